//! One GPU: its properties read from the driver, its context, streams and the loaded kernel module.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use cudarc::nvrtc::Ptx;

use super::error::{GpuError, GpuResult};

/// Properties of one GPU, read from the driver.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub multiprocessors: i32,
    pub total_memory: usize,
    pub free_memory: usize,
    pub clock_khz: i32,
    pub memory_clock_khz: i32,
    pub memory_bus_bits: i32,
    pub l2_bytes: i32,
    pub max_shared_per_block_optin: i32,
    pub max_shared_per_sm: i32,
    pub max_threads_per_block: i32,
    pub warp_size: i32,
    pub driver_version: i32,
    /// Time to load the PTX module (includes the driver's JIT compile to the GPU's machine code,
    /// unless the driver's compute cache already held it).
    pub module_load_ms: f64,
}

impl DeviceInfo {
    /// Theoretical DRAM bandwidth from the memory clock and bus width (bytes/s, DDR).
    pub fn peak_bandwidth(&self) -> f64 {
        2.0 * self.memory_clock_khz as f64 * 1e3 * self.memory_bus_bits as f64 / 8.0
    }
    /// FP32 FMA peak (flop/s): 128 FP32 lanes per SM on Volta..Hopper, 2 flops per FMA.
    pub fn peak_fp32(&self) -> f64 {
        let lanes = if self.compute_capability.0 >= 8 && self.compute_capability != (8, 0) { 128.0 } else { 64.0 };
        2.0 * lanes * self.multiprocessors as f64 * self.clock_khz as f64 * 1e3
    }
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "GPU {}: {} (compute capability {}.{})", self.ordinal, self.name,
            self.compute_capability.0, self.compute_capability.1)?;
        writeln!(f, "  multiprocessors      {}", self.multiprocessors)?;
        writeln!(f, "  memory               {:.1} GiB total, {:.1} GiB free", gib(self.total_memory), gib(self.free_memory))?;
        writeln!(f, "  SM clock             {} MHz", self.clock_khz / 1000)?;
        writeln!(f, "  memory               {} MHz x {} bit = {:.0} GB/s theoretical", self.memory_clock_khz / 1000,
            self.memory_bus_bits, self.peak_bandwidth() / 1e9)?;
        writeln!(f, "  FP32 FMA peak        {:.1} TFLOP/s", self.peak_fp32() / 1e12)?;
        writeln!(f, "  L2 cache             {} MiB", self.l2_bytes / (1 << 20))?;
        writeln!(f, "  shared memory        {} KiB per block (opt-in), {} KiB per SM", self.max_shared_per_block_optin / 1024,
            self.max_shared_per_sm / 1024)?;
        writeln!(f, "  max threads / block  {}", self.max_threads_per_block)?;
        writeln!(f, "  driver               CUDA {}.{}", self.driver_version / 1000, (self.driver_version % 1000) / 10)?;
        write!(f, "  PTX module load      {:.1} ms (PTX {} JIT-compiled by the driver)", self.module_load_ms, super::PTX_ARCH)
    }
}

fn gib(b: usize) -> f64 { b as f64 / (1u64 << 30) as f64 }

/// One GPU with the seisgpu kernels loaded: context, module, function cache and a stream pool.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    streams: Vec<Arc<CudaStream>>,
    info: DeviceInfo,
}

/// Streams in the pool (upload of the next work item overlaps the current one's compute).
pub const STREAM_POOL: usize = 4;

impl Gpu {
    /// Whether `libcuda.so` can be loaded at all (no panic when it cannot). Probed once per
    /// process: each probe tries to load the library under every candidate name (about half a
    /// millisecond on a machine without it), and the Python binding asks on every call.
    pub fn driver_present() -> bool {
        static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() })
    }

    /// Number of GPUs the driver sees; 0 when there is no driver.
    pub fn device_count() -> usize {
        if !Self::driver_present() {
            return 0;
        }
        if cudarc::driver::result::init().is_err() {
            return 0;
        }
        CudaContext::device_count().map(|n| n.max(0) as usize).unwrap_or(0)
    }

    /// Opens GPU `ordinal`, loads the embedded PTX and creates the stream pool.
    pub fn open(ordinal: usize) -> GpuResult<Arc<Gpu>> {
        if !Self::driver_present() {
            return Err(GpuError::NoDriver("libcuda.so not found on the library path".into()));
        }
        cudarc::driver::result::init().map_err(|e| GpuError::NoDriver(e.to_string()))?;
        let count = CudaContext::device_count().map_err(GpuError::driver("counting GPUs"))?.max(0) as usize;
        if count == 0 {
            return Err(GpuError::NoDevice);
        }
        if ordinal >= count {
            return Err(GpuError::BadOrdinal { ordinal, count });
        }
        if super::PTX.trim().is_empty() {
            return Err(GpuError::NoKernels);
        }
        let ctx = CudaContext::new(ordinal).map_err(GpuError::driver("creating the CUDA context"))?;
        let load_start = std::time::Instant::now();
        let module = ctx
            .load_module(Ptx::from_src(super::PTX))
            .map_err(GpuError::driver(format!("loading the PTX module (built for {})", super::PTX_ARCH)))?;
        let mut streams = Vec::with_capacity(STREAM_POOL);
        streams.push(ctx.default_stream());
        for _ in 1..STREAM_POOL {
            streams.push(ctx.new_stream().map_err(GpuError::driver("creating a stream"))?);
        }
        let module_load_ms = load_start.elapsed().as_secs_f64() * 1e3;
        let mut info = Self::read_info(&ctx, ordinal)?;
        info.module_load_ms = module_load_ms;
        Ok(Arc::new(Gpu { ctx, module, functions: Mutex::new(HashMap::new()), streams, info }))
    }

    fn read_info(ctx: &Arc<CudaContext>, ordinal: usize) -> GpuResult<DeviceInfo> {
        let a = |attr| ctx.attribute(attr).map_err(GpuError::driver("reading device attributes"));
        let (free, total) = ctx.mem_get_info().map_err(GpuError::driver("reading free memory"))?;
        let mut driver_version = 0;
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) };
        Ok(DeviceInfo {
            ordinal,
            name: ctx.name().map_err(GpuError::driver("reading the device name"))?,
            compute_capability: ctx.compute_capability().map_err(GpuError::driver("reading compute capability"))?,
            multiprocessors: a(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            total_memory: total,
            free_memory: free,
            clock_khz: a(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
            memory_clock_khz: a(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
            memory_bus_bits: a(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            l2_bytes: a(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            max_shared_per_block_optin: a(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            max_shared_per_sm: a(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            max_threads_per_block: a(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            warp_size: a(Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            driver_version,
            module_load_ms: 0.0,
        })
    }

    pub fn info(&self) -> &DeviceInfo { &self.info }
    pub fn context(&self) -> &Arc<CudaContext> { &self.ctx }
    /// The first stream of the pool (the context's default stream).
    pub fn stream(&self) -> &Arc<CudaStream> { &self.streams[0] }
    /// The whole stream pool.
    pub fn streams(&self) -> &[Arc<CudaStream>] { &self.streams }

    /// A kernel of the embedded module, by its `#[unsafe(no_mangle)]` name (cached).
    pub fn function(&self, name: &str) -> GpuResult<CudaFunction> {
        let mut cache = self.functions.lock().unwrap();
        if let Some(f) = cache.get(name) {
            return Ok(f.clone());
        }
        let f = self.module.load_function(name).map_err(|_| {
            GpuError::UnknownKernel(name.to_string(), super::kernel_names().join(", "))
        })?;
        cache.insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// Free and total device memory now, in bytes.
    pub fn memory(&self) -> GpuResult<(usize, usize)> {
        self.ctx.mem_get_info().map_err(GpuError::driver("reading free memory"))
    }

    /// Errors early, with a message, when `need` bytes will not fit (callers then split the work).
    pub fn ensure_fits(&self, what: &str, need: usize) -> GpuResult<()> {
        let (free, _) = self.memory()?;
        if need > free {
            return Err(GpuError::OutOfMemory { what: what.to_string(), need, free });
        }
        Ok(())
    }

    /// Copies a host slice to a new device buffer (on the default stream).
    pub fn upload<T: DeviceRepr>(&self, host: &[T]) -> GpuResult<CudaSlice<T>> {
        self.stream().clone_htod(host).map_err(GpuError::driver(format!("uploading {} elements", host.len())))
    }
    /// Copies a device buffer back to a new Vec (synchronises the default stream).
    pub fn download<T: DeviceRepr + Clone + Default>(&self, dev: &CudaSlice<T>) -> GpuResult<Vec<T>> {
        self.stream().clone_dtoh(dev).map_err(GpuError::driver(format!("downloading {} elements", dev.len())))
    }
    /// [`Gpu::download`] into host memory whose pages are written first, in parallel (rayon): a
    /// download into fresh pages takes their faults one by one inside the copy, which for a whole
    /// image (hundreds of MB) is most of its time. For the large once-per-job downloads.
    pub fn download_prefaulted<T: DeviceRepr + Default + Clone + Send + Sync>(&self, dev: &CudaSlice<T>) -> GpuResult<Vec<T>> {
        use rayon::prelude::*;
        // Huge pages requested for the fresh buffer (fewer faults in the parallel first touch).
        let mut host = Vec::with_capacity(dev.len());
        super::pages::advise_huge_pages(host.as_ptr() as *const u8, dev.len() * std::mem::size_of::<T>());
        rayon::iter::repeat_n(T::default(), dev.len()).collect_into_vec(&mut host);
        self.stream().memcpy_dtoh(dev, host.as_mut_slice()).map_err(GpuError::driver(format!("downloading {} elements", dev.len())))?;
        Ok(host)
    }
    /// A zero-filled device buffer.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> GpuResult<CudaSlice<T>> {
        self.stream().alloc_zeros(len).map_err(GpuError::driver(format!("allocating {len} elements")))
    }
    /// A device buffer filled with NaN: tests poison outputs so unwritten elements show.
    pub fn poisoned(&self, len: usize) -> GpuResult<CudaSlice<f32>> {
        self.upload(&vec![f32::NAN; len])
    }
    /// Waits for all work on all streams; a fault in an earlier asynchronous launch surfaces here.
    pub fn synchronize(&self) -> GpuResult<()> {
        self.ctx.synchronize().map_err(GpuError::driver("synchronising (an earlier kernel may have faulted)"))
    }
}
