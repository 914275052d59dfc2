//! Scale-out: every pipeline's `--gpus` split against the single-device run.
//!
//! On the CPU the split runs on N CPU work queues (what `--device cpu --gpus N` does): the work
//! items, the static blocks of items per device and the fixed-order reductions are those of N
//! GPUs, so the split and the sums are tested on machines without one. Kirchhoff, PSTM and SRM:
//! each device adds its contiguous block of items into one image and the host sums the device
//! images in device order, so a given N is repeatable bit for bit and different N differ by the
//! regrouped f32 sums (relative L2 < 1e-6, as against the unsplit single-device function). NLBF
//! (concatenation) and wave packets (cubes summed in cube order) equal the 1-device run bit for
//! bit. The GPU tests need two GPUs or more and skip with a printed reason otherwise.

use seisgpu_host::backend::{gpu_or_skip, Backend};
use seisgpu_lab::bench::BenchSize;
use seisgpu_host::ktm::{self, ImageGrid, OffsetClasses, Params, Velocity};
use seisgpu_host::exec::{self, reduce, GpuCount};
use seisgpu_lab::scale;
use seisgpu_host::nlbf::{self, Setup};
use seisgpu_host::pstm::{self, GpuTuning, PstmParams, TraveltimeMode, TraveltimeModel};
use seisgpu_host::runtime::Gpu;
use seisgpu_host::srm::{self, GpuOptions, SrmParams};
use seisgpu_lab::pstm as pb;
use seisgpu_host::traces::TraceSet;
use seisgpu_host::wavepacket::fragments::{Fragmented, Tiling};
use seisgpu_host::wavepacket::Params as WpParams;

use crate::common::{random_vec, rel_l2};

fn cpus(n: usize) -> Vec<Backend> { vec![Backend::Cpu; n] }

fn bits(v: &[f32]) -> Vec<u32> { v.iter().map(|x| x.to_bits()).collect() }

/// The Kirchhoff migration's work-item split on `devices` (also on one: `ktm::migrate` on one
/// device migrates the whole input at once).
fn ktm_split(traces: &TraceSet, p: &Params, devices: &[Backend]) -> anyhow::Result<ktm::Image> {
    exec::run(&ktm::Migration::of(traces, p)?, devices)
}

/// PSTM's work-item split on `devices` (also on one).
fn pstm_split(traces: &TraceSet, p: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel, devices: &[Backend])
    -> anyhow::Result<pstm::PstmImage> {
    exec::run(&pstm::Migration::of(traces, p, mode, model)?, devices)
}

/// SRM's (shot, frequency group) split on `devices` (also on one).
fn srm_split(devices: &[Backend], traces: &TraceSet, model: &srm::VelocityModel, params: &SrmParams, opts: GpuOptions)
    -> anyhow::Result<srm::Image> {
    let plan = srm::MultiPlan::new(traces, model, params, opts)?;
    let devs = devices.iter().map(|b| srm::SrmDevice::new(b, &plan.op)).collect::<anyhow::Result<Vec<_>>>()?;
    let opts = plan.resolve_variant(&devs, model, params, opts)?;
    exec::run(&srm::Migration { plan: &plan, traces, model, params, opts }, &devs)
}

/// `n` GPUs (at least 2), or `None` after printing why the test is skipped.
fn gpus_or_skip(test: &str, n: usize) -> Option<Vec<Backend>> {
    use std::io::Write;
    gpu_or_skip(test)?;
    let count = Gpu::device_count();
    if count < n {
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: needs {n} GPUs, {count} visible");
        return None;
    }
    match exec::open_gpus(GpuCount::N(n)) {
        Ok(g) => Some(g.into_iter().map(Backend::Gpu).collect()),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: opening {n} GPUs failed: {e}");
            None
        }
    }
}

// ---- Kirchhoff (ktm): trace chunks, images summed in item order ------------------------------

fn ktm_case(ntr: usize) -> (TraceSet, Vec<(&'static str, Params)>) {
    // 17 x 13 columns, 97 times: nothing is a multiple of a block or a tile.
    let grid = ImageGrid { x0: 0.0, dx: 25.0, nx: 17, y0: 0.0, dy: 25.0, ny: 13, tau0: 0.0, dtau: 0.004, ntau: 97 };
    let mut t = seisgpu_lab::ktm::scattered_traces(ntr, 140, 0.004, &grid, 1200.0, 11);
    t.data = random_vec(t.data.len(), "ktm traces").into();
    let bare = Params::bare(grid, Velocity::Constant(2100.0));
    let mut full = Params::full(grid, Velocity::Function { t0: 0.0, dt: 0.1, v: vec![1800.0, 2000.0, 2300.0, 2500.0, 2700.0] });
    full.offset_classes = Some(OffsetClasses { first: 0.0, width: 400.0, count: 3 });
    full.aperture = ktm::Aperture { max_distance: 250.0, max_angle_deg: 60.0, taper: 0.2 };
    full.mute_stretch = Some(0.5);
    (t, vec![("bare", bare), ("full+classes+aperture", full)])
}

#[test]
fn scale_ktm_split_equals_single_device_on_cpu() {
    let (traces, configs) = ktm_case(613);
    for (name, p) in configs {
        let one = ktm_split(&traces, &p, &cpus(1)).unwrap();
        let three = ktm_split(&traces, &p, &cpus(3)).unwrap();
        let again = ktm_split(&traces, &p, &cpus(3)).unwrap();
        assert_eq!(bits(&three.data), bits(&again.data), "{name}: the 3-way split is not repeatable");
        let e = rel_l2(&three.data, &one.data);
        assert!(e < 1e-6, "{name}: 3-way vs 1-way rel L2 {e}");
        // The 3-way image is the device-order sum of the three devices' block images.
        let plan = ktm::Plan::new(&traces.headers, traces.ns, traces.dt, traces.t0, &p).unwrap();
        let items = ktm::work_items(traces.len());
        let job = ktm::Migration::new(plan, &p, traces.len(), |r| traces.slice(r));
        let images: Vec<Vec<f32>> = exec::run_items(&job, &cpus(3), 0..items.len()).unwrap().into_iter()
            .map(|part| part.into_host().unwrap()).collect();
        assert_eq!(images.len(), 3);
        let mut sum = images[0].clone();
        for im in &images[1..] {
            sum.iter_mut().zip(im).for_each(|(a, b)| *a += b);
        }
        assert_eq!(bits(&sum), bits(&three.data), "{name}: not the device-order sum");
        let single = ktm::migrate(&traces, &p, &[Backend::Cpu]).unwrap();
        assert_eq!((one.classes, one.skipped_traces), (single.classes, single.skipped_traces), "{name}");
        let e = rel_l2(&one.data, &single.data);
        println!("ktm {name}: split vs single-device rel L2 {e:.2e}");
        assert!(e < 1e-6, "{name}: split vs single-device rel L2 {e}");
        assert!(single.data.iter().any(|&v| v != 0.0), "{name}: empty image");
    }
}

#[test]
fn scale_ktm_item_error_names_the_trace() {
    let (mut traces, configs) = ktm_case(100);
    let p = &configs[0].1;
    let plan = ktm::Plan::new(&traces.headers, traces.ns, traces.dt, traces.t0, p).unwrap();
    traces.data[70 * traces.ns + 5] = f32::NAN;
    let items = ktm::work_items(traces.len());
    let k = items.iter().position(|r| r.contains(&70)).unwrap();
    let r = items[k].clone();
    let e = ktm::migrate_item(&plan, &traces.slice(r.clone()), r, p, &Backend::Cpu).unwrap_err();
    assert!(e.to_string().contains("trace 70 sample 5"), "{e:#}");
}

#[test]
fn scale_ktm_split_on_gpus() {
    let Some(gpus) = gpus_or_skip("scale_ktm_split_on_gpus", 2) else { return };
    let (traces, configs) = ktm_case(2500);
    for (name, p) in configs {
        // Small image: the columns kernel splits the traces over blockIdx.z and adds atomically,
        // so even one GPU is not bit-repeatable here (it is at production sizes).
        let one = ktm_split(&traces, &p, &gpus[..1]).unwrap();
        let n = ktm_split(&traces, &p, &gpus).unwrap();
        let e1 = rel_l2(&n.data, &one.data);
        println!("ktm {name}: {} GPUs vs 1 GPU rel L2 {e1:.2e}", gpus.len());
        assert!(e1 < 1e-6, "{name}: {}-GPU split vs 1 GPU rel L2 {e1}", gpus.len());
        let cpu = ktm::migrate(&traces, &p, &[Backend::Cpu]).unwrap();
        let e = rel_l2(&n.data, &cpu.data);
        println!("ktm {name}: {} GPUs vs CPU rel L2 {e:.2e}", gpus.len());
        assert!(e < 1e-5, "{name}: rel L2 {e}");
        // Forced tiles: the device image cannot stay resident; items are added on the host.
        let tiled = Params { limits: ktm::GpuLimits { max_traces_per_chunk: Some(97), max_columns_per_tile: Some(26) }, ..p.clone() };
        let t = ktm_split(&traces, &tiled, &gpus).unwrap();
        let e = rel_l2(&t.data, &cpu.data);
        println!("ktm {name}: {} GPUs, tiled, vs CPU rel L2 {e:.2e}", gpus.len());
        assert!(e < 1e-5, "{name}: tiled rel L2 {e}");
    }
    // A production-sized image (one trace segment per launch: no atomics): N GPUs repeatable bit for bit.
    let grid = ImageGrid { x0: 0.0, dx: 25.0, nx: 101, y0: 0.0, dy: 25.0, ny: 99, tau0: 0.0, dtau: 0.004, ntau: 300 };
    let mut t = seisgpu_lab::ktm::scattered_traces(700, 400, 0.004, &grid, 1500.0, 5);
    t.data = random_vec(t.data.len(), "ktm traces").into();
    let p = Params::bare(grid, Velocity::Constant(2100.0));
    let (a, b) = (ktm_split(&t, &p, &gpus).unwrap(), ktm_split(&t, &p, &gpus).unwrap());
    assert_eq!(bits(&a.data), bits(&b.data), "{} GPUs: not repeatable bit for bit", gpus.len());
    let one = ktm_split(&t, &p, &gpus[..1]).unwrap();
    let single = ktm::migrate(&t, &p, &gpus[..1]).unwrap();
    assert!(rel_l2(&a.data, &one.data) < 1e-6 && rel_l2(&one.data, &single.data) < 1e-6);
}

// ---- PSTM: trace chunks, images summed in item order -----------------------------------------

fn pstm_case(ntr: usize) -> (PstmParams, TraceSet) {
    let mut p = PstmParams {
        nx: 3, ny: 13, x0: 500.0, y0: -300.0, dx: 30.0, dy: 20.0, nz: 150, tau0: 0.02, dtau: 0.004, noff: 2, offset0: 0.0,
        doffset: 800.0, vrms: vec![], eta: vec![], aperture: 450.0, stretch: 0.6, dynamic_max_step: 32, gpu: GpuTuning::read_only_cache(),
    };
    pb::smooth_model(&mut p, true);
    let h = pb::survey(ntr, &p, 300.0, 1500.0, 7);
    let mut t = TraceSet::zeros(h, 210, 0.004);
    t.data = random_vec(t.data.len(), "pstm traces").into();
    (p, t)
}

#[test]
fn scale_pstm_split_equals_single_device_on_cpu() {
    let (p, traces) = pstm_case(700);
    for mode in [TraveltimeMode::Exact, TraveltimeMode::Static8] {
        let model = TraveltimeModel::Vti;
        let one = pstm_split(&traces, &p, mode, model, &cpus(1)).unwrap();
        let three = pstm_split(&traces, &p, mode, model, &cpus(3)).unwrap();
        let again = pstm_split(&traces, &p, mode, model, &cpus(3)).unwrap();
        assert_eq!(bits(&three.data), bits(&again.data), "{mode:?}: the 3-way split is not repeatable");
        assert!(rel_l2(&three.data, &one.data) < 1e-6, "{mode:?}: 3-way vs 1-way");
        assert_eq!((three.stats.traces_used, three.stats.pairs), (one.stats.traces_used, one.stats.pairs));
        let single = pstm::migrate(&traces, &p, mode, model, &[Backend::Cpu]).unwrap();
        assert_eq!(one.stats.traces_used, single.stats.traces_used);
        assert_eq!(one.stats.pairs, single.stats.pairs);
        let e = rel_l2(&one.data, &single.data);
        println!("pstm {mode:?}: split vs single-device rel L2 {e:.2e}");
        assert!(e < 1e-6, "{mode:?}: rel L2 {e}");
    }
}

#[test]
fn scale_pstm_split_on_gpus() {
    let Some(gpus) = gpus_or_skip("scale_pstm_split_on_gpus", 2) else { return };
    let (p, traces) = pstm_case(3000);
    let (mode, model) = (TraveltimeMode::Exact, TraveltimeModel::Dsr);
    let one = pstm_split(&traces, &p, mode, model, &gpus[..1]).unwrap();
    let n = pstm_split(&traces, &p, mode, model, &gpus).unwrap();
    let again = pstm_split(&traces, &p, mode, model, &gpus).unwrap();
    assert_eq!(bits(&n.data), bits(&again.data), "{}-GPU split not repeatable", gpus.len());
    assert!(rel_l2(&n.data, &one.data) < 1e-6, "{}-GPU split vs 1 GPU rel L2 {}", gpus.len(), rel_l2(&n.data, &one.data));
    assert_eq!((n.stats.traces_used, n.stats.pairs), (one.stats.traces_used, one.stats.pairs));
    // Every sample written: the device images start at zero and every batch adds (no `first`).
    assert!(n.data.iter().all(|v| v.is_finite()));
    let cpu = pstm::migrate(&traces, &p, mode, model, &[Backend::Cpu]).unwrap();
    let e = rel_l2(&n.data, &cpu.data);
    println!("pstm: {} GPUs vs CPU rel L2 {e:.2e}", gpus.len());
    assert!(e < 1e-5, "rel L2 {e}");
}

/// The CLI's tuning (`GpuTuning::fastest`: staged traces, lean static8) on the scaling workload,
/// split over two GPUs, against the CPU; the parts summed on the host and on the GPUs, and each
/// GPU alone, so a failure says which step is wrong.
#[test]
fn scale_pstm_split_on_gpus_with_the_cli_tuning() {
    let Some(gpus) = gpus_or_skip("scale_pstm_split_on_gpus_with_the_cli_tuning", 2) else { return };
    let (mut p, ntr, ns) = pb::table2(BenchSize::Small);
    p.gpu = GpuTuning::fastest();
    let traces = pb::band_limited(pb::survey(ntr, &p, p.aperture as f64 * 0.5, 3000.0, 5), ns, 0.004, 25.0, &p);
    let mut failures = Vec::new();
    for (mode, model) in [(TraveltimeMode::Static8, TraveltimeModel::Dsr), (TraveltimeMode::Exact, TraveltimeModel::Dsr)] {
        let cpu = pstm::migrate(&traces, &p, mode, model, &[Backend::Cpu]).unwrap();
        let job = pstm::Migration::of(&traces, &p, mode, model).unwrap();
        let mut report = |what: &str, data: &[f32]| {
            let e = rel_l2(data, &cpu.data);
            println!("pstm {mode:?} {model:?} {what}: rel L2 to the CPU {e:.2e}");
            if !(e < 1e-5) {
                failures.push(format!("{mode:?} {what}: {e:.2e}"));
            }
        };
        report("one call on GPU 0", &pstm::migrate(&traces, &p, mode, model, &gpus[..1]).unwrap().data);
        for (d, g) in gpus.iter().enumerate().take(2) {
            report(&format!("work items on GPU {d} alone"), &exec::run(&job, std::slice::from_ref(g)).unwrap().data);
        }
        let parts = exec::run_items(&job, &gpus[..2], 0..exec::Job::items(&job)).unwrap();
        let host: Vec<Vec<f32>> = parts.into_iter().map(|(part, _)| part.into_host().unwrap()).collect();
        report("2 GPUs, parts summed on the host", &reduce::sum_in_order(host).unwrap());
        report("2 GPUs, summed on the GPUs", &exec::run(&job, &gpus[..2]).unwrap().data);
        report(&format!("{} GPUs", gpus.len()), &exec::run(&job, &gpus).unwrap().data);
        report("GPU 0 twice", &exec::run(&job, &[gpus[0].clone(), gpus[0].clone()]).unwrap().data);
    }
    assert!(failures.is_empty(), "{failures:?}");
}

// ---- NLBF: parameter traces -------------------------------------------------------------------

fn nlbf_case() -> (TraceSet, nlbf::EstimateParams) {
    let (mut t, mut p) = nlbf::synth::synthetic_2d(BenchSize::Small);
    t.data = random_vec(t.data.len(), "nlbf traces").into();
    p.spacing_x = 100.0;
    p.spacing_y = 100.0;
    (t, p)
}

#[test]
fn scale_nlbf_split_equals_single_device_on_cpu() {
    let (traces, p) = nlbf_case();
    let single = nlbf::estimate(&traces, &p, &[Backend::Cpu]).unwrap();
    assert!(single.grid.len() >= 4, "{} parameter traces: too few to split", single.grid.len());
    for n in [1, 3] {
        let est = nlbf::estimate_split(&cpus(n), &traces, &p, None).unwrap();
        assert_eq!(est.code, single.code, "{n}-way: picks differ");
        assert_eq!(bits(&est.semblance), bits(&single.semblance), "{n}-way: semblance differs");
        assert_eq!(est.grid, single.grid);
    }
}

#[test]
fn scale_nlbf_subset_setup_searches_like_the_whole() {
    let (traces, p) = nlbf_case();
    let setup = Setup::new(&traces, &p).unwrap();
    let (code, sem) = nlbf::cpu::estimate(&setup, &traces.data);
    let r = 2..setup.np() - 1;
    let sub = setup.subset(r.clone());
    assert_eq!(sub.np(), r.len());
    for phase in 0..3 {
        for (i, pt) in r.clone().enumerate() {
            assert_eq!(sub.apertures.list(phase, i), setup.apertures.list(phase, pt), "phase {phase}, parameter trace {pt}");
        }
    }
    let (c2, s2) = nlbf::cpu::estimate(&sub, &traces.data);
    let ns = setup.ns;
    assert_eq!(c2, code[r.start * ns..r.end * ns]);
    assert_eq!(bits(&s2), bits(&sem[r.start * ns..r.end * ns]));
}

#[test]
fn scale_nlbf_split_on_gpus() {
    let Some(gpus) = gpus_or_skip("scale_nlbf_split_on_gpus", 2) else { return };
    let (traces, p) = nlbf_case();
    let one = nlbf::estimate_split(&gpus[..1], &traces, &p, None).unwrap();
    let n = nlbf::estimate_split(&gpus, &traces, &p, None).unwrap();
    assert_eq!(one.code, n.code, "{}-GPU split: picks differ from 1 GPU", gpus.len());
    assert_eq!(bits(&one.semblance), bits(&n.semblance));
    let single = nlbf::estimate(&traces, &p, &gpus[..1]).unwrap();
    assert_eq!(single.code, n.code, "split: picks differ from the unsplit GPU search");
    assert!(rel_l2(&single.semblance, &n.semblance) < 1e-6);
}

// ---- SRM: shots and frequency groups, window images summed in item order ---------------------

/// Two shots (two point-scatterer records side by side) with random samples, on a small 3D model.
fn srm_case() -> (TraceSet, srm::VelocityModel, SrmParams) {
    use seisgpu_host::srm::synthetic::point_scatterer;
    let (n, d, dz, nz) = (23usize, 20.0, 20.0, 12usize);
    let (mut a, model) = point_scatterer(n, 19, nz, d, dz, 2000.0, (140.0, 180.0), (200.0, 180.0, 120.0), 100, 0.004, 20.0, 2);
    let (b, _) = point_scatterer(n, 19, nz, d, dz, 2000.0, (300.0, 180.0), (200.0, 180.0, 120.0), 100, 0.004, 20.0, 2);
    a.headers.extend(b.headers);
    a.data.to_mut().extend_from_slice(&b.data);
    a.data = random_vec(a.data.len(), "srm traces").into();
    let params = SrmParams { fmin: 5.0, fmax: 30.0, ricker_peak: 20.0, taper_width: 4, aperture: 100.0, table_rows: 48, nz,
        ..Default::default() };
    (a, model, params)
}

#[test]
fn scale_srm_split_equals_single_device_on_cpu() {
    let (traces, model, params) = srm_case();
    // 4 frequencies per item: the band's 13 bins make 4 items per shot, the last one short.
    let opts = GpuOptions { planes: 4, ..Default::default() };
    let plan = srm::MultiPlan::new(&traces, &model, &params, opts).unwrap();
    assert_eq!(plan.shots.len(), 2);
    assert!(plan.items.len() >= 6, "{} items", plan.items.len());
    let one = srm_split(&cpus(1), &traces, &model, &params, opts).unwrap();
    let three = srm_split(&cpus(3), &traces, &model, &params, opts).unwrap();
    // The CPU reference sums frequencies in whatever order its threads finish (inside an item):
    // equal to rounding, not bit for bit.
    let e = rel_l2(&three.data, &one.data);
    assert!(e < 1e-6, "3-way vs 1-way rel L2 {e}");
    let single = srm::migrate_with(&Backend::Cpu, &traces, &model, &params, GpuOptions::default(), false).unwrap();
    let e = rel_l2(&three.data, &single.data);
    println!("srm: split vs single-device rel L2 {e:.2e}");
    assert!(e < 1e-6, "split vs single-device rel L2 {e}");
    assert!(single.data.iter().any(|&v| v != 0.0));
}

#[test]
fn scale_srm_split_on_gpus() {
    let Some(gpus) = gpus_or_skip("scale_srm_split_on_gpus", 2) else { return };
    let (traces, model, params) = srm_case();
    let opts = GpuOptions { planes: 4, ..Default::default() };
    // A fixed kernel: `Auto` tunes by timing, which may pick another kernel on another run.
    let opts = GpuOptions { variant: srm::GpuVariant::Paper, ..opts };
    let one = srm_split(&gpus[..1], &traces, &model, &params, opts).unwrap();
    let n = srm_split(&gpus, &traces, &model, &params, opts).unwrap();
    let again = srm_split(&gpus, &traces, &model, &params, opts).unwrap();
    assert_eq!(bits(&n.data), bits(&again.data), "{}-GPU split not repeatable", gpus.len());
    assert!(rel_l2(&n.data, &one.data) < 1e-6, "{}-GPU split vs 1 GPU", gpus.len());
    // One GPU, one shot at a time with all its frequencies: the single-device migration.
    let single = srm::migrate_with(&gpus[0], &traces, &model, &params, opts, false).unwrap();
    assert!(rel_l2(&one.data, &single.data) < 1e-6);
    let cpu = srm::migrate_with(&Backend::Cpu, &traces, &model, &params, GpuOptions::default(), false).unwrap();
    let e = rel_l2(&n.data, &cpu.data);
    println!("srm: {} GPUs vs CPU rel L2 {e:.2e}", gpus.len());
    assert!(e < 1e-5, "rel L2 {e}");
}

// ---- Wave packets: cubes, overlaps summed in cube order --------------------------------------

#[test]
fn scale_wavepacket_cubes_on_several_engines_equal_one() {
    let shape = [40, 23, 70];
    let params = WpParams { eps: 1e-6, ..WpParams::default() };
    let tiling = Tiling::new(shape, 32, 8).unwrap();
    assert!(tiling.count() >= 4);
    let vol = random_vec(shape.iter().product(), "wave-packet volume");
    let one = Fragmented::on_backends(&cpus(1), tiling.clone(), &params).unwrap();
    let three = Fragmented::on_backends(&cpus(3), tiling.clone(), &params).unwrap();
    assert_eq!(three.engines(), 3);
    let (c1, c3) = (one.forward(&vol).unwrap(), three.forward(&vol).unwrap());
    assert!(c1 == c3, "forward: 3 engines differ from 1");
    let (v1, v3) = (one.inverse(&c1).unwrap(), three.inverse(&c3).unwrap());
    assert_eq!(bits(&v1), bits(&v3), "inverse: 3 engines differ from 1");
    let p1 = one.process(&vol, |_, c| c.iter_mut().for_each(|x| *x *= 0.5)).unwrap();
    let p3 = three.process(&vol, |_, c| c.iter_mut().for_each(|x| *x *= 0.5)).unwrap();
    assert_eq!(bits(&p1), bits(&p3), "process: 3 engines differ from 1");
    let single = Fragmented::new(&Backend::Cpu, shape, 32, 8, &params, false).unwrap();
    assert_eq!(bits(&single.inverse(&single.forward(&vol).unwrap()).unwrap()), bits(&v1));
    assert!(rel_l2(&v1, &vol) < 1e-5);
}

#[test]
fn scale_wavepacket_cubes_on_gpus() {
    let Some(gpus) = gpus_or_skip("scale_wavepacket_cubes_on_gpus", 2) else { return };
    let shape = [70, 45, 90];
    let params = WpParams { eps: 1e-6, ..WpParams::default() };
    let tiling = Tiling::new(shape, 32, 8).unwrap();
    let vol = random_vec(shape.iter().product(), "wave-packet volume");
    let one = Fragmented::on_backends(&gpus[..1], tiling.clone(), &params).unwrap();
    let n = Fragmented::on_backends(&gpus, tiling.clone(), &params).unwrap();
    let (c1, cn) = (one.forward(&vol).unwrap(), n.forward(&vol).unwrap());
    assert!(c1 == cn, "forward: {} GPUs differ from 1", gpus.len());
    let (v1, vn) = (one.inverse(&c1).unwrap(), n.inverse(&cn).unwrap());
    assert_eq!(bits(&v1), bits(&vn), "inverse: {} GPUs differ from 1", gpus.len());
    let cpu = Fragmented::on_backends(&cpus(1), tiling, &params).unwrap();
    let vc = cpu.inverse(&cpu.forward(&vol).unwrap()).unwrap();
    assert!(rel_l2(&vn, &vc) < 1e-4, "GPU vs CPU rel L2 {}", rel_l2(&vn, &vc));
}

// ---- The device list of `--gpus` ---------------------------------------------------------------

#[test]
fn scale_device_list_of_gpus_flag() {
    let (b, note) = exec::backends(seisgpu_host::DeviceChoice::Cpu, GpuCount::N(4)).unwrap();
    assert_eq!(b.len(), 4, "{note}");
    // `auto` without GPUs falls back to CPU queues and says why; with GPUs it opens them.
    let (b, note) = exec::backends(seisgpu_host::DeviceChoice::Auto, GpuCount::N(1)).unwrap();
    assert_eq!(b.len(), 1, "{note}");
}

// ---- `seisgpu bench --gpus`: the strong-scaling rows -------------------------------------------

#[test]
fn scale_bench_rows_on_cpu_queues() {
    // The code path on 2 CPU queues (no speed-up is expected: they share the cores): one row per
    // device count, the 2-queue result checked against the 1-queue one before timing (rel L2 for
    // the regrouped image sums) and the timed runs against the check run (bit for bit).
    let workloads = || [("ktm", seisgpu_lab::ktm::scale_workload(BenchSize::Small).unwrap()), ("pstm", seisgpu_lab::pstm::scale_workload(BenchSize::Small).unwrap())];
    for (p, w) in workloads() {
        let rows = scale::bench(vec![w], &cpus(2)).unwrap();
        assert_eq!(rows.len(), 2, "{p}: {rows:?}");
        assert_eq!(rows[0].variant, "1-cpu-queue");
        assert!(rows[1].check.contains("vs 1 device") && rows[1].check.contains("repeatable bit for bit"), "{p}: {}", rows[1].check);
        assert!(rows[1].note.contains("speed-up") && rows[1].note.contains("[4]-device rows skipped"), "{}", rows[1].note);
        assert!(rows.iter().all(|r| r.stats.median_ms > 0.0 && r.work > 0.0));
    }
    // One device: its row alone, the larger counts skipped with a note.
    let rows = scale::bench(seisgpu_lab::wavepacket::scaling::scale_workloads(BenchSize::Small).unwrap(), &cpus(1)).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].note.contains("[2, 4]-device rows skipped"), "{}", rows[0].note);
    assert!(scale::bench(Vec::new(), &[]).is_err());
}

#[test]
fn scale_bench_rows_on_gpus() {
    let Some(gpus) = gpus_or_skip("scale_bench_rows_on_gpus", 2) else { return };
    let size = BenchSize::Small;
    let workloads = vec![seisgpu_lab::nlbf::scale_workload(size).unwrap(), seisgpu_lab::ktm::scale_workload(size).unwrap(),
        seisgpu_lab::pstm::scale_workload(size).unwrap(), seisgpu_lab::wavepacket::scaling::scale_workloads(size).unwrap().remove(0),
        seisgpu_lab::srm::scale_workload(size).unwrap()];
    let n = workloads.len();
    let rows = scale::bench(workloads, &gpus).unwrap();
    for r in &rows {
        println!("{} {}: {:.3} ms, {} | {}", r.workload, r.variant, r.stats.median_ms, r.check, r.note);
    }
    assert_eq!(rows.len(), n * scale::counts(gpus.len()).len());
}

// ---- The CLI: `--gpus` on every pipeline -------------------------------------------------------

/// Runs the CLI (cargo's build, or the one beside the test binary in a GPU bundle).
fn seisgpu(args: &[&str]) {
    let bin = crate::common::seisgpu_bin();
    let out = std::process::Command::new(&bin).args(args).output().unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(out.status.success(), "seisgpu {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

fn npy(path: &std::path::Path) -> Vec<f32> { seisgpu_host::io::npy::read_f32(path).unwrap().1 }

#[test]
fn scale_cli_gpus_flag_on_every_pipeline() {
    let dir = std::env::temp_dir().join(format!("seisgpu-scale-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |name: &str| dir.join(name).to_string_lossy().into_owned();
    // (pipeline, arguments before the output, output flag, output file inside the output, bit-exact).
    // Kirchhoff and PSTM regroup the image sums (rounding), SRM's CPU reference sums frequencies in
    // thread order; NLBF and wave packets (cubes summed in cube order) are bit-exact.
    let cases: [(&str, Vec<&str>, &str, &str, bool); 5] = [
        ("ktm", vec!["ktm", "migrate", "--nx", "15", "--ny", "13", "--ntau", "120"], "-o", "", false),
        ("pstm", vec!["pstm", "migrate", "--traces", "300", "--nx", "9", "--ny", "11", "--nz", "200", "--ns", "260"], "-o", "", false),
        ("srm", vec!["srm", "--synthetic", "scatterer", "--fmax", "12", "--nz", "16", "--table-rows", "48", "--planes", "3"], "-o", "",
            false),
        ("nlbf", vec!["nlbf", "estimate", "--synthetic", "demo"], "--out", "S.npy", true),
        ("wavepacket", vec!["wavepacket", "denoise", "--input", "synth:40x36x64:0.3", "--cube", "32", "--overlap", "8",
            "--sigma", "0.05"], "--output", "", true),
    ];
    for (name, args, flag, inside, exact) in cases {
        let (one, three) = (p(&format!("{name}-1.npy")), p(&format!("{name}-3.npy")));
        let (one_dir, three_dir) = (p(&format!("{name}-1")), p(&format!("{name}-3")));
        let (o1, o3) = if inside.is_empty() { (one.clone(), three.clone()) } else { (one_dir.clone(), three_dir.clone()) };
        let mut a: Vec<&str> = vec!["--device", "cpu"];
        a.extend(&args);
        a.extend([flag, o1.as_str()]);
        seisgpu(&a);
        let mut b: Vec<&str> = vec!["--device", "cpu", "--gpus", "3"];
        b.extend(&args);
        b.extend([flag, o3.as_str()]);
        seisgpu(&b);
        let (f1, f3) = if inside.is_empty() {
            (std::path::PathBuf::from(&one), std::path::PathBuf::from(&three))
        } else {
            (std::path::Path::new(&one_dir).join(inside), std::path::Path::new(&three_dir).join(inside))
        };
        let (x, y) = (npy(&f1), npy(&f3));
        let e = rel_l2(&y, &x);
        println!("{name}: --gpus 3 vs one device: rel L2 {e:.2e}");
        assert!(x.iter().any(|&v| v != 0.0), "{name}: empty output");
        if exact {
            assert_eq!(bits(&x), bits(&y), "{name}: --gpus 3 differs from one device");
        } else {
            assert!(e < 1e-6, "{name}: --gpus 3 vs one device rel L2 {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- The device-side sum of per-device images, and the deferred whole-input scan -------------

#[test]
fn scale_bad_sample_named_by_its_input_index_on_cpu_queues() {
    // The multi-device jobs no longer scan the whole input before the split (the work items scan
    // their own traces); a bad sample must still be named by its index in the input.
    let (mut traces, configs) = ktm_case(300);
    traces.data[201 * traces.ns + 7] = f32::NAN;
    traces.data[250 * traces.ns + 3] = f32::INFINITY;
    for n in [1, 3] {
        let e = ktm::migrate(&traces, &configs[0].1, &cpus(n)).unwrap_err().to_string();
        assert!(e.contains("trace 201 sample 7 is not finite"), "{n} queues: {e}");
    }
    let (p, mut traces) = pstm_case(300);
    traces.data[123 * traces.ns + 4] = f32::NAN;
    for n in [1, 3] {
        let e = pstm::migrate(&traces, &p, TraveltimeMode::Static8, TraveltimeModel::Vti, &cpus(n)).unwrap_err().to_string();
        assert!(e.contains("trace 123 sample 4 is not finite"), "{n} queues: {e}");
    }
}

#[test]
fn scale_sum_parts_is_the_host_sum_in_order() {
    let parts: Vec<Vec<f32>> = (0..4).map(|k| random_vec(100_003, "sum parts").into_iter()
        .map(|v| v * (k as f32 + 1.3) - 0.1 * k as f32).collect()).collect();
    let want = reduce::sum_in_order(parts.clone()).unwrap();
    let got = reduce::sum_parts(parts.iter().cloned().map(reduce::Part::Host).collect()).unwrap();
    assert_eq!(bits(&got), bits(&want));
    let Some(_) = gpu_or_skip("scale_sum_parts_is_the_host_sum_in_order (GPU part)") else { return };
    // Parts round-robin over every GPU there is (several on one GPU exercise the same logic
    // without peers): the device-side sum must be the host sum bit for bit, for 1 to 4 parts,
    // and with a host part among them.
    let gpus = exec::open_gpus(GpuCount::All).unwrap();
    for np in 1..=4 {
        let dev: Vec<reduce::Part> = parts[..np].iter().enumerate()
            .map(|(k, p)| { let g = gpus[k % gpus.len()].clone(); let s = g.upload(p).unwrap(); reduce::Part::Gpu(g, s) }).collect();
        let got = reduce::sum_parts(dev).unwrap();
        let want = reduce::sum_in_order(parts[..np].to_vec()).unwrap();
        assert_eq!(bits(&got), bits(&want), "{np} parts on {} GPU(s)", gpus.len());
    }
    let mixed = vec![reduce::Part::Gpu(gpus[0].clone(), gpus[0].upload(&parts[0]).unwrap()), reduce::Part::Host(parts[1].clone())];
    assert_eq!(bits(&reduce::sum_parts(mixed).unwrap()), bits(&reduce::sum_in_order(parts[..2].to_vec()).unwrap()));
    let short = vec![reduce::Part::Gpu(gpus[0].clone(), gpus[0].upload(&parts[0]).unwrap()),
        reduce::Part::Gpu(gpus[gpus.len() - 1].clone(), gpus[gpus.len() - 1].upload(&parts[1][..10]).unwrap())];
    let e = reduce::sum_parts(short).unwrap_err().to_string();
    assert!(e.contains("samples"), "{e}");
}
