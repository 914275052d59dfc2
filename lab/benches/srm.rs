//! Micro-benchmarks of the srm CPU reference: one depth step (Chebyshev degree 15, both
//! waves) of 8 frequency planes on a 128 x 128 grid, and the operator design of a 64-row table.
//! GPU timings live in `seisgpu srm bench` (CUDA events).
use seisgpu_host::srm::cpu;
use seisgpu_host::srm::design::{DesignParams, Operator, Spacing};
use seisgpu_host::srm::Taper;
use seisgpu_lab::micro::Group;

fn main() {
    let n = 128;
    let sp = Spacing { dx: 25.0, dy: 25.0, dz: 10.0, two_d: false };
    let tau = 2.0 * std::f64::consts::PI;
    let op = Operator::new(DesignParams::default(), sp, tau * 5.0 * 10.0 / 4500.0, tau * 40.0 * 10.0 / 1500.0, 64).unwrap();
    let slow: Vec<f32> = (0..n * n).map(|i| 1.0 / (2000.0 + (i % 97) as f32 * 20.0)).collect();
    let maps: Vec<_> = (0..8).map(|k| op.row_map(tau * (5.0 + 4.0 * k as f64))).collect();
    let planes: Vec<f32> = (0..2 * 8 * n * n).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
    let taper = Taper::new(n, n, 20, 0.3);
    let g = Group::new("srm");
    g.case("cpu_depth_step_128x128_8planes_deg15", None, || {
        let mut p = planes.clone();
        cpu::step_planes(&op, &maps, &slow, &taper, n, n, &mut p);
        p
    });
    g.case("design_64_rows_deg15", None, || Operator::new(DesignParams::default(), sp, 0.05, 1.7, 64).unwrap());
}
