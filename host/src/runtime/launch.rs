//! Typed, checked kernel launches.
//!
//! ```ignore
//! // y = a x + y over n elements, in one line:
//! launch!(gpu, "saxpy", grid_1d(n, 256), &n, &a, &x, &mut y)?;
//! ```
//! Arguments go through cudarc's `PushKernelArg`, so each must be a reference to a `DeviceRepr`
//! scalar or a device buffer (bind temporaries to locals first). Errors name the kernel, grid and
//! block. Set `SEISGPU_SYNC_LAUNCH=1` to synchronise after every launch so an asynchronous fault is
//! reported by the kernel that caused it.

use cudarc::driver::{sys, CudaFunction, LaunchConfig};

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
#[macro_export]
macro_rules! launch {
    (on $stream:expr, $gpu:expr, $kernel:expr, $cfg:expr $(, $arg:expr)* $(,)?) => {{
        use $crate::runtime::PushKernelArg as _;
        let gpu: &$crate::runtime::Gpu = &$gpu;
        let cfg: $crate::runtime::LaunchConfig = $cfg;
        let kernel: &str = $kernel;
        match gpu.prepare_launch(kernel, &cfg) {
            Err(e) => Err(e),
            Ok(func) => {
                let stream: &$crate::runtime::CudaStream = &$stream;
                let mut builder = stream.launch_builder(&func);
                $( builder.arg($arg); )*
                let result = unsafe { builder.launch(cfg) };
                gpu.finish_launch(kernel, &cfg, result.map(|_| ()))
            }
        }
    }};
    ($gpu:expr, $kernel:expr, $cfg:expr $(, $arg:expr)* $(,)?) => {
        $crate::launch!(on $gpu.stream(), $gpu, $kernel, $cfg $(, $arg)*)
    };
}

impl Gpu {
    /// Looks the kernel up and validates the launch shape against the device's limits, raising
    /// the kernel's dynamic shared-memory limit when it asks for more than the 48 KiB default.
    pub fn prepare_launch(&self, kernel: &str, cfg: &LaunchConfig) -> GpuResult<CudaFunction> {
        let func = self.function(kernel)?;
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
