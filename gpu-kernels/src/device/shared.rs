//! Shared memory.
//!
//! Dynamic shared memory is the launch-sized region of `gpu_launch_sized_workgroup_mem` (real
//! `ld.shared`/`st.shared` after LLVM's address-space inference). Rust cannot declare statically
//! sized variables in the `.shared` state space, so "static" shared arrays are carved from the front
//! of the dynamic region at fixed offsets with [`SharedCarver`]; the host adds their size to the
//! launch's `shared_mem_bytes` (see `runtime::launch`).

/// Start of this block's dynamic shared memory, typed.
#[inline(always)]
pub fn dynamic_shared<T>() -> *mut T {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
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
        let p = unsafe { self.base.add(self.offset) } as *mut T;
        self.offset += len * core::mem::size_of::<T>();
        p
    }
}

impl Default for SharedCarver {
    fn default() -> Self { Self::new() }
}
