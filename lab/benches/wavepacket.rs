//! Criterion benchmarks of the wave-packet CPU reference: forward and inverse of a 48^3 cube for
//! each USFFT variant (separable, the paper's 3D stencil, exact lattice FFT). The GPU numbers come
//! from `seisgpu bench wavepacket` (CUDA events); this keeps the CPU reference's speed tracked.
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use seisgpu_host::wavepacket::cpu::CpuEngine;
use seisgpu_host::wavepacket::{apps, Frame, Gather, Params};

fn transforms(c: &mut Criterion) {
    let n = 48;
    let f = apps::synthetic_cube([n, n, n], 0.004, 25.0);
    let mut g = c.benchmark_group("wavepacket-48");
    g.sample_size(10);
    for gather in [Gather::Separable, Gather::Stencil, Gather::Lattice] {
        let fr = Arc::new(Frame::new(n, &Params { eps: 1e-4, gather, ..Params::default() }).unwrap());
        let e = CpuEngine::new(fr);
        let coeffs = e.forward(&f);
        g.bench_function(format!("forward-{gather:?}"), |b| b.iter(|| e.forward(&f)));
        g.bench_function(format!("inverse-{gather:?}"), |b| b.iter(|| e.inverse(&coeffs)));
    }
    g.finish();
}

criterion_group!(benches, transforms);
criterion_main!(benches);
