//! PSTM as an [`exec::Job`]: contiguous ranges of input traces as work items, each device adding
//! its block of them into one image ([`DeviceImage`]), the devices' images summed in device order
//! and their counts added. The same job runs on several devices ([`super::migrate`]) and on the
//! ranks of an MPI job (`super::distributed`).

use anyhow::{ensure, Context};

use super::{check_reach, count_pairs, cpu, gpu, plan, MigrationStats, PstmImage, PstmParams, TraveltimeMode, TraveltimeModel};
use crate::backend::Backend;
use crate::exec::{self, reduce::Part};
use crate::runtime::phases::mark;
use crate::traces::TraceSet;

/// Work items of a multi-device (`--gpus`) or MPI migration: contiguous ranges of input traces,
/// fixed by the trace count alone; each device takes a contiguous block of them into one resident
/// image (see `ktm::work_items`).
pub fn work_items(ntraces: usize) -> Vec<std::ops::Range<usize>> { crate::exec::split::even_ranges(ntraces, WORK_ITEMS) }

/// Items of [`work_items`].
pub const WORK_ITEMS: usize = 16;

/// Sums the counts of two runs.
pub fn add_stats(s: MigrationStats, p: &MigrationStats) -> MigrationStats {
    MigrationStats { traces_used: s.traces_used + p.traces_used, pairs: s.pairs + p.pairs,
        contributions: s.contributions + p.contributions, exact_evals: s.exact_evals + p.exact_evals }
}

/// Adds a work item's partial image (and its counts) into the running sum.
pub fn add_image(sum: &mut PstmImage, part: &PstmImage) -> anyhow::Result<()> {
    use rayon::prelude::*;
    ensure!(sum.data.len() == part.data.len(), "partial image of {} samples for an image of {}", part.data.len(), sum.data.len());
    sum.data.par_iter_mut().zip(part.data.par_iter()).for_each(|(s, p)| *s += p);
    sum.stats = add_stats(sum.stats, &part.stats);
    Ok(())
}

/// An all-zero image of `params`' shape (the start of a sum over work items).
pub fn zero_image(params: &PstmParams) -> PstmImage {
    PstmImage { nx: params.nx, ny: params.ny, noff: params.noff, nz: params.nz, nz_pad: params.nz_pad(),
        data: vec![0.0; params.columns() * params.noff * params.nz_pad()], stats: MigrationStats::default() }
}

/// A GPU's side of a [`DeviceImage`]: its resident image and coefficients (taken while an item
/// runs, so a failure leaves `None`) and the page-locked staging its items' traces go up through.
struct DeviceSide {
    gpu: std::sync::Arc<crate::runtime::Gpu>,
    resident: Option<gpu::Resident>,
    staging: Option<gpu::TraceStaging>,
}

/// One device's image in a multi-device or MPI migration: each work item it takes is planned on
/// its own (the plan only sorts and bins the item's traces) and added into it in item order. On a
/// GPU the image stays resident: every kernel batch adds into it, the host packs the next item
/// while the GPU migrates this one, and [`DeviceImage::finish`] downloads it once. A CPU work
/// queue adds each item's image on the host.
pub struct DeviceImage {
    mode: TraveltimeMode,
    model: TraveltimeModel,
    host: Option<PstmImage>,
    gpu: Option<DeviceSide>,
    stats: MigrationStats,
    /// nx, ny, noff, nz, nz_pad.
    shape: [usize; 5],
}

impl DeviceImage {
    pub fn new(backend: &Backend, params: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel) -> anyhow::Result<DeviceImage> {
        let (host, gpu) = match backend {
            Backend::Cpu => (Some(zero_image(params)), None),
            Backend::Gpu(g) => {
                let len = params.columns() * params.noff * params.nz_pad();
                let image = g.zeros::<f32>(len).context("the device's PSTM image")?;
                (None, Some(DeviceSide { gpu: g.clone(), resident: Some(gpu::Resident::new(image)), staging: None }))
            }
        };
        let shape = [params.nx, params.ny, params.noff, params.nz, params.nz_pad()];
        Ok(DeviceImage { mode, model, host, gpu, stats: MigrationStats::default(), shape })
    }

    /// Migrates the traces `chunk` (a work item) into the image.
    pub fn add_item(&mut self, chunk: &TraceSet, params: &PstmParams) -> anyhow::Result<()> {
        let plan = plan(chunk, params, self.mode)?;
        if let Some(img) = &mut self.host {
            return add_image(img, &cpu::migrate(chunk, params, &plan, self.mode, self.model));
        }
        let d = self.gpu.as_mut().expect("a GPU device image");
        let resident = d.resident.take().context("the device image was lost after an earlier failure")?;
        if d.staging.as_ref().is_none_or(|s| s.packed_len() != plan.packed_len()) {
            d.staging = None; // (its copies are waited for before a new one page-locks memory)
            d.staging = Some(gpu::TraceStaging::new(&d.gpu, plan.packed_len())?);
        }
        let staging = d.staging.as_mut().expect("made above");
        let prep = gpu::Prepared::streamed(&d.gpu, chunk, params, &plan, self.mode, self.model, gpu::Image::AddInto(resident), staging)
            .context("GPU PSTM")?;
        // The counts on the host while the kernels run.
        let (pairs, contributions) = count_pairs(params, &plan);
        self.stats = add_stats(self.stats, &MigrationStats { traces_used: plan.traces_used, pairs, contributions, exact_evals: 0 });
        d.resident = Some(prep.into_resident());
        Ok(())
    }

    /// The device's image where it is (resident on a GPU, for a device-side sum:
    /// [`crate::exec::reduce::sum_parts`]) and its counts.
    pub fn finish_part(self) -> anyhow::Result<(Part, MigrationStats)> {
        if let Some(img) = self.host {
            return Ok((Part::Host(img.data), img.stats));
        }
        let d = self.gpu.expect("a GPU device image");
        let image = d.resident.context("the device image was lost after an earlier failure")?.image;
        let t = std::time::Instant::now();
        d.gpu.synchronize()?;
        mark("kernels drained", t);
        Ok((Part::Gpu(d.gpu, image), self.stats))
    }

    /// The device's image and counts (one download on a GPU).
    pub fn finish(self) -> anyhow::Result<PstmImage> {
        if let Some(img) = self.host {
            return Ok(img);
        }
        let d = self.gpu.expect("a GPU device image");
        let (g, image) = (d.gpu, d.resident.context("the device image was lost after an earlier failure")?.image);
        // Synchronised first, so the scaling marks tell the kernels' drain from the copy.
        let t = std::time::Instant::now();
        g.synchronize()?;
        mark("kernels drained", t);
        let t = std::time::Instant::now();
        let data = g.download_prefaulted(&image).context("downloading the device's PSTM image")?;
        g.synchronize()?;
        mark("image download", t);
        let [nx, ny, noff, nz, nz_pad] = self.shape;
        Ok(PstmImage { nx, ny, noff, nz, nz_pad, data, stats: self.stats })
    }
}

/// The migration job: [`work_items`] of `ntraces` input traces, `chunk(range)` giving an item's
/// traces (the whole input in memory, or an MPI rank's share), every device adding its block of
/// items into its [`DeviceImage`]; the images summed in device order ([`exec::reduce::sum_parts`]:
/// on the GPUs, each downloading its slice of the sum), the counts added. A given device count
/// gives the same image bit for bit on every run; different counts regroup the f32 sums.
pub struct Migration<'a> {
    params: &'a PstmParams,
    mode: TraveltimeMode,
    model: TraveltimeModel,
    items: Vec<std::ops::Range<usize>>,
    chunk: Box<dyn Fn(std::ops::Range<usize>) -> TraceSet + Sync + 'a>,
    bar: crate::progress::Work,
}

impl<'a> Migration<'a> {
    /// The job over `ntraces` input traces (the parameters already checked).
    pub fn new(params: &'a PstmParams, mode: TraveltimeMode, model: TraveltimeModel, ntraces: usize,
        chunk: impl Fn(std::ops::Range<usize>) -> TraceSet + Sync + 'a) -> Self {
        let items = work_items(ntraces);
        let bar = crate::progress::work(items.len() as u64, "pstm work items");
        Migration { params, mode, model, items, chunk: Box::new(chunk), bar }
    }

    /// The job over `traces` in memory: the parameters and the traces' reach checked, and the
    /// shapes; each work item's plan scans its own samples (on the device threads, in parallel).
    pub fn of(traces: &'a TraceSet, params: &'a PstmParams, mode: TraveltimeMode, model: TraveltimeModel) -> anyhow::Result<Self> {
        params.validate(mode, model)?;
        check_reach(traces, params)?;
        let t = std::time::Instant::now();
        exec::validate_shape(traces, "input traces")?;
        mark("validate", t);
        Ok(Migration::new(params, mode, model, traces.len(), |r| traces.slice(r)))
    }
}

impl exec::Job for Migration<'_> {
    type Device = Backend;
    type State = DeviceImage;
    type Part = (Part, MigrationStats);
    type Output = PstmImage;

    fn items(&self) -> usize { self.items.len() }

    fn start(&self, device: &Backend) -> anyhow::Result<DeviceImage> { DeviceImage::new(device, self.params, self.mode, self.model) }

    fn run(&self, _: &Backend, image: &mut DeviceImage, item: usize) -> anyhow::Result<()> {
        self.bar.inc(1);
        let r = self.items[item].clone();
        image.add_item(&(self.chunk)(r.clone()), self.params).with_context(|| format!("traces {r:?}"))
    }

    fn finish(&self, _: &Backend, image: DeviceImage) -> anyhow::Result<(Part, MigrationStats)> { image.finish_part() }

    fn reduce(&self, parts: Vec<(Part, MigrationStats)>) -> anyhow::Result<PstmImage> {
        let stats = parts.iter().fold(MigrationStats::default(), |a, (_, s)| add_stats(a, s));
        let mut out = zero_image(self.params);
        let data = exec::reduce::sum_parts(parts.into_iter().map(|(p, _)| p).collect())?;
        ensure!(data.len() == out.data.len(), "pstm: device images of {} samples for an image of {}", data.len(), out.data.len());
        out.data = data;
        out.stats = stats;
        Ok(out)
    }
}

/// [`super::migrate`] on several devices: the [`Migration`] of `traces` in memory. On a failure
/// the whole set is scanned, so a bad sample is reported by its index in the input (as by a
/// serial scan of the whole set before the split, which it replaces).
pub(super) fn migrate_split(traces: &TraceSet, params: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel,
    devices: &[Backend]) -> anyhow::Result<PstmImage> {
    let job = Migration::of(traces, params, mode, model)?;
    exec::run(&job, devices).or_else(|e| {
        traces.validate("input traces").map_err(crate::error::Error::Input)?;
        Err(e)
    })
}
