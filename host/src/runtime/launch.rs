//! Typed, checked kernel launches.
//!
//! ```ignore
//! // y = a x + y over n elements, in one line:
//! launch!(gpu, SAXPY, grid_1d(n, 256), &n, &a, &x, &mut y)?;
//! ```
//! The kernel is named by its descriptor (`gpu_kernels::kernel!` writes one per entry point, e.g.
//! `gpu_kernels::smoke::SAXPY`): the arguments are then checked at compile time against the
//! kernel's parameters, their count and each type ([`KernelArg`]: `&u32` for a `u32`, `&CudaSlice<T>`
//! or a view for a `*const T`, `&mut CudaSlice<T>` for a `*mut T`). A kernel named by a string
//! (entry points not declared with `kernel!`) is launched unchecked.
//! Arguments go through cudarc's `PushKernelArg`, so each must be a reference to a `DeviceRepr`
//! scalar or a device buffer (bind temporaries to locals first). Errors name the kernel, grid and
//! block. Set `SEISGPU_SYNC_LAUNCH=1` to synchronise after every launch so an asynchronous fault is
//! reported by the kernel that caused it.

use cudarc::driver::{sys, CudaFunction, CudaSlice, CudaView, CudaViewMut, LaunchConfig};
use gpu_kernels::device::Kernel;
use std::marker::PhantomData;

use super::context::Gpu;
use super::error::{GpuError, GpuResult};

/// Blocks needed to cover `n` items with `block` threads each.
pub fn blocks_for(n: usize, block: u32) -> u32 {
    n.div_ceil(block as usize).max(1) as u32
}

/// A 1D launch shape covering `n` threads.
pub fn grid_1d(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks_for(n, block), 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

/// Launches `kernel` on the GPU's default stream, or on a given stream with `on STREAM,`.
///
/// With a descriptor, the arguments are checked when the launch compiles:
///
/// ```no_run
/// use seisgpu_host::kernels::smoke::SAXPY;
/// use seisgpu_host::runtime::{grid_1d, CudaSlice, Gpu};
/// fn scale_add(gpu: &Gpu, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) -> Result<(), seisgpu_host::runtime::GpuError> {
///     let (n, a) = (x.len() as u32, 2.0f32);
///     seisgpu_host::launch!(gpu, SAXPY, grid_1d(n as usize, 256), &n, &a, x, y)
/// }
/// ```
///
/// A missing argument, or one of the wrong kind (here the read-only `x` for the written `*mut f32`),
/// does not compile:
///
/// ```compile_fail,E0277
/// use seisgpu_host::kernels::smoke::SAXPY;
/// use seisgpu_host::runtime::{grid_1d, CudaSlice, Gpu};
/// fn scale_add(gpu: &Gpu, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) -> Result<(), seisgpu_host::runtime::GpuError> {
///     let (n, a) = (x.len() as u32, 2.0f32);
///     seisgpu_host::launch!(gpu, SAXPY, grid_1d(n as usize, 256), &n, &a, y, x)
/// }
/// ```
///
/// ```compile_fail,E0277
/// use seisgpu_host::kernels::smoke::SAXPY;
/// use seisgpu_host::runtime::{grid_1d, CudaSlice, Gpu};
/// fn scale_add(gpu: &Gpu, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) -> Result<(), seisgpu_host::runtime::GpuError> {
///     let n = x.len() as u32;
///     seisgpu_host::launch!(gpu, SAXPY, grid_1d(n as usize, 256), &n, x, y)
/// }
/// ```
///
/// The algorithms' descriptors check the same way: here the grid size is a `usize` where
/// `srm_image` takes a `u32` (`&nxy32`, with `let nxy32 = nxy as u32;`, compiles).
///
/// ```compile_fail,E0277
/// use seisgpu_host::kernels::srm::kernels::SRM_IMAGE;
/// use seisgpu_host::runtime::{grid_1d, CudaSlice, Gpu};
/// fn image(gpu: &Gpu, nxy: usize, waves: &CudaSlice<f32>, image: &mut CudaSlice<f32>) -> Result<(), seisgpu_host::runtime::GpuError> {
///     let (count, stride) = (1u32, 1u32);
///     seisgpu_host::launch!(gpu, SRM_IMAGE, grid_1d(nxy, 256), &nxy, &count, &stride, waves, image)
/// }
/// ```
///
/// ```no_run
/// use seisgpu_host::kernels::srm::kernels::SRM_IMAGE;
/// use seisgpu_host::runtime::{grid_1d, CudaSlice, Gpu};
/// fn image(gpu: &Gpu, nxy: usize, waves: &CudaSlice<f32>, image: &mut CudaSlice<f32>) -> Result<(), seisgpu_host::runtime::GpuError> {
///     let (nxy32, count, stride) = (nxy as u32, 1u32, 1u32);
///     seisgpu_host::launch!(gpu, SRM_IMAGE, grid_1d(nxy, 256), &nxy32, &count, &stride, waves, image)
/// }
/// ```
///
/// `DESC => func` launches a function the caller has prepared itself (a copy under a register cap
/// of its own choosing, its shared-memory limit already raised), still checking the arguments
/// against the descriptor: `launch!(on stream, gpu, PSTM_EXACT_DSR => &func, cfg, &params, ...)`.
#[macro_export]
macro_rules! launch {
    (on $stream:expr, $gpu:expr, $kernel:expr => $func:expr, $cfg:expr $(, $arg:expr)* $(,)?) => {{
        use $crate::runtime::PushKernelArg as _;
        let gpu: &$crate::runtime::Gpu = &$gpu;
        let cfg: $crate::runtime::LaunchConfig = $cfg;
        let target = &$kernel;
        // Type-checks the arguments against a descriptor's parameters; never runs.
        #[allow(unreachable_code, unused_must_use)]
        if false {
            $crate::runtime::launch::check_args(target, ($(&$arg,)*));
        }
        let kernel: &str = $crate::runtime::launch::KernelName::kernel_name(target);
        let func: &$crate::runtime::CudaFunction = $func;
        let stream: &$crate::runtime::CudaStream = &$stream;
        let mut builder = stream.launch_builder(func);
        $( builder.arg($arg); )*
        let result = unsafe { builder.launch(cfg) };
        gpu.finish_launch(kernel, &cfg, result.map(|_| ()))
    }};
    (on $stream:expr, $gpu:expr, $kernel:expr, $cfg:expr $(, $arg:expr)* $(,)?) => {{
        // The function looked up (its capped copy where `registers::CAPS` lists it) and the shape
        // checked, then launched as a prepared one.
        let gpu: &$crate::runtime::Gpu = &$gpu;
        let cfg: $crate::runtime::LaunchConfig = $cfg;
        let target = &$kernel;
        match gpu.prepare_launch($crate::runtime::launch::KernelName::kernel_name(target), &cfg) {
            Err(e) => Err(e),
            Ok(func) => $crate::launch!(on $stream, *gpu, *target => &func, cfg $(, $arg)*),
        }
    }};
    ($gpu:expr, $kernel:expr => $func:expr, $cfg:expr $(, $arg:expr)* $(,)?) => {
        $crate::launch!(on $gpu.stream(), $gpu, $kernel => $func, $cfg $(, $arg)*)
    };
    ($gpu:expr, $kernel:expr, $cfg:expr $(, $arg:expr)* $(,)?) => {
        $crate::launch!(on $gpu.stream(), $gpu, $kernel, $cfg $(, $arg)*)
    };
}

/// A kernel as `launch!` names it: a descriptor or a string.
pub trait KernelName {
    fn kernel_name(&self) -> &str;
}
impl KernelName for str {
    fn kernel_name(&self) -> &str { self }
}
impl KernelName for String {
    fn kernel_name(&self) -> &str { self }
}
impl<T: KernelName + ?Sized> KernelName for &T {
    fn kernel_name(&self) -> &str { (**self).kernel_name() }
}
impl<P> KernelName for Kernel<P> {
    fn kernel_name(&self) -> &str { self.name() }
}

/// Host arguments `A` (a tuple) that a launch of this kernel accepts: any for a kernel named by a
/// string, those matching the parameters for a descriptor.
pub trait LaunchArgs<A> {}
impl<A> LaunchArgs<A> for str {}
impl<A> LaunchArgs<A> for String {}
impl<A, T: LaunchArgs<A> + ?Sized> LaunchArgs<A> for &T {}
impl<A: ArgsFor<P>, P> LaunchArgs<A> for Kernel<P> {}

/// A host value that can be passed for a kernel parameter of type `P`.
#[diagnostic::on_unimplemented(message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    note = "scalars go by reference (`&n`); `*const T` takes `&CudaSlice<T>` or a view, `*mut T` takes `&mut CudaSlice<T>`")]
pub trait KernelArg<P> {}

macro_rules! scalar_args {
    ($($t:ty),*) => { $( impl KernelArg<$t> for &$t {} impl KernelArg<$t> for &mut $t {} )* };
}
scalar_args!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);
impl<T> KernelArg<*const T> for &CudaSlice<T> {}
impl<T> KernelArg<*const T> for &mut CudaSlice<T> {}
impl<T> KernelArg<*const T> for &CudaView<'_, T> {}
impl<T> KernelArg<*const T> for &CudaViewMut<'_, T> {}
impl<T> KernelArg<*const T> for &mut CudaViewMut<'_, T> {}
impl<T> KernelArg<*mut T> for &mut CudaSlice<T> {}
impl<T> KernelArg<*mut T> for &mut CudaViewMut<'_, T> {}
impl<T> KernelArg<*const T> for &DevPtr<T> {}
impl<T> KernelArg<*mut T> for &DevPtr<T> {}
// A flat f32 buffer passes for records of `N` floats (Kirchhoff's geometry quads `*const [f32; 4]`
// and sample pairs `*const [f32; 2]`): the kernel reads the same bytes, the buffer's length is the
// caller's contract as for any pointer.
impl<const N: usize> KernelArg<*const [f32; N]> for &CudaSlice<f32> {}
impl<const N: usize> KernelArg<*const [f32; N]> for &CudaView<'_, f32> {}

/// A raw device address of `T` values, for launches and copies that the caller orders with events
/// of its own instead of cudarc's per-buffer tracking: it passes for a `*const T` or `*mut T`
/// kernel parameter, so the element type is still checked.
#[repr(transparent)]
pub struct DevPtr<T>(u64, PhantomData<fn() -> T>);

impl<T> DevPtr<T> {
    /// The address `addr` (from `DevicePtr::device_ptr` of a buffer of `T`).
    pub fn new(addr: u64) -> Self { DevPtr(addr, PhantomData) }
    /// The address in bytes.
    pub fn addr(self) -> u64 { self.0 }
    /// The address `n` values further on.
    pub fn offset(self, n: usize) -> Self { DevPtr::new(self.0 + (n * std::mem::size_of::<T>()) as u64) }
}
impl<T> Clone for DevPtr<T> {
    fn clone(&self) -> Self { *self }
}
impl<T> Copy for DevPtr<T> {}
impl<T> std::fmt::Debug for DevPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "DevPtr({:#x})", self.0) }
}
// SAFETY: a device address, passed by value as the kernel's 64-bit pointer parameter.
unsafe impl<T> cudarc::driver::DeviceRepr for DevPtr<T> {}

/// Host argument tuples (borrowed, so that the check moves nothing) matching a kernel's parameter
/// tuple `P`, element by element.
#[diagnostic::on_unimplemented(message = "these arguments do not match the kernel's parameters `{P}`",
    note = "a launch passes one argument per kernel parameter, in order")]
pub trait ArgsFor<P> {}
macro_rules! args_for {
    ($($a:ident $p:ident),*) => { impl<'a, $($a: KernelArg<$p>, $p),*> ArgsFor<($($p,)*)> for ($(&'a $a,)*) {} };
}
impl ArgsFor<()> for () {}
args_for!(A0 P0);
args_for!(A0 P0, A1 P1);
args_for!(A0 P0, A1 P1, A2 P2);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15, A16 P16);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15, A16 P16, A17 P17);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15, A16 P16, A17 P17, A18 P18);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15, A16 P16, A17 P17, A18 P18, A19 P19);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15, A16 P16, A17 P17, A18 P18, A19 P19, A20 P20);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15, A16 P16, A17 P17, A18 P18, A19 P19, A20 P20, A21 P21);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15, A16 P16, A17 P17, A18 P18, A19 P19, A20 P20, A21 P21, A22 P22);
args_for!(A0 P0, A1 P1, A2 P2, A3 P3, A4 P4, A5 P5, A6 P6, A7 P7, A8 P8, A9 P9, A10 P10, A11 P11, A12 P12, A13 P13, A14 P14, A15 P15, A16 P16, A17 P17, A18 P18, A19 P19, A20 P20, A21 P21, A22 P22, A23 P23);

/// The compile-time check of `launch!` (called in a branch that never runs).
pub fn check_args<K: LaunchArgs<A> + ?Sized, A>(_kernel: &K, _args: A) {}

impl Gpu {
    /// Looks the kernel up and validates the launch shape against the device's limits, raising
    /// the kernel's dynamic shared-memory limit when it asks for more than the 48 KiB default.
    pub fn prepare_launch(&self, kernel: &str, cfg: &LaunchConfig) -> GpuResult<CudaFunction> {
        // A kernel with a cap in the table runs as its capped copy (the sm_90 module's are capped
        // at build time).
        let func = match gpu_kernels::registers::cap(kernel) {
            Some(cap) if !kernel.starts_with("sm90_") => {
                self.function(kernel)?; // present in the main module (else the list of known kernels)
                super::ptx::capped_function(self, kernel, cap)?
            }
            _ => self.function(kernel)?,
        };
        let (bx, by, bz) = cfg.block_dim;
        let threads = bx as u64 * by as u64 * bz as u64;
        let info = self.info();
        let bad = |why: String| Err(GpuError::BadLaunch { kernel: kernel.to_string(), why });
        if threads == 0 || threads > info.max_threads_per_block as u64 {
            return bad(format!("block {:?} has {threads} threads (1..={} allowed)", cfg.block_dim, info.max_threads_per_block));
        }
        let (gx, gy, gz) = cfg.grid_dim;
        if gx == 0 || gy == 0 || gz == 0 || gy > 65535 || gz > 65535 {
            return bad(format!("grid {:?} is empty or too large", cfg.grid_dim));
        }
        if cfg.shared_mem_bytes as i32 > info.max_shared_per_block_optin {
            return bad(format!("{} B of dynamic shared memory requested, {} B allowed", cfg.shared_mem_bytes,
                info.max_shared_per_block_optin));
        }
        if cfg.shared_mem_bytes > 48 * 1024 {
            func.set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                cfg.shared_mem_bytes as i32,
            )
            .map_err(GpuError::driver(format!("raising the shared-memory limit of `{kernel}`")))?;
        }
        Ok(func)
    }

    /// Maps a launch result to [`GpuError::Launch`]; optionally synchronises (`SEISGPU_SYNC_LAUNCH=1`).
    pub fn finish_launch(&self, kernel: &str, cfg: &LaunchConfig, result: Result<(), cudarc::driver::DriverError>) -> GpuResult<()> {
        let wrap = |source| GpuError::Launch {
            kernel: kernel.to_string(),
            grid: cfg.grid_dim,
            block: cfg.block_dim,
            shared: cfg.shared_mem_bytes,
            source,
        };
        result.map_err(wrap)?;
        if sync_every_launch() {
            self.context().synchronize().map_err(wrap)?;
        }
        Ok(())
    }
}

fn sync_every_launch() -> bool {
    static FLAG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FLAG.get_or_init(|| std::env::var("SEISGPU_SYNC_LAUNCH").is_ok_and(|v| v == "1"))
}
