//! Velocity-analysis kernel.
//!
//! `velan_semblance`: one block per (CMP gather, tile of TILE_T output times, tile of
//! VEL_PER_THREAD trial velocities); one thread per output time, holding the stack and energy of
//! its velocities in registers. The gather's traces go through shared memory in chunks:
//! for each trace the block stages only the samples its tile can reach (between the moveout of the
//! tile's first time at its fastest velocity and of its last time at its slowest), so a chunk holds
//! a few dozen traces. A sample outside the staged span (a trace whose span did not fit, or a
//! non-monotone moveout with eta) is read from global memory instead: every read is in range by
//! construction. The block computes h extra times on each side, so the window sums of its
//! TILE_T - 2h outputs come from shared memory.

// On the host only the entry points' descriptors are used: the kernels' helpers compile there
// (the device layer has host bodies) but nothing calls them, and clippy sees them only there.
#![cfg_attr(not(target_arch = "nvptx64"), allow(dead_code, unused_imports, unused_variables, unused_assignments,
    clippy::too_many_arguments, clippy::manual_is_multiple_of))]

/// The entry point's descriptor.
pub use device_code::VELAN_SEMBLANCE;

mod device_code {
    use crate::device::*;
    use crate::velan::*;

    const VT: usize = VEL_PER_THREAD as usize;

    crate::kernel! {
    /// Semblance panels of the gathers `gather0 + blockIdx.y`: `out[((blockIdx.y * nv) + v) * ns + t0]`.
    /// `trace0[g]..trace0[g + 1]` are gather g's traces (rows of `ns` samples in `data`, squared
    /// offsets in `x2`); `s2`, `v2` the trial velocities' 1/v^2 and v^2 (velocities increasing).
    /// The host checks: ns >= 1, nv >= 1, 2h < TILE_T, grid.x = n_ttiles * ceil(nv / VT).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn velan_semblance(ns: u32, nv: u32, h: u32, n_ttiles: u32, dt: f32, t_first: f32,
        inv_dt: f32, eta: f32, max_stretch: f32, data: *const f32, trace0: *const u32, x2: *const f32, s2: *const f32,
        v2: *const f32, gather0: u32, out: *mut f32) as VELAN_SEMBLANCE {
        let tid = thread_idx_x();
        // Uniform across the grid; rules out the divisions' zero case (no panic path).
        if n_ttiles == 0 || ns == 0 || nv == 0 || 2 * h >= TILE_T {
            return;
        }
        let tile = block_idx_x() % n_ttiles;
        let vtile = block_idx_x() / n_ttiles;
        let g = gather0 + block_idx_y();
        let opt = outputs_per_tile(h);

        let mut carve = SharedCarver::new();
        let stage: *mut f32 = carve.take::<f32>(STAGE_FLOATS as usize);
        let s_lo: *mut u32 = carve.take::<u32>(STAGE_TRACES as usize);
        let s_len: *mut u32 = carve.take::<u32>(STAGE_TRACES as usize);
        let s_off: *mut u32 = carve.take::<u32>(STAGE_TRACES as usize);
        let s_x2: *mut f32 = carve.take::<f32>(STAGE_TRACES as usize);
        let s_count: *mut u32 = carve.take::<u32>(1);

        // This thread's output time, and the block's range of valid times.
        let first = (tile * opt) as i32 - h as i32;
        let it = first + tid as i32;
        let valid_t = it >= 0 && (it as u32) < ns;
        let t0 = t0_of(it, dt, t_first);
        let it_lo = if first > 0 { first } else { 0 };
        let it_hi_raw = first + TILE_T as i32 - 1;
        let it_hi = if it_hi_raw < ns as i32 - 1 { it_hi_raw } else { ns as i32 - 1 };
        let (t0_lo, t0_hi) = (t0_of(it_lo, dt, t_first), t0_of(it_hi, dt, t_first));
        let last = (ns - 1) as f32;

        let jv0 = vtile * VEL_PER_THREAD;
        let mut s2r = [0.0f32; VT];
        let mut v2r = [0.0f32; VT];
        unroll!(VT, |j| {
            let jv = if jv0 + (j as u32) < nv { jv0 + j as u32 } else { nv - 1 };
            unsafe {
                s2r[j] = ldg_f32(s2.add(jv as usize));
                v2r[j] = ldg_f32(v2.add(jv as usize));
            }
        });
        // Fastest velocity of the tile: the earliest moveout; slowest: the latest.
        let (s2_fast, v2_fast, s2_slow, v2_slow) = (s2r[VT - 1], v2r[VT - 1], s2r[0], v2r[0]);

        let mut sum = [0.0f32; VT];
        let mut energy = [0.0f32; VT];

        let (k_begin, k_end) = unsafe { (ldg_u32(trace0.add(g as usize)), ldg_u32(trace0.add(g as usize + 1))) };
        let mut k = k_begin;
        while k < k_end {
            let nk = if k_end - k < STAGE_TRACES { k_end - k } else { STAGE_TRACES };
            // Each trace's reachable span [lo, hi] (clamped to the record).
            if tid < nk {
                let xx = unsafe { ldg_f32(x2.add((k + tid) as usize)) };
                let p_lo = position(moveout_time(t0_lo, xx, s2_fast, v2_fast, eta), t_first, inv_dt);
                let p_hi = position(moveout_time(t0_hi, xx, s2_slow, v2_slow, eta), t_first, inv_dt) + 1.0;
                let clamp = |p: f32| -> u32 { if p >= 0.0 { if p < last { crate::math::floor(p) as u32 } else { ns - 1 } } else { 0 } };
                let (lo, hi) = (clamp(p_lo), clamp(p_hi));
                unsafe {
                    *s_lo.add(tid as usize) = lo;
                    *s_len.add(tid as usize) = if hi >= lo { hi - lo + 1 } else { 0 };
                    *s_x2.add(tid as usize) = xx;
                }
            }
            sync_threads();
            if tid == 0 {
                // As many whole spans as fit; a first span too long for the buffer is not staged.
                let (mut off, mut c) = (0u32, 0u32);
                while c < nk {
                    let l = unsafe { *s_len.add(c as usize) };
                    if off + l > STAGE_FLOATS {
                        if c == 0 {
                            unsafe {
                                *s_len = 0;
                                *s_off = 0;
                            }
                            c = 1;
                        }
                        break;
                    }
                    unsafe { *s_off.add(c as usize) = off };
                    off += l;
                    c += 1;
                }
                unsafe { *s_count = c };
            }
            sync_threads();
            let count = unsafe { *s_count };
            let mut i = 0u32;
            while i < count {
                let (lo, len, off) = unsafe { (*s_lo.add(i as usize), *s_len.add(i as usize), *s_off.add(i as usize)) };
                let row = unsafe { data.add((k + i) as usize * ns as usize + lo as usize) };
                let mut j = tid;
                while j < len {
                    unsafe { *stage.add((off + j) as usize) = ldg_f32(row.add(j as usize)) };
                    j += TILE_T;
                }
                i += 1;
            }
            sync_threads();
            let mut i = 0u32;
            while i < count {
                let (lo, len, off, xx) =
                    unsafe { (*s_lo.add(i as usize), *s_len.add(i as usize), *s_off.add(i as usize), *s_x2.add(i as usize)) };
                let row = unsafe { data.add((k + i) as usize * ns as usize) };
                let base = unsafe { stage.add(off as usize) };
                // Staged when ii >= lo and ii + 1 <= lo + len - 1: one unsigned compare.
                let staged_below = if len > 0 { len - 1 } else { 0 };
                unroll!(VT, |j| {
                    let t = moveout_time(t0, xx, s2r[j], v2r[j], eta);
                    let pos = position(t, t_first, inv_dt);
                    if valid_t && is_live(t, t0, pos, last, max_stretch) {
                        let (ii, f) = split(pos);
                        let (a0, a1) = if ii.wrapping_sub(lo) < staged_below {
                            unsafe { (*base.add((ii - lo) as usize), *base.add((ii - lo + 1) as usize)) }
                        } else {
                            let a0 = unsafe { ldg_f32(row.add(ii as usize)) };
                            let a1 = if ii + 1 < ns { unsafe { ldg_f32(row.add(ii as usize + 1)) } } else { 0.0 };
                            (a0, a1)
                        };
                        let a = lerp(a0, a1, f);
                        sum[j] += a;
                        energy[j] = crate::math::mul_add(a, a, energy[j]);
                    }
                });
                i += 1;
            }
            k += count;
            sync_threads();
        }

        // Window sums from shared memory: q1 = s^2 and q2 = N e per (velocity, time).
        let fold = (k_end - k_begin) as f32;
        let q1 = stage;
        let q2 = unsafe { stage.add((VT as u32 * TILE_T) as usize) };
        unroll!(VT, |j| {
            unsafe {
                *q1.add(j * TILE_T as usize + tid as usize) = sum[j] * sum[j];
                *q2.add(j * TILE_T as usize + tid as usize) = fold * energy[j];
            }
        });
        sync_threads();
        if tid >= h && tid < TILE_T - h {
            let io = (tile * opt + tid - h) as u64;
            if io < ns as u64 {
                let out_g = unsafe { out.add(block_idx_y() as usize * nv as usize * ns as usize) };
                unroll!(VT, |j| {
                    let jv = jv0 + j as u32;
                    if jv < nv {
                        let (mut num, mut den) = (0.0f32, 0.0f32);
                        let mut w = tid - h;
                        while w <= tid + h {
                            unsafe {
                                num += *q1.add(j * TILE_T as usize + w as usize);
                                den += *q2.add(j * TILE_T as usize + w as usize);
                            }
                            w += 1;
                        }
                        unsafe { *out_g.add(jv as usize * ns as usize + io as usize) = semblance(num, den) };
                    }
                });
            }
        }
    }
    }
}
