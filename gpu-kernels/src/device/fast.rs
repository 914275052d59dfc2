//! Fast math on the special function units (`__expf`, `rsqrtf`, ...) and PTX's rounding-mode
//! arithmetic. On the host: the exact functions (the fast ones differ by a few ulp).

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// One PTX instruction `$ptx r, x` (or `r, a, b`) on `f32` registers.
macro_rules! unary {
    ($(#[$doc:meta])* $name:ident, $ptx:literal, |$x:ident| $host:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name($x: f32) -> f32 {
            device_or_host! {
                device: {
                    let r: f32;
                    // SAFETY: arithmetic on registers; no memory is touched.
                    unsafe { asm!(concat!($ptx, " {r}, {x};"), r = out(reg32) r, x = in(reg32) $x, options(pure, nomem, nostack)) };
                    r
                }
                host: { $host }
            }
        }
    };
}
macro_rules! binary {
    ($(#[$doc:meta])* $name:ident, $ptx:literal, |$a:ident, $b:ident| $host:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name($a: f32, $b: f32) -> f32 {
            device_or_host! {
                device: {
                    let r: f32;
                    // SAFETY: arithmetic on registers; no memory is touched.
                    unsafe {
                        asm!(concat!($ptx, " {r}, {a}, {b};"), r = out(reg32) r, a = in(reg32) $a, b = in(reg32) $b,
                            options(pure, nomem, nostack))
                    };
                    r
                }
                host: { $host }
            }
        }
    };
}

unary!(
    /// 2^x with `ex2.approx.ftz` (about 2 ulp).
    ex2_approx, "ex2.approx.ftz.f32", |x| x.exp2());
unary!(
    /// log2(x) with `lg2.approx`.
    lg2_approx, "lg2.approx.ftz.f32", |x| x.log2());
unary!(
    /// 1/sqrt(x) with `rsqrt.approx`.
    rsqrt_approx, "rsqrt.approx.ftz.f32", |x| 1.0 / x.sqrt());
unary!(
    /// sqrt(x) with `sqrt.approx` (MUFU.RSQ + multiply).
    sqrt_approx, "sqrt.approx.ftz.f32", |x| x.sqrt());
unary!(
    /// Correctly rounded sqrt (`sqrt.rn`), the same value the CPU's `f32::sqrt` gives.
    sqrt_rn, "sqrt.rn.f32", |x| x.sqrt());
unary!(
    /// 1/x with `rcp.approx`.
    rcp_approx, "rcp.approx.ftz.f32", |x| 1.0 / x);
unary!(
    /// sin(x) with `sin.approx` (good for |x| up to a few pi).
    sin_approx, "sin.approx.ftz.f32", |x| x.sin());
unary!(
    /// cos(x) with `cos.approx`.
    cos_approx, "cos.approx.ftz.f32", |x| x.cos());
binary!(
    /// `div.full.f32`: full-range division, 2 ulp, a handful of instructions (no slow path).
    div_full, "div.full.f32", |a, b| a / b);
binary!(
    /// `a + b` rounded toward minus infinity (`add.rm.f32`): with 1.5 * 2^23 added, the floor of a
    /// sample position lands in the low mantissa bits in one instruction.
    add_rm, "add.rm.f32", |a, b| add_down_host(a, b));

/// `a + b` rounded down on the CPU: the nearest sum, one step lower where it exceeds the sum
/// (taken in f64, exact for the positions the kernels split).
#[cfg(not(target_arch = "nvptx64"))]
fn add_down_host(a: f32, b: f32) -> f32 {
    let r = a + b;
    if r as f64 > a as f64 + b as f64 { r.next_down() } else { r }
}

/// `f32` to `u32` rounding toward zero, saturating (NaN to 0) like Rust's `as`, in one
/// instruction (`cvt.rzi.u32.f32`) instead of LLVM's conversion-compare-select expansion.
#[inline(always)]
pub fn cvt_rzi_u32(x: f32) -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: a conversion on registers; no memory is touched.
            unsafe { asm!("cvt.rzi.u32.f32 {r}, {s};", r = out(reg32) r, s = in(reg32) x, options(pure, nomem, nostack)) };
            r
        }
        host: { x as u32 }
    }
}

/// Correctly rounded sqrt(x) for `x >= 2^-101`: the fast path of `sqrt.rn` written out (MUFU.RSQ
/// and the Newton steps ptxas emits for such arguments), without the special-case test and
/// slow-path call ptxas wraps around it. Smaller arguments are the caller's to avoid.
#[inline(always)]
pub fn sqrt_rsqrt_newton(x: f32) -> f32 {
    device_or_host! {
        device: {
            let r: f32;
            // SAFETY: arithmetic on registers; no memory is touched.
            unsafe {
                asm!(
                    "{{ .reg .f32 q, y, h, e, ny;",
                    "rsqrt.approx.ftz.f32 q, {x};",
                    "mul.rn.ftz.f32 y, {x}, q;",
                    "mul.rn.ftz.f32 h, q, 0f3F000000;",
                    "neg.f32 ny, y;",
                    "fma.rn.f32 e, ny, y, {x};",
                    "fma.rn.f32 {r}, e, h, y; }}",
                    x = in(reg32) x, r = out(reg32) r, options(pure, nomem, nostack));
            }
            r
        }
        host: { x.sqrt() }
    }
}

/// e^x through `ex2.approx` (`__expf`).
#[inline(always)]
pub fn exp_fast(x: f32) -> f32 { ex2_approx(x * core::f32::consts::LOG2_E) }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_math_is_the_exact_math() {
        assert_eq!((sqrt_rn(9.0), rcp_approx(4.0), div_full(1.0, 8.0)), (3.0, 0.25, 0.125));
        assert!((exp_fast(1.0) - core::f32::consts::E).abs() < 1e-6);
        // Rounded down: 0.1 + 1 is not exactly representable; the result is at most the exact sum.
        assert!((add_rm(0.1, 1.0) as f64) <= 1.1f64);
        assert_eq!(add_rm(2.75, 12_582_912.0), 12_582_914.0);
        assert_eq!((cvt_rzi_u32(3.9), cvt_rzi_u32(-1.0), cvt_rzi_u32(f32::NAN)), (3, 0, 0));
        assert_eq!(sqrt_rsqrt_newton(2.0), 2.0f32.sqrt());
    }
}
