//! Strong scaling (issue 9): each pipeline's multi-device split on 1, 2, 4 (, 8, ...) of the given
//! devices, one fixed workload, wall-clock time of the whole job (host data in, host result out)
//! and the speed-up over one device. `seisgpu bench --gpus N|all` prints these rows.
//!
//! Before timing, every count's result is checked against the one-device result: bit-exact where
//! the reduction order is fixed (Kirchhoff, PSTM, NLBF, wave packets: the work items do not depend
//! on the device count), relative L2 below 1e-6 for SRM on CPU queues (its CPU reference sums
//! frequencies in thread order). Counts above the devices given are skipped with a note; with one
//! device only its row is produced. On CPU work queues (`--device cpu --gpus N`) the rows exercise
//! the code path: the queues share the same cores, so they do not speed anything up.

use anyhow::{ensure, Context, Result};

use crate::backend::Backend;
use crate::bench::{rel_l2, BenchRow, BenchSize};
use crate::runtime::timing::measure_cpu;

/// The pipelines with a scaling workload, in `seisgpu bench` order.
pub const PIPELINES: [&str; 5] = ["nlbf", "ktm", "pstm", "wavepacket", "srm"];

/// Device counts measured out of `available`: 1, 2, 4, 8, ... up to it, and `available` itself.
pub fn counts(available: usize) -> Vec<usize> {
    let mut c: Vec<usize> = std::iter::successors(Some(1usize), |&k| Some(k * 2)).take_while(|&k| k <= available).collect();
    if available > 0 && c.last() != Some(&available) {
        c.push(available);
    }
    c
}

/// The whole split job on some devices, its result as f32s (for the checks).
type Job = Box<dyn Fn(&[Backend]) -> Result<Vec<f32>>>;

/// One pipeline's workload, prepared once.
struct Workload {
    name: String,
    work: f64,
    unit: String,
    /// Results equal bit for bit across device counts.
    exact: bool,
    run: Job,
}

/// The strong-scaling rows of `pipeline` on `devices` (all of them the same kind).
pub fn bench(pipeline: &str, devices: &[Backend], size: BenchSize) -> Result<Vec<BenchRow>> {
    ensure!(!devices.is_empty(), "scaling bench: no device");
    let w = workload(pipeline, size)?;
    let kind = if devices[0].gpu().is_some() { "gpu" } else { "cpu-queue" };
    // Whole jobs of seconds: one warm-up (contexts, module loads), the median of three.
    let (warmup, repeats) = (1, 3);
    let mut rows = Vec::new();
    let mut one: Option<(Vec<f32>, f64)> = None;
    for &n in &counts(devices.len()) {
        let devs = &devices[..n];
        let got = (w.run)(devs).with_context(|| format!("{} on {n} device(s)", w.name))?;
        let check = match &one {
            None => "reference (1 device)".to_string(),
            Some((want, _)) => {
                ensure!(got.len() == want.len(), "{}: {} values on {n} devices, {} on one", w.name, got.len(), want.len());
                let e = rel_l2(&got, want);
                let same = got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits());
                if w.exact {
                    ensure!(same, "{}: the {n}-device result differs from the 1-device one (rel L2 {e:.2e})", w.name);
                    "bit-exact vs 1 device".to_string()
                } else {
                    ensure!(e < 1e-6, "{}: the {n}-device result differs from the 1-device one by rel L2 {e:.2e}", w.name);
                    format!("rel L2 {e:.1e} vs 1 device")
                }
            }
        };
        let mut err = None;
        let stats = measure_cpu(warmup, repeats, || {
            if let Err(e) = (w.run)(devs) {
                err.get_or_insert(e);
            }
        });
        if let Some(e) = err {
            return Err(e.context(format!("{} on {n} device(s), timed run", w.name)));
        }
        let t = stats.median_ms;
        let note = match &one {
            None => format!("{n} {kind}; speed-up 1.00x"),
            Some((_, t1)) => format!("{n} {kind}s; speed-up {:.2}x vs 1 (efficiency {:.0} %)", t1 / t, 100.0 * t1 / t / n as f64),
        };
        if one.is_none() {
            one = Some((got, t));
        }
        rows.push(BenchRow {
            workload: w.name.clone(),
            variant: format!("{n}-{kind}"),
            scope: "end-to-end".into(),
            stats,
            work: w.work,
            work_unit: w.unit.clone(),
            ceiling: None,
            fraction_of_ceiling: None,
            check,
            paper: (n == 1).then(|| "paper variant 2 (wave packets): 3.93x on 4 GPUs, 7.70x on 8 (Amdahl estimates); \
                target >= 3.7x on 4 (3.5x NLBF)".into()),
            note,
        });
    }
    let skipped: Vec<usize> = [2usize, 4].into_iter().filter(|&k| k > devices.len()).collect();
    if !skipped.is_empty() {
        let msg = format!("{}: {} device(s) given; the {skipped:?}-device rows need more (run on nvidia-h200-x2/x4)",
            w.name, devices.len());
        eprintln!("SKIPPED {msg}");
        if let Some(r) = rows.last_mut() {
            r.note += &format!("; {skipped:?}-device rows skipped: {} device(s)", devices.len());
        }
    }
    Ok(rows)
}

fn workload(pipeline: &str, size: BenchSize) -> Result<Workload> {
    let paper = size == BenchSize::Paper;
    Ok(match pipeline {
        "ktm" => {
            // Table 2's 40960-trace run (255 x 255 x 1024 image, full aperture); small: its 1/32.
            let all = crate::ktm::bench::workloads(size);
            let pick = if paper { "ktm-table2-40960" } else { "ktm-table2-256" };
            let w = all.into_iter().find(|w| w.name == pick).context("ktm workload")?;
            let work = w.traces.len() as f64 * w.params.grid.len() as f64;
            let (traces, params) = (w.traces, w.params);
            Workload { name: format!("scale-{}", w.name), work, unit: "contributions (trace x image sample)".into(), exact: true,
                run: Box::new(move |d| Ok(crate::ktm::migrate_multi(&traces, &params, d)?.data)) }
        }
        "pstm" => {
            // Table 2's image (50 x 1097 x 1504) with a fifth of its 450,000 traces; small: the small table.
            use crate::pstm::{self, bench as pb, TraveltimeMode, TraveltimeModel};
            let (p, ntr, ns) = pb::table2(size);
            let ntr = if paper { ntr / 5 } else { ntr };
            let traces = pb::band_limited(pb::survey(ntr, &p, p.aperture as f64 * 0.5, 3000.0, 5), ns, 0.004, 25.0, &p);
            let (mode, model) = (TraveltimeMode::Static8, TraveltimeModel::Dsr);
            let work = pstm::count_pairs(&p, &pstm::plan(&traces, &p, mode)?).1 as f64;
            Workload { name: format!("scale-pstm-table2-{ntr}"), work, unit: "contributions (pair x image sample)".into(),
                exact: true, run: Box::new(move |d| Ok(pstm::migrate_multi(&traces, &p, mode, model, d)?.data)) }
        }
        "nlbf" => {
            // The paper's field cross-spread shape (94 x 224 traces, 1500 samples).
            use crate::nlbf::{self, NlbfDevice, Setup, Variant};
            let (traces, params) = nlbf::synth::crossspread_3d(size);
            let setup = Setup::new(&traces, &params)?;
            let work = setup.estimations() as f64;
            Workload { name: "scale-nlbf-crossspread-3d".into(), work, unit: "estimations (parameter trace x time sample)".into(),
                exact: true, run: Box::new(move |d| {
                    let variant = d.iter().find(|b| b.gpu().is_some()).map_or(Variant::Cpu, |b| nlbf::variant_for(b, &setup));
                    let devs: Vec<NlbfDevice> = d.iter().map(NlbfDevice::new).collect();
                    let (code, sem) = nlbf::estimate_setup_multi(&devs, &setup, &traces.data, variant)?;
                    // Picks as their bit patterns next to the semblance, so the check covers both.
                    Ok(code.iter().map(|&c| f32::from_bits(c)).chain(sem).collect())
                }) }
        }
        "srm" => {
            // The srm-shot workload (one 400 x 400 shot window, 500 depths, 256 frequencies); small: 64 x 64.
            use crate::srm::{self, synthetic::flat_reflector, GpuOptions, SrmParams};
            let (n, nz, nfreq, ns) = if paper { (400, 500, 256, 1024) } else { (48, 30, 24, 256) };
            let (d, dz, dt) = (25.0, 10.0, 0.004f32);
            let (traces, model) = flat_reflector(n, n, nz, d, dz, &[0.0, 1500.0], &[2000.0, 3000.0],
                2000.0f64.min(0.8 * nz as f64 * dz), ns, dt, 20.0, 2);
            let df = 1.0 / (ns as f64 * dt as f64);
            let k0 = (5.0 / df).ceil();
            let params = SrmParams { fmin: (k0 - 0.25) * df, fmax: (k0 + nfreq as f64 - 0.75) * df, ricker_peak: 20.0,
                taper_width: 20, aperture: 1e9, nz, table_rows: if paper { 0 } else { 48 }, ..Default::default() };
            let opts = GpuOptions { planes: if paper { 16 } else { 4 }, ..Default::default() };
            let work = (nfreq * nz * n * n) as f64;
            Workload { name: format!("scale-srm-shot-{n}"), work, unit: "frequency x depth x node".into(), exact: false,
                run: Box::new(move |d| Ok(srm::migrate_multi(d, &traces, &model, &params, opts)?.data)) }
        }
        "wavepacket" => {
            // Variant 2 of the paper: a volume of 2 x 2 x 2 overlapping 256^3 cubes; small: 48^3 cubes.
            use crate::wavepacket::{apps, fragments::{Fragmented, Tiling}, Params};
            let (shape, cube, overlap) = if paper { ([480, 480, 480], 256, 32) } else { ([80, 72, 80], 48, 16) };
            let vol = apps::synthetic_cube(shape, 0.004, 25.0);
            let params = Params::default();
            let tiling = Tiling::new(shape, cube, overlap)?;
            let work = vol.len() as f64;
            // The engines (frame, FFT plans, device buffers) are built once per device count, outside
            // the timed runs, as a processing job builds them once for many volumes.
            let engines: std::sync::Mutex<Vec<(usize, std::sync::Arc<Fragmented>)>> = Default::default();
            Workload { name: format!("scale-wavepacket-{}x{}x{}", shape[0], shape[1], shape[2]), work,
                unit: "samples (forward + inverse)".into(), exact: true, run: Box::new(move |d| {
                    let f = {
                        let mut e = engines.lock().map_err(|_| anyhow::anyhow!("engine cache poisoned"))?;
                        match e.iter().find(|(n, _)| *n == d.len()) {
                            Some((_, f)) => f.clone(),
                            None => {
                                let f = std::sync::Arc::new(Fragmented::on_backends(d, tiling.clone(), &params)?);
                                e.push((d.len(), f.clone()));
                                f
                            }
                        }
                    };
                    f.process(&vol, |_, _| {})
                }) }
        }
        other => anyhow::bail!("no scaling workload for `{other}` (expected one of {PIPELINES:?})"),
    })
}

/// The rows of every pipeline in `which` (a failure is reported and the others still run).
pub fn bench_all(which: &[&str], devices: &[Backend], size: BenchSize) -> (Vec<BenchRow>, Vec<(String, String)>) {
    let (mut rows, mut failures) = (Vec::new(), Vec::new());
    for p in which {
        match bench(p, devices, size) {
            Ok(r) => rows.extend(r),
            Err(e) => failures.push((format!("scale-{p}"), format!("{e:#}"))),
        }
    }
    (rows, failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_counts_are_powers_of_two_then_all() {
        assert_eq!(counts(1), vec![1]);
        assert_eq!(counts(2), vec![1, 2]);
        assert_eq!(counts(4), vec![1, 2, 4]);
        assert_eq!(counts(6), vec![1, 2, 4, 6]);
        assert_eq!(counts(8), vec![1, 2, 4, 8]);
    }
}
