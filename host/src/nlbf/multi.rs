//! The search over several devices (`--gpus`) and its work items.

use rayon::prelude::*;

use super::{cpu, gpu, invalid, Estimate, EstimateParams, NlbfError, Result, Setup, Variant};
use crate::backend::Backend;
use crate::traces::TraceSet;

/// Work items of a multi-device (`--gpus`) or MPI search: contiguous ranges of parameter traces
/// (each parameter trace's search is independent, so the split changes no result), fixed by
/// their count alone.
pub fn work_items(np: usize) -> Vec<std::ops::Range<usize>> { crate::exec::split::even_ranges(np, WORK_ITEMS) }

/// Items of [`work_items`].
pub const WORK_ITEMS: usize = 16;

/// The variant the whole search runs with on `backend`: the CPU reference, or on a GPU the fast
/// kernels where they apply to the whole setup (then to every subset: its apertures are no
/// larger), else the paper-faithful kernel. Decided once, so every item runs the same code.
pub fn variant_for(backend: &Backend, setup: &Setup) -> Variant {
    match backend {
        Backend::Cpu => Variant::Cpu,
        Backend::Gpu(g) => match gpu::FastPlan::new(g, setup, None) {
            Ok(_) => Variant::GpuFast,
            Err(why) => {
                eprintln!("nlbf: the fast GPU kernels do not apply ({why}); using the paper-faithful kernel");
                Variant::GpuPaper
            }
        },
    }
}

/// One device of a multi-device search. On a GPU running the fast kernels, the gather, the
/// trace coordinates and the search tables go up once (with the first item the device takes)
/// and stay for all its items; only each item's parameter traces and apertures are uploaded.
pub struct NlbfDevice {
    pub backend: Backend,
    resident: std::sync::Mutex<Option<gpu::Resident>>,
}

impl NlbfDevice {
    pub fn new(backend: &Backend) -> NlbfDevice { NlbfDevice { backend: backend.clone(), resident: std::sync::Mutex::new(None) } }
}

/// One work item on `dev`: (codes, semblance) of parameter traces `ptraces`, `[i * ns + t]`.
/// `variant` is that of the whole search ([`variant_for`]); a CPU device runs the reference.
pub fn estimate_item(variant: Variant, dev: &NlbfDevice, setup: &Setup, data: &[f32], ptraces: std::ops::Range<usize>)
    -> Result<(Vec<u32>, Vec<f32>)> {
    let n = ptraces.len() * setup.ns;
    let (mut code, mut sem) = (vec![0u32; n], vec![0f32; n]);
    estimate_item_into(variant, dev, setup, data, ptraces, &mut code, &mut sem)?;
    Ok((code, sem))
}

/// [`estimate_item`] writing into `code` and `sem` (`ptraces.len() * ns` each): on a GPU running
/// the fast kernels the results are downloaded straight there (no intermediate vectors).
pub fn estimate_item_into(variant: Variant, dev: &NlbfDevice, setup: &Setup, data: &[f32], ptraces: std::ops::Range<usize>,
    code: &mut [u32], sem: &mut [f32]) -> Result<()> {
    let list = || ptraces.clone().collect::<Vec<usize>>();
    let put = |(c, s): (Vec<u32>, Vec<f32>), code: &mut [u32], sem: &mut [f32]| -> Result<()> {
        if c.len() != code.len() || s.len() != sem.len() {
            return invalid(format!("work item {ptraces:?}: {} picks for {} outputs", c.len(), code.len()));
        }
        code.copy_from_slice(&c);
        sem.copy_from_slice(&s);
        Ok(())
    };
    match (&dev.backend, variant) {
        (Backend::Cpu, _) | (_, Variant::Cpu) => put(cpu::estimate_subset(setup, data, &list()), code, sem),
        (Backend::Gpu(g), Variant::GpuPaper) => put(gpu::estimate_paper_subset(g, setup, data, &list())?, code, sem),
        (Backend::Gpu(g), Variant::GpuFast) => {
            let mut r = dev.resident.lock().map_err(|_| NlbfError::Invalid("a device thread panicked".into()))?;
            if r.is_none() {
                *r = Some(gpu::Resident::upload(g, setup, data)?);
            }
            gpu::estimate_fast_resident_into(g, &setup.subset(ptraces), r.as_mut().unwrap(), code, sem)
        }
    }
}

/// The search over several devices: (codes, semblance) of every parameter trace of `setup`,
/// the [`work_items`] going to the devices as they free up.
pub(crate) fn estimate_setup_split(devices: &[NlbfDevice], setup: &Setup, data: &[f32], variant: Variant)
    -> Result<(Vec<u32>, Vec<f32>)> {
    let n = setup.estimations();
    // Written (page faults taken) on all cores, not inside the downloads.
    let mut code = Vec::new();
    rayon::iter::repeat_n(0u32, n).collect_into_vec(&mut code);
    let mut sem = Vec::new();
    rayon::iter::repeat_n(0f32, n).collect_into_vec(&mut sem);
    estimate_setup_split_into(devices, setup, data, variant, &mut code, &mut sem)?;
    Ok((code, sem))
}

/// [`estimate_setup_split`] into `code` and `sem` (`setup.estimations()` each): the [`Search`]
/// job through the queue ([`crate::exec::run_queue`]). Each work item is a contiguous range of
/// parameter traces, so its results are a contiguous part of the outputs: the device threads
/// write (on a GPU: download) them in place, in parallel, and nothing is left to fold on the
/// calling thread (the result is the concatenation, bit for bit, for any number of devices and
/// any timing).
pub fn estimate_setup_split_into(devices: &[NlbfDevice], setup: &Setup, data: &[f32], variant: Variant, code: &mut [u32],
    sem: &mut [f32]) -> Result<()> {
    if devices.is_empty() {
        return invalid("nlbf: no device to search on");
    }
    let items = work_items(setup.np());
    let job = Search::new(setup, data, variant, &items, 0..items.len(), 0, code, sem)?;
    let bar = crate::progress::work(items.len() as u64, "nlbf work items");
    crate::exec::run_queue(&crate::progress::Ticked(&job, &bar), devices, ()).map_err(|e| NlbfError::Invalid(format!("{e:#}")))
}

/// The search as a queue job ([`crate::exec::QueueJob`]): item `i` is the parameter traces
/// `items[i]` (in the numbering of the whole search), searched on whichever device takes it and
/// written straight into its part of the outputs. A job may hold the outputs of a block of the
/// items only (an MPI rank's, [`super::distributed::estimate`]) and a setup of only their
/// parameter traces (the setup's parameter trace 0 being the search's `first`).
pub struct Search<'a> {
    setup: &'a Setup,
    data: &'a [f32],
    variant: Variant,
    items: &'a [std::ops::Range<usize>],
    held: std::ops::Range<usize>,
    first: usize,
    /// The outputs of the items `held`, each taken once by the device that runs the item.
    slots: Vec<Slot<'a>>,
}

type Slot<'a> = std::sync::Mutex<Option<(&'a mut [u32], &'a mut [f32])>>;

impl<'a> Search<'a> {
    /// The search of the items `held` of `items` (their parameter traces consecutive), `setup`'s
    /// parameter traces being the search's from `first` on; their (codes, semblance) go into
    /// `code` and `sem`, `[i * ns + t]` from the first held parameter trace on.
    #[allow(clippy::too_many_arguments)]
    pub fn new(setup: &'a Setup, data: &'a [f32], variant: Variant, items: &'a [std::ops::Range<usize>],
        held: std::ops::Range<usize>, first: usize, code: &'a mut [u32], sem: &'a mut [f32]) -> Result<Search<'a>> {
        let ns = setup.ns;
        let n: usize = items[held.clone()].iter().map(|r| r.len() * ns).sum();
        if code.len() != n || sem.len() != n {
            return invalid(format!("nlbf: {} / {} outputs for {n} estimations", code.len(), sem.len()));
        }
        let mut slots: Vec<Slot> = Vec::with_capacity(held.len());
        let (mut rc, mut rs) = (code, sem);
        for r in &items[held.clone()] {
            let (c, tc) = rc.split_at_mut(r.len() * ns);
            let (s, ts) = rs.split_at_mut(r.len() * ns);
            slots.push(std::sync::Mutex::new(Some((c, s))));
            (rc, rs) = (tc, ts);
        }
        Ok(Search { setup, data, variant, items, held, first, slots })
    }
}

impl crate::exec::QueueJob for Search<'_> {
    type Device = NlbfDevice;
    type Result = ();
    type Output = ();
    fn items(&self) -> usize { self.items.len() }
    fn run(&self, dev: &NlbfDevice, i: usize) -> anyhow::Result<()> {
        let r = &self.items[i];
        anyhow::ensure!(self.held.contains(&i), "work item {i} (parameter traces {r:?}): its outputs are not held here");
        let (c, s) = self.slots[i - self.held.start].lock().map_err(|_| anyhow::anyhow!("output slot poisoned"))?.take()
            .ok_or_else(|| anyhow::anyhow!("work item {i} ran twice"))?;
        let local = r.start - self.first..r.end - self.first;
        estimate_item_into(self.variant, dev, self.setup, self.data, local, c, s).map_err(|e| anyhow::Error::new(e).context(format!("parameter traces {r:?}")))
    }
    fn fold(&self, _: &mut (), _: usize, _: ()) -> anyhow::Result<()> { Ok(()) }
}

/// [`super::estimate`] split over `backends` (also over one): the parameter traces are cut into
/// [`work_items`] that go to the devices as they free up (one host thread per device); every
/// parameter trace's picks and semblance are those of the single-device search, bit for bit.
/// `variant` forces a GPU variant on the GPUs (`None`: [`variant_for`], as [`super::estimate`]);
/// CPU devices run the reference.
pub fn estimate_split(backends: &[Backend], traces: &TraceSet, params: &EstimateParams, variant: Option<Variant>)
    -> Result<Estimate> {
    if backends.is_empty() {
        return invalid("nlbf: no device to search on");
    }
    let setup = Setup::new(traces, params)?;
    let variant = match variant {
        Some(v) => v,
        None => backends.iter().find(|b| b.gpu().is_some()).map_or(Variant::Cpu, |b| variant_for(b, &setup)),
    };
    let devices: Vec<NlbfDevice> = backends.iter().map(NlbfDevice::new).collect();
    let (code, sem) = estimate_setup_split(&devices, &setup, &traces.data, variant)?;
    Ok(Estimate::from_setup(&setup, code, sem))
}
