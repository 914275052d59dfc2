//! Micro-benchmarks of the NLBF CPU reference (the 2+2+1 search on the small workloads, the
//! enhancement, NMO) and, where a GPU is present, of the fast GPU kernels on the same inputs.
//! The paper-size comparison of every variant is `seisgpu bench nlbf --size paper`.
use seisgpu_host::nlbf::{self, cpu, gpu, synth, Setup};
use seisgpu_host::Backend;
use seisgpu_lab::bench::BenchSize;
use seisgpu_lab::micro::Group;

fn search() {
    let g = Group::new("nlbf-search");
    let gpu = seisgpu_host::runtime::Gpu::open(0).ok();
    for (name, (t, p)) in [("synthetic-2d-small", synth::synthetic_2d(BenchSize::Small)),
        ("crossspread-3d-small", synth::crossspread_3d(BenchSize::Small))] {
        let s = Setup::new(&t, &p).unwrap();
        g.case(&format!("{name}/cpu-reference"), None, || cpu::estimate(&s, &t.data));
        if let Some(gpu) = &gpu {
            let plan = gpu::FastPlan::new(gpu, &s, None).unwrap();
            let mut buf = plan.upload(gpu, &s, &t.data).unwrap();
            g.case(&format!("{name}/gpu-fast-kernels"), None, || {
                plan.launch(gpu, &s, &mut buf).unwrap();
                gpu.synchronize().unwrap();
            });
        }
    }
}

fn enhance_and_nmo() {
    let g = Group::new("nlbf-enhance-nmo");
    let (_, noisy, p) = seisgpu_lab::nlbf::demo_gather();
    let est = nlbf::estimate(&noisy, &p, &[Backend::Cpu]).unwrap();
    let ep = nlbf::EnhanceParams { aperture: p.aperture_c };
    let es = nlbf::EnhanceSetup::new(&noisy, &p.coords, &est, &ep).unwrap();
    g.case("enhance/cpu", None, || cpu::enhance(&es, &est, &noisy.data));
    let offsets = nlbf::nmo_offsets(&noisy.headers);
    let vrms = vec![2000.0f32; noisy.ns];
    g.case("nmo/cpu", None, || cpu::nmo(&noisy.data, noisy.ns, noisy.dt, 0.0, &offsets, &vrms, 0.5));
}

fn main() {
    search();
    enhance_and_nmo();
}
