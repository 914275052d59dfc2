//! Warp operations over the full warp (mask `0xffffffff`: every lane must take part): lane index,
//! `__syncwarp`, shuffles, votes and reductions. On the host a warp is one lane: shuffles return
//! the lane's own value and votes look at its predicate alone.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// Every lane of a warp.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// Lane inside the warp (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: reads a special register; no memory is touched.
            unsafe { asm!("mov.u32 {r}, %laneid;", r = out(reg32) r, options(pure, nomem, nostack)) };
            r
        }
        host: { 0 }
    }
}

/// The lane index, read afresh each time (not `pure`): values derived from it inside a loop are
/// recomputed per iteration instead of being hoisted into registers that stay live across it.
#[inline(always)]
pub fn lane_fresh() -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: reads a special register; no memory is touched.
            unsafe { asm!("mov.u32 {r}, %laneid;", r = out(reg32) r, options(nomem, nostack)) };
            r
        }
        host: { 0 }
    }
}

/// `__syncwarp()` over the full warp.
#[inline(always)]
pub fn sync_warp() {
    device_or_host! {
        // SAFETY: a warp barrier; it orders memory but reads or writes none itself.
        device: { unsafe { asm!("bar.warp.sync -1;", options(nostack)) } }
        host: {}
    }
}

/// One `shfl.sync` form on 32-bit values: `$op` its mode, `$c` its clamp/segment operand.
macro_rules! shuffle {
    ($(#[$doc:meta])* $name:ident, $t:ty, $op:literal, $c:literal, $arg:ident) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(v: $t, $arg: u32) -> $t {
            device_or_host! {
                device: {
                    let r: $t;
                    // SAFETY: a register exchange between the lanes of the warp; no memory is touched.
                    unsafe {
                        asm!(concat!("shfl.sync.", $op, ".b32 {r}, {v}, {d}, ", $c, ", -1;"), r = out(reg32) r, v = in(reg32) v,
                             d = in(reg32) $arg, options(nostack))
                    };
                    r
                }
                host: { let _ = $arg; v }
            }
        }
    };
}

shuffle!(
    /// `__shfl_down_sync(full, v, delta)`: the value of lane `lane + delta` (lanes past 31 keep their own).
    shfl_down_f32, f32, "down", "31", delta);
shuffle!(
    /// [`shfl_down_f32`] on `u32`.
    shfl_down_u32, u32, "down", "31", delta);
shuffle!(
    /// `__shfl_xor_sync(full, v, mask)`: the value of lane `lane ^ mask` (butterfly).
    shfl_xor_f32, f32, "bfly", "31", mask);
shuffle!(
    /// [`shfl_xor_f32`] on `u32`.
    shfl_xor_u32, u32, "bfly", "31", mask);
shuffle!(
    /// Broadcast `v` from `src_lane` to the whole warp (`__shfl_sync`).
    shfl_idx_f32, f32, "idx", "31", src_lane);
shuffle!(
    /// [`shfl_idx_f32`] on `u32`.
    shfl_idx_u32, u32, "idx", "31", src_lane);

/// `__shfl_up_sync(full, v, 1)`: the value of the lane below (lane 0 keeps its own). The delta is
/// an immediate, which saves the register a variable delta needs.
#[inline(always)]
pub fn shfl_up1_f32(v: f32) -> f32 {
    device_or_host! {
        device: {
            let r: f32;
            // SAFETY: a register exchange between the lanes of the warp; no memory is touched.
            unsafe { asm!("shfl.sync.up.b32 {r}, {v}, 1, 0, -1;", r = out(reg32) r, v = in(reg32) v, options(nostack)) };
            r
        }
        host: { v }
    }
}

/// `__ballot_sync(full, pred)`: bit k set where lane k's `pred` holds.
#[inline(always)]
pub fn vote_ballot(pred: bool) -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: a vote across the warp's registers; no memory is touched.
            unsafe {
                asm!("{{ .reg .pred p; setp.ne.u32 p, {x}, 0; vote.sync.ballot.b32 {r}, p, -1; }}",
                     r = out(reg32) r, x = in(reg32) pred as u32, options(nostack))
            };
            r
        }
        host: { pred as u32 }
    }
}
/// Whether `pred` holds on any lane of the warp.
#[inline(always)]
pub fn vote_any(pred: bool) -> bool { vote_ballot(pred) != 0 }
/// Whether `pred` holds on every lane of the warp (on the host: on its one lane).
#[inline(always)]
pub fn vote_all(pred: bool) -> bool {
    device_or_host! {
        device: { vote_ballot(pred) == FULL_MASK }
        host: { pred }
    }
}

/// Butterfly reduction over the 32 lanes: every lane gets `op` folded over the warp's values (on
/// the host, the one lane's value).
macro_rules! warp_reduce {
    ($(#[$doc:meta])* $name:ident, $t:ty, $shfl:ident, |$a:ident, $b:ident| $op:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(v: $t) -> $t {
            device_or_host! {
                device: {
                    let mut v = v;
                    let mut m = 16;
                    while m > 0 {
                        let ($a, $b) = (v, $shfl(v, m));
                        v = $op;
                        m >>= 1;
                    }
                    v
                }
                host: { v }
            }
        }
    };
}

warp_reduce!(
    /// Warp-wide sum (every lane gets the total).
    warp_sum_f32, f32, shfl_xor_f32, |a, b| a + b);
warp_reduce!(
    /// Warp-wide sum of `u32` (wrapping).
    warp_sum_u32, u32, shfl_xor_u32, |a, b| a.wrapping_add(b));
warp_reduce!(
    /// Warp-wide maximum (NaN lanes are ignored unless every lane is NaN, as `f32::max`).
    warp_max_f32, f32, shfl_xor_f32, |a, b| a.max(b));
warp_reduce!(
    /// Warp-wide minimum (as `f32::min`).
    warp_min_f32, f32, shfl_xor_f32, |a, b| a.min(b));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_warp_is_one_lane() {
        assert_eq!((lane_id(), shfl_down_f32(2.5, 1), shfl_idx_u32(7, 3), shfl_up1_f32(1.0)), (0, 2.5, 7, 1.0));
        assert!(vote_all(true) && !vote_all(false) && vote_any(true) && !vote_any(false));
        assert_eq!((warp_sum_f32(1.5), warp_sum_u32(4)), (1.5, 4));
        assert_eq!(warp_max_f32(-3.0), -3.0);
    }
}
