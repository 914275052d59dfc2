//! seisgpu device code. Kernels (`extern "ptx-kernel"`, only on `nvptx64`) and the pure math they
//! share with the CPU references (compiled for the host too, and unit-tested there).
//!
//! A kernel in four steps (the worked example is [`gain`]; docs/DEVELOPING.md, "Writing a kernel
//! in 15 minutes", walks through the files):
//!
//! 1. The math of one output as a plain `#[inline(always)] pub fn` here ([`gain::agc_sample`]):
//!    the CPU reference in the host crate calls the same function, so both sides agree.
//! 2. The entry point with [`kernel!`]: parameters are scalars and raw pointers, the body uses
//!    [`device`] (indices and grid-stride loops, shared memory, warp operations, atomics, loads,
//!    fast math, [`unroll!`]) and no `asm!` of its own. `kernel!` also writes a host descriptor
//!    ([`gain::AGC_RMS`]) naming the entry point with its parameter types.
//! 3. The host launches it with `launch!(gpu, AGC_RMS, cfg, &arg, ...)`: a wrong argument count
//!    or type does not compile.
//! 4. A register cap, if the kernel needs one, goes in [`registers::CAPS`].
//!
//! One module per algorithm: `nlbf`, `ktm`, `pstm`, `wavepacket`, `srm`, `velan`; [`device`] is the
//! `cuda_std`-like layer. build.rs (at the workspace root) compiles this crate for
//! `nvptx64-nvidia-cuda` and embeds the PTX in the host crate.
#![cfg_attr(not(test), no_std)]
#![feature(core_float_math)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_ptx,
        stdarch_nvptx,
        asm_experimental_arch,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

#[macro_use]
pub mod device;

// The host build gets std, so shared math can call std's exp/sin/cos on the CPU side.
#[cfg(all(not(target_arch = "nvptx64"), not(test)))]
extern crate std;

pub mod smoke;
pub mod ceilings;
pub mod gain;
pub mod interp;
pub mod math;
pub mod registers;

pub mod ktm;
pub mod nlbf;
pub mod pstm;
pub mod srm;
pub mod velan;
pub mod wavepacket;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::intrinsics::abort()
}
