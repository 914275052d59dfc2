//! The host side of [`super::Fragmented::process_into`]: boxes arriving from the engines, folded into the
//! volume in box order ([`OrderedFold`]) on a pool of their own, and the engines' host buffers.

use std::sync::atomic::Ordering;
use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};

use anyhow::Result;

use crate::wavepacket::HostSamples;

use super::{FoldRows, Tiling};

/// From an engine's thread to the folding thread: a box's partial sum on its way (in a host
/// buffer of the engine's pool) and its kept count, or the failure of a cube of the box.
pub(super) type BoxResult = (usize, usize, Result<(Arrival, Option<u64>)>);

/// A box's partial sum coming into host memory: the engine's buffer, whether the box's fresh
/// block went straight into the output volume, and the box's slabs of x0 rows (box-relative) not
/// folded yet, each with the event after which its rows are in the buffer (none: there already).
pub(super) struct Arrival {
    pub(super) buf: HostSamples,
    pub(super) fresh: bool,
    /// The box's face came down with the fresh block, its earlier sum added ([`CubeBox::face`]).
    pub(super) face: bool,
    pub(super) slabs: std::collections::VecDeque<(std::ops::Range<usize>, Option<cudarc::driver::CudaEvent>)>,
}

impl Arrival {
    /// Waits until nothing more comes down into the buffer (or the volume), for a job that stops.
    pub(super) fn settle(&self) {
        for ev in self.slabs.iter().filter_map(|(_, e)| e.as_ref()) {
            let _ = ev.synchronize();
        }
    }
}

/// The boxes' partial sums into the volume, each volume plane (x0) taking its boxes in
/// box order, so every sample gets its sum in one fixed order whatever the engines and their
/// timing; a box folds slab by slab as its rows come down. The last boxes of several devices
/// arrive together: they fold plane by plane behind one another (box 5's first slab once box 4's
/// first slab is in) while the later slabs still come down, not one whole box after another once
/// all are down (on 4 GPUs at 480^3, ~1.5 ms of host folds after the devices had finished).
pub(super) struct OrderedFold<'t> {
    pub(super) tiling: &'t Tiling,
    /// Each box's first volume plane.
    pub(super) origin: Vec<usize>,
    /// Per volume plane: the boxes covering it, in order, and how many of them are folded there.
    pub(super) covering: Vec<Vec<usize>>,
    pub(super) folded: Vec<usize>,
    pub(super) pending: BTreeMap<usize, (usize, Arrival)>,
    pub(super) boxes_done: usize,
    /// Seconds spent folding, and in how many passes.
    pub(super) busy: f64,
    pub(super) passes: usize,
    /// Boxes folded whole, and how many from box 0 on are (every face of the boxes of later x0
    /// rows may be read once it reaches them: [`Tiling::row_start`]).
    pub(super) done: Vec<bool>,
    pub(super) prefix: usize,
    /// `SEISGPU_WP_TRACE`: the job's start and what the fold did when (waits, passes).
    pub(super) log: Option<(std::time::Instant, Vec<String>)>,
}

/// Threads of the host fold's own pool ([`fold_pool`]).
pub(super) const FOLD_THREADS: usize = 32;

/// The threads the host fold runs on: a pool of its own, [`FOLD_THREADS`] (at most one per core).
/// Measured on 4 x H200 (64 cores; the ignored probe `fold_speed_480` and the scaling bench): a
/// pass over 32 planes cost ~0.55 ms on the 64 threads of rayon's global pool once they had gone
/// idle (waking them), ~0.15 ms on 16 or 32, and whole boxes folded
/// fastest on 32 (~7 G samples/s); 480^3 on 4 GPUs, medians: 39.4-42.9 ms on the global pool,
/// 36.7-37.4 on 16, 36.1 on 32. `None` (the global pool) only if the pool cannot be made.
pub(super) fn fold_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let n = FOLD_THREADS.min(cores);
        rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(|i| format!("wp-fold-{i}")).build().ok()
    }).as_ref()
}

impl<'t> OrderedFold<'t> {
    pub(super) fn new(tiling: &'t Tiling) -> Self {
        let mut covering = vec![Vec::new(); tiling.shape[0]];
        let mut origin = Vec::new();
        for b in 0..tiling.box_count() {
            let bx = tiling.cube_box(b);
            origin.push(bx.origin[0]);
            covering[bx.origin[0]..bx.origin[0] + bx.extent[0]].iter_mut().for_each(|c: &mut Vec<usize>| c.push(b));
        }
        let folded = vec![0; covering.len()];
        Self { tiling, origin, covering, folded, pending: BTreeMap::new(), boxes_done: 0, busy: 0.0, passes: 0,
            done: vec![false; tiling.box_count()], prefix: 0, log: None }
    }

    pub(super) fn add(&mut self, b: usize, engine: usize, a: Arrival) { self.pending.insert(b, (engine, a)); }

    pub(super) fn finished(&self) -> bool { self.boxes_done == self.tiling.box_count() }

    /// Whether box b may fold its `rows`: on each of their planes every earlier box is in.
    pub(super) fn due(&self, b: usize, rows: &std::ops::Range<usize>) -> bool {
        let o = self.origin[b];
        (o + rows.start..o + rows.end).all(|p| self.covering[p].get(self.folded[p]) == Some(&b))
    }

    /// Whether a slab is due but still coming down (the folding thread then polls for it).
    pub(super) fn waiting(&self) -> bool {
        self.pending.iter().any(|(&b, (_, a))| a.slabs.front().is_some_and(|(r, _)| self.due(b, r)))
    }

    /// Folds every due slab that is down, in one pass ([`Tiling::fold_rows`]); whole boxes go back
    /// to their engines' pools. Returns whether anything was folded, or the box that failed. It
    /// never waits for a slab: a GPU may be waiting for this thread (a box's face copy waits until
    /// the fold has reached the box's x0 row, [`CubeBox::face`]), so the thread polls
    /// ([`OrderedFold::waiting`]) and keeps taking boxes while it waits.
    pub(super) fn step(&mut self, out: &mut [f32], pools: &[CubePool]) -> std::result::Result<bool, (usize, anyhow::Error)> {
        // The batch, in box order: a slab's planes count as folded once it is taken, so a later
        // box's slab on the same planes follows it in the same pass.
        let mut batch: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        let boxes: Vec<usize> = self.pending.keys().copied().collect();
        for &b in &boxes {
            for (rows, ev) in &self.pending[&b].1.slabs {
                if !self.due(b, rows) {
                    break;
                }
                if let Some(ev) = ev && !ev.try_is_complete().map_err(|e| (b, anyhow::Error::from(e).context("a box's partial sum coming down")))? {
                    break;
                }
                for p in self.origin[b] + rows.start..self.origin[b] + rows.end {
                    self.folded[p] += 1;
                }
                batch.push((b, rows.clone()));
            }
        }
        let Some(&(first, _)) = batch.first() else { return Ok(false) };
        let tf = std::time::Instant::now();
        let items = batch.iter().map(|(b, rows)| {
            let (_, a) = &self.pending[b];
            Ok(FoldRows { b: *b, partial: a.buf.as_slice()?, set_fresh: !a.fresh, rows: rows.clone(), face_folded: a.face })
        }).collect::<Result<Vec<_>>>().map_err(|e| (first, e))?;
        // Slabs with nothing to write (a box's fresh rows already in the volume) make no pass.
        let mut fold = || self.tiling.fold_rows(out, &items);
        let passed = match fold_pool() {
            Some(pool) => pool.install(fold),
            None => fold(),
        }.map_err(|e| (first, e.context(format!("adding boxes {first}.. into the volume"))))?;
        if passed {
            self.busy += tf.elapsed().as_secs_f64();
            self.passes += 1;
            if let Some((t0, log)) = self.log.as_mut() {
                log.push(format!("{:7.2} ms: pass {:.2} ms over {:?}", (tf - *t0).as_secs_f64() * 1e3, tf.elapsed().as_secs_f64() * 1e3,
                    batch.iter().map(|(b, r)| format!("{b}:{}..{}", r.start, r.end)).collect::<Vec<_>>()));
            }
        }
        for (b, _) in &batch {
            self.pending.get_mut(b).unwrap().1.slabs.pop_front();
        }
        for b in boxes {
            if self.pending[&b].1.slabs.is_empty() {
                let (k, a) = self.pending.remove(&b).unwrap();
                pools[k].give(a.buf);
                self.boxes_done += 1;
                self.done[b] = true;
            }
        }
        while self.done.get(self.prefix) == Some(&true) {
            self.prefix += 1;
        }
        Ok(true)
    }

    /// Waits for every slab still coming down and gives the buffers back (a job that stops: no
    /// device may go on writing host memory once it has returned).
    pub(super) fn drain(self, pools: &[CubePool]) {
        for (_, (k, a)) in self.pending {
            a.settle();
            pools[k].give(a.buf);
        }
    }
}

/// A volume sample that is not finite, found while writing the cubes ([`Fragmented::process`]
/// then names the first one with [`validate_volume`]).
#[derive(Debug, thiserror::Error)]
#[error("the volume has a sample that is not finite")]
pub(super) struct NotFinite;

/// Host buffers for box partial sums per engine in [`Fragmented::process`]: one the device
/// downloads into, one waiting for (or in) the ordered fold, one spare for an out-of-order box.
/// (Five instead of three made no difference on 4 x H200: 2.77-3.76x against 3.46-3.72x, same
/// machine.)
pub(super) const HOST_BOXES: usize = 3;

/// An engine's host buffers: its box partial sums (the free ones, and how many exist) and the
/// buffer it copies each cube's raw samples into. Made on first use, page-locked on a GPU, so a
/// processing job of many volumes pays their allocation once.
#[derive(Default)]
pub(super) struct CubePool {
    pub(super) state: Mutex<(Vec<HostSamples>, usize)>,
    pub(super) ready: Condvar,
    pub(super) raw: Mutex<Option<HostSamples>>,
}

impl CubePool {
    /// A free buffer (made with `make` while fewer than [`HOST_BOXES`] exist, else waiting for the
    /// fold to give one back); `None` once `stop` is set.
    pub(super) fn take(&self, stop: &std::sync::atomic::AtomicBool, make: impl FnOnce() -> Result<HostSamples>) -> Result<Option<HostSamples>> {
        let mut g = self.state.lock().map_err(|_| anyhow::anyhow!("cube buffer pool poisoned"))?;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(b) = g.0.pop() {
                return Ok(Some(b));
            }
            if g.1 < HOST_BOXES {
                g.1 += 1;
                drop(g);
                return make().map(Some);
            }
            g = self.ready.wait_timeout(g, std::time::Duration::from_millis(50))
                .map_err(|_| anyhow::anyhow!("cube buffer pool poisoned"))?.0;
        }
    }
    pub(super) fn give(&self, b: HostSamples) {
        if let Ok(mut g) = self.state.lock() {
            g.0.push(b);
        }
        self.ready.notify_all();
    }
    pub(super) fn wake(&self) { self.ready.notify_all(); }
    /// After a failed job: the buffers that did not come back are forgotten.
    pub(super) fn recount(&self) {
        if let Ok(mut g) = self.state.lock() {
            g.1 = g.0.len();
        }
    }
}
