//! Kernel build (the role `cuda_builder` plays for Rust-CUDA): compiles `gpu-kernels/` for
//! `nvptx64-nvidia-cuda` with rustc's own NVPTX backend and embeds one self-contained PTX module in
//! the host crate.
//!
//! How: `cargo rustc --crate-type cdylib -Zbuild-std=core` with fat LTO and `--emit=asm`. Fat LTO
//! pulls everything the kernels use from `core` into one module, so the emitted `.s` is complete PTX;
//! the final link step (normally `llvm-bitcode-linker`, which is not served for this toolchain) is
//! replaced by `/bin/true` because its output is not needed. Entry points named `sm90_*` (thread-block
//! clusters) are then moved into a second, sm_90 module (`split_sm90`). The build fails if any
//! entry point of either module calls a function (`check_no_calls`): a panic path in a kernel.
//!
//! Knobs (environment):
//! - `SEISGPU_PTX_ARCH` (default `sm_70`): the PTX target. `sm_70` loads on every GPU of compute
//!   capability 7.0 or newer; the driver JIT-compiles it for the GPU at module load (BENCHMARKS.md
//!   has the measured cost on the H100).
//! - `SEISGPU_SKIP_PTX=1`: build without kernels (the runtime then reports that no PTX is embedded).
//!
//! Rebuilds happen only when a file under `gpu-kernels/` or one of the knobs changes.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().expect("host/ lives inside the workspace").to_path_buf();
    let kernels = root.join("gpu-kernels");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let ptx_out = out_dir.join("kernels.ptx");

    println!("cargo:rerun-if-changed={}", kernels.join("src").display());
    println!("cargo:rerun-if-changed={}", kernels.join("Cargo.toml").display());
    println!("cargo:rerun-if-changed=../build.rs");
    println!("cargo:rerun-if-env-changed=SEISGPU_PTX_ARCH");
    println!("cargo:rerun-if-env-changed=SEISGPU_SKIP_PTX");

    let arch = env::var("SEISGPU_PTX_ARCH").unwrap_or_else(|_| "sm_70".to_string());
    println!("cargo:rustc-env=SEISGPU_PTX_ARCH={arch}");

    if env::var("SEISGPU_SKIP_PTX").is_ok_and(|v| v == "1") {
        std::fs::write(&ptx_out, "").unwrap();
        std::fs::write(out_dir.join("kernels_sm90.ptx"), "").unwrap();
        println!("cargo:warning=SEISGPU_SKIP_PTX=1: building without GPU kernels");
        return;
    }

    // A target dir of its own: the outer cargo holds the lock on the workspace's target dir.
    let target_dir = ptx_target_dir(&out_dir, &root);
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&kernels)
        .args(["rustc", "--release", "--lib", "--crate-type", "cdylib"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--", "-C", &format!("target-cpu={arch}"), "--emit=asm", "-C", "linker=/bin/true"])
        .env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3");
    // Do not leak the outer build's flags (host target features, coverage, ...) into the NVPTX build.
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER", "CARGO_TARGET_DIR", "CARGO_BUILD_RUSTFLAGS"] {
        cmd.env_remove(var);
    }
    let output = cmd.output().unwrap_or_else(|e| panic!("could not start cargo for the kernel build: {e}"));
    if !output.status.success() {
        // Show rustc's own diagnostics, not the build-script wrapper around them.
        let stderr = String::from_utf8_lossy(&output.stderr);
        for line in stderr.lines().filter(|l| !l.trim_start().starts_with("Compiling")) {
            println!("cargo:warning={line}");
        }
        eprintln!("{stderr}");
        panic!("gpu-kernels failed to compile for nvptx64-nvidia-cuda (rustc's messages above)");
    }

    let asm = target_dir.join("nvptx64-nvidia-cuda/release/deps/gpu_kernels.s");
    let ptx = std::fs::read_to_string(&asm)
        .unwrap_or_else(|e| panic!("kernel build produced no PTX at {}: {e}", asm.display()));
    check_self_contained(&ptx);
    let (ptx, sm90) = split_sm90(&ptx).unwrap_or_else(|e| panic!("moving the sm_90 kernels to their module: {e}"));
    check_no_calls(&[("seisgpu-kernels.ptx", &ptx), ("seisgpu-kernels-sm90.ptx", &sm90)]);
    std::fs::write(&ptx_out, ptx).unwrap();
    std::fs::write(out_dir.join("kernels_sm90.ptx"), &sm90).unwrap();
    // A copy beside the target dir, for ptxas reports in CI and for the GPU bundle.
    let _ = std::fs::copy(&ptx_out, target_dir.join("seisgpu-kernels.ptx"));
    let _ = std::fs::write(target_dir.join("seisgpu-kernels-sm90.ptx"), &sm90);
}

/// Moves every entry point named `sm90_*` (thread-block clusters, DSMEM: instructions of PTX ISA 7.8 and 8.6
/// for sm_90, written with `asm!`, which rustc's backend pastes unchecked) out of the main module into
/// a module of its own with `.version 8.6` (at least: the mbarrier fences of `device::cluster`) and `.target sm_90` (at least),
/// with the register caps of `gpu_kernels::registers::CAPS`. The main module
/// stays loadable on every GPU of its target; the host loads the second one on compute capability
/// 9.0+ only. One kernel build instead of a second fat-LTO build of the whole crate for sm_90 (which
/// would double the kernel build time in CI). The moved kernels must call no function.
fn split_sm90(ptx: &str) -> Result<(String, String), String> {
    use gpu_kernels::registers;
    let mut sm90 = String::new();
    for l in ptx.lines() {
        let t = l.trim_start();
        if let Some(v) = t.strip_prefix(".version ") {
            let (maj, min) = v.trim().split_once('.').ok_or_else(|| format!("odd PTX version line `{l}`"))?;
            let (maj, min): (u32, u32) = (maj.parse().map_err(|_| format!("odd `{l}`"))?, min.parse().map_err(|_| format!("odd `{l}`"))?);
            let (maj, min) = if (maj, min) < (8, 6) { (8, 6) } else { (maj, min) };
            sm90.push_str(&format!(".version {maj}.{min}\n"));
        } else if let Some(tgt) = t.strip_prefix(".target sm_") {
            let num: u32 = tgt.trim_end_matches(|c: char| !c.is_ascii_digit()).parse().map_err(|_| format!("odd `{l}`"))?;
            sm90.push_str(if num < 90 { ".target sm_90\n" } else { l });
            if num >= 90 {
                sm90.push('\n');
            }
        } else if t.starts_with(".address_size") || t.starts_with(".extern .shared") {
            sm90.push_str(l);
            sm90.push('\n');
        }
    }
    // The `// .globl name` comments the main module keeps are harmless.
    let moved = registers::move_entries(ptx, |name| name.starts_with("sm90_").then(|| registers::cap(name)))?;
    if moved.count == 0 {
        return Ok((moved.rest, String::new())); // no cluster kernels: an empty module (the host then reports it missing)
    }
    sm90.push_str(&moved.entries);
    Ok((moved.rest, sm90))
}

/// `target/ptx` beside the outer build's profile directories.
fn ptx_target_dir(out_dir: &Path, root: &Path) -> PathBuf {
    // OUT_DIR = <target>/<profile>/build/seisgpu-host-<hash>/out (or <target>/<triple>/<profile>/...).
    out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|b| b.parent())
        .and_then(|profile| profile.parent())
        .map(|t| t.join("ptx"))
        .unwrap_or_else(|| root.join("target/ptx"))
}

/// No entry point of either module may call a function: after fat LTO the only calls left are
/// into `core::panicking` (a division by a divisor not known to be non-zero, a bounds-checked
/// index), whose `trap` would kill the CUDA context. Fails the build naming each kernel and what it
/// calls (docs/DEVELOPING.md, "Writing a kernel", says how to write divisions and indexing).
/// Kernels that keep Rust's division-by-zero check (a branch to a trapping panic path; the host
/// never launches them with a zero divisor): written with `device::nonzero` divisors, the default
/// NLBF slide kernel (`nlbf_slide_l10_h5`) ran 104.4 -> 111.9 ms and the paper's kernel 18.34 ->
/// 19.61 s on nlbf-crossspread-3d (one H200, same run), from register allocation alone. They
/// leave this list when a check-free form measures as fast.
const KEEP_DIVISION_CHECK: &[&str] = &["nlbf_slide_", "nlbf_paper"];

fn check_no_calls(modules: &[(&str, &str)]) {
    use gpu_kernels::registers::{entry_calls, readable_symbol};
    let mut found = Vec::new();
    for (module, ptx) in modules {
        for (kernel, called) in entry_calls(ptx) {
            if KEEP_DIVISION_CHECK.iter().any(|p| kernel.starts_with(p)) {
                continue;
            }
            let called: Vec<String> = called.iter().map(|c| format!("`{}`", readable_symbol(c))).collect();
            found.push(format!("  {kernel} ({module}) calls {}", called.join(", ")));
        }
    }
    if !found.is_empty() {
        for l in &found {
            println!("cargo:warning={l}");
        }
        panic!("{} GPU kernel(s) have a panic path (a call into core::panicking traps and kills the CUDA context):\n{}\n\
            Divide by `device::nonzero(v)` / `nonzero_usize(v)`, index through raw pointers in range by construction or with \
            indices the compiler can bound (`min`, a power-of-two mask, `unroll!` constants): docs/DEVELOPING.md, \"Writing a kernel\".",
            found.len(), found.join("\n"));
    }
}

/// Fat LTO must have resolved every function: an `.extern .func` would fail at module load.
fn check_self_contained(ptx: &str) {
    let unresolved: Vec<&str> =
        ptx.lines().filter(|l| l.trim_start().starts_with(".extern .func")).collect();
    if !unresolved.is_empty() {
        panic!("PTX has unresolved functions (not self-contained):\n{}", unresolved.join("\n"));
    }
}
