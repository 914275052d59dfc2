//! The Kirchhoff benchmark workloads (paper 2, Tables 1 and 2): synthetic surveys shared by the
//! benchmarks and the strong-scaling rows ([`crate::scale`]).

use rayon::prelude::*;

use seisgpu_host::ktm::{ImageGrid, Params, Velocity};
use crate::bench::BenchSize;
use seisgpu_host::{TraceHeader, TraceSet};

/// One workload: a geometry, a grid, the traces.
pub struct Workload {
    pub name: String,
    pub traces: TraceSet,
    pub params: Params,
    /// The paper's figure, for the table.
    pub paper: Option<String>,
}

/// Traces scattered over the image area: random sources, receivers within `max_offset` of them,
/// Gaussian noise samples (seeded; the migration's cost does not depend on the data).
pub fn scattered_traces(n: usize, ns: usize, dt: f32, g: &ImageGrid, max_offset: f64, seed: u64) -> TraceSet {
    use rand::RngExt;
    let mut r = seisgpu_host::synth::rng(seed);
    let (wx, wy) = ((g.nx.max(2) - 1) as f64 * g.dx, (g.ny.max(2) - 1) as f64 * g.dy);
    let headers: Vec<TraceHeader> = (0..n)
        .map(|_| {
            let (sx, sy) = (g.x0 + r.random_range(0.0..1.0) * wx, g.y0 + r.random_range(0.0..1.0) * wy);
            let (a, h): (f64, f64) = (r.random_range(0.0..std::f64::consts::TAU), r.random_range(0.0..max_offset));
            let mut t = TraceHeader { sx, sy, gx: sx + h * a.cos(), gy: sy + h * a.sin(), ..Default::default() };
            t.offset = t.distance();
            t
        })
        .collect();
    let mut t = TraceSet::zeros(headers, ns, dt);
    t.data.par_chunks_mut(ns).enumerate().for_each(|(i, tr)| seisgpu_host::synth::add_noise(tr, 1.0, seed ^ (i as u64 + 1)));
    t
}

fn table2_grid(size: BenchSize) -> ImageGrid {
    match size {
        BenchSize::Paper => ImageGrid { x0: 0.0, dx: 25.0, nx: 255, y0: 0.0, dy: 25.0, ny: 255, tau0: 0.0, dtau: 0.004, ntau: 1024 },
        BenchSize::Small => ImageGrid { x0: 0.0, dx: 25.0, nx: 31, y0: 0.0, dy: 25.0, ny: 29, tau0: 0.0, dtau: 0.008, ntau: 128 },
    }
}

/// The workloads' RMS velocity: 1500 m/s at 0 s, +250 m/s every 0.5 s.
pub fn vrms() -> Velocity { Velocity::Function { t0: 0.0, dt: 0.5, v: (0..12).map(|k| 1500.0 + 250.0 * k as f32).collect() } }

/// The benchmark workloads at `size`.
pub fn workloads(size: BenchSize) -> Vec<Workload> { workloads_named(size, |_| true) }

/// The workloads' names at `size`, in [`workloads`] order (without generating their traces).
pub fn names(size: BenchSize) -> Vec<String> {
    table2_counts(size).iter().map(|&(n, ..)| format!("ktm-table2-{n}")).chain(["ktm-table1".to_string()]).collect()
}

/// Trace counts of the Table 2 workloads at `size`, with the paper's CPU and GPU times (s).
fn table2_counts(size: BenchSize) -> Vec<(usize, usize, usize)> {
    let paper2 = [(4096, 2096, 100), (8192, 4343, 200), (40960, 24124, 1243), (83968, 49663, 2616)];
    match size {
        BenchSize::Paper => paper2.to_vec(),
        BenchSize::Small => paper2[..2].iter().map(|&(n, c, g)| (n / 32, c, g)).collect(),
    }
}

/// The workloads at `size` whose name `wanted` accepts (the others are not generated).
pub fn workloads_named(size: BenchSize, wanted: impl Fn(&str) -> bool) -> Vec<Workload> {
    let mut w = Vec::new();
    let g2 = table2_grid(size);
    let (ns2, dt2) = match size {
        BenchSize::Paper => (1024, 0.004),
        BenchSize::Small => (256, 0.004),
    };
    for (k, &(n, cpu, gpu)) in table2_counts(size).iter().enumerate() {
        let name = format!("ktm-table2-{n}");
        if !wanted(&name) {
            continue;
        }
        w.push(Workload {
            name,
            traces: scattered_traces(n, ns2, dt2, &g2, 4000.0, 20 + k as u64),
            params: Params::bare(g2, vrms()),
            paper: Some(format!("CPU {cpu} s (4 threads), GPU {gpu} s (C1060)")),
        });
    }
    let g1 = match size {
        BenchSize::Paper => ImageGrid { x0: 0.0, dx: 12.5, nx: 1, y0: 0.0, dy: 12.5, ny: 255, tau0: 0.0, dtau: 0.004, ntau: 1248 },
        BenchSize::Small => ImageGrid { x0: 0.0, dx: 12.5, nx: 1, y0: 0.0, dy: 12.5, ny: 63, tau0: 0.0, dtau: 0.004, ntau: 160 },
    };
    let (n1, ns1) = match size {
        BenchSize::Paper => (6727, 640),
        BenchSize::Small => (400, 128),
    };
    if !wanted("ktm-table1") {
        return w;
    }
    w.push(Workload {
        name: "ktm-table1".into(),
        traces: scattered_traces(n1, ns1, 0.008, &g1, 3000.0, 11),
        params: Params::bare(g1, vrms()),
        paper: Some("0.9 s (C1060, block 128 x 1)".into()),
    });
    w
}
