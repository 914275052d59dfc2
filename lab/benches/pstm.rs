//! Micro-benchmarks of the pstm CPU reference: one (trace, column) traveltime pass per mode
//! and model (the part the schemes differ in), and a small full migration per mode.
use seisgpu_host::kernels::pstm::traveltime::{Dsr, Vti};
use seisgpu_host::pstm::{cpu, plan, Coefs, TraveltimeMode, TraveltimeModel};
use seisgpu_lab::bench::BenchSize;
use seisgpu_lab::micro::Group;
use seisgpu_lab::pstm as pb;

fn traveltimes() {
    let (p, _, _) = pb::table2(BenchSize::Small);
    let traces = pb::fast_noise(pb::survey(50, &p, 200.0, 2000.0, 1), 500, 0.004, 2);
    let modes = [("exact", TraveltimeMode::Exact), ("static8", TraveltimeMode::Static8),
        ("dynamic", TraveltimeMode::Dynamic { tolerance: 4e-4 })];
    let g = Group::new("pstm-positions").repeats(100);
    for (name, mode) in modes {
        let pl = plan(&traces, &p, mode).unwrap();
        let kp = pl.kp;
        let coefs = Coefs::new(&p, &kp, 1);
        let (iv2, eta) = coefs.column(0);
        let ctx = kp.ctx(400.0 * 400.0, 900.0 * 900.0);
        let (mut pos, mut pts) = (vec![0.0; kp.nz_pad as usize], Vec::new());
        let work = Some((p.nz as f64, "image sample"));
        g.case(&format!("{name}-dsr"), work, || cpu::positions::<Dsr>(mode, &kp, &ctx, iv2, eta, &mut pos, &mut pts));
        g.case(&format!("{name}-vti"), work, || cpu::positions::<Vti>(mode, &kp, &ctx, iv2, eta, &mut pos, &mut pts));
    }
}

fn migration() {
    let (p, _, ns) = pb::table2(BenchSize::Small);
    let traces = pb::fast_noise(pb::survey(200, &p, 200.0, 2000.0, 3), ns, 0.004, 4);
    let g = Group::new("pstm-migrate-cpu");
    for mode in [TraveltimeMode::Exact, TraveltimeMode::Static8, TraveltimeMode::Dynamic { tolerance: 4e-4 }] {
        let pl = plan(&traces, &p, mode).unwrap();
        let (_, work) = seisgpu_host::pstm::count_pairs(&p, &pl);
        g.case(mode.name(), Some((work as f64, "contribution")), || cpu::migrate(&traces, &p, &pl, mode, TraveltimeModel::Dsr));
    }
}

fn main() {
    traveltimes();
    migration();
}
