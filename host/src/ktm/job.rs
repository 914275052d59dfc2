//! Kirchhoff migration as an [`exec::Job`]: contiguous ranges of input traces as work items,
//! each device adding its block of them into one image ([`DeviceImage`]), the devices' images
//! summed in device order. The same job runs on several devices ([`super::migrate`]) and on
//! the ranks of an MPI job (`super::distributed`).

use std::ops::Range;

use anyhow::{ensure, Context};
use rayon::prelude::*;

use super::{cpu, gpu, prep, Image, Params, Plan};
use crate::backend::Backend;
use crate::exec::{self, reduce::Part};
use crate::runtime::phases::mark;
use crate::traces::TraceSet;

/// Work items of a multi-device (`--gpus`) or MPI migration: contiguous ranges of input traces,
/// fixed by the trace count alone. Devices take contiguous blocks of them
/// (`crate::exec::split::device_blocks`) and add every item into one image resident on the device
/// ([`DeviceImage`]), so the per-item cost is the host preparation of its traces (overlapped
/// with the previous item's migration), not an image download. 16 items keep 1, 2, 4 and 8
/// devices evenly loaded.
pub fn work_items(ntraces: usize) -> Vec<Range<usize>> { crate::exec::split::even_ranges(ntraces, WORK_ITEMS) }

/// Items of [`work_items`].
pub const WORK_ITEMS: usize = 16;

/// Checks and prepares one work item: `chunk` holds the input traces `range` (only those: an MPI
/// rank reads only its share), `plan` is the plan of all traces. `None` when no trace of the
/// item takes part (all outside the offset classes).
fn prepare_item(plan: &Plan, chunk: &TraceSet, range: Range<usize>, params: &Params) -> anyhow::Result<Option<(Plan, prep::Prepared)>> {
    ensure!(chunk.len() == range.len() && chunk.ns == plan.ns,
        "ktm work item {range:?}: {} traces of {} samples given, the plan has {} samples", chunk.len(), chunk.ns, plan.ns);
    if let Some(i) = chunk.data.par_iter().position_first(|v| !v.is_finite()) {
        crate::bail_input!("ktm input: trace {} sample {} is not finite", range.start + i / chunk.ns, i % chunk.ns);
    }
    let sub = plan.restrict(range);
    if sub.ntraces() == 0 {
        return Ok(None);
    }
    // On the host (rayon), so it overlaps the device's migration of the previous item.
    let prepared = prep::prepare(chunk, &sub, params);
    Ok(Some((sub, prepared)))
}

/// Migrates one work item on its own and returns its partial image (`classes * ncols * ntau`, as
/// [`Image::data`]); see [`prepare_item`] for the arguments.
pub fn migrate_item(plan: &Plan, chunk: &TraceSet, range: Range<usize>, params: &Params, backend: &Backend)
    -> anyhow::Result<Vec<f32>> {
    let Some((sub, prepared)) = prepare_item(plan, chunk, range, params)? else {
        return Ok(vec![0.0; plan.classes() * plan.grid.len()]);
    };
    match backend {
        Backend::Cpu => Ok(cpu::migrate(&sub, &prepared)),
        Backend::Gpu(gpu) => gpu::migrate(gpu, &sub, &prepared, params.variant, &params.limits).context("GPU migration"),
    }
}

/// One device's image in a multi-device or MPI migration: every work item the device takes is
/// added into it, in item order. On a GPU the image stays resident ([`gpu::Accumulator`]) and is
/// downloaded once by [`DeviceImage::finish`]; where it does not fit (tiling), and on a CPU work
/// queue, each item's partial image is added on the host.
pub struct DeviceImage {
    acc: DeviceAcc,
}

enum DeviceAcc {
    Resident(Box<gpu::Accumulator>),
    Host(Vec<f32>, Backend),
}

impl DeviceImage {
    /// A zero image of `plan` on `backend`; `max_item` is the largest work item (traces).
    pub fn new(backend: &Backend, plan: &Plan, params: &Params, max_item: usize) -> anyhow::Result<DeviceImage> {
        let host = || DeviceAcc::Host(vec![0.0; plan.classes() * plan.grid.len()], backend.clone());
        let acc = match backend {
            Backend::Cpu => host(),
            Backend::Gpu(g) => match gpu::Accumulator::new(g, plan, params.variant, &params.limits, max_item).context("GPU image")? {
                Some(a) => DeviceAcc::Resident(Box::new(a)),
                None => host(),
            },
        };
        Ok(DeviceImage { acc })
    }

    /// Adds work item `range` (its traces in `chunk`; see [`prepare_item`]).
    pub fn add_item(&mut self, plan: &Plan, chunk: &TraceSet, range: Range<usize>, params: &Params) -> anyhow::Result<()> {
        let Some((sub, prepared)) = prepare_item(plan, chunk, range, params)? else { return Ok(()) };
        match &mut self.acc {
            DeviceAcc::Resident(a) => a.add(&sub, &prepared).context("GPU migration"),
            DeviceAcc::Host(image, backend) => {
                let part = match backend {
                    Backend::Cpu => cpu::migrate(&sub, &prepared),
                    Backend::Gpu(g) => gpu::migrate(g, &sub, &prepared, params.variant, &params.limits).context("GPU migration")?,
                };
                add_image(image, &part)
            }
        }
    }

    /// The device's image on the host (one download on a GPU).
    pub fn finish(self) -> anyhow::Result<Vec<f32>> {
        match self.acc {
            DeviceAcc::Resident(a) => a.download().context("downloading the device's image"),
            DeviceAcc::Host(image, _) => Ok(image),
        }
    }

    /// The device's image where it is: still resident on a GPU (for a device-side sum,
    /// [`crate::exec::reduce::sum_parts`]), or on the host.
    pub fn finish_part(self) -> anyhow::Result<Part> {
        match self.acc {
            DeviceAcc::Resident(a) => {
                let (g, image) = a.into_image().context("finishing the device's image")?;
                Ok(Part::Gpu(g, image))
            }
            DeviceAcc::Host(image, _) => Ok(Part::Host(image)),
        }
    }
}

/// Adds a partial image into the running sum.
pub fn add_image(sum: &mut [f32], part: &[f32]) -> anyhow::Result<()> {
    ensure!(sum.len() == part.len(), "partial image of {} samples for an image of {}", part.len(), sum.len());
    sum.par_iter_mut().zip(part.par_iter()).for_each(|(s, p)| *s += p);
    Ok(())
}

/// The migration job: [`work_items`] of `ntraces` input traces, `chunk(range)` giving an item's
/// traces (the whole input in memory, or an MPI rank's share), every device adding its block of
/// items into its [`DeviceImage`], the images summed in device order ([`exec::reduce::sum_parts`]:
/// on the GPUs, each downloading its slice of the sum; the same bits as
/// [`exec::reduce::sum_in_order`] on the host). The split is static, so a given device count gives
/// the same image bit for bit on every run (on GPUs wherever the kernel sums in a fixed order: the
/// columns kernel with one trace segment, i.e. any image larger than about 8 blocks per SM);
/// different counts regroup the f32 sums (relative L2 ~1e-7 to each other and to the unsplit
/// single-device migration).
pub struct Migration<'a> {
    plan: Plan,
    params: &'a Params,
    items: Vec<Range<usize>>,
    max_item: usize,
    chunk: Box<dyn Fn(Range<usize>) -> TraceSet + Sync + 'a>,
    bar: crate::progress::Work,
}

impl<'a> Migration<'a> {
    /// The job over `ntraces` input traces planned as `plan`.
    pub fn new(plan: Plan, params: &'a Params, ntraces: usize, chunk: impl Fn(Range<usize>) -> TraceSet + Sync + 'a) -> Self {
        let items = work_items(ntraces);
        let max_item = items.iter().map(|r| r.len()).max().unwrap_or(1);
        let bar = crate::progress::work(items.len() as u64, "ktm work items");
        Migration { plan, params, items, max_item, chunk: Box::new(chunk), bar }
    }

    /// The job over `traces` in memory. The shape checks here; the samples' finiteness is checked
    /// by every work item as the devices take them (in parallel with the other devices' work), not
    /// in a serial scan of the whole input first.
    pub fn of(traces: &'a TraceSet, params: &'a Params) -> anyhow::Result<Self> {
        // The items run in the Kirchhoff engine, whose traveltimes are DSR only.
        crate::ensure_param!(!super::interpolated::needed(params), "traveltime-model",
            "ktm: --traveltime-model {} runs in the PSTM engine, not split by the Kirchhoff work items: use `seisgpu pstm migrate` \
             for VTI across MPI ranks", params.traveltime_model.name());
        let t = std::time::Instant::now();
        exec::validate_shape(traces, "ktm input")?;
        mark("validate", t);
        let t = std::time::Instant::now();
        let plan = Plan::new(&traces.headers, traces.ns, traces.dt, traces.t0, params)?;
        mark("plan", t);
        Ok(Migration::new(plan, params, traces.len(), |r| traces.slice(r)))
    }

    /// The plan of every input trace.
    pub fn plan(&self) -> &Plan { &self.plan }

    /// The image of this job's plan with `data`.
    pub fn image(&self, data: Vec<f32>) -> Image {
        let plan = &self.plan;
        Image { grid: plan.grid, classes: plan.classes(), class_offsets: plan.class_offsets(self.params), data,
            skipped_traces: plan.skipped_traces }
    }
}

impl exec::Job for Migration<'_> {
    type Device = Backend;
    type State = DeviceImage;
    type Part = Part;
    type Output = Image;

    fn items(&self) -> usize { self.items.len() }

    fn start(&self, device: &Backend) -> anyhow::Result<DeviceImage> { DeviceImage::new(device, &self.plan, self.params, self.max_item) }

    fn run(&self, _: &Backend, image: &mut DeviceImage, item: usize) -> anyhow::Result<()> {
        self.bar.inc(1);
        let r = self.items[item].clone();
        image.add_item(&self.plan, &(self.chunk)(r.clone()), r.clone(), self.params).with_context(|| format!("traces {r:?}"))
    }

    fn finish(&self, _: &Backend, image: DeviceImage) -> anyhow::Result<Part> { image.finish_part() }

    fn reduce(&self, parts: Vec<Part>) -> anyhow::Result<Image> {
        // Resident images are summed on the GPUs, one slice of the sum downloaded by each.
        Ok(self.image(exec::reduce::sum_parts(parts)?))
    }
}

/// [`super::migrate`] on several devices: the [`Migration`] of `traces` in memory. On a failure
/// the whole input is scanned, so a bad sample is reported as by the single-device migration:
/// the first one in the input.
pub(super) fn migrate_split(traces: &TraceSet, params: &Params, devices: &[Backend]) -> anyhow::Result<Image> {
    let job = Migration::of(traces, params)?;
    exec::run(&job, devices).or_else(|e| {
        traces.validate("ktm input").map_err(crate::error::Error::Input)?;
        Err(e)
    })
}
