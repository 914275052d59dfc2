//! Micro-benchmarks of the ktm CPU reference on the small workloads (bare migration, the full
//! production configuration, and modelling) and, where a GPU is present, of the default kernel on
//! the same resident data. The paper-size comparison of every variant is `seisgpu ktm bench --size
//! paper` (or `seisgpu bench ktm`).
use seisgpu_host::ktm::{self, gpu::Resident, prep, Params, Plan, Variant};
use seisgpu_host::Backend;
use seisgpu_lab::bench::BenchSize;
use seisgpu_lab::ktm::workloads;
use seisgpu_lab::micro::Group;

fn main() {
    let g = Group::new("ktm");
    let gpu = seisgpu_host::runtime::Gpu::open(0).ok();
    let wl = workloads(BenchSize::Small).into_iter().next().expect("a small workload");
    let full = Params::full(wl.params.grid, wl.params.velocity.clone());
    for (name, params) in [("bare", wl.params.clone()), ("full", full)] {
        g.case(&format!("{}/{name}/cpu-reference", wl.name), None, || ktm::migrate(&wl.traces, &params, &[Backend::Cpu]).unwrap());
        if let Some(gpu) = &gpu {
            let plan = Plan::new(&wl.traces.headers, wl.traces.ns, wl.traces.dt, wl.traces.t0, &params).unwrap();
            let prepared = prep::prepare(&wl.traces, &plan, &params);
            let mut res = Resident::new(gpu, &plan, &prepared).unwrap();
            g.case(&format!("{}/{name}/gpu-columns-kernel", wl.name), None, || {
                res.run(gpu, Variant::Columns).unwrap();
                gpu.synchronize().unwrap();
            });
        }
    }
    let img = ktm::migrate(&wl.traces, &wl.params, &[Backend::Cpu]).unwrap();
    let t = &wl.traces;
    g.case(&format!("{}/bare/cpu-modelling", wl.name), None, || {
        ktm::model(&img, &t.headers, t.ns, t.dt, t.t0, &wl.params, &Backend::Cpu).unwrap()
    });
}
