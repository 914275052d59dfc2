//! Thread-block clusters (compute capability 9.0+): the sm_90 kernel module ([`super::PTX_SM90`],
//! loaded lazily, once per context, only on such GPUs), cluster launches through `cuLaunchKernelEx`
//! (cudarc 0.19 has none) and `cuOccupancyMaxActiveClusters`.
//!
//! ```ignore
//! let shape = ClusterConfig { grid: (16, 1, 32), block: (448, 1, 1), cluster: (16, 1, 1), shared: 200_000 };
//! let f = cluster_function(&gpu, SM90_SRM_STEP_CLUSTER.name(), &shape)?;
//! // Arguments checked against the descriptor, each saying how it is passed.
//! launch_cluster!(gpu, SM90_SRM_STEP_CLUSTER => &f, &shape, value &st, value &nx, ..., buf_mut x, view slow, ...)?;
//! ```

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{sys, CudaFunction, CudaModule, CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceRepr,
    SyncOnDrop};
use cudarc::nvrtc::Ptx;

use super::context::Gpu;
use super::error::{GpuError, GpuResult};

/// Shape of a cluster launch: grid and block (as `LaunchConfig`), cluster dimensions (the grid must
/// be a multiple of them) and dynamic shared memory per CTA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub cluster: (u32, u32, u32),
    pub shared: u32,
}

impl ClusterConfig {
    /// CTAs per cluster.
    pub fn cluster_size(&self) -> u32 { self.cluster.0 * self.cluster.1 * self.cluster.2 }
    /// Why this shape cannot be launched at all (before asking the driver), or None.
    pub fn check(&self) -> Option<String> {
        let (g, c, b) = (self.grid, self.cluster, self.block);
        if [g.0, g.1, g.2, c.0, c.1, c.2, b.0, b.1, b.2].contains(&0) {
            return Some(format!("empty grid {g:?}, block {b:?} or cluster {c:?}"));
        }
        if g.0 % c.0 != 0 || g.1 % c.1 != 0 || g.2 % c.2 != 0 {
            return Some(format!("grid {g:?} is not a multiple of the cluster {c:?}"));
        }
        if self.cluster_size() > 16 {
            return Some(format!("cluster {c:?} has {} CTAs (at most 16)", self.cluster_size()));
        }
        None
    }
}

/// Compute capability needed by the cluster kernels.
pub const CLUSTER_CC: (i32, i32) = (9, 0);

/// Whether `gpu` can run thread-block clusters (and the sm_90 module is embedded).
pub fn clusters_supported(gpu: &Gpu) -> bool {
    gpu.info().compute_capability >= CLUSTER_CC && !super::PTX_SM90.trim().is_empty()
}

type Key = usize;
static MODULES: OnceLock<Mutex<HashMap<Key, Arc<CudaModule>>>> = OnceLock::new();

/// The sm_90 module of `gpu`'s context (JIT-compiled once per context).
fn sm90_module(gpu: &Gpu, kernel: &str) -> GpuResult<Arc<CudaModule>> {
    let cc = gpu.info().compute_capability;
    if cc < CLUSTER_CC {
        return Err(GpuError::BadLaunch { kernel: kernel.into(),
            why: format!("needs compute capability 9.0 (thread-block clusters); this GPU has {}.{}", cc.0, cc.1) });
    }
    if super::PTX_SM90.trim().is_empty() {
        return Err(GpuError::BadLaunch { kernel: kernel.into(), why: "this build has no sm_90 kernel module".into() });
    }
    let key = gpu.context().cu_ctx() as usize;
    let mut cache = MODULES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = cache.get(&key) {
        return Ok(m.clone());
    }
    let m = gpu.context().load_module(Ptx::from_src(super::PTX_SM90))
        .map_err(GpuError::driver("loading the sm_90 (thread-block cluster) PTX module"))?;
    cache.insert(key, m.clone());
    Ok(m)
}

/// Names of the kernels in the sm_90 module.
pub fn sm90_kernel_names() -> Vec<&'static str> {
    super::PTX_SM90.lines().filter_map(|l| l.trim_start().strip_prefix(".visible .entry ")).map(|r| r.trim_end_matches('(').trim()).collect()
}

fn attr(f: &CudaFunction, a: sys::CUfunction_attribute) -> GpuResult<i32> {
    let mut v = 0i32;
    unsafe { sys::cuFuncGetAttribute(&mut v, a, f.cu_function()) }.result().map_err(GpuError::driver("reading a kernel attribute"))?;
    Ok(v)
}

/// Kernel `name` of the sm_90 module with its dynamic shared-memory limit raised to the GPU's opt-in
/// maximum and non-portable cluster sizes (9..16 CTAs) allowed, so that any shape can be asked of
/// [`max_active_clusters`] and launched.
pub fn sm90_function(gpu: &Gpu, name: &str) -> GpuResult<CudaFunction> {
    let module = sm90_module(gpu, name)?;
    let func = module.load_function(name)
        .map_err(|_| GpuError::UnknownKernel(name.to_string(), sm90_kernel_names().join(", ")))?;
    let set = |a, v: i32, what: &str| {
        unsafe { sys::cuFuncSetAttribute(func.cu_function(), a, v) }.result()
            .map_err(GpuError::driver(format!("{what} of `{name}`")))
    };
    gpu.context().bind_to_thread().map_err(GpuError::driver("binding the context"))?;
    set(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, gpu.info().max_shared_per_block_optin,
        "raising the shared-memory limit")?;
    set(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, "allowing a non-portable cluster size")?;
    Ok(func)
}

/// Checks `cfg` for `func` (from [`sm90_function`]): grid a multiple of the cluster, block within
/// the kernel's own thread limit (its registers), shared memory within the opt-in limit.
pub fn check_cluster_launch(gpu: &Gpu, name: &str, func: &CudaFunction, cfg: &ClusterConfig) -> GpuResult<()> {
    let bad = |why: String| Err(GpuError::BadLaunch { kernel: name.to_string(), why });
    if let Some(why) = cfg.check() {
        return bad(why);
    }
    let threads = cfg.block.0 as i64 * cfg.block.1 as i64 * cfg.block.2 as i64;
    let max = max_threads(func)?;
    if threads > max as i64 {
        return bad(format!("block {:?} has {threads} threads; the kernel allows {max} (its registers)", cfg.block));
    }
    if cfg.shared as i32 > gpu.info().max_shared_per_block_optin {
        return bad(format!("{} B of dynamic shared memory requested, {} B allowed", cfg.shared, gpu.info().max_shared_per_block_optin));
    }
    Ok(())
}

/// [`sm90_function`] + [`check_cluster_launch`].
pub fn cluster_function(gpu: &Gpu, name: &str, cfg: &ClusterConfig) -> GpuResult<CudaFunction> {
    let func = sm90_function(gpu, name)?;
    check_cluster_launch(gpu, name, &func, cfg)?;
    Ok(func)
}

/// Largest kernel block (threads) `func` can run with (its register count decides).
pub fn max_threads(func: &CudaFunction) -> GpuResult<u32> {
    Ok(attr(func, sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?.max(0) as u32)
}

fn launch_config(stream: &CudaStream, cfg: &ClusterConfig, attr: &mut sys::CUlaunchAttribute) -> sys::CUlaunchConfig {
    *attr = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cfg.cluster.0;
    attr.value.clusterDim.y = cfg.cluster.1;
    attr.value.clusterDim.z = cfg.cluster.2;
    sys::CUlaunchConfig {
        gridDimX: cfg.grid.0, gridDimY: cfg.grid.1, gridDimZ: cfg.grid.2,
        blockDimX: cfg.block.0, blockDimY: cfg.block.1, blockDimZ: cfg.block.2,
        sharedMemBytes: cfg.shared, hStream: stream.cu_stream(), attrs: attr, numAttrs: 1,
    }
}

/// How many clusters of shape `cfg` can be resident at once (`cuOccupancyMaxActiveClusters`); 0:
/// the shape cannot run on this GPU at all (too much shared memory, too large a cluster for a GPC).
pub fn max_active_clusters(gpu: &Gpu, name: &str, func: &CudaFunction, cfg: &ClusterConfig) -> GpuResult<u32> {
    gpu.context().bind_to_thread().map_err(GpuError::driver("binding the context"))?;
    let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    let lc = launch_config(gpu.stream(), cfg, &mut a);
    let mut n = 0i32;
    let r = unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, func.cu_function(), &lc) }.result();
    match r {
        Ok(()) => Ok(n.max(0) as u32),
        // The driver refuses shapes it cannot place (e.g. a cluster larger than any GPC): none fit.
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_INVALID_CLUSTER_SIZE => Ok(0),
        Err(e) => Err(GpuError::Driver { what: format!("asking the cluster occupancy of `{name}` for {cfg:?}"), source: e }),
    }
}

/// The arguments of one cluster launch, in the kernel's parameter order: scalars by value, device
/// buffers as their device pointers (with cudarc's stream-ordering records, kept until the launch is
/// queued).
pub struct ClusterArgs<'a> {
    stream: &'a CudaStream,
    values: Vec<Box<[u64]>>,
    guards: Vec<SyncOnDrop<'a>>,
}

impl<'a> ClusterArgs<'a> {
    pub fn new(stream: &'a CudaStream) -> Self { ClusterArgs { stream, values: Vec::new(), guards: Vec::new() } }

    /// A scalar or `#[repr(C)]` struct argument, by value.
    pub fn value<T: DeviceRepr + Copy>(&mut self, v: &T) -> &mut Self {
        let words = std::mem::size_of::<T>().div_ceil(8).max(1);
        let mut b = vec![0u64; words].into_boxed_slice();
        // SAFETY: the box holds at least size_of::<T>() bytes, 8-byte aligned (>= T's alignment for kernel arguments).
        unsafe { std::ptr::copy_nonoverlapping(v as *const T as *const u8, b.as_mut_ptr() as *mut u8, std::mem::size_of::<T>()) };
        self.values.push(b);
        self
    }
    /// A buffer the kernel reads.
    pub fn buf<T>(&mut self, s: &'a CudaSlice<T>) -> &mut Self {
        let (p, g) = s.device_ptr(self.stream);
        self.guards.push(g);
        self.value(&p)
    }
    /// A view the kernel reads.
    pub fn view<T>(&mut self, s: &'a CudaView<'_, T>) -> &mut Self {
        let (p, g) = s.device_ptr(self.stream);
        self.guards.push(g);
        self.value(&p)
    }
    /// A buffer the kernel writes.
    pub fn buf_mut<T>(&mut self, s: &'a mut CudaSlice<T>) -> &mut Self {
        let (p, g) = s.device_ptr_mut(self.stream);
        self.guards.push(g);
        self.value(&p)
    }
}

/// Launches a cluster kernel's prepared function (from [`cluster_function`]) on the GPU's default
/// stream, its arguments checked against the descriptor at compile time as `launch!` checks them;
/// each argument says how it goes into [`ClusterArgs`] (`value`, `buf`, `view`, `buf_mut`):
/// `launch_cluster!(gpu, SM90_SRM_STEP_CLUSTER => &func, &cfg, value &st, ..., buf_mut x, view slow, ...)`.
#[macro_export]
macro_rules! launch_cluster {
    ($gpu:expr, $kernel:expr => $func:expr, $cfg:expr $(, $how:ident $arg:expr)* $(,)?) => {{
        let gpu: &$crate::runtime::Gpu = &$gpu;
        let target = &$kernel;
        // Type-checks the arguments against the descriptor's parameters; never runs.
        #[allow(unreachable_code, unused_must_use)]
        if false {
            $crate::runtime::launch::check_args(target, ($(&$arg,)*));
        }
        let mut args = $crate::runtime::cluster::ClusterArgs::new(gpu.stream());
        $( args.$how($arg); )*
        $crate::runtime::cluster::launch_cluster(gpu, $crate::runtime::launch::KernelName::kernel_name(target), $func, $cfg, args)
    }};
}

/// Launches `func` (from [`cluster_function`]) with thread-block clusters on the args' stream.
/// Errors name the kernel and its shape.
pub fn launch_cluster(gpu: &Gpu, name: &str, func: &CudaFunction, cfg: &ClusterConfig, mut args: ClusterArgs<'_>) -> GpuResult<()> {
    let wrap = |source| GpuError::Launch { kernel: format!("{name} (cluster {:?})", cfg.cluster), grid: cfg.grid, block: cfg.block,
        shared: cfg.shared, source };
    gpu.context().bind_to_thread().map_err(GpuError::driver("binding the context"))?;
    let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    let lc = launch_config(args.stream, cfg, &mut a);
    let mut params: Vec<*mut c_void> = args.values.iter_mut().map(|b| b.as_mut_ptr() as *mut c_void).collect();
    // SAFETY: `params` points at one value per kernel parameter (the caller's order and types, as
    // for cudarc's launch builder), alive until the call returns (the driver copies them).
    let r = unsafe { sys::cuLaunchKernelEx(&lc, func.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }.result();
    drop(args.guards);
    r.map_err(wrap)?;
    if std::env::var("SEISGPU_SYNC_LAUNCH").is_ok_and(|v| v == "1") {
        gpu.context().synchronize().map_err(wrap)?;
    }
    Ok(())
}
