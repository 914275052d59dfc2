//! Criterion benchmarks of the NLBF CPU reference (the 2+2+1 search on the small workloads, the
//! enhancement, NMO) and, where a GPU is present, of the fast GPU kernels on the same inputs.
//! The paper-size comparison of every variant is `seisgpu bench nlbf --size paper`.
use criterion::{criterion_group, criterion_main, Criterion};
use seisgpu_host::bench::BenchSize;
use seisgpu_host::nlbf::{self, cpu, gpu, synth, Setup};
use seisgpu_host::Backend;

fn search(c: &mut Criterion) {
    let mut g = c.benchmark_group("nlbf-search");
    g.sample_size(10);
    let gpu = seisgpu_host::runtime::Gpu::open(0).ok();
    for (name, (t, p)) in [("synthetic-2d-small", synth::synthetic_2d(BenchSize::Small)),
        ("crossspread-3d-small", synth::crossspread_3d(BenchSize::Small))] {
        let s = Setup::new(&t, &p).unwrap();
        g.bench_function(format!("{name}/cpu-reference"), |b| b.iter(|| cpu::estimate(&s, &t.data)));
        if let Some(gpu) = &gpu {
            let plan = gpu::FastPlan::new(gpu, &s, None).unwrap();
            let mut buf = plan.upload(gpu, &s, &t.data).unwrap();
            g.bench_function(format!("{name}/gpu-fast-kernels"), |b| {
                b.iter(|| {
                    plan.launch(gpu, &s, &mut buf).unwrap();
                    gpu.synchronize().unwrap();
                })
            });
        }
    }
    g.finish();
}

fn enhance_and_nmo(c: &mut Criterion) {
    let mut g = c.benchmark_group("nlbf-enhance-nmo");
    g.sample_size(10);
    let (_, noisy, p) = nlbf::bench::demo_gather();
    let est = nlbf::estimate(&noisy, &p, &[Backend::Cpu]).unwrap();
    let ep = nlbf::EnhanceParams { aperture: p.aperture_c };
    let es = nlbf::EnhanceSetup::new(&noisy, &p.coords, &est, &ep).unwrap();
    g.bench_function("enhance/cpu", |b| b.iter(|| cpu::enhance(&es, &est, &noisy.data)));
    let offsets = nlbf::nmo_offsets(&noisy.headers);
    let vrms = vec![2000.0f32; noisy.ns];
    g.bench_function("nmo/cpu", |b| b.iter(|| cpu::nmo(&noisy.data, noisy.ns, noisy.dt, 0.0, &offsets, &vrms, 0.5)));
    g.finish();
}

criterion_group!(benches, search, enhance_and_nmo);
criterion_main!(benches);
