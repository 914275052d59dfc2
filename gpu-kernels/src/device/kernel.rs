//! Entry points with a typed host descriptor: [`kernel!`](crate::kernel) writes the
//! `extern "ptx-kernel"` function (GPU build) and a [`Kernel`] constant naming it with its
//! parameter types (every build). The host's `launch!` takes the constant instead of a string and
//! checks, at compile time, that the arguments are as many as the parameters and of matching
//! types (`runtime::launch::KernelArg` says which host values stand for which parameter types).

use core::marker::PhantomData;

/// The name of a kernel in the PTX and its parameter types `A` (a tuple, in order).
pub struct Kernel<A> {
    name: &'static str,
    _params: PhantomData<fn(A)>,
}

impl<A> Kernel<A> {
    /// Descriptor of the entry point `name` with parameters `A`; [`kernel!`](crate::kernel) writes these.
    pub const fn new(name: &'static str) -> Self { Self { name, _params: PhantomData } }
    /// The entry point's name in the PTX.
    pub const fn name(&self) -> &'static str { self.name }
}

impl<A> Clone for Kernel<A> {
    fn clone(&self) -> Self { *self }
}
impl<A> Copy for Kernel<A> {}

/// The entry point's name (what error messages and benchmark rows print).
impl<A> core::fmt::Display for Kernel<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result { f.write_str(self.name) }
}

impl<A> core::fmt::Debug for Kernel<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result { write!(f, "Kernel({})", self.name) }
}

/// Declares a kernel entry point and its host descriptor:
///
/// ```
/// gpu_kernels::kernel! {
///     /// y = a x + y over `n` samples.
///     pub unsafe fn scale_add(n: u32, a: f32, x: *const f32, y: *mut f32) as SCALE_ADD {
///         use gpu_kernels::device::*;
///         for i in grid_stride(n as usize) {
///             // SAFETY: x and y hold n values (the host's contract).
///             unsafe { *y.add(i) += a * *x.add(i) };
///         }
///     }
/// }
/// // On the host only the descriptor exists.
/// assert_eq!(SCALE_ADD.name(), "scale_add");
/// let _: gpu_kernels::device::Kernel<(u32, f32, *const f32, *mut f32)> = SCALE_ADD;
/// ```
///
/// For the GPU build this is `#[unsafe(no_mangle)] pub unsafe extern "ptx-kernel" fn scale_add(...)`
/// with the body as written (the PTX is what a hand-written entry point gives). The doc comment
/// goes on both. Parameters are plain names with their types: scalars by value, buffers as
/// `*const T` (read) or `*mut T` (written), texture objects as `u64`, `#[repr(C)]` parameter
/// blocks by value.
///
/// A local macro that writes a family of entry points takes each descriptor's name next to the
/// entry's and passes both on (`entry!(pstm_exact_dsr as PSTM_EXACT_DSR, exact, Dsr, global)`
/// expanding to `kernel! { pub unsafe fn $name(...) as $desc { ... } }`); the host picks among
/// entries of one signature with a table function returning the descriptor (`Kernel<P>` with `P`
/// named once as a type alias, e.g. `nlbf::kernels::SlideKernel`).
#[macro_export]
macro_rules! kernel {
    ($(#[$attr:meta])* pub unsafe fn $name:ident($($arg:ident: $ty:ty),* $(,)?) as $desc:ident $body:block) => {
        $(#[$attr])*
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name($($arg: $ty),*) $body

        $(#[$attr])*
        ///
        #[doc = concat!("Host descriptor of the entry point `", stringify!($name), "`: pass it to `launch!`.")]
        #[allow(dead_code)]
        pub const $desc: $crate::device::Kernel<($($ty,)*)> = $crate::device::Kernel::new(stringify!($name));
    };
}
