//! Thread geometry: `threadIdx`, `blockIdx`, `blockDim`, `gridDim`, the global index of a thread and
//! grid-stride loops. On the host: thread 0 of a one-thread, one-block grid.


macro_rules! special_register {
    ($(#[$doc:meta] $name:ident => $intrinsic:ident, $host:expr;)*) => {$(
        #[$doc]
        #[inline(always)]
        pub fn $name() -> u32 {
            device_or_host! {
                // SAFETY: reads a special register; no memory is touched.
                device: { unsafe { core::arch::nvptx::$intrinsic() as u32 } }
                host: { $host }
            }
        }
    )*};
}

special_register! {
    /// `threadIdx.x`.
    thread_idx_x => _thread_idx_x, 0;
    /// `threadIdx.y`.
    thread_idx_y => _thread_idx_y, 0;
    /// `threadIdx.z`.
    thread_idx_z => _thread_idx_z, 0;
    /// `blockIdx.x`.
    block_idx_x => _block_idx_x, 0;
    /// `blockIdx.y`.
    block_idx_y => _block_idx_y, 0;
    /// `blockIdx.z`.
    block_idx_z => _block_idx_z, 0;
    /// `blockDim.x`: threads per block along x.
    block_dim_x => _block_dim_x, 1;
    /// `blockDim.y`.
    block_dim_y => _block_dim_y, 1;
    /// `blockDim.z`.
    block_dim_z => _block_dim_z, 1;
    /// `gridDim.x`: blocks along x.
    grid_dim_x => _grid_dim_x, 1;
    /// `gridDim.y`.
    grid_dim_y => _grid_dim_y, 1;
    /// `gridDim.z`.
    grid_dim_z => _grid_dim_z, 1;
}

/// `v` as a divisor that is never zero, so that `x / nonzero(v)` and `x % nonzero(v)` compile
/// without Rust's division-by-zero check, a call into the panic path that would trap and kill the
/// context. A zero (which the host's validation never launches with) divides by one instead.
#[inline(always)]
pub fn nonzero(v: u32) -> core::num::NonZeroU32 { core::num::NonZeroU32::new(v).unwrap_or(core::num::NonZeroU32::MIN) }

/// [`nonzero`] for `usize` divisors (linear indices of 64-bit extents).
#[inline(always)]
pub fn nonzero_usize(v: usize) -> core::num::NonZeroUsize { core::num::NonZeroUsize::new(v).unwrap_or(core::num::NonZeroUsize::MIN) }

/// `a / d` rounded up, for a divisor that cannot be zero ([`nonzero`]).
#[inline(always)]
pub fn div_ceil_nz(a: u32, d: core::num::NonZeroU32) -> u32 { a / d + (a % d != 0) as u32 }

/// Global x index of this thread in a 1D launch (`blockIdx.x * blockDim.x + threadIdx.x`).
#[inline(always)]
pub fn global_x() -> u32 { block_idx_x() * block_dim_x() + thread_idx_x() }
/// Global y index of this thread.
#[inline(always)]
pub fn global_y() -> u32 { block_idx_y() * block_dim_y() + thread_idx_y() }
/// [`global_x`] as an index.
#[inline(always)]
pub fn global_index() -> usize { global_x() as usize }
/// Threads in the whole 1D grid (`gridDim.x * blockDim.x`): the step of a grid-stride loop.
#[inline(always)]
pub fn grid_threads() -> usize { grid_dim_x() as usize * block_dim_x() as usize }

/// Linear thread index inside the block (x fastest).
#[inline(always)]
pub fn block_thread_linear() -> u32 {
    (thread_idx_z() * block_dim_y() + thread_idx_y()) * block_dim_x() + thread_idx_x()
}

/// The indices `global_index(), global_index() + grid_threads(), ...` below `n`: every index of
/// `0..n` is visited by exactly one thread of a 1D launch, whatever the grid size.
///
/// ```ignore
/// for i in grid_stride(n) { unsafe { *y.add(i) = a * *x.add(i) } }
/// ```
#[inline(always)]
pub fn grid_stride(n: usize) -> GridStride { GridStride { next: global_index(), step: grid_threads(), end: n } }

/// Iterator of [`grid_stride`].
#[derive(Clone, Copy, Debug)]
pub struct GridStride {
    next: usize,
    step: usize,
    end: usize,
}

impl Iterator for GridStride {
    type Item = usize;
    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.next < self.end {
            let i = self.next;
            // Saturating: a step past usize::MAX ends the loop instead of wrapping to a low index.
            self.next = self.next.saturating_add(self.step);
            Some(i)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_thread_visits_every_index() {
        assert_eq!(grid_stride(5).collect::<std::vec::Vec<_>>(), [0, 1, 2, 3, 4]);
        assert_eq!(grid_stride(0).count(), 0);
        assert_eq!((global_index(), grid_threads(), block_thread_linear()), (0, 1, 0));
    }

    #[test]
    fn strides_partition_the_range() {
        // Threads 0..7 of a grid of 7: every index once.
        let n = 23;
        let mut seen = std::vec![0; n];
        for t in 0..7 {
            for i in (GridStride { next: t, step: 7, end: n }) {
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
        assert_eq!((GridStride { next: usize::MAX - 1, step: 4, end: usize::MAX }).count(), 1);
    }
}
