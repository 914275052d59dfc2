//! The pipelined end-to-end search: bands of parameter traces over three streams, so that the
//! upload, the aperture fill, the kernels and the downloads overlap.

use super::*;

/// Cumulative fractions of the parameter traces (grid order) that end the bands of the pipelined
/// [`FastEngine::estimate`]: a small first band, so that the kernels start as soon as the first
/// traces are on the device, and a small last band, so that little is left to copy back after the
/// last kernel. Traces in gather order follow the parameter-trace rows on sorted surveys (the
/// cross-spread: source-major, y = source); on other orders the first band simply waits longer.
/// Measured on the H100 (crossspread-3d, one run, seven layouts through [`FastEngine::estimate_bands`]): these four bands
/// 151.8 ms end to end against 154.5 ms for the seven bands used before (1/32, 1/8, 1/4, 1/2, 3/4, 15/16, 1):
/// fewer band boundaries, fewer partly filled waves of the sliding scan.
pub const BAND_ENDS: [f64; 4] = [1.0 / 32.0, 1.0 / 8.0, 1.0 / 2.0, 1.0];
/// Most bands the engine has events for.
pub const MAX_BANDS: usize = 16;
/// Chunks (of whole traces) the pipelined upload is split into.
pub const PIPE_CHUNKS: usize = 16;

/// Ends (in traces, ascending, the last = `ntr`) of the (at most `n`) chunks of the pipelined
/// upload: band 0's traces (`first_need`) end a chunk, so that the first launch waits for exactly
/// them, in at least two chunks (the second's copy overlaps the first's DMA) and in their share of
/// the `n` otherwise (a band 0 that reads most of the gather keeps the copy/DMA overlap of even
/// chunks); the rest of the gather evenly in the other chunks.
pub fn chunk_ends(ntr: usize, first_need: usize, n: usize) -> Vec<usize> {
    let n = n.max(3);
    let f = first_need.clamp(1, ntr);
    let k0 = if f == ntr { n } else { ((n * f) as f64 / ntr as f64).round().clamp(2.0, (n - 1) as f64) as usize };
    let mut v: Vec<usize> = (1..=k0).map(|k| (f * k).div_ceil(k0)).collect();
    let k1 = n - k0;
    v.extend((1..=k1).map(|k| f + ((ntr - f) * k).div_ceil(k1)));
    v.dedup();
    v
}

/// Contiguous bands `(p0, p1)` of `np` parameter traces ending at the cumulative fractions `ends`
/// (empty bands dropped; the last band always ends at `np`).
pub fn bands(np: usize, ends: &[f64]) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    let mut p0 = 0;
    for &f in ends {
        let p1 = ((np as f64 * f).round() as usize).clamp(p0, np);
        if p1 > p0 {
            v.push((p0, p1));
            p0 = p1;
        }
    }
    if p0 < np {
        v.push((p0, np));
    }
    v
}

/// For each band, the prefix of the gather (in traces) that it and every earlier band read: one
/// past the largest trace index in any of their apertures.
pub fn band_needs(ap: &Apertures, bands: &[(usize, usize)]) -> Vec<usize> {
    // Lists are ascending: the last entry is the largest.
    band_needs_by(bands, |phase, p| ap.list(phase, p).last().copied())
}

/// [`band_needs`] from the largest entry `last(phase, p)` of each list (`None`: empty), e.g.
/// [`crate::nlbf::ApertureFill::last`] before the lists are filled.
pub fn band_needs_by(bands: &[(usize, usize)], last: impl Fn(usize, usize) -> Option<u32>) -> Vec<usize> {
    let mut need = 0usize;
    bands
        .iter()
        .map(|&(p0, p1)| {
            for phase in 0..3 {
                for p in p0..p1 {
                    if let Some(t) = last(phase, p) {
                        need = need.max(t as usize + 1);
                    }
                }
            }
            need
        })
        .collect()
}

/// Aperture offsets of each band as the kernels read them (3 x (band length + 1), phase-major, the
/// values positions in the whole index list, so the index list itself is shared), concatenated;
/// and where each band's offsets start.
pub fn band_offsets(ap: &Apertures, bands: &[(usize, usize)]) -> (Vec<u32>, Vec<usize>) {
    let mut off = Vec::with_capacity(3 * (ap.np + bands.len()));
    let mut start = Vec::with_capacity(bands.len());
    for &(p0, p1) in bands {
        start.push(off.len());
        for phase in 0..3 {
            let o = phase * (ap.np + 1);
            off.extend_from_slice(&ap.off[o + p0..=o + p1]);
        }
    }
    (off, start)
}

/// Where the time of the last pipelined [`FastEngine::estimate`] went (ms).
#[derive(Debug, Clone, Copy, Default)]
pub struct PipelineTimes {
    /// Host: the setup's first pass and band 0's aperture lists (all cores, before the staging: the
    /// first launch waits for them), the plan and the geometry uploads queued.
    pub setup_ms: f64,
    /// Host: the other bands' aperture lists (one thread, overlapping the staging and the kernels).
    pub fill_ms: f64,
    /// Host: staging every chunk (copy and finiteness check) and queueing uploads and launches.
    pub stage_ms: f64,
    /// Host: after the last band's results were in page-locked memory, until they were copied out.
    pub tail_ms: f64,
    /// Host: the whole call.
    pub wall_ms: f64,
    /// GPU events: start -> last chunk on the device.
    pub upload_ms: f64,
    /// GPU events: start -> first sliding scan starts (what the pipeline did not hide).
    pub lead_ms: f64,
    /// GPU events: first sliding scan starts -> last C scan done.
    pub kernels_ms: f64,
    /// GPU events: last C scan done -> last band's results in page-locked memory.
    pub download_ms: f64,
    pub bands: usize,
}

impl std::fmt::Display for PipelineTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bands; GPU: first kernel starts at {:.1} ms, upload done at {:.1} ms, kernels {:.1} ms, last \
            download {:.2} ms; host: setup to band 0 ready {:.2} ms, other bands' lists {:.1} ms (overlapped), \
            staging+queueing {:.1} ms, copy-out tail {:.2} ms, wall {:.1} ms", self.bands, self.lead_ms, self.upload_ms,
            self.kernels_ms, self.download_ms, self.setup_ms, self.fill_ms, self.stage_ms, self.tail_ms, self.wall_ms)
    }
}

/// Streams, events and the band-offset buffer of the pipelined engine. The C-scan stream has the
/// highest priority: each band's C scan takes SMs as soon as its picks exist, so only the last
/// band's is left once the sliding scans end.
pub(super) struct Pipe {
    pub(super) up: Arc<CudaStream>,
    pub(super) slide: Arc<CudaStream>,
    pub(super) cscan: Arc<CudaStream>,
    /// Download of the first part of the last band's results ([`last_band_split`]).
    pub(super) down: Arc<CudaStream>,
    /// That part's C scan done (C-scan stream) and its results in page-locked memory (download stream).
    pub(super) part_done: CudaEvent,
    pub(super) part_back: CudaEvent,
    /// Main-stream work before the call.
    pub(super) ready: CudaEvent,
    pub(super) chunk: Vec<CudaEvent>,
    /// A band's aperture lists on the device (upload stream).
    pub(super) listed: Vec<CudaEvent>,
    pub(super) slid: Vec<CudaEvent>,
    pub(super) done: Vec<CudaEvent>,
    pub(super) band_off: CudaSlice<u32>,
    /// Timing: start, last chunk uploaded, first sliding scan starts, last C scan done, downloads done.
    pub(super) t: [CudaEvent; 5],
    pub(super) host: PipelineTimes,
}

impl Pipe {
    pub(super) fn new(gpu: &Gpu, np: usize) -> Result<Pipe> {
        let ctx = gpu.context();
        let sync = || ctx.new_event(None).map_err(drv("creating an event"));
        let timed = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(drv("creating an event"));
        let stream = || ctx.new_stream().map_err(drv("creating a stream"));
        let (_, highest) = cudarc::driver::result::stream::get_priority_range().unwrap_or((0, 0));
        let cscan = ctx.new_stream_with_priority(highest).map_err(drv("creating a stream"))?;
        Ok(Pipe {
            up: stream()?,
            slide: stream()?,
            cscan,
            down: stream()?,
            part_done: sync()?,
            part_back: sync()?,
            ready: sync()?,
            chunk: (0..PIPE_CHUNKS).map(|_| sync()).collect::<Result<_>>()?,
            listed: (0..MAX_BANDS).map(|_| sync()).collect::<Result<_>>()?,
            slid: (0..MAX_BANDS).map(|_| sync()).collect::<Result<_>>()?,
            done: (0..MAX_BANDS).map(|_| sync()).collect::<Result<_>>()?,
            band_off: gpu.zeros::<u32>(3 * (np + MAX_BANDS))?,
            t: [timed()?, timed()?, timed()?, timed()?, timed()?],
            host: PipelineTimes::default(),
        })
    }
}

/// Parameter traces of the first part of the last band's C scan (0: not split). Only the last
/// band's C scan runs after the sliding scans; in two launches (7/8, 1/8 of it) the first part's
/// download (~0.3 ms on the cross-spread) and copy-out (~0.5 ms) overlap the second part's compute,
/// so only 1/8 of them remains after the last kernel. Results do not depend on it.
pub fn last_band_split(npb: usize) -> usize {
    // From two parameter traces on (at least one in each part), so the small test workloads split too.
    if npb >= 2 { npb - (npb / 8).max(1) } else { 0 }
}

/// Raw device addresses the band launches use (ordered by the pipe's events, not by cudarc's
/// per-buffer tracking).
pub(super) struct Ptrs {
    pub(super) data: DevPtr<f32>,
    pub(super) tx: DevPtr<f32>,
    pub(super) ty: DevPtr<f32>,
    pub(super) px: DevPtr<f32>,
    pub(super) py: DevPtr<f32>,
    pub(super) idx: DevPtr<u32>,
    pub(super) vals: DevPtr<f32>,
    pub(super) picks: DevPtr<u32>,
    pub(super) pick_s: DevPtr<f32>,
    pub(super) code: DevPtr<u32>,
    pub(super) sem: DevPtr<f32>,
    pub(super) off: DevPtr<u32>,
}

/// One gather's setup split into bands, with the launches queued so far.
pub(super) struct Banded {
    /// The setup without its index list (`apertures.idx` empty: the lists go up band by band
    /// from the engine's page-locked `stage_idx`).
    pub(super) setup: Setup,
    pub(super) bands: Vec<(usize, usize)>,
    pub(super) need: Vec<usize>,
    /// Kept alive until the end of the call: the source of an asynchronous copy.
    pub(super) _off: Vec<u32>,
    pub(super) off_start: Vec<usize>,
    pub(super) ptrs: Ptrs,
    /// Bands whose aperture lists are queued for upload.
    pub(super) listed: usize,
    pub(super) next: usize,
}

impl Banded {
    /// Plans the kernels for `setup` (its offsets and bounds are final, its lists not yet filled),
    /// takes the bands' needs from the lists' last entries (`fill`), and queues the geometry
    /// uploads on the sliding-scan stream (ahead of its first launch).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prepare(gpu: &Gpu, setup: Setup, fill: &ApertureFill, bands: Vec<(usize, usize)>, tuning: Tuning, plan: &mut FastPlan,
        bufs: &mut FastBuffers, pipe: &mut Pipe) -> Result<Banded> {
        *plan = FastPlan::tuned(gpu, &setup, tuning).map_err(NlbfError::Invalid)?;
        if setup.estimations() != bufs.code.len() || setup.ntr() != bufs.tx.len() || setup.np() != bufs.px.len()
            || setup.tables.vals.len() != bufs.vals.len() || setup.apertures.off.len() != bufs.ap_off.len() {
            return Err(NlbfError::Invalid("FastEngine: the gather's geometry differs from the engine's".into()));
        }
        let st = pipe.slide.clone();
        if fill.total() > bufs.ap_idx.len() {
            bufs.ap_idx = gpu.zeros::<u32>(fill.total())?;
            pipe.ready.record(gpu.stream()).map_err(drv("recording an event"))?;
            for s in [&pipe.up, &st] {
                s.wait(&pipe.ready).map_err(drv("ordering streams"))?;
            }
        }
        let need = band_needs_by(&bands, |phase, p| fill.last(phase, p));
        let (off, off_start) = band_offsets(&setup.apertures, &bands);
        let ptrs = Ptrs {
            data: dptr(&bufs.data, &st),
            tx: dptr_mut(&mut bufs.tx, &st),
            ty: dptr_mut(&mut bufs.ty, &st),
            px: dptr_mut(&mut bufs.px, &st),
            py: dptr_mut(&mut bufs.py, &st),
            idx: dptr_mut(&mut bufs.ap_idx, &st),
            vals: dptr_mut(&mut bufs.vals, &st),
            picks: dptr_mut(&mut bufs.picks, &st),
            pick_s: dptr_mut(&mut bufs.pick_s, &st),
            code: dptr_mut(&mut bufs.code, &st),
            sem: dptr_mut(&mut bufs.sem, &st),
            off: dptr_mut(&mut pipe.band_off, &st),
        };
        // Pageable sources: each call returns once the driver has staged them; they stay alive in
        // `setup` / `off` until the call ends anyway.
        unsafe {
            htod(&st, ptrs.tx, &setup.tx)?;
            htod(&st, ptrs.ty, &setup.ty)?;
            htod(&st, ptrs.px, &setup.px)?;
            htod(&st, ptrs.py, &setup.py)?;
            htod(&st, ptrs.vals, &setup.tables.vals)?;
            htod(&st, ptrs.off, &off)?;
        }
        Ok(Banded { setup, bands, need, _off: off, off_start, ptrs, listed: 0, next: 0 })
    }

    /// Queues the upload of band `b`'s aperture lists (`pieces[phase]`, page-locked, filled) to
    /// their place in the device's index list on the upload stream, with the band's event; bands
    /// come in order. The pieces must stay untouched until the call's streams are synchronized.
    pub(super) fn queue_lists(&mut self, pipe: &Pipe, b: usize, pieces: &[&mut [u32]; 3]) -> Result<()> {
        if b != self.listed {
            return Err(NlbfError::Invalid(format!("FastEngine: aperture lists of band {b} came before band {}", self.listed)));
        }
        let (np, (p0, _)) = (self.setup.np(), self.bands[b]);
        for (phase, piece) in pieces.iter().enumerate() {
            if piece.is_empty() {
                continue;
            }
            let start = self.setup.apertures.off[phase * (np + 1) + p0] as usize;
            unsafe { htod(&pipe.up, self.ptrs.idx.offset(start), &piece[..])? };
        }
        pipe.listed[b].record(&pipe.up).map_err(drv("recording an event"))?;
        self.listed += 1;
        Ok(())
    }

    /// Queues every band not yet launched whose aperture lists are queued and whose traces are among
    /// the first `uploaded` chunks (ending at traces `cend`, each with its event on the upload stream): its
    /// sliding scan after its lists and the chunk holding its last trace, its C scan and download
    /// after its sliding scan.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_ready(&mut self, gpu: &Gpu, plan: &FastPlan, pipe: &Pipe, uploaded: usize, cend: &[usize], oc: &mut [u32],
        os: &mut [f32]) -> Result<()> {
        let ev = |e: &CudaEvent, s: &CudaStream| e.record(s).map_err(drv("recording an event"));
        let s = &self.setup;
        let t = &s.tables;
        let (ns, ns32) = (s.ns, s.ns as u32);
        let (na, nb, nc, nd, ne) = (t.na as u32, t.nb as u32, t.nc as u32, t.nd as u32, t.ne as u32);
        let q = &self.ptrs;
        // The first chunk that ends at or after the band's need.
        let chunk_of = |need: usize| cend.partition_point(|&e| e < need.max(1));
        while self.next < self.listed && chunk_of(self.need[self.next]) < uploaded {
            let b = self.next;
            let (p0, p1) = self.bands[b];
            let npb = (p1 - p0) as u32;
            let chunk = chunk_of(self.need[b]);
            pipe.slide.wait(&pipe.chunk[chunk]).map_err(drv("ordering streams"))?;
            pipe.slide.wait(&pipe.listed[b]).map_err(drv("ordering streams"))?;
            if b == 0 {
                ev(&pipe.t[2], &pipe.slide)?;
            }
            let (px, py) = (q.px.offset(p0), q.py.offset(p0));
            // Both phases' picks: 2 ns per parameter trace.
            let (picks, pick_s) = (q.picks.offset(2 * p0 * ns), q.pick_s.offset(2 * p0 * ns));
            let off = q.off.offset(self.off_start[b]);
            let cfg = LaunchConfig { grid_dim: (npb * plan.nchunks, 2, 1), ..plan.slide_cfg };
            launch!(on pipe.slide, gpu, plan.slide_kernel, cfg, &ns32, &npb, &plan.nchunks, &s.inv_dt, &plan.smax,
                &plan.span, &plan.mmax, &q.data, &q.tx, &q.ty, &px, &py, &off, &q.idx, &q.vals, &na, &nb, &nc, &nd, &ne,
                &picks, &pick_s)?;
            ev(&pipe.slid[b], &pipe.slide)?;
            pipe.cscan.wait(&pipe.slid[b]).map_err(drv("ordering streams"))?;
            let off3 = off.offset(2 * (npb as usize + 1));
            let last = b + 1 == self.bands.len();
            // The C scan in parts of the band's parameter traces [a, z) (band-local): one, or for the
            // last band two (see `last_band_split`), the first part's results downloaded on the
            // download stream while the second computes. A part's launch keeps the band's count as
            // `np` (the phase-2 picks lie np * ns after the phase-1 ones) and shifts its pointers.
            let split = if last { last_band_split(npb as usize) } else { 0 };
            let parts: &[(usize, usize)] = if split > 0 { &[(0, split), (split, npb as usize)] } else { &[(0, npb as usize)] };
            for (i, &(a, z)) in parts.iter().enumerate() {
                let pa = p0 + a;
                let (px, py, off3) = (q.px.offset(pa), q.py.offset(pa), off3.offset(a));
                let picks = picks.offset(a * ns);
                let (code, sem) = (q.code.offset(pa * ns), q.sem.offset(pa * ns));
                let cfg = LaunchConfig { grid_dim: ((z - a) as u32 * plan.nchunks3, 1, 1), ..plan.cscan_cfg };
                let func = plan.cscan_function(gpu, &cfg)?;
                launch!(on pipe.cscan, gpu, plan.cscan_kernel => &func, cfg, &ns32, &npb, &plan.nchunks3, &s.inv_dt, &plan.smax3,
                    &plan.span3, &q.data, &q.tx, &q.ty, &px, &py, &off3, &q.idx, &q.vals, &na, &nb, &nc, &nd, &ne, &picks, &code,
                    &sem)?;
                let (lo, hi) = (pa * ns, (p0 + z) * ns);
                if i + 1 < parts.len() {
                    // First part of a split band: its download on the download stream.
                    ev(&pipe.part_done, &pipe.cscan)?;
                    pipe.down.wait(&pipe.part_done).map_err(drv("ordering streams"))?;
                    unsafe {
                        dtoh(&pipe.down, &mut oc[lo..hi], code)?;
                        dtoh(&pipe.down, &mut os[lo..hi], sem)?;
                    }
                    ev(&pipe.part_back, &pipe.down)?;
                    continue;
                }
                if last {
                    ev(&pipe.t[3], &pipe.cscan)?;
                }
                unsafe {
                    dtoh(&pipe.cscan, &mut oc[lo..hi], code)?;
                    dtoh(&pipe.cscan, &mut os[lo..hi], sem)?;
                }
            }
            if split > 0 {
                // `done` (and the timing event) cover the whole band.
                pipe.cscan.wait(&pipe.part_back).map_err(drv("ordering streams"))?;
            }
            ev(&pipe.done[b], &pipe.cscan)?;
            if last {
                ev(&pipe.t[4], &pipe.cscan)?;
            }
            self.next += 1;
        }
        Ok(())
    }
}
