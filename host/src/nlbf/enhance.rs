//! The enhancement: every trace stacked with its neighbours along the local operator.

use rayon::prelude::*;

use super::setup::validate_layout;
use super::{coordinates, cpu, gpu, invalid, slopes, validate_traces, Aperture, Coordinates, Estimate, Grid, NlbfError, Result};
use crate::backend::Backend;
use crate::traces::TraceSet;

/// Parameters of the enhancement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnhanceParams {
    /// Neighbours stacked with each trace: |x - x_n| <= x/2 and |y - y_n| <= y/2 (m).
    pub aperture: Aperture,
}

/// Neighbour lists of every trace (CSR, ascending), through the same bucket search.
pub fn neighbours(tx: &[f32], ty: &[f32], ap: Aperture) -> Result<(Vec<u32>, Vec<u32>)> {
    if !(ap.x.is_finite() && ap.y.is_finite() && ap.x >= 0.0 && ap.y >= 0.0) {
        return super::bad_parameter("aperture", format!("the enhancement aperture {} x {} m must be finite and non-negative", ap.x, ap.y));
    }
    let n = tx.len();
    let (hx, hy) = ((ap.x / 2.0) as f32 * (1.0 + 1e-6) + 1e-6, (ap.y / 2.0) as f32 * (1.0 + 1e-6) + 1e-6);
    let cs = (ap.x.max(ap.y) / 2.0).max(1.0) as f32;
    let (xmax, ymax) = (tx.iter().cloned().fold(0.0, f32::max), ty.iter().cloned().fold(0.0, f32::max));
    let (bx, by) = ((xmax / cs) as usize + 1, (ymax / cs) as usize + 1);
    if bx.saturating_mul(by) > 1 << 26 {
        return invalid(format!("enhancement aperture {} x {} m is too small for the survey extent", ap.x, ap.y));
    }
    let cell = |i: usize| ((ty[i] / cs) as usize).min(by - 1) * bx + ((tx[i] / cs) as usize).min(bx - 1);
    let mut count = vec![0u32; bx * by + 1];
    for i in 0..n {
        count[cell(i) + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let mut fill = count.clone();
    let mut bucket = vec![0u32; n];
    for i in 0..n {
        let c = cell(i);
        bucket[fill[c] as usize] = i as u32;
        fill[c] += 1;
    }
    let lists: Vec<Vec<u32>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let (x0, y0) = (tx[i], ty[i]);
            let ix0 = ((x0 - hx).max(0.0) / cs) as usize;
            let ix1 = (((x0 + hx) / cs) as usize).min(bx - 1);
            let iy0 = ((y0 - hy).max(0.0) / cs) as usize;
            let iy1 = (((y0 + hy) / cs) as usize).min(by - 1);
            let mut l = Vec::new();
            for iy in iy0..=iy1 {
                for ix in ix0..=ix1 {
                    let b = iy * bx + ix;
                    for &t in &bucket[count[b] as usize..count[b + 1] as usize] {
                        if (tx[t as usize] - x0).abs() <= hx && (ty[t as usize] - y0).abs() <= hy {
                            l.push(t);
                        }
                    }
                }
            }
            l.sort_unstable();
            l
        })
        .collect();
    let mut off = Vec::with_capacity(n + 1);
    off.push(0u32);
    let mut idx = Vec::new();
    for l in lists {
        idx.extend_from_slice(&l);
        if idx.len() > u32::MAX as usize {
            return invalid("enhancement neighbour lists exceed 2^32 entries: reduce the aperture");
        }
        off.push(idx.len() as u32);
    }
    Ok((off, idx))
}

/// Everything the enhancement needs besides the data and the estimate.
#[derive(Debug, Clone)]
pub struct EnhanceSetup {
    pub ns: usize,
    pub inv_dt: f32,
    pub tx: Vec<f32>,
    pub ty: Vec<f32>,
    pub nb_off: Vec<u32>,
    pub nb_idx: Vec<u32>,
    /// Trace coordinates relative to the estimate's grid origin: node (i, j) at (i sx, j sy).
    pub grid: Grid,
}

impl EnhanceSetup {
    pub fn new(traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams) -> Result<EnhanceSetup> {
        validate_traces(traces)?;
        Self::from_layout(traces, coords, est, params)
    }

    /// [`EnhanceSetup::new`] from a layout: every trace header and the sampling, `data` not looked
    /// at (an MPI rank plans before it reads the traces it needs).
    pub fn from_layout(traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams) -> Result<EnhanceSetup> {
        validate_layout(traces)?;
        if traces.ns != est.ns {
            return super::bad_input(format!("the estimate has {} samples per trace, the data {}", est.ns, traces.ns));
        }
        if est.code.len() != est.grid.len() * est.ns {
            return invalid("the estimate's volumes do not match its grid");
        }
        let (x, y) = coordinates(&traces.headers, coords)?;
        let tx: Vec<f32> = x.iter().map(|&v| (v - est.origin.0) as f32).collect();
        let ty: Vec<f32> = y.iter().map(|&v| (v - est.origin.1) as f32).collect();
        let (nb_off, nb_idx) = neighbours(&tx, &ty, params.aperture)?;
        Ok(EnhanceSetup { ns: traces.ns, inv_dt: 1.0 / traces.dt, tx, ty, nb_off, nb_idx, grid: est.grid })
    }

    /// Traces this setup enhances: its first `outputs()` traces (every trace of a whole setup).
    pub fn outputs(&self) -> usize { self.nb_off.len().saturating_sub(1) }

    /// The setup enhancing traces `out` alone, knowing only the traces their neighbour lists hold:
    /// those input traces, the outputs first (output k becomes trace k) and the others ascending,
    /// with every list renumbered in place (its order kept, so every sum runs as in the whole
    /// setup: the same bits). Returns the input trace numbers of the subset's traces, in its
    /// order. An MPI rank reads and enhances only these.
    pub fn subset_reading(&self, out: std::ops::Range<usize>) -> (EnhanceSetup, Vec<usize>) {
        let (a, b) = (self.nb_off[out.start] as usize, self.nb_off[out.end] as usize);
        let mut others: Vec<u32> = self.nb_idx[a..b].iter().copied().filter(|&t| !out.contains(&(t as usize))).collect();
        others.par_sort_unstable();
        others.dedup();
        let order: Vec<usize> = out.clone().chain(others.iter().map(|&t| t as usize)).collect();
        // Input trace number -> its place in the subset (as `Setup::subset_reading` does).
        let mut place = vec![u32::MAX; self.tx.len()];
        for (k, &t) in order.iter().enumerate() {
            place[t] = k as u32;
        }
        let nb_idx = self.nb_idx[a..b].iter().map(|&t| place[t as usize]).collect();
        let nb_off = self.nb_off[out.start..=out.end].iter().map(|&o| o - a as u32).collect();
        let sub = EnhanceSetup { ns: self.ns, inv_dt: self.inv_dt, tx: order.iter().map(|&t| self.tx[t]).collect(),
            ty: order.iter().map(|&t| self.ty[t]).collect(), nb_off, nb_idx, grid: self.grid };
        (sub, order)
    }
}

/// Enhancement: every trace replaced by the mean of its neighbours shifted along the local
/// operator, the operator interpolated bilinearly between the parameter traces. On several
/// devices the traces are split over them, every sample that of one device, bit for bit.
pub fn enhance(traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams, devices: &[Backend])
    -> crate::error::Result<TraceSet> {
    let out = match devices {
        [] => invalid("nlbf: no device to enhance on"),
        [backend] => enhance_on(backend, traces, coords, est, params),
        _ => enhance_split(devices, traces, coords, est, params),
    };
    Ok(out?)
}

/// [`enhance`] on one device.
fn enhance_on(backend: &Backend, traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams)
    -> Result<TraceSet> {
    let setup = EnhanceSetup::new(traces, coords, est, params)?;
    let mut data = match backend {
        Backend::Cpu => cpu::enhance(&setup, est, &traces.data),
        Backend::Gpu(g) => gpu::enhance(g, &setup, est, &traces.data)?,
    };
    slopes::copy_unestimated(&setup, est, &traces.data, &mut data);
    Ok(TraceSet { headers: traces.headers.clone(), data: data.into(), ns: traces.ns, dt: traces.dt, t0: traces.t0 })
}

/// [`enhance`] over several devices (`--gpus`): the [`Enhancement`] job through the queue
/// ([`crate::exec::run_queue`]); every sample is the single-device enhancement's, bit for bit.
fn enhance_split(backends: &[Backend], traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams)
    -> Result<TraceSet> {
    if backends.is_empty() {
        return invalid("nlbf: no device to enhance on");
    }
    let setup = EnhanceSetup::new(traces, coords, est, params)?;
    let ns = traces.ns;
    let job = Enhancement { setup: &setup, est, data: &traces.data, blocks: blocks(traces.len(), backends.len()) };
    let data = crate::exec::run_queue(&job, backends, Vec::with_capacity(traces.data.len()))
        .map_err(|e| NlbfError::Invalid(format!("enhancing traces {:?}: {e:#}", job.blocks.get(e.item).cloned().unwrap_or_default())))?;
    Ok(TraceSet { headers: traces.headers.clone(), data: data.into(), ns, dt: traces.dt, t0: traces.t0 })
}

/// The work items of an enhancement of `ntr` traces on `ndevices` devices: on one device every
/// trace in one item (one enhancement call, as [`enhance`] on one device), else four blocks per
/// device, so that a faster device takes more of them.
pub fn blocks(ntr: usize, ndevices: usize) -> Vec<std::ops::Range<usize>> {
    crate::exec::split::even_ranges(ntr, if ndevices <= 1 { 1 } else { 4 * ndevices })
}

/// The enhancement as a queue job ([`crate::exec::QueueJob`]): the traces cut into contiguous
/// blocks that go to the devices as they free up, each block enhanced from only the traces its
/// neighbour lists hold ([`EnhanceSetup::subset_reading`]: the whole enhancement's values, bit for
/// bit), the blocks' samples concatenated in trace order.
pub struct Enhancement<'a> {
    pub setup: &'a EnhanceSetup,
    pub est: &'a Estimate,
    /// Every trace's samples, `[k * ns + t]`.
    pub data: &'a [f32],
    /// The traces of each work item.
    pub blocks: Vec<std::ops::Range<usize>>,
}

impl crate::exec::QueueJob for Enhancement<'_> {
    type Device = Backend;
    type Result = Vec<f32>;
    type Output = Vec<f32>;
    fn items(&self) -> usize { self.blocks.len() }
    fn run(&self, b: &Backend, i: usize) -> anyhow::Result<Vec<f32>> {
        let ns = self.setup.ns;
        let (sub, order) = self.setup.subset_reading(self.blocks[i].clone());
        let data: Vec<f32> = order.iter().flat_map(|&k| self.data[k * ns..(k + 1) * ns].iter().copied()).collect();
        let mut out = match b {
            Backend::Cpu => cpu::enhance(&sub, self.est, &data),
            Backend::Gpu(g) => gpu::enhance(g, &sub, self.est, &data)?,
        };
        slopes::copy_unestimated(&sub, self.est, &data, &mut out);
        Ok(out)
    }
    fn fold(&self, out: &mut Vec<f32>, i: usize, block: Vec<f32>) -> anyhow::Result<()> {
        anyhow::ensure!(block.len() == self.blocks[i].len() * self.setup.ns, "{} enhanced samples for traces {:?} of {} samples",
            block.len(), self.blocks[i], self.setup.ns);
        out.extend_from_slice(&block);
        Ok(())
    }
}
