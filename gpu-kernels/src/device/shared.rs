//! Shared memory.
//!
//! Dynamic shared memory is the launch-sized region of `gpu_launch_sized_workgroup_mem` (real
//! `ld.shared`/`st.shared` after LLVM's address-space inference). Rust cannot declare statically
//! sized variables in the `.shared` state space, so "static" shared arrays are carved from the front
//! of the dynamic region at fixed offsets with [`SharedCarver`] (raw pointers) or as typed
//! [`SharedArray`]s; the host adds their size to the launch's `shared_mem_bytes` (see
//! `runtime::launch`). On the host there is no shared memory: these functions panic there.

#[cfg(not(target_arch = "nvptx64"))]
use super::gpu_only;

/// Start of this block's dynamic shared memory, typed.
#[inline(always)]
pub fn dynamic_shared<T>() -> *mut T {
    device_or_host! {
        device: { core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>() }
        host: { gpu_only("dynamic_shared") }
    }
}

/// Hands out consecutive, aligned sub-arrays of the dynamic shared region.
/// Every thread of a block must carve in the same order so that all agree on the layout.
pub struct SharedCarver {
    base: *mut u8,
    offset: usize,
}

impl SharedCarver {
    #[inline(always)]
    pub fn new() -> Self { Self { base: dynamic_shared::<u8>(), offset: 0 } }

    /// The next `len` elements of `T`, aligned for `T` (and to 16 bytes for vector loads).
    #[inline(always)]
    pub fn take<T>(&mut self, len: usize) -> *mut T {
        let align = if core::mem::align_of::<T>() > 16 { core::mem::align_of::<T>() } else { 16 };
        self.offset = (self.offset + align - 1) & !(align - 1);
        // SAFETY: the host sizes the launch's dynamic region for everything its kernel carves
        // (`shared_mem_bytes`), so the offset stays inside that one allocation.
        let p = unsafe { self.base.add(self.offset) } as *mut T;
        self.offset += len * core::mem::size_of::<T>();
        p
    }

    /// The next `N` elements of `T` as a typed array.
    #[inline(always)]
    pub fn array<T: Copy, const N: usize>(&mut self) -> SharedArray<T, N> { SharedArray { base: self.take::<T>(N) } }

    /// Bytes carved so far (alignment padding included): what the host must add to the launch's
    /// `shared_mem_bytes` for this layout.
    #[inline(always)]
    pub fn bytes(&self) -> usize { self.offset }
}

impl Default for SharedCarver {
    fn default() -> Self { Self::new() }
}

/// `N` values of `T` in this block's shared memory (`__shared__ T a[N]`), carved with
/// [`SharedCarver::array`]. Copyable handle: every thread holds the same address.
#[derive(Clone, Copy)]
pub struct SharedArray<T: Copy, const N: usize> {
    base: *mut T,
}

impl<T: Copy, const N: usize> SharedArray<T, N> {
    /// Elements.
    pub const LEN: usize = N;
    /// Bytes the array occupies (before the carver's 16-byte alignment).
    pub const BYTES: usize = N * core::mem::size_of::<T>();

    /// Element `i`, or `None` past the end.
    ///
    /// # Safety
    /// No other thread writes element `i` between the barriers ([`sync_threads`](super::sync_threads))
    /// around this read.
    #[inline(always)]
    pub unsafe fn get(&self, i: usize) -> Option<T> {
        // SAFETY: in bounds (checked) of the carved array; the caller excludes concurrent writes.
        if i < N { Some(unsafe { *self.base.add(i) }) } else { None }
    }

    /// Element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < N`, and as [`get`](Self::get).
    #[inline(always)]
    pub unsafe fn read(&self, i: usize) -> T {
        // SAFETY: the caller's contract (in bounds, no concurrent write).
        unsafe { *self.base.add(i) }
    }

    /// Writes element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < N`, and no other thread reads or writes element `i` between the barriers around this write.
    #[inline(always)]
    pub unsafe fn write(&self, i: usize, v: T) {
        // SAFETY: the caller's contract (in bounds, no concurrent access).
        unsafe { *self.base.add(i) = v }
    }

    /// The generic address of element 0 (for the `load` module's vector accesses).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T { self.base }
}
