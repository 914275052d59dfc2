//! seisgpu device code. Kernels (`extern "ptx-kernel"`, only on `nvptx64`) and the pure math they
//! share with the CPU references (compiled for the host too, and unit-tested there).
//!
//! One module per algorithm: `nlbf`, `ktm`, `pstm`, `wavepacket`, `srm`; `device` is the
//! `cuda_std`-like layer (indices, barriers, shared memory, shuffles, atomics, fast math, textures).
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
