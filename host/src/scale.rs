//! Strong scaling: each pipeline's multi-device split on 1, 2, 4 (, 8, ...) of the given
//! devices, one fixed workload, wall-clock time of the whole job (host data in, host result out)
//! and the speed-up over one device. `seisgpu bench --gpus N|all` prints these rows and a summary
//! table ([`summary`]).
//!
//! What a timed run includes: everything a job does with its input on devices that are already
//! open: planning the items, host preparation, uploads, kernels, downloads, the host reduction.
//! The reduction of the per-device images is part of every timed run: with several GPUs they are
//! summed on the devices (peer copies, [`crate::runtime::reduce`]) and each GPU downloads its slice
//! of the sum; with one, the image comes down whole.
//! What it excludes, as one-time setup that a processing job pays once for many inputs: opening
//! the devices (context, peer access between them), loading and JIT-compiling modules (the untimed check run before the timed
//! runs does it), cuFFT plans and wave-packet engines, the SRM operator design, the operator table
//! and the NLBF gather resident on each device (made once per device count, outside the timing).
//!
//! Before timing, every count's result is checked against the one-device result: bit-exact where
//! the split does not change the summation (NLBF: concatenation; wave packets: cubes summed in cube
//! order), relative L2 below 1e-6 where each device sums its own block of items and the device
//! images are then summed in device order (Kirchhoff, PSTM, SRM: a different N regroups the f32
//! sums; the on-device sum gives the same bits as the host sum in device order). The timed
//! runs' last result is compared bit for bit with the check run (the static split makes a given N
//! repeatable). Counts above the devices given are skipped with a note; with one device only its
//! row is produced. On CPU work queues (`--device cpu --gpus N`) the rows exercise the code path:
//! the queues share the same cores, so they do not speed anything up.

use anyhow::{ensure, Context, Result};

use crate::backend::Backend;
use crate::bench::{rel_l2, BenchRow, BenchSize};
use crate::runtime::memory::HostSamples;

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
type Job = Box<dyn Fn(&[Backend]) -> Result<HostSamples>>;

/// A job whose result is an ordinary vector.
fn pageable(job: impl Fn(&[Backend]) -> Result<Vec<f32>> + 'static) -> Job { Box::new(move |d| job(d).map(HostSamples::Pageable)) }

/// One pipeline's workload, prepared once.
struct Workload {
    name: String,
    work: f64,
    unit: String,
    /// Results equal bit for bit across device counts.
    exact: bool,
    run: Job,
    /// Takes back a result the harness is done with (its memory serves a later run), where the
    /// job writes into reusable buffers; without it results are freed after the timing.
    recycle: Option<Box<dyn Fn(HostSamples)>>,
}

/// The strong-scaling rows of `pipeline` on `devices` (all of them the same kind): every workload
/// of the pipeline (wave packets at paper size: two volumes, 8 and 32 cubes).
pub fn bench(pipeline: &str, devices: &[Backend], size: BenchSize) -> Result<Vec<BenchRow>> {
    ensure!(!devices.is_empty(), "scaling bench: no device");
    let mut rows = Vec::new();
    // `SEISGPU_SCALE_CASE=<text>`: only the workloads whose name contains it.
    let case = std::env::var("SEISGPU_SCALE_CASE").ok();
    for w in workloads(pipeline, size)? {
        if case.as_ref().is_some_and(|c| !w.name.contains(c.as_str())) {
            continue;
        }
        rows.extend(bench_workload(w, devices)?);
    }
    Ok(rows)
}

fn bench_workload(w: Workload, devices: &[Backend]) -> Result<Vec<BenchRow>> {
    let kind = if devices[0].gpu().is_some() { "gpu" } else { "cpu-queue" };
    let mut rows = Vec::new();
    let mut one: Option<(HostSamples, f64)> = None;
    for &n in &counts(devices.len()) {
        let devs = &devices[..n];
        // The check run: also the warm-up (module loads, resident data, per-count setup).
        let t_check = std::time::Instant::now();
        let got = (w.run)(devs).with_context(|| format!("{} on {n} device(s)", w.name))?;
        let t_check = t_check.elapsed().as_secs_f64();
        let mut check = match &one {
            None => "reference (1 device)".to_string(),
            Some((want, _)) => {
                let (got, want) = (got.as_slice()?, want.as_slice()?);
                ensure!(got.len() == want.len(), "{}: {} values on {n} devices, {} on one", w.name, got.len(), want.len());
                let e = rel_l2(&got, want);
                let same = got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits());
                if w.exact {
                    ensure!(same, "{}: the {n}-device result differs from the 1-device one (rel L2 {e:.2e})", w.name);
                    "bit-exact vs 1 device".to_string()
                } else {
                    ensure!(e < 1e-6, "{}: the {n}-device result differs from the 1-device one by rel L2 {e:.2e}", w.name);
                    if same { "bit-exact vs 1 device".to_string() } else { format!("rel L2 {e:.1e} vs 1 device") }
                }
            }
        };
        // Median of repeats, timed around the job alone: handing a result back (and poisoning it
        // for its next use) is the harness's work, done between the timed runs. Seven repeats for
        // jobs under 0.2 s (run-to-run spread on the 4 x H200 VM is a few ms, a tenth of such a
        // job), three for jobs of a few seconds, one for the long ones (SRM on one GPU takes
        // ~12 s), which keeps the whole `--size paper` scaling run within minutes.
        let mut repeats = if t_check < 5.0 { 3 } else { 1 };
        let mut err = None;
        let mut last = None;
        // The earlier timed runs' results, freed after the timing: unmapping a big result (442 MB
        // for the 480^3 wave-packet volume) is not the next run's work.
        let mut spent: Vec<HostSamples> = Vec::new();
        // The last timed run's wall-clock marks (crate::multi::mark): where its serial time goes.
        let mut marks = Vec::new();
        let mut times = Vec::new();
        while times.len() < repeats {
            crate::multi::take_marks();
            let t = std::time::Instant::now();
            let r = (w.run)(devs);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            marks = crate::multi::take_marks();
            if times.len() == 1 && times[0] < 200.0 {
                repeats = 7;
            }
            match r {
                Ok(v) => match (last.replace(v), &w.recycle) {
                    (Some(old), Some(r)) => r(old),
                    (old, _) => spent.extend(old),
                },
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        let stats = crate::runtime::timing::Stats::from_samples(&times);
        drop(spent);
        if let Some(e) = err {
            return Err(e.context(format!("{} on {n} device(s), timed run", w.name)));
        }
        if let Some(v) = last {
            let (vs, gs) = (v.as_slice()?, got.as_slice()?);
            let same = vs.len() == gs.len() && vs.iter().zip(gs).all(|(a, b)| a.to_bits() == b.to_bits());
            check += if same { "; repeatable bit for bit" } else { "; NOT repeatable bit for bit" };
            if !same {
                eprintln!("WARNING {}: {n}-device runs differ from each other (rel L2 {:.1e})", w.name, rel_l2(vs, gs));
            }
            if let Some(r) = &w.recycle {
                r(v);
            }
        }
        let t = stats.median_ms;
        let note = match &one {
            None => format!("{n} {kind}; speed-up 1.00x"),
            Some((_, t1)) => format!("{n} {kind}s; speed-up {:.2}x vs 1 (efficiency {:.0} %)", t1 / t, 100.0 * t1 / t / n as f64),
        };
        let note = if marks.is_empty() { note } else { format!("{note}; last run: {}", crate::multi::marks_line(&marks)) };
        match (&one, &w.recycle) {
            (None, _) => one = Some((got, t)),
            (Some(_), Some(r)) => r(got),
            _ => {}
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

/// Per-device-count state of a workload, made on its first run with that count (untimed: the
/// check run) and reused by the timed runs.
type PerCount<T> = std::sync::Mutex<Vec<(usize, std::sync::Arc<T>)>>;

fn cached<T>(cache: &PerCount<T>, n: usize, make: impl FnOnce() -> Result<T>) -> Result<std::sync::Arc<T>> {
    let mut c = cache.lock().map_err(|_| anyhow::anyhow!("per-device-count cache poisoned"))?;
    if let Some((_, v)) = c.iter().find(|(k, _)| *k == n) {
        return Ok(v.clone());
    }
    let v = std::sync::Arc::new(make()?);
    c.push((n, v.clone()));
    Ok(v)
}

fn workloads(pipeline: &str, size: BenchSize) -> Result<Vec<Workload>> {
    if pipeline == "wavepacket" {
        // Variant 2 of the paper: 2 x 2 x 2 overlapping 256^3 cubes (2 per GPU on 4), and, as the
        // scheme is meant for large volumes, 4 x 4 x 2 cubes (8 per GPU: start-up and tail weigh
        // 1/8 of a device's work instead of 1/2; 928 = 4 x 224 + 32 tiles exactly, no ragged cube).
        // Small: 48^3 cubes.
        return Ok(if size == BenchSize::Paper {
            vec![wavepacket_workload([480, 480, 480], 256, 32)?, wavepacket_workload(WAVEPACKET_LARGE, 256, 32)?]
        } else {
            vec![wavepacket_workload([80, 72, 80], 48, 16)?]
        });
    }
    Ok(vec![workload(pipeline, size)?])
}

/// The second paper-size wave-packet scaling volume (32 cubes of 256^3).
pub const WAVEPACKET_LARGE: [usize; 3] = [928, 928, 480];

/// A wave-packet scaling workload: forward + identity edit (the coefficients stay on the devices)
/// + inverse of every cube, folded in box order into the output volume. The volume is made on the
/// first (untimed, check) run, so the bench holds only the volumes it has reached, in the job's
/// volume buffer (page-locked on GPUs: the devices copy their cubes from it by DMA). The output
/// buffers are made once (four volume buffers, page-locked on GPUs: the devices write each box's
/// fresh block into them by DMA) and reused by every run, as a job processing many volumes reuses
/// its buffers: on the 4 x H200 VM, fresh pages cost the fold 44-66 ms per 126 MB box in
/// first-touch faults (one run's output is 1.65 GB at 928 x 928 x 480), and page-locking 1.65 GB
/// takes 139-163 ms, which every device count would pay alike and which no split can hide.
/// Measured against the alternatives (docs/notes/scale.md, wave packets): ordinary memory in
/// (2.65x against 3.18x on 4 GPUs), boxes of two cubes (3.60x against 3.67x), the identity as a
/// host edit (the coefficients down and up: twice the one-GPU time).
fn wavepacket_workload(shape: [usize; 3], cube: usize, overlap: usize) -> Result<Workload> {
    use crate::wavepacket::{apps, fragments::{Fragmented, Tiling}, CoeffEdit, Params};
    use rayon::prelude::*;
    let params = Params::default();
    let tiling = Tiling::new(shape, cube, overlap)?;
    let len = shape.iter().product::<usize>();
    let work = len as f64;
    let vol = std::sync::OnceLock::new();
    // The engines (frame, FFT plans, device buffers) are built once per device count, outside
    // the timed runs, as a processing job builds them once for many volumes.
    let engines: PerCount<Fragmented> = Default::default();
    let outputs: std::sync::Arc<std::sync::Mutex<Vec<HostSamples>>> = Default::default();
    let made = std::sync::atomic::AtomicBool::new(false);
    let back = outputs.clone();
    Ok(Workload { name: format!("scale-wavepacket-{}x{}x{}", shape[0], shape[1], shape[2]), work,
        unit: "samples (forward + inverse)".into(), exact: true,
        // Poisoned on its way back, as the previous run's result would be: every sample must be
        // written again (the check compares every run's result with the first device count's).
        recycle: Some(Box::new(move |mut v| {
            if let Ok(s) = v.as_mut_slice() {
                s.par_chunks_mut(1 << 16).for_each(|c| c[0] = f32::NAN);
            }
            back.lock().map(|mut o| o.push(v)).unwrap_or(())
        })),
        run: Box::new(move |d| {
            let f = cached(&engines, d.len(), || Fragmented::on_backends(d, tiling.clone(), &params))?;
            if vol.get().is_none() {
                // Read into the job's volume buffer, as a job of many volumes reads each one.
                let mut buf = f.volume_buffer()?;
                buf.as_mut_slice()?.par_chunks_mut(1 << 16).zip(apps::synthetic_cube(shape, 0.004, 25.0).par_chunks(1 << 16))
                    .for_each(|(d, s)| d.copy_from_slice(s));
                let _ = vol.set(buf);
            }
            let vol = vol.get().context("the input volume")?.as_slice()?;
            if !made.swap(true, std::sync::atomic::Ordering::Relaxed) {
                let mut o = outputs.lock().map_err(|_| anyhow::anyhow!("output buffers poisoned"))?;
                // The 1-device reference, the check run's and two timed runs' (the harness gives
                // each run's result back once the next one is in).
                for _ in 0..4 {
                    let mut v = f.volume_buffer()?;
                    v.as_mut_slice()?.par_chunks_mut(1 << 16).for_each(|c| c.fill(f32::NAN));
                    o.push(v);
                }
            }
            let popped = outputs.lock().map_err(|_| anyhow::anyhow!("output buffers poisoned"))?.pop();
            // (Buffers come back poisoned through `recycle`.)
            let mut out = popped.unwrap_or_else(|| HostSamples::Pageable(crate::runtime::memory::zeroed_host(len)));
            f.process_into(vol, CoeffEdit::Identity, out.as_mut_slice()?)?;
            Ok(out)
        }) })
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
            Workload { name: format!("scale-{}", w.name), work, unit: "contributions (trace x image sample)".into(), exact: false, recycle: None,
                run: pageable(move |d| Ok(crate::ktm::migrate_multi(&traces, &params, d)?.data)) }
        }
        "pstm" => {
            // Table 2's image (50 x 1097 x 1504) with a fifth of its 450,000 traces; small: the small table.
            use crate::pstm::{self, bench as pb, TraveltimeMode, TraveltimeModel};
            let (mut p, ntr, ns) = pb::table2(size);
            p.gpu = pstm::GpuTuning::fastest(); // what `seisgpu pstm migrate` runs
            let ntr = if paper { ntr / 5 } else { ntr };
            let traces = pb::band_limited(pb::survey(ntr, &p, p.aperture as f64 * 0.5, 3000.0, 5), ns, 0.004, 25.0, &p);
            let (mode, model) = (TraveltimeMode::Static8, TraveltimeModel::Dsr);
            let work = pstm::count_pairs(&p, &pstm::plan(&traces, &p, mode)?).1 as f64;
            Workload { name: format!("scale-pstm-table2-{ntr}"), work, unit: "contributions (pair x image sample)".into(),
                exact: false, recycle: None, run: pageable(move |d| Ok(pstm::migrate_multi(&traces, &p, mode, model, d)?.data)) }
        }
        "nlbf" => {
            // The paper's field cross-spread shape (94 x 224 traces, 1500 samples).
            use crate::nlbf::{self, NlbfDevice, Setup, Variant};
            use rayon::prelude::*;
            let (traces, params) = nlbf::synth::crossspread_3d(size);
            let setup = Setup::new(&traces, &params)?;
            let work = setup.estimations() as f64;
            // Per device count, once: the devices (on a GPU the gather, coordinates and search
            // tables go up with its first item, in the untimed check run, and stay resident) and
            // the variant (the fast kernels' plan check). A processing job does these once for
            // many parameter sets; the timed run is the search itself: parameter traces and
            // apertures up, kernels, picks and semblance down.
            let cache: PerCount<(Variant, Vec<NlbfDevice>)> = Default::default();
            Workload { name: "scale-nlbf-crossspread-3d".into(), work, unit: "estimations (parameter trace x time sample)".into(),
                exact: true, recycle: None, run: pageable(move |d| {
                    let state = cached(&cache, d.len(), || {
                        let variant = d.iter().find(|b| b.gpu().is_some()).map_or(Variant::Cpu, |b| nlbf::variant_for(b, &setup));
                        Ok((variant, d.iter().map(NlbfDevice::new).collect()))
                    })?;
                    let (variant, devs) = &*state;
                    // The job's output: picks (as their bit patterns) then semblance, in one vector
                    // that the devices write in place (the check covers both). Its pages are
                    // written on all cores first, as any job's output would be.
                    let n = setup.estimations();
                    let mut out = Vec::new();
                    rayon::iter::repeat_n(0f32, 2 * n).collect_into_vec(&mut out);
                    let (code, sem) = out.split_at_mut(n);
                    // SAFETY: u32 and f32 have the same size and alignment, and every bit pattern
                    // is valid for both; `code` is borrowed only for the call.
                    let code: &mut [u32] = unsafe { std::slice::from_raw_parts_mut(code.as_mut_ptr().cast::<u32>(), n) };
                    nlbf::estimate_setup_multi_into(devs, &setup, &traces.data, *variant, code, sem)?;
                    Ok(out)
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
            // Once: the operator design (the plan); per device count: the operator tables on the
            // devices. `GpuVariant::Auto` is resolved once, on the first device, for every count
            // (so all rows run the same kernel). The timed run migrates the shot: slowness window,
            // traces and their FFT up, extrapolation and imaging, one window image down per device.
            let plan = srm::MultiPlan::new(&traces, &model, &params, opts)?;
            let resolved: std::sync::Mutex<Option<GpuOptions>> = Default::default();
            let cache: PerCount<Vec<srm::SrmDevice>> = Default::default();
            Workload { name: format!("scale-srm-shot-{n}"), work, unit: "frequency x depth x node".into(), exact: false,
                recycle: None, run: pageable(move |d| {
                    let devs = cached(&cache, d.len(), || d.iter().map(|b| srm::SrmDevice::new(b, &plan.op)).collect())?;
                    let opts = {
                        let mut r = resolved.lock().map_err(|_| anyhow::anyhow!("srm options poisoned"))?;
                        match *r {
                            Some(o) => o,
                            None => *r.insert(plan.resolve_variant(&devs, &model, &params, opts)?),
                        }
                    };
                    Ok(srm::migrate_planned(&devs, &plan, &traces, &model, &params, opts)?.data)
                }) }
        }
        other => anyhow::bail!("no scaling workload for `{other}` (expected one of {PIPELINES:?})"),
    })
}

/// The target speed-up on 4 devices for a scaling workload (`None`: no target).
pub fn target_on_4(workload: &str) -> Option<f64> {
    if workload.starts_with("scale-nlbf") {
        Some(3.5)
    } else if ["scale-ktm", "scale-wavepacket", "scale-srm"].iter().any(|p| workload.starts_with(p)) {
        Some(3.7)
    } else {
        None
    }
}

/// The scaling rows as one table: devices, median time, speed-up and efficiency against the
/// workload's 1-device row, the target on 4 devices, and the check.
pub fn summary(rows: &[BenchRow]) -> String {
    let devices = |r: &BenchRow| r.variant.split('-').next().and_then(|n| n.parse::<usize>().ok());
    let mut out = String::from("| workload | devices | median (s) | speed-up | efficiency | target (4 devices) | check |\n\
        |---|---:|---:|---:|---:|---|---|\n");
    for r in rows {
        let Some(n) = devices(r) else { continue };
        let one = rows.iter().find(|o| o.workload == r.workload && devices(o) == Some(1));
        let t = r.stats.median_ms / 1e3;
        let (speed, eff) = match one {
            Some(o) => {
                let s = o.stats.median_ms / r.stats.median_ms;
                (format!("{s:.2}x"), format!("{:.0} %", 100.0 * s / n as f64))
            }
            None => ("-".into(), "-".into()),
        };
        let target = match (target_on_4(&r.workload), n, one) {
            (Some(g), 4, Some(o)) => {
                let s = o.stats.median_ms / r.stats.median_ms;
                format!("{g:.1}x: {}", if s >= g { "met" } else { "NOT met" })
            }
            (Some(g), _, _) => format!("{g:.1}x"),
            (None, _, _) => "-".into(),
        };
        out += &format!("| {} | {n} | {t:.3} | {speed} | {eff} | {target} | {} |\n", r.workload, r.check);
    }
    out
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
    fn scale_summary_has_speed_up_and_target() {
        let row = |w: &str, n: usize, ms: f64| BenchRow {
            workload: w.into(), variant: format!("{n}-gpu"), scope: "end-to-end".into(),
            stats: crate::runtime::timing::Stats::from_samples(&[ms]), work: 1.0, work_unit: "x".into(), ceiling: None,
            fraction_of_ceiling: None, check: "ok".into(), paper: None, note: String::new(),
        };
        let rows = [row("scale-ktm-table2-40960", 1, 4000.0), row("scale-ktm-table2-40960", 4, 1000.0),
            row("scale-nlbf-crossspread-3d", 1, 200.0), row("scale-nlbf-crossspread-3d", 4, 80.0)];
        let t = summary(&rows);
        assert!(t.contains("| scale-ktm-table2-40960 | 4 | 1.000 | 4.00x | 100 % | 3.7x: met |"), "{t}");
        assert!(t.contains("| scale-nlbf-crossspread-3d | 4 | 0.080 | 2.50x | 62 % | 3.5x: NOT met |"), "{t}");
    }

    #[test]
    fn scale_wavepacket_volumes_tile_into_whole_cubes_per_device() {
        use crate::wavepacket::fragments::Tiling;
        let small = Tiling::new([480, 480, 480], 256, 32).unwrap();
        let large = Tiling::new(WAVEPACKET_LARGE, 256, 32).unwrap();
        assert_eq!(small.count(), 8);
        assert_eq!(large.count(), 32, "{:?}", large.starts);
        // 4 x 4 x 2 cubes at the minimum overlap: a stride of 224 on the long axes, 8 cubes per GPU on 4.
        assert_eq!(large.starts[0], vec![0, 224, 448, 672]);
        assert_eq!(large.count() % 4, 0);
    }

    #[test]
    fn scale_counts_are_powers_of_two_then_all() {
        assert_eq!(counts(1), vec![1]);
        assert_eq!(counts(2), vec![1, 2]);
        assert_eq!(counts(4), vec![1, 2, 4]);
        assert_eq!(counts(6), vec![1, 2, 4, 6]);
        assert_eq!(counts(8), vec![1, 2, 4, 8]);
    }
}
