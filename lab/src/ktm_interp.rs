//! Benchmark rows of the interpolated traveltimes (`--traveltime static8|dynamic`, paper 5) in the
//! columns kernels, beside the exact `gpu-columns` rows of the same run: kernel-only and end to
//! end, checked against the CPU reference of the same mode, with the traveltime error against
//! exact in the form of paper 5's Table 1 (largest error in samples, share of image samples read
//! at exactly the exact position) and the image's rel L2 to the exact image.

use rayon::prelude::*;

use crate::ktm::{subset, time_gpu, Workload};
use seisgpu_host::ktm::{cpu_interp, migrate, Image, Params, Plan, Variant};
use seisgpu_host::backend::Backend;
use crate::bench::{rel_l2, BenchRow};
use seisgpu_host::pstm::TraveltimeMode;
use seisgpu_host::runtime::timing::measure_cpu;
use seisgpu_host::runtime::Gpu;
use seisgpu_host::kernels::ktm::interp::{node, node_sample, static8_reads_at_trace_end};
use seisgpu_host::kernels::ktm::COL_K_BARE;
use seisgpu_host::kernels::ktm::{contribution, pair_geom, sample_geom};

/// The modes benchmarked: static8, and dynamic at the CLI's tolerance (0.1 ms).
pub const MODES: [TraveltimeMode; 2] = [TraveltimeMode::Static8, TraveltimeMode::Dynamic { tolerance: 1e-4 }];

/// SASS instructions per lane of the bare static8 kernel at a non-negative read offset
/// (`ktm_mig_static8_bare2` at its 40-register cap; sm_90, nvdisasm of the embedded PTX;
/// docs/notes/ktm.md), by path: the node phase of a batch of 4 traces (nodes, step table, the
/// trace-end ballots, the batch's pointer and loop), then per trace of the batch its 8 image
/// times of one 256-sample block row read inside the trace (no clamp), straddling its end
/// (clamped), or past it (only the tests; the batch's last trace saves a branch on the last
/// two paths, hence the quarters).
pub const STATIC8_NODE_PHASE: f64 = 154.0;
pub const STATIC8_READ_INSIDE: f64 = 72.0;
pub const STATIC8_READ_STRADDLING: f64 = 84.75;
pub const STATIC8_READ_PAST: f64 = 7.75;

/// SASS instructions per contribution of the bare static8 kernel on `traces` under `params`: the
/// per-path counts above weighted by the share of (trace, column, block row) reads inside,
/// straddling and past the trace end, over every 61st column (a segment is inside when its five
/// nodes lie below the padded trace's end, past when all lie at or past its last pair, or when it
/// is below the image). `None` for the other flavours and modes (the dynamic kernel's node phase
/// branches on the data) and where the host runs another kernel.
pub fn interp_instr_per_contribution(traces: &seisgpu_host::traces::TraceSet, params: &Params) -> anyhow::Result<Option<f64>> {
    if params.traveltime != TraveltimeMode::Static8 || params.corrections() || params.antialias.is_some() {
        return Ok(None);
    }
    let plan = Plan::new(&traces.headers, traces.ns, traces.dt, traces.t0, params)?;
    let c = plan.consts;
    if seisgpu_host::ktm::gpu::interp_kernel(c.tt_mode, false, false, c.s_off, c.stride).name() != seisgpu_host::kernels::ktm::kernels_interp::KTM_MIG_STATIC8_BARE2.name() {
        return Ok(None);
    }
    let ntau = plan.grid.ntau;
    let (rows, n) = (ntau.div_ceil(256), plan.geom.len());
    let cols: Vec<usize> = (0..plan.grid.ncols()).step_by(61).collect();
    let per_col: Vec<f64> = cols.par_iter().map(|&col| {
        let vcol = if c.vel_stride == 0 { 0 } else { col };
        let v = &plan.vel[vcol * ntau..(vcol + 1) * ntau];
        let (x, y) = plan.column_xy(col);
        let zs: Vec<_> = (0..=32 * rows as u32).map(|i| node_sample(&c, 8 * i, v[(8 * i as usize).min(ntau - 1)])).collect();
        let mut instr = (n.div_ceil(4) * rows) as f64 * STATIC8_NODE_PHASE;
        for g in &plan.geom {
            let pg = pair_geom(x, y, *g);
            let s: Vec<f32> = zs.iter().map(|q| node::<false>(&c, &pg, q).s).collect();
            for r in 0..rows {
                let (mut inside, mut past) = (true, true);
                for seg in 0..8 {
                    let at = 32 * r + 4 * seg;
                    let nodes: &[f32; 5] = s[at..at + 5].try_into().expect("five nodes a segment");
                    let (seg_inside, seg_past) = static8_reads_at_trace_end(nodes, c.stride, 32 / COL_K_BARE as u32);
                    inside &= seg_inside;
                    past &= 256 * r + 32 * seg >= ntau || seg_past;
                }
                instr += if inside { STATIC8_READ_INSIDE } else if past { STATIC8_READ_PAST } else { STATIC8_READ_STRADDLING };
            }
        }
        instr
    }).collect();
    // 8 contributions per lane and trace of a block row.
    Ok(Some(per_col.iter().sum::<f64>() / (8.0 * (n * rows * cols.len()) as f64)))
}

/// Traveltime error of `params`' interpolated mode against exact over every (trace, column,
/// image sample) of `traces` x every 7th column: (largest |error| in samples, share of samples
/// with no error at all).
pub fn traveltime_error(traces: &seisgpu_host::traces::TraceSet, params: &Params) -> anyhow::Result<(f64, f64)> {
    let plan = Plan::new(&traces.headers, traces.ns, traces.dt, traces.t0, params)?;
    let c = plan.consts;
    let ntau = plan.grid.ntau;
    let cols: Vec<usize> = (0..plan.grid.ncols()).step_by(7).collect();
    let per_col: Vec<(f64, u64, u64)> = cols.par_iter().map(|&col| {
        let nodes = cpu_interp::column_nodes(&plan, col);
        let vcol = if c.vel_stride == 0 { 0 } else { col };
        let v = &plan.vel[vcol * ntau..(vcol + 1) * ntau];
        let (x, y) = plan.column_xy(col);
        let (mut s, mut m) = (vec![0.0f32; ntau], vec![0.0f32; ntau]);
        let (mut worst, mut zero, mut total) = (0.0f64, 0u64, 0u64);
        for g in &plan.geom {
            let pg = pair_geom(x, y, *g);
            cpu_interp::positions::<false>(&c, &pg, &nodes, &mut s, &mut m);
            for it in 0..ntau {
                let e = contribution::<false, false>(&c, &pg, &sample_geom(&c, plan.grid.tau(it), v[it])).s;
                let d = (s[it] as f64 - e as f64).abs();
                worst = worst.max(d);
                zero += (d == 0.0) as u64;
                total += 1;
            }
        }
        (worst, zero, total)
    }).collect();
    let worst = per_col.iter().map(|r| r.0).fold(0.0, f64::max);
    let (zero, total) = per_col.iter().fold((0u64, 0u64), |a, r| (a.0 + r.1, a.1 + r.2));
    Ok((worst, zero as f64 / total.max(1) as f64))
}

/// The rows of both modes for one workload: `sub` and `cpu_exact` are the CPU reference's traces
/// and exact image, `cpu_rate` its throughput (contributions/s).
pub fn rows(gpu: &std::sync::Arc<Gpu>, wl: &Workload, sub: &seisgpu_host::traces::TraceSet, cpu_exact: &Image, cpu_rate: f64,
    peak_issue: f64) -> anyhow::Result<Vec<BenchRow>> {
    let backend = Backend::Gpu(gpu.clone());
    let n = wl.traces.len();
    let full_work = n as f64 * wl.params.grid.len() as f64;
    let mut rows = Vec::new();
    for mode in MODES {
        let params = Params { traveltime: mode, variant: Variant::Columns, ..wl.params.clone() };
        let cpu = migrate(sub, &params, &[Backend::Cpu])?;
        let gpu_img = migrate(sub, &params, std::slice::from_ref(&backend))?;
        let err = rel_l2(&gpu_img.data, &cpu.data);
        anyhow::ensure!(err < 1e-5, "{} {}: GPU differs from the CPU reference of the same mode (rel L2 {err:.2e})", wl.name,
            mode.name());
        let vs_exact = rel_l2(&cpu.data, &cpu_exact.data);
        let (worst, zero) = traveltime_error(&subset(sub, 8), &params)?;
        let check = format!("rel L2 {err:.1e} vs CPU {} on {} traces; vs exact: max traveltime error {worst:.3} samples, \
            {:.1}% of samples exact, image rel L2 {vs_exact:.1e}", mode.name(), sub.len(), 100.0 * zero);
        let plan = Plan::new(&wl.traces.headers, wl.traces.ns, wl.traces.dt, wl.traces.t0, &params)?;
        let prep = seisgpu_host::ktm::prep::prepare(&wl.traces, &plan, &params);
        let mut res = seisgpu_host::ktm::gpu::Resident::new(gpu, &plan, &prep)?;
        let k = time_gpu(gpu, 1, 3, || res.run(gpu, Variant::Columns))?;
        drop(res);
        let name = format!("gpu-columns-{}", mode.name());
        let mut kernel_row = BenchRow {
            workload: wl.name.clone(),
            variant: name.clone(),
            scope: "kernel".into(),
            stats: k,
            work: full_work,
            work_unit: "contributions".into(),
            ceiling: None,
            fraction_of_ceiling: None,
            check: check.clone(),
            paper: None,
            note: String::new(),
        };
        let rate = kernel_row.throughput();
        kernel_row.note = format!("{rate:.2e} contributions/s, {:.1}x the CPU reference (exact)", rate / cpu_rate);
        if let Some(ipc) = interp_instr_per_contribution(&wl.traces, &params)? {
            let ipc = (ipc * 100.0).round() / 100.0;
            crate::bench::set_issue_ceiling(&mut kernel_row, ipc, "SASS instr/contribution", peak_issue);
        }
        rows.push(kernel_row);
        let e2e = measure_cpu(0, 2, || {
            migrate(&wl.traces, &params, std::slice::from_ref(&backend)).expect("GPU migration");
        });
        let mut row = BenchRow {
            workload: wl.name.clone(),
            variant: name,
            scope: "end-to-end".into(),
            stats: e2e,
            work: full_work,
            work_unit: "contributions".into(),
            ceiling: None,
            fraction_of_ceiling: None,
            check,
            paper: None,
            note: String::new(),
        };
        row.note = format!("{:.1}x the CPU reference (exact)", row.throughput() / cpu_rate);
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seisgpu_host::ktm::ImageGrid;

    /// Long traces under a shallow image are read inside at every block row; the same traces
    /// under a deep image also straddle and pass their end; corrections run another kernel.
    #[test]
    fn static8_instr_count_follows_the_reads_against_the_trace_end() {
        let g = ImageGrid { x0: 0.0, dx: 25.0, nx: 9, y0: 0.0, dy: 25.0, ny: 8, tau0: 0.0, dtau: 0.004, ntau: 256 };
        let traces = crate::ktm::scattered_traces(64, 1000, 0.004, &g, 500.0, 3);
        let bare = |g| Params { traveltime: TraveltimeMode::Static8, ..Params::bare(g, crate::ktm::vrms()) };
        let inside = interp_instr_per_contribution(&traces, &bare(g)).unwrap().unwrap();
        assert_eq!(inside, (STATIC8_NODE_PHASE / 4.0 + STATIC8_READ_INSIDE) / 8.0);
        let deep = interp_instr_per_contribution(&traces, &bare(ImageGrid { ntau: 1300, ..g })).unwrap().unwrap();
        let (lo, hi) = ((STATIC8_NODE_PHASE / 4.0 + STATIC8_READ_PAST) / 8.0, (STATIC8_NODE_PHASE / 4.0 + STATIC8_READ_STRADDLING) / 8.0);
        assert!(deep > lo && deep < hi && deep < inside, "{deep} not in ({lo}, {inside})");
        let corr = Params { weights: true, ..bare(g) };
        assert!(interp_instr_per_contribution(&traces, &corr).unwrap().is_none());
    }
}
