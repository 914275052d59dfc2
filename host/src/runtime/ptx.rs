//! Single kernels of the embedded PTX as modules of their own, with a register cap: Rust cannot
//! emit `.maxnreg`, so the driver JIT-compiles a copy of the entry point with the directive added
//! after its parameter list (the pstm, srm and nlbf drivers use it). The kernel must call no
//! function, since the copy carries no other function.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{sys, CudaFunction, CudaModule, LaunchConfig};
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

/// Lines of the end of the parameter list and of the body of the entry point `name` that
/// starts at `lines[start]`.
pub fn entry_span(lines: &[&str], start: usize, name: &str) -> Result<(usize, usize), String> {
    let close = (start..lines.len()).find(|&k| lines[k] == ")").ok_or_else(|| format!("PTX of `{name}` has no parameter list end"))?;
    let end = (close..lines.len()).find(|&k| lines[k] == "}").ok_or_else(|| format!("PTX of `{name}` has no end"))?;
    Ok((close, end))
}

/// Appends lines `start..=end` (the entry point `name`, parameter list ending at `close`) to
/// `out`, with `.maxnreg max_regs` after the parameter list.
pub fn push_capped(lines: &[&str], start: usize, (close, end): (usize, usize), name: &str, max_regs: u32, out: &mut String)
    -> Result<(), String> {
    for (k, l) in lines.iter().enumerate().take(end + 1).skip(start) {
        if l.trim_start().starts_with("call") {
            return Err(format!("PTX kernel `{name}` calls a function; it cannot be moved to its own module"));
        }
        out.push_str(l);
        out.push('\n');
        if k == close {
            out.push_str(&format!(".maxnreg {max_regs}\n"));
        }
    }
    Ok(())
}

/// Entry point `name` of `ptx` alone in a module, with `.maxnreg max_regs`.
pub fn capped_ptx(ptx: &str, name: &str, max_regs: u32) -> Result<String, String> {
    let mut out = module_header(ptx);
    let lines: Vec<&str> = ptx.lines().collect();
    let head = format!(".visible .entry {name}(");
    let start = lines.iter().position(|l| *l == head).ok_or_else(|| format!("the embedded PTX has no kernel `{name}`"))?;
    let span = entry_span(&lines, start, name)?;
    push_capped(&lines, start, span, name, max_regs, &mut out)?;
    Ok(out)
}

type ModuleKey = (usize, String, u32);
static MODULES: OnceLock<Mutex<HashMap<ModuleKey, Arc<CudaModule>>>> = OnceLock::new();

/// Kernel `name` of the embedded PTX capped at `max_regs` registers (its module JIT-compiled once
/// per context), with its shared-memory limit raised for `cfg`.
pub fn capped_kernel(gpu: &Gpu, name: &str, max_regs: u32, cfg: &LaunchConfig) -> GpuResult<CudaFunction> {
    // Validates the launch shape against the device (and the kernel's presence in the main module).
    gpu.prepare_launch(name, cfg)?;
    let key = (gpu.context().cu_ctx() as usize, name.to_string(), max_regs);
    let module = {
        let mut cache = MODULES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(&key) {
            Some(m) => m.clone(),
            None => {
                let src = capped_ptx(super::PTX, name, max_regs).map_err(|why| GpuError::BadLaunch { kernel: name.into(), why })?;
                let m = gpu.context().load_module(Ptx::from_src(src))
                    .map_err(GpuError::driver(format!("JIT-compiling `{name}` with .maxnreg {max_regs}")))?;
                cache.insert(key, m.clone());
                m
            }
        }
    };
    let func = module.load_function(name).map_err(GpuError::driver(format!("loading the register-capped copy of `{name}`")))?;
    if cfg.shared_mem_bytes > 48 * 1024 {
        func.set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, cfg.shared_mem_bytes as i32)
            .map_err(GpuError::driver(format!("raising the shared-memory limit of `{name}` (capped copy)")))?;
    }
    Ok(func)
}
