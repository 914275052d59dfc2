//! [`unroll!`](crate::unroll): straight-line repetition of a loop body.

/// Straight-line repetition of a loop body, one copy per index, every index a literal: register
/// arrays indexed by it stay in registers whatever LLVM's unroll heuristics decide (a rolled loop
/// would put them in local memory), and bodies too large for LLVM's unroller are unrolled anyway.
///
/// - `unroll!(N, |i| { ... })`: the body for `i: usize` = 0, 1, ... while `i < N`, N at most 64.
///   `N` may be a runtime value: every copy is then guarded by `if i < N` (with a constant `N` the
///   guards fold away).
/// - `unroll!(N, |const C| { ... })`: the same with `C` a `const C: usize`, for bodies that need a
///   constant (array lengths, const generics).
///
/// ```
/// let mut acc = [0.0f32; 4];
/// gpu_kernels::unroll!(4, |k| { acc[k] = k as f32 * 2.0; });
/// assert_eq!(acc, [0.0, 2.0, 4.0, 6.0]);
/// let n = 3; // runtime count
/// let mut seen = 0;
/// gpu_kernels::unroll!(n, |const K| { seen += 1 << K; });
/// assert_eq!(seen, 0b111);
/// ```
#[macro_export]
macro_rules! unroll {
    ($n:expr, |const $c:ident| $body:block) => {
        $crate::unroll!(@const $n, $c, $body, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63])
    };
    ($n:expr, |$i:ident| $body:block) => {
        $crate::unroll!(@let $n, $i, $body, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63])
    };
    (@let $n:expr, $i:ident, $body:block, [$($k:literal)*]) => {
        $( if $k < $n { let $i: usize = $k; $body } )*
    };
    (@const $n:expr, $c:ident, $body:block, [$($k:literal)*]) => {
        $( if $k < $n { #[allow(non_upper_case_globals)] const $c: usize = $k; $body } )*
    };
}
