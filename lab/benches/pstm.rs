//! Criterion benchmarks of the pstm CPU reference: one (trace, column) traveltime pass per mode
//! and model (the part the schemes differ in), and a small full migration per mode.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use seisgpu_host::bench::BenchSize;
use seisgpu_host::kernels::pstm::traveltime::{Dsr, Vti};
use seisgpu_host::pstm::{bench as pb, cpu, plan, Coefs, TraveltimeMode, TraveltimeModel};

fn traveltimes(c: &mut Criterion) {
    let (p, _, _) = pb::table2(BenchSize::Small);
    let traces = pb::fast_noise(pb::survey(50, &p, 200.0, 2000.0, 1), 500, 0.004, 2);
    let modes = [("exact", TraveltimeMode::Exact), ("static8", TraveltimeMode::Static8),
        ("dynamic", TraveltimeMode::Dynamic { tolerance: 4e-4 })];
    let mut g = c.benchmark_group("pstm-positions");
    for (name, mode) in modes {
        let pl = plan(&traces, &p, mode).unwrap();
        let kp = pl.kp;
        let coefs = Coefs::new(&p, &kp, 1);
        let (iv2, eta) = coefs.column(0);
        let ctx = kp.ctx(400.0 * 400.0, 900.0 * 900.0);
        let (mut pos, mut pts) = (vec![0.0; kp.nz_pad as usize], Vec::new());
        g.throughput(Throughput::Elements(p.nz as u64));
        g.bench_function(format!("{name}-dsr"), |b| b.iter(|| cpu::positions::<Dsr>(mode, &kp, &ctx, iv2, eta, &mut pos, &mut pts)));
        g.bench_function(format!("{name}-vti"), |b| b.iter(|| cpu::positions::<Vti>(mode, &kp, &ctx, iv2, eta, &mut pos, &mut pts)));
    }
    g.finish();
}

fn migration(c: &mut Criterion) {
    let (p, _, ns) = pb::table2(BenchSize::Small);
    let traces = pb::fast_noise(pb::survey(200, &p, 200.0, 2000.0, 3), ns, 0.004, 4);
    let mut g = c.benchmark_group("pstm-migrate-cpu");
    g.sample_size(10);
    for mode in [TraveltimeMode::Exact, TraveltimeMode::Static8, TraveltimeMode::Dynamic { tolerance: 4e-4 }] {
        let pl = plan(&traces, &p, mode).unwrap();
        let (_, work) = seisgpu_host::pstm::count_pairs(&p, &pl);
        g.throughput(Throughput::Elements(work));
        g.bench_function(mode.name(), |b| b.iter(|| cpu::migrate(&traces, &p, &pl, mode, TraveltimeModel::Dsr)));
    }
    g.finish();
}

criterion_group!(benches, traveltimes, migration);
criterion_main!(benches);
