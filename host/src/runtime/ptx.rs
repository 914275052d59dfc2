//! Single kernels of the embedded PTX as modules of their own, with a register cap: Rust cannot
//! emit `.maxnreg`, so the driver JIT-compiles a copy of the entry point with the directive added
//! after its parameter list (the pstm, srm and nlbf drivers use it; the edit is
//! `gpu_kernels::registers::move_entries`, the fixed caps `gpu_kernels::registers::CAPS`). The
//! kernel must call no function, since the copy carries no other function.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::{sys, CudaFunction, LaunchConfig};
use cudarc::nvrtc::Ptx;

use super::context::Gpu;
use super::error::{GpuError, GpuResult};

/// The directives every extracted module needs: `.version`, `.target`, `.address_size` and the
/// dynamic shared-memory symbol.
pub fn module_header(ptx: &str) -> String {
    let mut out = String::new();
    for l in ptx.lines() {
        let t = l.trim_start();
        if t.starts_with(".version") || t.starts_with(".target") || t.starts_with(".address_size")
            || t.starts_with(".extern .shared")
        {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// The entry points of `ptx` that `pick` chooses (`Some(cap)`, see
/// `gpu_kernels::registers::move_entries`) alone in a module; an error if there is none.
pub fn entries_ptx(ptx: &str, what: &str, pick: impl Fn(&str) -> Option<Option<u32>>) -> Result<String, String> {
    let moved = gpu_kernels::registers::move_entries(ptx, pick)?;
    if moved.count == 0 {
        return Err(format!("the embedded PTX has no kernel {what}{}", if ptx.trim().is_empty() { " (built with SEISGPU_SKIP_PTX=1?)" } else { "" }));
    }
    Ok(module_header(ptx) + &moved.entries)
}

/// Entry point `name` of `ptx` alone in a module, with `.maxnreg max_regs`.
pub fn capped_ptx(ptx: &str, name: &str, max_regs: u32) -> Result<String, String> {
    entries_ptx(ptx, &format!("`{name}`"), |n| (n == name).then_some(Some(max_regs)))
}

/// Kernel `name` of the embedded PTX with its cap from `gpu_kernels::registers::CAPS` (which
/// [`Gpu::prepare_launch`] applies to every listed kernel); an error if the table has none for it.
pub fn listed_capped_kernel(gpu: &Gpu, name: &str, cfg: &LaunchConfig) -> GpuResult<CudaFunction> {
    if gpu_kernels::registers::cap(name).is_none() {
        return Err(GpuError::BadLaunch { kernel: name.into(), why: "no register cap in gpu_kernels::registers::CAPS".into() });
    }
    gpu.prepare_launch(name, cfg)
}

type CappedKey = (usize, String, u32);
/// The capped copies made so far: (context, kernel, registers) -> the function (which keeps its
/// module alive).
static CAPPED: OnceLock<Mutex<HashMap<CappedKey, CudaFunction>>> = OnceLock::new();

/// Kernel `name` of the embedded PTX capped at `max_regs` registers (its module JIT-compiled once
/// per context), with its shared-memory limit raised for `cfg`.
pub fn capped_kernel(gpu: &Gpu, name: &str, max_regs: u32, cfg: &LaunchConfig) -> GpuResult<CudaFunction> {
    // Validates the launch shape against the device (and the kernel's presence in the main module).
    gpu.prepare_launch(name, cfg)?;
    let func = capped_function(gpu, name, max_regs)?;
    if cfg.shared_mem_bytes > 48 * 1024 {
        func.set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, cfg.shared_mem_bytes as i32)
            .map_err(GpuError::driver(format!("raising the shared-memory limit of `{name}` (capped copy)")))?;
    }
    Ok(func)
}

/// Kernel `name` of the embedded PTX capped at `max_regs` registers, its module JIT-compiled once
/// per context and process. [`Gpu::prepare_launch`] takes this copy for every kernel listed in
/// `gpu_kernels::registers::CAPS`, so a cap declared there applies to every launch.
pub fn capped_function(gpu: &Gpu, name: &str, max_regs: u32) -> GpuResult<CudaFunction> {
    let key = (gpu.context().cu_ctx() as usize, name.to_string(), max_regs);
    let mut cache = CAPPED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = cache.get(&key) {
        return Ok(f.clone());
    }
    let src = capped_ptx(super::PTX, name, max_regs).map_err(|why| GpuError::BadLaunch { kernel: name.into(), why })?;
    let module = gpu.context().load_module(Ptx::from_src(src))
        .map_err(GpuError::driver(format!("JIT-compiling `{name}` with .maxnreg {max_regs}")))?;
    let func = module.load_function(name).map_err(GpuError::driver(format!("loading the register-capped copy of `{name}`")))?;
    cache.insert(key, func.clone());
    Ok(func)
}
