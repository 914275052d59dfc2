//! Micro-benchmarks of the wave-packet CPU reference: forward and inverse of a 48^3 cube for
//! each USFFT variant (separable, the paper's 3D stencil, exact lattice FFT). The GPU numbers come
//! from `seisgpu bench wavepacket` (CUDA events); this keeps the CPU reference's speed tracked.
use std::sync::Arc;

use seisgpu_host::wavepacket::cpu::CpuEngine;
use seisgpu_host::wavepacket::{apps, Frame, Gather, Params};
use seisgpu_lab::micro::Group;

fn main() {
    let n = 48;
    let f = apps::synthetic_cube([n, n, n], 0.004, 25.0);
    let g = Group::new("wavepacket-48");
    for gather in [Gather::Separable, Gather::Stencil, Gather::Lattice] {
        let fr = Arc::new(Frame::new(n, &Params { eps: 1e-4, gather, ..Params::default() }).unwrap());
        let e = CpuEngine::new(fr);
        let coeffs = e.forward(&f);
        g.case(&format!("forward-{gather:?}"), None, || e.forward(&f));
        g.case(&format!("inverse-{gather:?}"), None, || e.inverse(&coeffs));
    }
}
