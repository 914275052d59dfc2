//! Many machines through MPI (cargo feature `mpi`; rsmpi over the system's Open MPI).
//!
//! The same work items as on several local devices (`--gpus`), split across ranks: rank r takes a
//! contiguous block of the items (`super::split::block_share`) and runs them on its local devices
//! (its GPUs, or CPU work queues) with the same [`super::Job`] ([`run_rank`]) or [`super::QueueJob`]
//! ([`run_rank_queue`]: the rank's block through the queue, folded in item order), reading only the
//! input its items need where the format allows ([`read_trace_share`]: SEG-Y trace ranges, .npy
//! rows; [`read_layout`] and [`read_traces`]: every header, then only the traces a rank's items
//! touch). A rank's result is its devices' parts reduced in device order; images are summed over
//! the ranks in rank order (one image per rank crosses the network, not one per item). With one
//! device per rank this is exactly the single-process run on as many devices, bit for bit.
//! What an algorithm reads or writes of its own (the traces of chosen gathers, slabs of a volume)
//! is in its folder (`<algorithm>/distributed.rs`), built on the pieces here.
//!
//! Every rank writes its part of the output into one file ([`write_shares`]: a temporary file
//! beside the target, which every rank opens, renamed by rank 0 once every rank has written and
//! synced its bytes; the file system must be one every rank sees): images summed scattered (each
//! rank sums its block over the ranks, [`write_npy_sum`], [`write_segy_sum`]); rank 0 writes only
//! small descriptions ([`write_on_root`]).
//!
//! Failures: each phase (reading, planning, computing, writing) ends with [`Cluster::agree`], a
//! collective in which every rank learns every rank's outcome; when one failed, every rank
//! returns the same [`JobFailed`] error naming the ranks, the phase and the work items, and the
//! job exits non-zero with nothing half-written. Only the main thread calls MPI (threading level
//! `Funneled`); device threads never do.

use std::ops::Range;
use std::path::Path;

use anyhow::{bail, ensure, Context};
use mpi::datatype::PartitionMut;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;

use crate::backend::{Backend, DeviceChoice};
use super::devices::{self, GpuCount};
use super::split::block_share;
use super::{Job, QueueJob};
use crate::runtime::Gpu;
use crate::traces::{TraceHeader, TraceSet};

/// Whether an MPI launcher (Open MPI's mpirun, a PMI/PMIx launcher such as srun) started this
/// process: then the CLI initialises MPI without being asked (`--mpi`).
pub fn launched_by_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"].iter().any(|v| std::env::var_os(v).is_some())
}

/// Initialises MPI; keep the universe alive until the end of `main` (dropping it finalises MPI).
pub fn init() -> anyhow::Result<mpi::environment::Universe> {
    let (universe, level) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .context("MPI could not be initialised (is this an MPI launch, with Open MPI installed?)")?;
    ensure!(level >= mpi::Threading::Funneled, "the MPI library offers thread level {level:?}, seisgpu needs Funneled");
    Ok(universe)
}

/// The ranks of the job.
pub struct Cluster {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
}

pub use mpi::environment::Universe;

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cluster {{ rank {} of {} }}", self.rank, self.size)
    }
}

/// The failure of a phase on one or more ranks: the same error on every rank.
#[derive(Debug)]
pub struct JobFailed {
    pub phase: String,
    /// (rank, what failed there).
    pub failures: Vec<(usize, String)>,
    /// What the first failure is (the exit status: bad input on one rank is bad input for the job).
    pub kind: crate::ErrorKind,
}

impl std::fmt::Display for JobFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MPI job failed while {}: ", self.phase)?;
        for (k, (rank, msg)) in self.failures.iter().enumerate() {
            write!(f, "{}rank {rank}: {msg}", if k > 0 { "; " } else { "" })?;
        }
        Ok(())
    }
}

impl std::error::Error for JobFailed {}

/// Message tag of item results (non-overtaking order between two ranks keeps them in item order).
const ITEM_TAG: mpi::Tag = 9;
/// Largest piece of one message (elements): MPI counts are C ints.
const PIECE: usize = 1 << 28;

impl Cluster {
    /// The job's world, once MPI is initialised (`None` otherwise). Not collective.
    pub fn world() -> Option<Cluster> {
        if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
            return None;
        }
        let world = SimpleCommunicator::world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        Some(Cluster { world, rank, size })
    }

    pub fn rank(&self) -> usize { self.rank }
    pub fn size(&self) -> usize { self.size }
    /// This rank's number among the ranks on its machine (which of the machine's GPUs it takes).
    /// Collective.
    pub fn local_rank(&self) -> usize { self.world.split_shared(self.rank as i32).rank() as usize }
    pub fn is_root(&self) -> bool { self.rank == 0 }

    /// This rank's block of `n` work items.
    pub fn share(&self, n: usize) -> Range<usize> { block_share(n, self.size, self.rank) }

    /// Ends the job at once (every rank), after printing `msg`: for failures outside a phase that
    /// the other ranks cannot learn of through [`Cluster::agree`].
    pub fn abort(&self, msg: &str) -> ! {
        eprintln!("error (rank {} of {}): {msg}", self.rank, self.size);
        self.world.abort(1)
    }

    /// Collective end of a phase: every rank learns every rank's outcome. All succeeded: this
    /// rank's value. Otherwise every rank gets the same [`JobFailed`] naming the failed ranks and
    /// their errors (work item, trace, device as the error says).
    pub fn agree<T>(&self, phase: &str, local: anyhow::Result<T>) -> anyhow::Result<T> {
        use crate::ErrorKind;
        const KINDS: [ErrorKind; 5] = [ErrorKind::Parameter, ErrorKind::Input, ErrorKind::Gpu, ErrorKind::Io, ErrorKind::Internal];
        // A failure: its kind's index in KINDS, then its message.
        let msg = match &local {
            Ok(_) => Vec::new(),
            Err(e) => {
                let kind = ErrorKind::of(e);
                std::iter::once(KINDS.iter().position(|&k| k == kind).unwrap_or(KINDS.len() - 1) as u8).chain(format!("{e:#}").into_bytes()).collect()
            }
        };
        let all = self.all_gather_bytes(&msg);
        let failures: Vec<(usize, ErrorKind, String)> = all
            .into_iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .map(|(r, m)| (r, KINDS.get(m[0] as usize).copied().unwrap_or(ErrorKind::Internal), String::from_utf8_lossy(&m[1..]).into_owned()))
            .collect();
        if failures.is_empty() {
            local
        } else {
            let kind = failures[0].1;
            Err(JobFailed { phase: phase.to_string(), failures: failures.into_iter().map(|(r, _, m)| (r, m)).collect(), kind }.into())
        }
    }

    /// Every rank's bytes, in rank order.
    fn all_gather_bytes(&self, local: &[u8]) -> Vec<Vec<u8>> {
        let parts = self.all_gather_varcount(local);
        parts.into_iter().map(|r| r.to_vec()).collect()
    }

    /// Every rank's `local` slice, in rank order.
    pub(crate) fn all_gather_varcount<T: Equivalence + Default + Clone>(&self, local: &[T]) -> Vec<Vec<T>> {
        // One leading filler element per rank: empty buffers are dangling pointers that can be
        // equal for the send and receive sides, which MPI rejects as aliasing (MPI_ERR_ARG).
        let padded: Vec<T> = std::iter::once(T::default()).chain(local.iter().cloned()).collect();
        let local = &padded[..];
        let n = local.len() as Count;
        let mut counts = vec![0 as Count; self.size];
        self.world.all_gather_into(&n, &mut counts[..]);
        let displs: Vec<Count> = counts.iter().scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        }).collect();
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut buf = vec![T::default(); total];
        {
            let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(local, &mut part);
        }
        (0..self.size).map(|r| buf[displs[r] as usize + 1..(displs[r] + counts[r]) as usize].to_vec()).collect()
    }

    /// Every rank's trace headers, concatenated in rank order (the ranks' shares are contiguous
    /// and in rank order, so this is the input's header list).
    pub fn all_gather_headers(&self, local: &[TraceHeader]) -> anyhow::Result<Vec<TraceHeader>> {
        const F: usize = 12;
        ensure!(local.len() * F < i32::MAX as usize, "{} trace headers on one rank: too many for one MPI message", local.len());
        let packed: Vec<f64> = local.iter().flat_map(|h| {
            [h.sx, h.sy, h.gx, h.gy, h.offset, h.cdp as f64, h.inline as f64, h.crossline as f64, h.ffid as f64,
                h.channel as f64, h.source_station as f64, h.receiver_station as f64]
        }).collect();
        let all = self.all_gather_varcount(&packed);
        ensure!(all.iter().map(|v| v.len()).sum::<usize>() < i32::MAX as usize, "trace headers exceed one MPI message");
        Ok(all.concat().chunks(F).map(|v| TraceHeader {
            sx: v[0], sy: v[1], gx: v[2], gy: v[3], offset: v[4], cdp: v[5] as i32, inline: v[6] as i32, crossline: v[7] as i32,
            ffid: v[8] as i32, channel: v[9] as i32, source_station: v[10] as i32, receiver_station: v[11] as i32,
            ..Default::default()
        }).collect())
    }

    /// Sends `v` to `dest` (length first, then pieces below the C-int count limit).
    pub(crate) fn send_vec<T: Equivalence>(&self, dest: usize, v: &[T]) {
        let p = self.world.process_at_rank(dest as i32);
        p.send_with_tag(&(v.len() as u64), ITEM_TAG);
        for piece in v.chunks(PIECE) {
            p.send_with_tag(piece, ITEM_TAG);
        }
    }

    pub(crate) fn receive_vec<T: Equivalence + Default + Clone>(&self, src: usize) -> Vec<T> {
        let p = self.world.process_at_rank(src as i32);
        let mut n = 0u64;
        p.receive_into_with_tag(&mut n, ITEM_TAG);
        let mut v = vec![T::default(); n as usize];
        for piece in v.chunks_mut(PIECE) {
            p.receive_into_with_tag(piece, ITEM_TAG);
        }
        v
    }

    /// The rank-order sum, scattered: the image is `units` units of `unit` values, rank r gets the
    /// sum over the ranks of its block of units ([`block_share`]), each rank's part added in
    /// rank order as [`super::reduce::sum_in_order`] adds whole images (the same bits as one rank-order sum
    /// of the whole images). `local` is this rank's image (`None`: no work items, left out of the sum). Steps r = 0,
    /// 1, ...: in step r every other rank sends rank r its block, which rank r receives in rank
    /// order (no cycle of blocked sends). Call after an [`agree`](Self::agree) that every rank
    /// passed, with every image `units * unit` long.
    pub fn sum_ranks_scattered(&self, local: Option<Vec<f32>>, units: usize, unit: usize) -> (Range<usize>, anyhow::Result<Vec<f32>>) {
        let block = |r: usize| {
            let b = block_share(units, self.size, r);
            b.start * unit..b.end * unit
        };
        let mut parts: Vec<Vec<f32>> = Vec::new();
        for r in 0..self.size {
            let piece = local.as_ref().map_or(&[][..], |v| &v[block(r)]);
            if r != self.rank {
                self.send_vec(r, piece);
                continue;
            }
            for q in 0..self.size {
                parts.push(if q == self.rank { piece.to_vec() } else { self.receive_vec(q) });
            }
        }
        let mine = block_share(units, self.size, self.rank);
        let parts: Vec<Vec<f32>> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let sum = if mine.is_empty() {
            Ok(Vec::new())
        } else {
            super::reduce::sum_in_order(parts).context("no rank holds a partial image")
        };
        (mine, sum)
    }

    /// Rank 0's `v` on every rank (every rank's `v` has the same length), in pieces below the
    /// C-int count limit.
    pub fn broadcast_from_root<T: Equivalence>(&self, v: &mut [T]) {
        let root = self.world.process_at_rank(0);
        for piece in v.chunks_mut(PIECE) {
            root.broadcast_into(piece);
        }
    }

    /// Element-wise sum over the ranks into `out` (integers: any order gives the same sum). Collective.
    pub fn sum_counts(&self, local: &[u64], out: &mut [u64]) {
        self.world.all_reduce_into(local, out, mpi::collective::SystemOperation::sum());
    }

    /// Element-wise sum over the ranks into `out` (MPI's order of additions). Collective.
    pub fn sum_reals(&self, local: &[f64], out: &mut [f64]) {
        self.world.all_reduce_into(local, out, mpi::collective::SystemOperation::sum());
    }

    /// The largest of the ranks' values. Collective.
    pub fn max(&self, local: f32) -> f32 {
        let mut m = 0.0f32;
        self.world.all_reduce_into(&local, &mut m, mpi::collective::SystemOperation::max());
        m
    }

    /// This rank's devices (collective). Without `--gpus`: one, the GPU `ordinal + local rank` (modulo the
    /// GPUs on the machine: one rank per GPU is the usual launch) or the CPU. With `--gpus N`:
    /// N GPUs from `local rank * N` on (N CPU work queues with `--device cpu`); `all`: every GPU.
    pub fn local_devices(&self, choice: DeviceChoice, ordinal: usize, count: Option<GpuCount>)
        -> anyhow::Result<(Vec<Backend>, String)> {
        let local_rank = self.local_rank();
        let visible = if choice == DeviceChoice::Cpu { 0 } else { Gpu::device_count() };
        let gpus_usable = visible > 0;
        match (choice, count, gpus_usable) {
            (DeviceChoice::Cpu, Some(c), _) | (DeviceChoice::Auto, Some(c), false) => Ok(devices::backends(DeviceChoice::Cpu, c)?),
            (DeviceChoice::Cpu, None, _) | (DeviceChoice::Auto, None, false) => {
                Ok((vec![Backend::Cpu], format!("CPU ({} threads)", rayon::current_num_threads())))
            }
            (DeviceChoice::Gpu, _, false) => crate::bail_param!("device", "--device gpu: no GPU on this machine (rank {})", self.rank),
            (_, Some(GpuCount::All), true) => Ok(devices::backends(DeviceChoice::Gpu, GpuCount::All)?),
            (_, c, true) => {
                let n = match c {
                    Some(GpuCount::N(n)) => n,
                    _ => 1,
                };
                crate::ensure_param!(n <= visible, "gpus", "--gpus {n}: {visible} GPUs on this machine (rank {})", self.rank);
                let first = if c.is_some() { local_rank * n } else { ordinal + local_rank };
                let mut out = Vec::with_capacity(n);
                for k in 0..n {
                    out.push(Backend::Gpu(Gpu::open((first + k) % visible)?));
                }
                let names: Vec<String> = out.iter().filter_map(|b| b.gpu().map(|g| format!("{}: {}", g.info().ordinal, g.info().name)))
                    .collect();
                Ok((out, format!("{} GPU(s) ({})", n, names.join(", "))))
            }
        }
    }
}

/// A rank's part of a migration image: the image's description (its `data` left empty) and the
/// sum of this rank's devices' images (`None`: the rank had no work items). The ranks' parts are
/// summed by [`write_npy_sum`] or [`write_segy_sum`] (each rank writing its block of the sum).
pub struct RankImage<I> {
    pub image: I,
    pub partial: Option<Vec<f32>>,
}

/// Sums the ranks' partial images and writes the sum as a float32 .npy file of `shape`, each rank
/// summing and writing its own block: the image is cut into `units` of `unit_in` values (whole
/// image traces), rank r sums its block of units over the ranks in rank order (the same bits as
/// one sum on rank 0) and writes the first `unit_out` values of each unit (a padded image drops
/// its padding) at their place in the file ([`write_shares`]). Collective.
pub fn write_npy_sum(cluster: &Cluster, path: &Path, shape: &[usize], partial: Option<Vec<f32>>, unit_in: usize, unit_out: usize)
    -> anyhow::Result<()> {
    let out_len: usize = shape.iter().product();
    ensure!(unit_out > 0 && unit_out <= unit_in && out_len.is_multiple_of(unit_out),
        "{}: units of {unit_out} of {unit_in} values for a {shape:?} image", path.display());
    let units = out_len / unit_out;
    let sizes = match &partial {
        Some(p) if p.len() != units * unit_in => Err(anyhow::anyhow!("a partial image of {} values, {} expected", p.len(), units * unit_in)),
        _ => Ok(()),
    };
    cluster.agree("checking the partial images", sizes)?;
    let (mine, sum) = cluster.sum_ranks_scattered(partial, units, unit_in);
    let sum = cluster.agree("summing the partial images", sum)?;
    let mut bytes = Vec::with_capacity(mine.len() * unit_out * 4);
    for unit in sum.chunks(unit_in) {
        bytes.extend(unit[..unit_out].iter().flat_map(|v| v.to_le_bytes()));
    }
    write_shares(cluster, path, &crate::io::npy::header_f32(shape), (out_len * 4) as u64, (mine.start * unit_out * 4) as u64, &bytes)
}

/// Sums the ranks' partial images and writes the sum as SEG-Y, each rank summing its block of
/// image traces over the ranks (as [`write_npy_sum`]) and encoding them, with their `headers`, at
/// their place in the file ([`crate::io::segy::TraceEncoder`], [`write_shares`]; `opts` with a
/// fixed coordinate scalar makes the bytes one process's file). `headers`: every image trace's,
/// in the image's order (traces of `ns` samples). Collective.
#[allow(clippy::too_many_arguments)]
pub fn write_segy_sum(cluster: &Cluster, path: &Path, headers: &[TraceHeader], opts: &crate::io::segy::WriteOptions, ns: usize,
    dt: f32, t0: f32, partial: Option<Vec<f32>>) -> anyhow::Result<()> {
    let units = headers.len();
    let head = crate::io::segy::TraceEncoder::new(path, ns, dt, t0, opts, units as u64);
    let sizes = head.map_err(anyhow::Error::from).and_then(|h| match &partial {
        Some(p) if p.len() != units * ns => Err(anyhow::anyhow!("a partial image of {} values, {} expected", p.len(), units * ns)),
        _ => Ok(h),
    });
    let (enc, head) = cluster.agree("checking the partial images", sizes)?;
    let (mine, sum) = cluster.sum_ranks_scattered(partial, units, ns);
    let sum = cluster.agree("summing the partial images", sum)?;
    let set = TraceSet { headers: headers[mine.clone()].to_vec(), data: sum.into(), ns, dt, t0 };
    let bytes = cluster.agree("encoding the image traces", enc.encode_set(&set, mine.start as u64).map_err(anyhow::Error::from))?;
    let tb = enc.trace_bytes() as u64;
    write_shares(cluster, path, &head, tb * units as u64, tb * mine.start as u64, &bytes)
}

/// A fault-injection hook's value (the number in the environment variable `var`), for the failing-rank
/// checks of `scripts/mpi-check.sh`: only in a build with the cargo feature `fault-injection`,
/// `None` in every other build.
pub(crate) fn injected(var: &str) -> Option<usize> {
    if cfg!(feature = "fault-injection") { std::env::var(var).ok().and_then(|v| v.parse().ok()) } else { None }
}

/// Writes one file from every rank's bytes: rank 0 makes a temporary file beside `target` of the
/// whole length (`head`, then `body_len` bytes) and writes `head`; each rank opens it, writes its
/// `bytes` at `offset` into the body and syncs them; once every rank has, rank 0 renames the file
/// over `target`. Any failure (a rank that cannot open the file: not a file system every rank sees;
/// a short write) fails every rank naming it, and rank 0 removes the temporary file: `target` is
/// left as it was. Collective. (Test hook, [`injected`]: `SEISGPU_TEST_FAIL_WRITE_RANK=r` fails rank r's write.)
pub fn write_shares(cluster: &Cluster, target: &Path, head: &[u8], body_len: u64, offset: u64, bytes: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::FileExt;
    // Rank 0's process id names the temporary file (every rank must name the same one).
    let mut pid = [std::process::id()];
    cluster.broadcast_from_root(&mut pid);
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = target.with_file_name(format!(".{name}.tmp-{}-shares", pid[0]));
    let created = if cluster.is_root() {
        std::fs::File::create(&tmp)
            .and_then(|f| {
                f.write_all_at(head, 0)?;
                f.set_len(head.len() as u64 + body_len)
            })
            .with_context(|| format!("creating {}", tmp.display()))
    } else {
        Ok(())
    };
    if created.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    cluster.agree(&format!("creating {}", target.display()), created)?;
    let fail_rank = injected("SEISGPU_TEST_FAIL_WRITE_RANK");
    let wrote = (|| -> anyhow::Result<()> {
        ensure!(offset + bytes.len() as u64 <= body_len, "bytes {offset}..{} of a body of {body_len}", offset + bytes.len() as u64);
        if fail_rank == Some(cluster.rank()) {
            bail!("injected write failure (SEISGPU_TEST_FAIL_WRITE_RANK={})", cluster.rank());
        }
        let f = std::fs::OpenOptions::new().write(true).open(&tmp)
            .with_context(|| format!("opening {} (the output must be on a file system every rank sees)", tmp.display()))?;
        f.write_all_at(bytes, head.len() as u64 + offset)
            .and_then(|_| f.sync_data())
            .with_context(|| format!("writing bytes {offset}..{} of {}", offset + bytes.len() as u64, tmp.display()))
    })();
    let wrote = cluster.agree(&format!("writing the ranks' shares of {}", target.display()), wrote);
    let renamed = if !cluster.is_root() {
        Ok(())
    } else if wrote.is_ok() {
        std::fs::rename(&tmp, target).with_context(|| format!("renaming {} onto {}", tmp.display(), target.display()))
    } else {
        Ok(())
    };
    if cluster.is_root() && (wrote.is_err() || renamed.is_err()) {
        let _ = std::fs::remove_file(&tmp);
    }
    wrote?;
    cluster.agree(&format!("finishing {}", target.display()), renamed)
}

/// Where a trace-domain pipeline's input comes from.
pub enum TraceSource<'a> {
    /// Already in memory on every rank (built-in synthetics): each rank takes its share.
    Memory(&'a TraceSet),
    /// A SEG-Y file every rank can open: each rank reads only its share's trace range.
    Segy(&'a Path),
    /// A (traces, samples) .npy file every rank can open, with every trace's header and the
    /// sampling in `layout` (its `data` empty; the headers come from a geometry file): each rank
    /// reads only its share's rows.
    NpyRows { traces: &'a Path, layout: &'a TraceSet },
}

/// Traces `range` of a [`TraceSource::NpyRows`] input.
fn npy_rows(path: &Path, layout: &TraceSet, range: Range<usize>) -> anyhow::Result<TraceSet> {
    let (shape, data) = crate::io::npy::read_rows_f32(path, range.clone())?;
    crate::ensure_input!(shape == [layout.len(), layout.ns], "{}: shape {shape:?}, the geometry has {} traces of {} samples", path.display(),
        layout.len(), layout.ns);
    Ok(TraceSet { headers: layout.headers[range].to_vec(), data: data.into(), ns: layout.ns, dt: layout.dt, t0: layout.t0 })
}

/// Every trace header and the sampling of a trace input, no samples (`data` empty): what a rank
/// plans from before it reads the traces it needs ([`read_traces`]).
pub fn read_layout(source: &TraceSource) -> anyhow::Result<TraceSet> {
    match source {
        TraceSource::Memory(t) => Ok(TraceSet { headers: t.headers.clone(), data: Vec::new().into(), ns: t.ns, dt: t.dt, t0: t.t0 }),
        TraceSource::NpyRows { layout, .. } => Ok((*layout).clone()),
        TraceSource::Segy(p) => crate::io::segy::SegyReader::open(p)
            .map_err(anyhow::Error::from)
            .and_then(|mut r| {
                let headers = r.read_headers()?;
                let i = r.info();
                Ok(TraceSet { headers, data: Vec::new().into(), ns: i.ns, dt: i.dt, t0: i.t0 })
            })
            .with_context(|| format!("reading the trace headers of {}", p.display())),
    }
}

/// The input traces `wanted` (ascending input numbers) of a trace input whose [`read_layout`] is
/// `layout`, read run by run of consecutive numbers. A sample that is not finite is named by its
/// input trace number (`what`: the data's name in the message).
pub fn read_traces(source: &TraceSource, layout: &TraceSet, wanted: &[usize], what: &str) -> anyhow::Result<TraceSet> {
    // The sampling's checks (no samples yet).
    TraceSet { headers: Vec::new(), data: Vec::new().into(), ns: layout.ns, dt: layout.dt, t0: layout.t0 }.validate(what)
        .map_err(crate::error::Error::Input)?;
    let runs: Vec<Range<usize>> = wanted.chunk_by(|a, b| *b == a + 1).map(|c| c[0]..c[c.len() - 1] + 1).collect();
    let parts: Vec<TraceSet> = match source {
        TraceSource::Memory(t) => runs.iter().map(|r| t.slice(r.clone())).collect(),
        TraceSource::NpyRows { traces, layout } => runs.iter().map(|r| npy_rows(traces, layout, r.clone())).collect::<anyhow::Result<_>>()?,
        TraceSource::Segy(p) => crate::io::segy::SegyReader::open(p)
            .and_then(|mut r| runs.iter().map(|run| r.read_range(run.start as u64, run.len() as u64)).collect())
            .with_context(|| format!("reading {} traces of {}", wanted.len(), p.display()))?,
    };
    let mut local = TraceSet { headers: Vec::with_capacity(wanted.len()), data: Vec::with_capacity(wanted.len() * layout.ns).into(),
        ns: layout.ns, dt: layout.dt, t0: layout.t0 };
    for part in parts {
        local.headers.extend(part.headers);
        local.data.to_mut().extend_from_slice(&part.data);
    }
    ensure!(local.len() == wanted.len() && local.data.len() == wanted.len() * layout.ns, "{what}: read {} of {} traces",
        local.len(), wanted.len());
    use rayon::prelude::*;
    if let Some(i) = local.data.par_iter().position_first(|v| !v.is_finite()) {
        crate::bail_input!("{what}: trace {} sample {} is not finite ({})", wanted[i / layout.ns], i % layout.ns, local.data[i]);
    }
    Ok(local)
}

/// What a rank holds of a trace-domain input: its contiguous share of the traces and every
/// trace's header (gathered from all ranks), plus the sampling.
pub struct TraceShare {
    /// Input trace numbers this rank holds.
    pub range: Range<usize>,
    pub traces: TraceSet,
    pub all_headers: Vec<TraceHeader>,
}

impl TraceShare {
    /// The traces `r` (input numbering, inside [`TraceShare::range`]).
    pub fn slice(&self, r: Range<usize>) -> TraceSet {
        self.traces.slice(r.start - self.range.start..r.end - self.range.start)
    }
}

/// Reads this rank's share of a trace input: the traces of its block of the `items` (contiguous
/// trace ranges in order, fixed by `items_of(ntraces)`), and gathers every header. Collective; a
/// failure on any rank fails every rank with the rank and the reason.
pub fn read_trace_share(cluster: &Cluster, source: &TraceSource, items_of: impl Fn(usize) -> Vec<Range<usize>>)
    -> anyhow::Result<(TraceShare, Vec<Range<usize>>)> {
    // Trace count and sampling: every rank looks at the file's headers (cheap).
    let opened = match source {
        TraceSource::Memory(t) => Ok((t.len(), None)),
        TraceSource::NpyRows { layout, .. } => Ok((layout.len(), None)),
        TraceSource::Segy(p) => crate::io::segy::SegyReader::open(p)
            .map(|r| (r.info().n_traces as usize, Some(r)))
            .with_context(|| format!("opening {}", p.display())),
    };
    let (ntraces, reader) = cluster.agree("opening the input", opened)?;
    let items = items_of(ntraces);
    let mine = cluster.share(items.len());
    let range = if mine.is_empty() {
        let at = items.get(mine.start).map_or(ntraces, |r| r.start);
        at..at
    } else {
        items[mine.start].start..items[mine.end - 1].end
    };
    let read = match (source, reader) {
        (TraceSource::Memory(t), _) => Ok(t.slice(range.clone())),
        (TraceSource::Segy(p), Some(mut r)) => {
            let read = r.read_range(range.start as u64, range.len() as u64)
                .with_context(|| format!("reading traces {range:?} (work items {mine:?}) of {}", p.display()));
            // The rank reading the end checks for a partial trace after the last whole one.
            match read {
                Ok(t) if range.end == ntraces => r.check_tail().map(|_| t).map_err(anyhow::Error::from),
                other => other,
            }
        }
        (TraceSource::NpyRows { traces, layout }, _) => npy_rows(traces, layout, range.clone()),
        (TraceSource::Segy(_), None) => unreachable!("the file was opened"),
    };
    let traces = cluster.agree("reading the input traces", read)?;
    let all_headers = cluster.all_gather_headers(&traces.headers);
    let all_headers = cluster.agree("gathering the trace headers", all_headers)?;
    ensure!(all_headers.len() == ntraces, "gathered {} trace headers of {ntraces}", all_headers.len());
    Ok((TraceShare { range, traces, all_headers }, items))
}

/// Runs this rank's block of `job`'s items ([`Cluster::share`]) on its `devices` through the queue
/// ([`super::run_queue_items`]), their results folded into `out` in item order (global item
/// numbers). The outcome is agreed over the ranks as phase `phase`: a failure names the work item
/// by its global number and the local device.
pub fn run_rank_queue<J: QueueJob>(cluster: &Cluster, job: &J, devices: &[J::Device], phase: &str, out: J::Output)
    -> anyhow::Result<J::Output> {
    // Test hook (CI's failing-rank check): the work item numbered here fails as a device would.
    let job = Injected { job, fail: injected("SEISGPU_TEST_FAIL_ITEM") };
    let local = super::run_queue_items(&job, devices, cluster.share(job.items()), out)
        .map_err(|e| e.source.context(format!("work item {} on local device {}", e.item, e.device)));
    cluster.agree(phase, local)
}

/// A queue job whose item `fail` fails as a device would ([`injected`]).
struct Injected<'a, J> {
    job: &'a J,
    fail: Option<usize>,
}

impl<J: QueueJob> QueueJob for Injected<'_, J> {
    type Device = J::Device;
    type Result = J::Result;
    type Output = J::Output;
    fn items(&self) -> usize { self.job.items() }
    fn run(&self, device: &J::Device, item: usize) -> anyhow::Result<J::Result> {
        if self.fail == Some(item) {
            bail!("injected failure (SEISGPU_TEST_FAIL_ITEM={item})");
        }
        self.job.run(device, item)
    }
    fn fold(&self, out: &mut J::Output, item: usize, result: J::Result) -> anyhow::Result<()> { self.job.fold(out, item, result) }
}

/// Runs this rank's work items `mine` (global numbers) on its devices, each device taking a
/// contiguous block of them (`super::split::run_blocks`) into its state (`start`, `step` per item in
/// order, `finish`); the devices' results in device order (devices without items left out). An
/// error names the work item by its global number and the local device.
pub fn run_share_blocks<S, R: Send>(devices: &[Backend], mine: Range<usize>,
    start: impl Fn(&Backend) -> anyhow::Result<S> + Sync, step: impl Fn(&mut S, usize) -> anyhow::Result<()> + Sync,
    finish: impl Fn(S) -> anyhow::Result<R> + Sync) -> anyhow::Result<Vec<R>> {
    // Test hook (CI's failing-rank check): the work item numbered here fails as a device would.
    let inject = injected("SEISGPU_TEST_FAIL_ITEM");
    super::split::run_blocks(devices, mine, start, |_, s, i| {
        if inject == Some(i) {
            bail!("injected failure (SEISGPU_TEST_FAIL_ITEM={i})");
        }
        step(s, i)
    }, |_, s| finish(s))
        .map(|r| r.into_iter().flatten().collect())
        .map_err(|e| e.source.context(format!("work item {} on local device {}", e.item, e.device)))
}

/// Runs this rank's block of `job`'s items ([`Cluster::share`]) on its `devices` ([`super::run_items`])
/// and reduces their parts; `None` where the rank has no items. The outcome is agreed over the
/// ranks as phase `phase`: a failure names the work item by its global number and the local device.
pub fn run_rank<J: Job>(cluster: &Cluster, job: &J, devices: &[J::Device], phase: &str) -> anyhow::Result<Option<J::Output>> {
    // Test hook (CI's failing-rank check): the work item numbered here fails as a device would.
    let inject = injected("SEISGPU_TEST_FAIL_ITEM");
    let local = super::split::run_blocks(devices, cluster.share(job.items()), |d| job.start(d), |d, s, i| {
        if inject == Some(i) {
            bail!("injected failure (SEISGPU_TEST_FAIL_ITEM={i})");
        }
        job.run(d, s, i)
    }, |d, s| job.finish(d, s))
        .map_err(|e| e.source.context(format!("work item {} on local device {}", e.item, e.device)))
        .and_then(|parts| {
            let parts: Vec<J::Part> = parts.into_iter().flatten().collect();
            if parts.is_empty() { Ok(None) } else { job.reduce(parts).map(Some) }
        });
    cluster.agree(phase, local)
}

/// Runs `write` on rank 0 only, then lets every rank know whether it worked.
pub fn write_on_root(cluster: &Cluster, what: &str, write: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let r = if cluster.is_root() { write() } else { Ok(()) };
    cluster.agree(what, r)
}

#[cfg(test)]
mod tests {
    #[test]
    fn fault_injection_only_in_its_build() {
        // (A variable no other test reads.)
        unsafe { std::env::set_var("SEISGPU_TEST_FAIL_PROBE", "7") };
        let want = if cfg!(feature = "fault-injection") { Some(7) } else { None };
        assert_eq!(super::injected("SEISGPU_TEST_FAIL_PROBE"), want);
        assert_eq!(super::injected("SEISGPU_TEST_FAIL_UNSET_PROBE"), None);
    }
}
