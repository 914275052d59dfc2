//! The wave-packet benchmark's time estimate: each workload's expected time on the H100 machine,
//! from a cost model calibrated on the measured numbers of docs/notes/wavepacket.md.

use anyhow::Result;
use seisgpu_host::wavepacket::fragments::Tiling;
use seisgpu_host::wavepacket::{Frame, Gather};

use super::{fragment_workload, gpu_repeats, params, plan, variant_name, workload, Plan, PAGEABLE, PROFILES};
use crate::bench::BenchSize;

/// The cost model of [`estimate`], calibrated on the H100 machine (NVIDIA H100 80GB, 16 CPU cores):
/// docs/notes/wavepacket.md, "Measured" (commit 349fda0, before the window tables, so the GPU box
/// side is overestimated). Transfer and host rates are assumptions, stated here.
mod model {
    /// CPU reference (separable USFFT), 16 threads, 256^3, eps 1e-4: forward and inverse (ms).
    pub const CPU_256: [f64; 2] = [2281.0, 1459.0];
    /// Serial fraction (Amdahl) from 1 thread against 16 at 128^3: forward 1014 / 259 ms,
    /// inverse 823 / 139 ms.
    pub const CPU_SERIAL: [f64; 2] = [0.205, 0.114];
    /// The paper's stencil on the CPU over the separable reference, 128^3 (1630 / 259, 362 / 139).
    pub const CPU_STENCIL: [f64; 2] = [6.3, 2.6];
    /// CPU cost of eps 1e-6 (q = 6) over 1e-4 (q = 4): assumed (the gathers grow 1.5x, the FFTs
    /// and the box side, most of the time, do not).
    pub const CPU_EPS6: f64 = 1.25;
    /// GPU kernel time at 256^3 (ms), forward and inverse: lattice, separable, stencil at eps
    /// 1e-4; separable at 1e-6 (stencil at 1e-6: 118.5 / 40.8). Scaled by N^3 to other sizes
    /// (measured 512^3: lattice 67.7 / 33.6, separable 77.9 / 58.1, stencil 281 / 152).
    pub const GPU_256: [[f64; 2]; 3] = [[9.1, 4.5], [10.3, 7.6], [37.9, 17.6]];
    pub const GPU_256_SEP_EPS6: [f64; 2] = [10.6, 8.5];
    pub const GPU_256_STENCIL_EPS6: [f64; 2] = [118.5, 40.8];
    /// Host <-> device, page-locked and pageable (bytes/s); assumed.
    pub const PINNED_BPS: f64 = 20e9;
    pub const PAGEABLE_BPS: f64 = 10e9;
    /// Host-side copies, comparisons, allocations of fresh memory and page locking (bytes/s of
    /// the data touched); assumed.
    pub const HOST_BPS: f64 = 3e9;
    /// Fixed cost of an engine (plans, window tables), s; assumed.
    pub const ENGINE_S: f64 = 0.3;
}

/// Expected seconds of one workload of the plan, with what they are made of.
#[derive(Clone, Debug)]
pub struct Estimate {
    pub workload: String,
    pub cpu_s: f64,
    pub gpu_s: f64,
    pub what: String,
}

impl Estimate {
    pub fn total(&self) -> f64 { self.cpu_s + self.gpu_s }
}

/// CPU reference time of one transform (ms) on `threads` threads (Amdahl from the 16-thread
/// measurement), for the separable USFFT.
fn cpu_ms(n: usize, eps: f64, forward: bool, threads: usize) -> f64 {
    let d = if forward { 0 } else { 1 };
    let s = model::CPU_SERIAL[d];
    let t16 = model::CPU_256[d] * (n as f64 / 256.0).powi(3) * (n as f64).log2() / 8.0;
    let t1 = t16 / (s + (1.0 - s) / 16.0);
    let eps_factor = if eps < 1e-5 { model::CPU_EPS6 } else { 1.0 };
    t1 * (s + (1.0 - s) / threads.max(1) as f64) * eps_factor
}

/// GPU kernel time of one transform (ms), scaled by N^3 from 256^3.
fn gpu_ms(n: usize, eps: f64, gather: Gather, forward: bool) -> f64 {
    let d = if forward { 0 } else { 1 };
    let at256 = match (gather, eps < 1e-5) {
        (Gather::Lattice, _) => model::GPU_256[0][d],
        (Gather::Separable, false) => model::GPU_256[1][d],
        (Gather::Separable, true) => model::GPU_256_SEP_EPS6[d],
        (Gather::Stencil, false) => model::GPU_256[2][d],
        (Gather::Stencil, true) => model::GPU_256_STENCIL_EPS6[d],
    };
    at256 * (n as f64 / 256.0).powi(3)
}

/// Expected time of every workload of `plan` on the H100 machine's GPU (`gpu`) with its CPU on
/// `threads` threads. Builds every frame and tiling of the plan (so a bad plan fails here).
pub fn estimate(plan: &Plan, threads: usize, gpu: bool) -> Result<Vec<Estimate>> {
    let mut out = Vec::new();
    let mut last_n = 0;
    for w in &plan.cubes {
        let n = w.n;
        let fr = Frame::new(n, &params(w.eps, Gather::Separable))?;
        let n3 = (n * n * n) as f64;
        let (bytes_v, bytes_c) = (4.0 * n3, 8.0 * fr.total as f64);
        let mut what = format!("{} boxes, redundancy {:.2}, q = {}", fr.box_count(), fr.redundancy(), fr.geom.q);
        let name = format!("{} / {}", workload("forward", n, w.eps), workload("inverse", n, w.eps));
        if w.cpu_repeats.is_none() && !(gpu && !w.gpu.is_empty()) {
            out.push(Estimate { workload: name, cpu_s: 0.0, gpu_s: 0.0, what: what + "; nothing runs without a GPU" });
            continue;
        }
        // The test cube (made once per N) and its host copies.
        let mut cpu_s = if n != last_n { 4.0 * bytes_v / model::HOST_BPS } else { 0.0 };
        last_n = n;
        if let Some(reps) = w.cpu_repeats {
            let pair = (cpu_ms(n, w.eps, true, threads) + cpu_ms(n, w.eps, false, threads)) * 1e-3;
            let mut s = (1 + reps) as f64 * pair + 2.0 * bytes_c / model::HOST_BPS;
            if w.cpu_extras {
                s += (cpu_ms(n, w.eps, true, 1) + cpu_ms(n, w.eps, false, 1)) * 1e-3;
                s += (cpu_ms(n, w.eps, true, threads) * model::CPU_STENCIL[0] + cpu_ms(n, w.eps, false, threads) * model::CPU_STENCIL[1]) * 1e-3;
            }
            what += &format!("; CPU {} runs of forward + inverse at {:.2} s", 1 + reps, pair);
            cpu_s += s;
        }
        let mut gpu_s = 0.0;
        if gpu && !w.gpu.is_empty() {
            let (warm, reps, e2e) = gpu_repeats(n);
            let pinned_pair = 2.0 * (bytes_v + bytes_c) / model::PINNED_BPS;
            // Engine, page-locked buffers; at 512^3 (no CPU) the lattice's coefficients are kept.
            gpu_s += model::ENGINE_S + (bytes_v + bytes_c) / model::HOST_BPS;
            if w.cpu_repeats.is_none() && w.gpu.contains(&Gather::Lattice) {
                gpu_s += bytes_c / model::HOST_BPS;
            }
            for &g in &w.gpu {
                let (kf, ki) = (gpu_ms(n, w.eps, g, true) * 1e-3, gpu_ms(n, w.eps, g, false) * 1e-3);
                // Check (forward + inverse + comparisons), kernel forward, kernel inverse (each after
                // a forward), end to end, pageable, stages (inverse after a forward).
                let mut s = kf + ki + pinned_pair + 2.0 * (bytes_c + bytes_v) / model::HOST_BPS;
                s += (warm + reps) as f64 * (kf + kf + ki);
                s += (1 + e2e) as f64 * (kf + ki + pinned_pair);
                if n <= 256 {
                    s += (PAGEABLE.0 + PAGEABLE.1) as f64 * (kf + ki + 2.0 * (bytes_v + bytes_c) / model::PAGEABLE_BPS);
                }
                s += PROFILES as f64 * (kf + kf + ki);
                if g == Gather::Stencil {
                    s += 8.0 * (fr.p() as f64).powi(3) / model::HOST_BPS; // the P^3 grid and its plan
                }
                gpu_s += s;
            }
            what += &format!("; GPU {}", w.gpu.iter().map(|&g| variant_name(g)).collect::<Vec<_>>().join(", "));
        }
        out.push(Estimate { workload: name, cpu_s, gpu_s, what });
    }
    let f = &plan.fragments;
    let tiling = Tiling::new(f.shape, f.cube, f.overlap)?;
    let fr = Frame::new(tiling.cube, &params(1e-4, Gather::Separable))?;
    let count = tiling.count() as f64;
    let samples: f64 = f.shape.iter().map(|&d| d as f64).product();
    let c3 = (tiling.cube as f64).powi(3);
    let passes = (1 + f.repeats) as f64;
    // Per cube: extract, copy in and out of the page-locked buffers, merge (host), plus the transform.
    let host_cube = 4.0 * 4.0 * c3 / model::HOST_BPS;
    let setup = 3.0 * 4.0 * samples / model::HOST_BPS;
    let (cpu_s, gpu_s) = if gpu {
        let kf = gpu_ms(tiling.cube, 1e-4, Gather::Separable, true) * 1e-3;
        let ki = gpu_ms(tiling.cube, 1e-4, Gather::Separable, false) * 1e-3;
        let pair = kf + ki + 2.0 * (4.0 * c3 + 8.0 * fr.total as f64) / model::PINNED_BPS;
        (0.0, setup + model::ENGINE_S + passes * count * (pair + host_cube))
    } else if f.on_cpu {
        let pair = (cpu_ms(tiling.cube, 1e-4, true, threads) + cpu_ms(tiling.cube, 1e-4, false, threads)) * 1e-3;
        (setup + passes * count * (pair + host_cube), 0.0)
    } else {
        (0.0, 0.0)
    };
    out.push(Estimate {
        workload: fragment_workload(f),
        cpu_s,
        gpu_s,
        what: format!("{} cubes of {}^3, {} passes{}", tiling.count(), tiling.cube, 1 + f.repeats,
            if !gpu && !f.on_cpu { " (GPU only: skipped)" } else { "" }),
    });
    Ok(out)
}

/// The plan of `size` with its estimated times, without running anything.
pub fn dry_run(size: BenchSize, threads: usize, gpu: bool) -> Result<String> {
    let est = estimate(&plan(size), threads, gpu)?;
    let total: f64 = est.iter().map(Estimate::total).sum();
    let mut s = format!(
        "wave-packet bench, {size:?} size: estimated {total:.0} s ({} CPU threads, {}; model calibrated on the H100 machine)\n",
        threads, if gpu { "GPU" } else { "no GPU" });
    for e in &est {
        s += &format!("  {:<62} CPU {:>6.1} s  GPU {:>6.1} s  ({})\n", e.workload, e.cpu_s, e.gpu_s, e.what);
    }
    Ok(s)
}
