//! Criterion benchmarks of the ktm CPU reference on the small workloads (bare migration, the full
//! production configuration, and modelling) and, where a GPU is present, of the default kernel on
//! the same resident data. The paper-size comparison of every variant is `seisgpu ktm bench --size
//! paper` (or `seisgpu bench ktm`).
use criterion::{criterion_group, criterion_main, Criterion};
use seisgpu_host::bench::BenchSize;
use seisgpu_host::ktm::{self, bench::workloads, gpu::Resident, prep, Params, Plan, Variant};
use seisgpu_host::Backend;

fn migration(c: &mut Criterion) {
    let mut g = c.benchmark_group("ktm");
    g.sample_size(10);
    let gpu = seisgpu_host::runtime::Gpu::open(0).ok();
    let wl = workloads(BenchSize::Small).into_iter().next().expect("a small workload");
    let full = Params::full(wl.params.grid, wl.params.velocity.clone());
    for (name, params) in [("bare", wl.params.clone()), ("full", full)] {
        g.bench_function(format!("{}/{name}/cpu-reference", wl.name), |b| {
            b.iter(|| ktm::migrate(&wl.traces, &params, &[Backend::Cpu]).unwrap())
        });
        if let Some(gpu) = &gpu {
            let plan = Plan::new(&wl.traces.headers, wl.traces.ns, wl.traces.dt, wl.traces.t0, &params).unwrap();
            let prepared = prep::prepare(&wl.traces, &plan, &params);
            let mut res = Resident::new(gpu, &plan, &prepared).unwrap();
            g.bench_function(format!("{}/{name}/gpu-columns-kernel", wl.name), |b| {
                b.iter(|| {
                    res.run(gpu, Variant::Columns).unwrap();
                    gpu.synchronize().unwrap();
                })
            });
        }
    }
    let img = ktm::migrate(&wl.traces, &wl.params, &[Backend::Cpu]).unwrap();
    let t = &wl.traces;
    g.bench_function(format!("{}/bare/cpu-modelling", wl.name), |b| {
        b.iter(|| ktm::model(&img, &t.headers, t.ns, t.dt, t.t0, &wl.params, &Backend::Cpu).unwrap())
    });
    g.finish();
}

criterion_group!(benches, migration);
criterion_main!(benches);
