//! Many machines through MPI (cargo feature `mpi`; rsmpi over the system's Open MPI).
//!
//! The same work items as `--gpus` (`multi`), split across ranks: rank r takes a contiguous
//! block of the items ([`crate::multi::block_share`]) and runs them on its local devices (its
//! GPUs, or CPU work queues), reading only the input its items need where the format allows
//! (SEG-Y trace ranges for Kirchhoff and PSTM; every header, then only the traces its items
//! touch, for SRM's shots ([`srm_read_share`]) and NLBF's apertures ([`nlbf_estimate`]); a
//! .npy volume's rows for the wave-packet commands). Kirchhoff and PSTM: each local device adds
//! its contiguous block of the rank's items into one resident image, the rank's image is the sum
//! of its devices' images in device order, and the ranks' images are summed in rank order (one
//! image per rank crosses the network, not one per item); with one device per rank this is
//! exactly the sum of the single-process `--gpus <ranks>` run, bit for bit. SRM sums its ranks'
//! images the same way.
//!
//! Every rank writes its part of the output into one file ([`write_shares`]: a temporary file
//! beside the target, which every rank opens, renamed by rank 0 once every rank has written and
//! synced its bytes; the file system must be one every rank sees): images summed scattered
//! (each rank sums its block over the ranks, [`write_npy_sum`]), NLBF's volumes (each rank its
//! parameter traces, [`write_estimate_shares`]), wave-packet volumes (each rank its rows,
//! [`write_volume_shares`]: a rank holds the slab of rows its cubes read, and the ranks exchange
//! the cube planes that fall in each other's slabs, [`add_cubes_into_slabs`]) and coefficients
//! (each rank its cubes'), and Kirchhoff's SEG-Y images (each rank its block of image traces,
//! [`write_segy_sum`]). Rank 0 writes only small descriptions (NLBF's positions and nlbf.json).
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
use crate::multi::{self, GpuCount};
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
    pub fn share(&self, n: usize) -> Range<usize> { multi::block_share(n, self.size, self.rank) }

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
        let msg = match &local {
            Ok(_) => String::new(),
            Err(e) => format!("{e:#}"),
        };
        let all = self.all_gather_bytes(msg.as_bytes());
        let failures: Vec<(usize, String)> = all
            .into_iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .map(|(r, m)| (r, String::from_utf8_lossy(&m).into_owned()))
            .collect();
        if failures.is_empty() {
            local
        } else {
            Err(JobFailed { phase: phase.to_string(), failures }.into())
        }
    }

    /// Every rank's bytes, in rank order.
    fn all_gather_bytes(&self, local: &[u8]) -> Vec<Vec<u8>> {
        let parts = self.all_gather_varcount(local);
        parts.into_iter().map(|r| r.to_vec()).collect()
    }

    /// Every rank's `local` slice, in rank order.
    fn all_gather_varcount<T: Equivalence + Default + Clone>(&self, local: &[T]) -> Vec<Vec<T>> {
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
    fn send_vec<T: Equivalence>(&self, dest: usize, v: &[T]) {
        let p = self.world.process_at_rank(dest as i32);
        p.send_with_tag(&(v.len() as u64), ITEM_TAG);
        for piece in v.chunks(PIECE) {
            p.send_with_tag(piece, ITEM_TAG);
        }
    }

    fn receive_vec<T: Equivalence + Default + Clone>(&self, src: usize) -> Vec<T> {
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
    /// sum over the ranks of its block of units ([`multi::block_share`]), each rank's part added in
    /// rank order as [`multi::sum_in_order`] adds whole images (the same bits as one rank-order sum
    /// of the whole images). `local` is this rank's image (`None`: no work items, left out of the sum). Steps r = 0,
    /// 1, ...: in step r every other rank sends rank r its block, which rank r receives in rank
    /// order (no cycle of blocked sends). Call after an [`agree`](Self::agree) that every rank
    /// passed, with every image `units * unit` long.
    pub fn sum_ranks_scattered(&self, local: Option<Vec<f32>>, units: usize, unit: usize) -> (Range<usize>, anyhow::Result<Vec<f32>>) {
        let block = |r: usize| {
            let b = multi::block_share(units, self.size, r);
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
        let mine = multi::block_share(units, self.size, self.rank);
        let parts: Vec<Vec<f32>> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let sum = if mine.is_empty() {
            Ok(Vec::new())
        } else {
            multi::sum_in_order(parts).context("no rank holds a partial image")
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

    /// This rank's devices (collective). Without `--gpus`: one, the GPU `ordinal + local rank` (modulo the
    /// GPUs on the machine: one rank per GPU is the usual launch) or the CPU. With `--gpus N`:
    /// N GPUs from `local rank * N` on (N CPU work queues with `--device cpu`); `all`: every GPU.
    pub fn local_devices(&self, choice: DeviceChoice, ordinal: usize, count: Option<GpuCount>)
        -> anyhow::Result<(Vec<Backend>, String)> {
        let local_rank = self.local_rank();
        let visible = if choice == DeviceChoice::Cpu { 0 } else { Gpu::device_count() };
        let gpus_usable = visible > 0;
        match (choice, count, gpus_usable) {
            (DeviceChoice::Cpu, Some(c), _) | (DeviceChoice::Auto, Some(c), false) => Ok(multi::backends(DeviceChoice::Cpu, c)?),
            (DeviceChoice::Cpu, None, _) | (DeviceChoice::Auto, None, false) => {
                Ok((vec![Backend::Cpu], format!("CPU ({} threads)", rayon::current_num_threads())))
            }
            (DeviceChoice::Gpu, _, false) => bail!("--device gpu: no GPU on this machine (rank {})", self.rank),
            (_, Some(GpuCount::All), true) => Ok(multi::backends(DeviceChoice::Gpu, GpuCount::All)?),
            (_, c, true) => {
                let n = match c {
                    Some(GpuCount::N(n)) => n,
                    _ => 1,
                };
                ensure!(n <= visible, "--gpus {n}: {visible} GPUs on this machine (rank {})", self.rank);
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
    let set = TraceSet { headers: headers[mine.clone()].to_vec(), data: sum, ns, dt, t0 };
    let bytes = cluster.agree("encoding the image traces", enc.encode_set(&set, mine.start as u64).map_err(anyhow::Error::from))?;
    let tb = enc.trace_bytes() as u64;
    write_shares(cluster, path, &head, tb * units as u64, tb * mine.start as u64, &bytes)
}

/// A fault-injection hook's value (the number in the environment variable `var`), for the failing-rank
/// checks of `scripts/mpi-check.sh`: only in a build with the cargo feature `fault-injection`,
/// `None` in every other build.
fn injected(var: &str) -> Option<usize> {
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
    ensure!(shape == [layout.len(), layout.ns], "{}: shape {shape:?}, the geometry has {} traces of {} samples", path.display(),
        layout.len(), layout.ns);
    Ok(TraceSet { headers: layout.headers[range].to_vec(), data, ns: layout.ns, dt: layout.dt, t0: layout.t0 })
}

/// Every trace header and the sampling of a trace input, no samples (`data` empty): what a rank
/// plans from before it reads the traces it needs ([`read_traces`]).
fn read_layout(source: &TraceSource) -> anyhow::Result<TraceSet> {
    match source {
        TraceSource::Memory(t) => Ok(TraceSet { headers: t.headers.clone(), data: Vec::new(), ns: t.ns, dt: t.dt, t0: t.t0 }),
        TraceSource::NpyRows { layout, .. } => Ok((*layout).clone()),
        TraceSource::Segy(p) => crate::io::segy::SegyReader::open(p)
            .map_err(anyhow::Error::from)
            .and_then(|mut r| {
                let headers = r.read_headers()?;
                let i = r.info();
                Ok(TraceSet { headers, data: Vec::new(), ns: i.ns, dt: i.dt, t0: i.t0 })
            })
            .with_context(|| format!("reading the trace headers of {}", p.display())),
    }
}

/// The input traces `wanted` (ascending input numbers) of a trace input whose [`read_layout`] is
/// `layout`, read run by run of consecutive numbers. A sample that is not finite is named by its
/// input trace number (`what`: the data's name in the message).
fn read_traces(source: &TraceSource, layout: &TraceSet, wanted: &[usize], what: &str) -> anyhow::Result<TraceSet> {
    // The sampling's checks (no samples yet).
    TraceSet { headers: Vec::new(), data: Vec::new(), ns: layout.ns, dt: layout.dt, t0: layout.t0 }.validate(what)
        .map_err(anyhow::Error::msg)?;
    let runs: Vec<Range<usize>> = wanted.chunk_by(|a, b| *b == a + 1).map(|c| c[0]..c[c.len() - 1] + 1).collect();
    let parts: Vec<TraceSet> = match source {
        TraceSource::Memory(t) => runs.iter().map(|r| t.slice(r.clone())).collect(),
        TraceSource::NpyRows { traces, layout } => runs.iter().map(|r| npy_rows(traces, layout, r.clone())).collect::<anyhow::Result<_>>()?,
        TraceSource::Segy(p) => crate::io::segy::SegyReader::open(p)
            .and_then(|mut r| runs.iter().map(|run| r.read_range(run.start as u64, run.len() as u64)).collect())
            .with_context(|| format!("reading {} traces of {}", wanted.len(), p.display()))?,
    };
    let mut local = TraceSet { headers: Vec::with_capacity(wanted.len()), data: Vec::with_capacity(wanted.len() * layout.ns),
        ns: layout.ns, dt: layout.dt, t0: layout.t0 };
    for part in parts {
        local.headers.extend(part.headers);
        local.data.extend(part.data);
    }
    ensure!(local.len() == wanted.len() && local.data.len() == wanted.len() * layout.ns, "{what}: read {} of {} traces",
        local.len(), wanted.len());
    use rayon::prelude::*;
    if let Some(i) = local.data.par_iter().position_first(|v| !v.is_finite()) {
        bail!("{what}: trace {} sample {} is not finite ({})", wanted[i / layout.ns], i % layout.ns, local.data[i]);
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

/// Kirchhoff migration across the ranks (`seisgpu ktm migrate` under mpirun): [`crate::ktm::work_items`]
/// split in blocks over the ranks, each rank's block split in blocks over its devices, each device
/// adding its items into one resident image ([`crate::ktm::DeviceImage`]); a rank's image is its
/// devices' sum in device order, rank 0 sums the ranks in rank order. `Some(image)` on rank 0.
pub fn ktm_migrate(cluster: &Cluster, source: &TraceSource, params: &crate::ktm::Params, devices: &[Backend])
    -> anyhow::Result<RankImage<crate::ktm::Image>> {
    use crate::ktm;
    let (share, items) = read_trace_share(cluster, source, ktm::work_items)?;
    let t = &share.traces;
    let plan = ktm::Plan::new(&share.all_headers, t.ns, t.dt, t.t0, params);
    let plan = cluster.agree("planning the migration", plan)?;
    let max_item = items.iter().map(|r| r.len()).max().unwrap_or(1);
    let local = run_share_blocks(devices, cluster.share(items.len()),
        |b| ktm::DeviceImage::new(b, &plan, params, max_item),
        |img, i| {
            let r = items[i].clone();
            img.add_item(&plan, &share.slice(r.clone()), r.clone(), params).with_context(|| format!("traces {r:?}"))
        },
        |img| img.finish());
    let local = local.and_then(|images| if images.is_empty() { Ok(None) } else { multi::sum_in_order(images).map(Some) });
    let partial = cluster.agree("migrating", local)?;
    Ok(RankImage {
        image: ktm::Image {
            grid: plan.grid,
            classes: plan.classes(),
            class_offsets: plan.class_offsets(params),
            data: Vec::new(),
            skipped_traces: plan.skipped_traces,
        },
        partial,
    })
}

/// Shot-record migration across the ranks (`seisgpu srm` under mpirun): the (shot, frequency
/// group) items of [`crate::srm::MultiPlan`] split in blocks over the ranks and over each rank's
/// devices; each device adds its items of a shot into one window image ([`crate::srm::DeviceShots`]),
/// a rank adds its devices' windows into a model image in device order, and the ranks' images are
/// summed in rank order. Each rank reads every trace header and only its shots' samples
/// ([`srm_read_share`]); the velocity model is on every rank.
pub fn srm_migrate(cluster: &Cluster, source: &TraceSource, model: &crate::srm::VelocityModel, params: &crate::srm::SrmParams,
    opts: crate::srm::GpuOptions, devices: &[Backend]) -> anyhow::Result<RankImage<crate::srm::Image>> {
    use crate::srm::{DeviceShots, SrmDevice};
    let (plan, traces) = srm_read_share(cluster, source, model, params, opts)?;
    let traces = &traces;
    let devs = devices.iter().map(|b| SrmDevice::new(b, &plan.op)).collect::<anyhow::Result<Vec<_>>>();
    let devs = cluster.agree("preparing the devices", devs)?;
    let opts = cluster.agree("choosing the GPU kernel", plan.resolve_variant(&devs, model, params, opts))?;
    let n = plan.items.len();
    // Test hook (CI's failing-rank check), as in `run_share_blocks`.
    let inject = injected("SEISGPU_TEST_FAIL_ITEM");
    let local = multi::run_blocks(&devs, cluster.share(n), |_| Ok(DeviceShots::default()),
        |d, st, i| {
            if inject == Some(i) {
                bail!("injected failure (SEISGPU_TEST_FAIL_ITEM={i})");
            }
            plan.device_step(d, st, i, traces, model, params, opts)
        },
        |d, st| plan.device_finish(d, st))
        .map_err(|e| anyhow::anyhow!("work item {} on local device {}: {:#}", e.item, e.device, e.source))
        .and_then(|parts| {
            let parts: Vec<(usize, Vec<f32>)> = parts.into_iter().flatten().flatten().collect();
            if parts.is_empty() {
                return Ok(None);
            }
            let mut image = plan.zero_image(model);
            for (shot, part) in parts {
                plan.add_shot(&mut image, shot, &part)?;
            }
            Ok(Some(image))
        });
    let local = cluster.agree("migrating", local)?;
    let (nx, ny, nz) = local.as_ref().map_or((model.nx, model.ny, plan.nz), |i| (i.nx, i.ny, i.nz));
    Ok(RankImage { image: crate::srm::Image { data: Vec::new(), nx, ny, nz }, partial: local.map(|i| i.data) })
}

/// SRM's input on this rank: the plan (shots, windows, work items) from every trace's header, the
/// same on every rank, and the samples of the traces of the shots whose work items this rank runs,
/// read alone (a SEG-Y file: every header, then those traces' runs of consecutive trace numbers;
/// a .npy file: those rows; built-in data: taken from memory). The plan's shots of this rank number their traces in the
/// returned set; the other shots' trace lists are emptied (this rank never runs them).
pub fn srm_read_share(cluster: &Cluster, source: &TraceSource, model: &crate::srm::VelocityModel, params: &crate::srm::SrmParams,
    opts: crate::srm::GpuOptions) -> anyhow::Result<(crate::srm::MultiPlan, TraceSet)> {
    // Every header and the sampling (no samples yet).
    let layout = read_layout(source).and_then(|l| match source {
        TraceSource::Segy(p) => crate::srm::check_segy_coordinates(&l.headers, p).map(|_| l),
        _ => Ok(l),
    });
    let layout = cluster.agree("reading the trace headers", layout)?;
    let plan = crate::srm::MultiPlan::from_headers(&layout, model, params, opts);
    let mut plan = cluster.agree("planning the migration", plan)?;
    let mine = cluster.share(plan.items.len());
    let mut shots: Vec<usize> = plan.items[mine].iter().map(|it| it.shot).collect();
    shots.dedup();
    let mut wanted: Vec<usize> = shots.iter().flat_map(|&s| plan.shots[s].0.traces.iter().copied()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let read = read_traces(source, &layout, &wanted, "shot gathers")
        .with_context(|| format!("reading the traces of shots {shots:?}"));
    let local = cluster.agree("reading the input traces", read)?;
    // One write of the whole line (the ranks share the terminal).
    let line = format!("seisgpu: rank {}: {} of {} traces read (shots {:?})\n", cluster.rank(), local.len(), layout.len(),
        shots.first().zip(shots.last()).map(|(a, b)| *a..*b + 1).unwrap_or(0..0));
    eprint!("{line}");
    for (s, (shot, _)) in plan.shots.iter_mut().enumerate() {
        if shots.contains(&s) {
            for t in shot.traces.iter_mut() {
                *t = wanted.binary_search(t).expect("a wanted trace");
            }
        } else {
            shot.traces.clear();
        }
    }
    Ok((plan, local))
}

/// PSTM across the ranks (`seisgpu pstm migrate` under mpirun): [`crate::pstm::work_items`] split in
/// blocks over the ranks and over each rank's devices (each rank reads only its items' traces of
/// a SEG-Y input; the built-in input is made on every rank, each taking its share), each device
/// adding its items into one resident image; rank images are their devices' sums in device order,
/// summed over the ranks in rank order, the counts summed over the ranks.
pub fn pstm_migrate(cluster: &Cluster, source: &TraceSource, params: &crate::pstm::PstmParams, mode: crate::pstm::TraveltimeMode,
    model: crate::pstm::TraveltimeModel, devices: &[Backend]) -> anyhow::Result<RankImage<crate::pstm::PstmImage>> {
    use crate::pstm;
    cluster.agree("checking the parameters", params.validate(mode, model))?;
    let (share, items) = read_trace_share(cluster, source, pstm::work_items)?;
    cluster.agree("checking the input", share.traces.validate("input traces").map_err(anyhow::Error::msg))?;
    let local = run_share_blocks(devices, cluster.share(items.len()),
        |b| pstm::DeviceImage::new(b, params, mode, model),
        |img, i| img.add_item(&share.slice(items[i].clone()), params).with_context(|| format!("traces {:?}", items[i])),
        |img| img.finish());
    let local = local.and_then(|images| {
        if images.is_empty() {
            return Ok(None);
        }
        let stats = images.iter().fold(pstm::MigrationStats::default(), |a, i| pstm::add_stats(a, &i.stats));
        let data = multi::sum_in_order(images.into_iter().map(|i| i.data).collect())?;
        Ok(Some((data, stats)))
    });
    let local = cluster.agree("migrating", local)?;
    let s = local.as_ref().map_or(pstm::MigrationStats::default(), |(_, s)| *s);
    let counts = [s.traces_used as u64, s.pairs, s.contributions, s.exact_evals];
    let mut total = [0u64; 4];
    self_sum(cluster, &counts, &mut total);
    let mut image = pstm::zero_image(params);
    image.data = Vec::new();
    image.stats = pstm::MigrationStats { traces_used: total[0] as usize, pairs: total[1], contributions: total[2], exact_evals: total[3] };
    Ok(RankImage { image, partial: local.map(|(d, _)| d) })
}

/// This rank's part of the NLBF search ([`nlbf_estimate`]).
pub struct NlbfShare {
    /// The whole search's setup (every parameter trace; its aperture lists in input trace numbers).
    pub setup: crate::nlbf::Setup,
    /// The parameter traces this rank searched, and their estimate (a grid of one row of them).
    pub ptraces: Range<usize>,
    pub estimate: crate::nlbf::Estimate,
    /// Input traces this rank read.
    pub traces_read: usize,
}

/// The NLBF search across the ranks (`seisgpu nlbf estimate` under mpirun): every rank reads the
/// trace headers and plans the whole search ([`crate::nlbf::Setup::from_layout`]); the parameter
/// traces' [`crate::nlbf::work_items`] are split in blocks over the ranks, and each rank reads only
/// the input traces its parameter traces' apertures hold
/// ([`crate::nlbf::Setup::subset_reading`]: neighbouring ranks' apertures overlap, so some
/// traces are read by two) and searches its block on its devices. Every pick and semblance is
/// that of the single-device search, bit for bit; [`write_estimate_shares`] writes them.
pub fn nlbf_estimate(cluster: &Cluster, source: &TraceSource, params: &crate::nlbf::EstimateParams, devices: &[Backend],
    variant: Option<crate::nlbf::Variant>) -> anyhow::Result<NlbfShare> {
    let layout = cluster.agree("reading the trace headers", read_layout(source))?;
    nlbf_estimate_from(cluster, source, &layout, params, devices, variant).map(|(share, _)| share)
}

/// [`nlbf_estimate`] with the input's layout read ([`read_layout`]); also returns the input
/// traces the rank read (ascending trace numbers, their traces).
fn nlbf_estimate_from(cluster: &Cluster, source: &TraceSource, layout: &TraceSet, params: &crate::nlbf::EstimateParams,
    devices: &[Backend], variant: Option<crate::nlbf::Variant>) -> anyhow::Result<(NlbfShare, (Vec<usize>, TraceSet))> {
    use crate::nlbf::{self, NlbfDevice, Setup, Variant};
    let setup = cluster.agree("planning the search", Setup::from_layout(layout, params).map_err(anyhow::Error::from))?;
    let variant = variant.unwrap_or_else(|| devices.iter().find(|b| b.gpu().is_some()).map_or(Variant::Cpu, |b| nlbf::variant_for(b, &setup)));
    let items = nlbf::work_items(setup.np());
    let mine = cluster.share(items.len());
    let ptraces = if mine.is_empty() { 0..0 } else { items[mine.start].start..items[mine.end - 1].end };
    let (local_setup, wanted) = setup.subset_reading(ptraces.clone());
    let traces = cluster.agree("reading the input traces", read_traces(source, layout, &wanted, "input traces"))?;
    let line = format!("seisgpu: rank {}: parameter traces {ptraces:?} of {}, {} of {} input traces read\n", cluster.rank(),
        setup.np(), wanted.len(), layout.len());
    eprint!("{line}");
    let devs: Vec<NlbfDevice> = devices.iter().map(NlbfDevice::new).collect();
    let local = run_share(&devs, mine, |d, i| {
        let r = items[i].start - ptraces.start..items[i].end - ptraces.start;
        nlbf::estimate_item(variant, d, &local_setup, &traces.data, r)
            .map_err(|e| anyhow::anyhow!("parameter traces {:?}: {e}", items[i]))
    });
    let local = cluster.agree("searching", local)?;
    let (codes, sems): (Vec<Vec<u32>>, Vec<Vec<f32>>) = local.into_iter().unzip();
    let estimate = nlbf::Estimate::from_setup(&local_setup, codes.concat(), sems.concat());
    Ok((NlbfShare { setup, ptraces, estimate, traces_read: wanted.len() }, (wanted, traces)))
}

/// This rank's part of the NLBF enhancement ([`nlbf_enhance`]).
pub struct NlbfEnhanced {
    /// The search's part ([`nlbf_estimate`]).
    pub search: NlbfShare,
    /// Input traces this rank enhanced, their enhanced and their input samples (`[k * ns + t]`).
    pub traces: Range<usize>,
    pub enhanced: Vec<f32>,
    pub input: Vec<f32>,
    /// Input traces in all, samples per trace.
    pub ntr: usize,
    pub ns: usize,
}

/// `nlbf enhance` across the ranks: the search as [`nlbf_estimate`] (each rank its parameter
/// traces), the picks gathered so that every rank holds the whole estimate (4 bytes per
/// estimation), then each rank enhances its block of the input traces from only the traces their
/// neighbour lists hold ([`crate::nlbf::EnhanceSetup::subset_reading`]: the whole enhancement's
/// values, bit for bit) on its first device. Of those traces, the ones the search read are kept
/// from it; only the others are read.
pub fn nlbf_enhance(cluster: &Cluster, source: &TraceSource, params: &crate::nlbf::EstimateParams,
    enhance: &crate::nlbf::EnhanceParams, devices: &[Backend], variant: Option<crate::nlbf::Variant>) -> anyhow::Result<NlbfEnhanced> {
    use crate::nlbf::{self, EnhanceSetup, Estimate};
    let layout = cluster.agree("reading the trace headers", read_layout(source))?;
    let (search, (had, had_traces)) = nlbf_estimate_from(cluster, source, &layout, params, devices, variant)?;
    let s = &search.setup;
    cluster.agree("gathering the picks", if s.estimations() < i32::MAX as usize { Ok(()) } else {
        Err(anyhow::anyhow!("{} estimations: too many to gather in one MPI message", s.estimations()))
    })?;
    let code = cluster.all_gather_varcount(&search.estimate.code).concat();
    let est = Estimate::from_setup(s, code, Vec::new());
    let setup = cluster.agree("planning the enhancement",
        EnhanceSetup::from_layout(&layout, &params.coords, &est, enhance).map_err(anyhow::Error::from))?;
    let mine = cluster.share(layout.len());
    let (sub, order) = setup.subset_reading(mine.clone());
    // The traces the search read are kept; the others are read in ascending order; all are
    // placed in the subset's order (the outputs first).
    let mut missing: Vec<usize> = order.iter().copied().filter(|t| had.binary_search(t).is_err()).collect();
    missing.sort_unstable();
    let read = read_traces(source, &layout, &missing, "input traces").map(|t| {
        let ns = t.ns;
        let mut data = Vec::with_capacity(order.len() * ns);
        for &k in &order {
            let (from, at) = match had.binary_search(&k) {
                Ok(at) => (&had_traces.data, at),
                Err(_) => (&t.data, missing.binary_search(&k).expect("a read trace")),
            };
            data.extend_from_slice(&from[at * ns..(at + 1) * ns]);
        }
        data
    });
    let data = cluster.agree("reading the traces to enhance", read)?;
    drop(had_traces);
    let line = format!("seisgpu: rank {}: enhancing traces {mine:?} of {} from {} traces ({} of them read now, the others kept \
        from the search)\n", cluster.rank(), layout.len(), order.len(), missing.len());
    eprint!("{line}");
    let device = devices.first().context("no device")?;
    let enhanced = match device {
        Backend::Cpu => Ok(nlbf::cpu::enhance(&sub, &est, &data)),
        Backend::Gpu(g) => nlbf::gpu::enhance(g, &sub, &est, &data).map_err(anyhow::Error::from),
    }.map(|mut out| {
        nlbf::slopes::copy_unestimated(&sub, &est, &data, &mut out);
        out
    });
    let enhanced = cluster.agree("enhancing", enhanced.with_context(|| format!("traces {mine:?}")))?;
    let ns = layout.ns;
    let input = data[..mine.len() * ns].to_vec();
    Ok(NlbfEnhanced { search, traces: mine, enhanced, input, ntr: layout.len(), ns })
}

/// Writes `nlbf enhance`'s outputs from every rank's part into `dir`: the estimate
/// ([`write_estimate_shares`]), enhanced.npy and input.npy (traces x samples, each rank its
/// block of traces; one process's files byte for byte). Collective.
pub fn write_enhanced_shares(cluster: &Cluster, dir: &Path, part: &NlbfEnhanced, extra: serde_json::Value) -> anyhow::Result<()> {
    write_estimate_shares(cluster, dir, &part.search, extra)?;
    // The header of the single process's trace files (`io::output::write_traces`), so the bytes agree.
    let head = crate::io::npy::header_f32(&[part.ntr, part.ns]);
    let (body, at) = ((part.ntr * part.ns * 4) as u64, (part.traces.start * part.ns * 4) as u64);
    for (name, v) in [("enhanced.npy", &part.enhanced), ("input.npy", &part.input)] {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        write_shares(cluster, &dir.join(name), &head, body, at, &bytes)?;
    }
    Ok(())
}

/// Writes the NLBF estimate from every rank's part into `dir`: each rank writes its parameter
/// traces' block of A.npy .. E.npy and S.npy ([`write_shares`]; the bytes of one process's files),
/// rank 0 positions.npy and nlbf.json (`extra`: the run's description). Collective.
pub fn write_estimate_shares(cluster: &Cluster, dir: &Path, share: &NlbfShare, extra: serde_json::Value) -> anyhow::Result<()> {
    use crate::nlbf::{output, Estimate, Param};
    let made = if cluster.is_root() { std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display())) } else { Ok(()) };
    cluster.agree("creating the output folder", made)?;
    let s = &share.setup;
    let head = output::npy_header("<f4", &[s.grid.ny, s.grid.nx, s.ns]);
    let body = (s.estimations() * 4) as u64;
    for p in Param::ALL {
        let bytes: Vec<u8> = share.estimate.volume(p).iter().flat_map(|v| v.to_le_bytes()).collect();
        write_shares(cluster, &dir.join(format!("{}.npy", p.name())), &head, body, (share.ptraces.start * s.ns * 4) as u64, &bytes)?;
    }
    write_on_root(cluster, "writing the estimate's description", || {
        output::write_description(dir, &Estimate::from_setup(s, Vec::new(), Vec::new()), extra)
            .map(|_| ()).with_context(|| format!("writing the estimate's description to {}", dir.display()))
    })
}

/// `wavepacket forward` across ranks (the paper's variant 2): each rank transforms its block of
/// cubes on its engines and writes their coefficients at their place in the coefficient file
/// ([`write_shares`]; cube after cube, as one process writes them, so the file is the same byte
/// for byte). `slab`: the volume's rows from `first_row` on, at least those of this rank's cubes
/// ([`wavepacket_rows`]; the whole volume with `first_row` 0 does too). Returns the number of
/// coefficients in the file.
pub fn wavepacket_forward(cluster: &Cluster, tr: &crate::wavepacket::fragments::Fragmented, slab: &[f32], first_row: usize,
    path: &Path) -> anyhow::Result<usize> {
    use crate::wavepacket::coeffs_io;
    // The slab's samples, a bad one named by its place in the whole volume (a rank without cubes
    // holds no rows).
    let checked = crate::wavepacket::validate_rows(slab, first_row, tr.tiling.shape, "wave-packet forward");
    cluster.agree("checking the volume", checked)?;
    let n = tr.tiling.count();
    let mine = cluster.share(n);
    let local = run_share(&engine_ids(tr), mine.clone(), |&k, t| {
        tr.forward_cube_from_rows(k, slab, first_row, t).map(|c| coeffs_io::coeff_bytes(&c))
    });
    let local = cluster.agree("transforming the cubes", local)?;
    let header = coeffs_io::Header { version: 1, tiling: tr.tiling.clone(), params: tr.frame.params.clone(), per_cube: tr.frame.total };
    let head = cluster.agree("describing the coefficients", coeffs_io::head_bytes(&header))?;
    let per = 8 * tr.frame.total as u64;
    write_shares(cluster, path, &head, per * n as u64, per * mine.start as u64, &local.concat())?;
    Ok(tr.total())
}

/// The rows of the volume (along its first axis) that this rank's block of cubes reads: the slab
/// a rank holds in the wave-packet commands ([`wavepacket_forward`] reads it; the applications and
/// [`wavepacket_inverse`] return it).
pub fn wavepacket_rows(cluster: &Cluster, tiling: &crate::wavepacket::fragments::Tiling) -> Range<usize> {
    held_rows(tiling, cluster.size())[cluster.rank()].clone()
}

/// Every rank's [`wavepacket_rows`], in rank order.
fn held_rows(tiling: &crate::wavepacket::fragments::Tiling, ranks: usize) -> Vec<Range<usize>> {
    (0..ranks).map(|r| tiling.rows_of(multi::block_share(tiling.count(), ranks, r))).collect()
}

/// The rows of the volume this rank answers for (writes, and counts in whole-volume sums): from
/// the first row of its slab to the first row of the next rank's that holds cubes (the last such
/// rank: to the end). The ranks' owned rows partition the volume, in rank order, each inside its
/// rank's slab (the next rank's first cube starts at or before this rank's last cube ends).
pub fn wavepacket_owned_rows(cluster: &Cluster, tiling: &crate::wavepacket::fragments::Tiling) -> Range<usize> {
    owned_rows(tiling, cluster.size(), cluster.rank())
}

fn owned_rows(tiling: &crate::wavepacket::fragments::Tiling, ranks: usize, rank: usize) -> Range<usize> {
    let held = held_rows(tiling, ranks);
    let busy = |q: usize| !multi::block_share(tiling.count(), ranks, q).is_empty();
    if !busy(rank) {
        return held[rank].clone();
    }
    let end = (rank + 1..ranks).find(|&q| busy(q)).map_or(tiling.shape[0], |q| held[q].start);
    held[rank].start..end
}

/// `wavepacket inverse` across ranks: each rank inverts its block of cubes from `mine`, their
/// coefficients ([`crate::wavepacket::coeffs_io::read_coeffs_of_cubes`] reads a rank's share of
/// the file), and the ranks exchange the planes of their cubes that fall in each other's slabs
/// ([`add_cubes_into_slabs`]). Returns this rank's slab ([`wavepacket_rows`]): every sample as one
/// process sums it, bit for bit.
pub fn wavepacket_inverse(cluster: &Cluster, tr: &crate::wavepacket::fragments::Fragmented, mine: &[num_complex::Complex32])
    -> anyhow::Result<Vec<f32>> {
    let (n, per) = (tr.tiling.count(), tr.frame.total);
    let share = cluster.share(n);
    cluster.agree("checking the coefficients", if mine.len() == share.len() * per { Ok(()) } else {
        Err(anyhow::anyhow!("{} coefficients for cubes {share:?} of {per} each", mine.len()))
    })?;
    let local = run_share(&engine_ids(tr), share.clone(), |&k, t| {
        let at = (t - share.start) * per;
        tr.inverse_cube(k, &mine[at..at + per], t)
    });
    let local = cluster.agree("inverting the cubes", local)?;
    let slab = add_cubes_into_slabs(cluster, &tr.tiling, local);
    cluster.agree("adding the cubes", slab)
}

/// Every rank's slab of the volume its cubes add up to ([`wavepacket_rows`]). `local`: this
/// rank's inverted cubes, in cube order. The planes (first axis) of each cube that fall in
/// another rank's slab go to that rank, and every rank adds the cubes that reach its slab in cube
/// order ([`crate::wavepacket::fragments::Tiling::accumulate_rows`]): each sample gets the same
/// additions in the same order as in one process's volume. Steps r = 0, 1, ... as in
/// [`Cluster::sum_ranks_scattered`]: in step r every other rank sends rank r its planes for it
/// (all its cubes' in one message, maybe empty), which rank r adds in rank order, so in cube
/// order. Call after an [`agree`](Cluster::agree) that every rank passed.
fn add_cubes_into_slabs(cluster: &Cluster, tiling: &crate::wavepacket::fragments::Tiling, local: Vec<Vec<f32>>)
    -> anyhow::Result<Vec<f32>> {
    let (n, ranks, me) = (tiling.count(), cluster.size(), cluster.rank());
    let [_, s1, s2] = tiling.shape;
    let plane = tiling.cube * tiling.cube;
    let held = held_rows(tiling, ranks);
    let mine = cluster.share(n);
    // The rows of cube t inside `rows` (maybe none).
    let overlap = |t: usize, rows: &Range<usize>| {
        let r = tiling.rows_of(t..t + 1);
        let lo = r.start.max(rows.start);
        lo..r.end.min(rows.end).max(lo)
    };
    // Cube t's planes of `rows`, from its samples (planes from the cube's first row).
    let planes = |t: usize, cube: &[f32], rows: &Range<usize>| -> anyhow::Result<std::ops::Range<usize>> {
        let first = tiling.start(t)[0];
        let span = (rows.start - first) * plane..(rows.end - first) * plane;
        ensure!(span.end <= cube.len(), "cube {t}: {} samples, rows {rows:?} need {}", cube.len(), span.end);
        Ok(span)
    };
    let pieces_for = |r: usize| -> anyhow::Result<Vec<f32>> {
        let mut out = Vec::new();
        for (t, cube) in mine.clone().zip(&local) {
            let o = overlap(t, &held[r]);
            if !o.is_empty() {
                out.extend_from_slice(&cube[planes(t, cube, &o)?]);
            }
        }
        Ok(out)
    };
    let mut slab = vec![0.0f32; held[me].len() * s1 * s2];
    let mut added = if local.len() == mine.len() { Ok(()) } else {
        Err(anyhow::anyhow!("rank {me}: {} cubes for cubes {mine:?}", local.len()))
    };
    for r in 0..ranks {
        if r != me {
            // Send even after a local failure (empty): rank r must not block.
            let piece = pieces_for(r);
            cluster.send_vec(r, piece.as_deref().unwrap_or(&[]));
            if let Err(e) = piece {
                added = added.and(Err(e));
            }
            continue;
        }
        for q in 0..ranks {
            let theirs = if q == me { None } else { Some(cluster.receive_vec::<f32>(q)) };
            if added.is_err() {
                continue;
            }
            let mut at = 0;
            for (k, t) in multi::block_share(n, ranks, q).enumerate() {
                let o = overlap(t, &held[me]);
                if o.is_empty() {
                    continue;
                }
                let part = match &theirs {
                    None => planes(t, &local[k], &o).map(|span| &local[k][span]),
                    Some(buf) => {
                        let len = o.len() * plane;
                        at += len;
                        if at <= buf.len() { Ok(&buf[at - len..at]) } else {
                            Err(anyhow::anyhow!("rank {q} sent {} samples of its cubes' planes, fewer than cube {t} needs", buf.len()))
                        }
                    }
                };
                match part {
                    Ok(p) => tiling.accumulate_rows(&mut slab, held[me].start, t, o, p),
                    Err(e) => {
                        added = Err(e);
                        break;
                    }
                }
            }
        }
    }
    added.map(|_| slab)
}

/// Writes a wave-packet volume from the ranks' slabs: each rank writes its owned rows
/// ([`wavepacket_owned_rows`]) of `slab` (its [`wavepacket_rows`]) into one float32 .npy file of
/// the volume's shape ([`write_shares`]; the bytes of one process's file). Collective.
pub fn write_volume_shares(cluster: &Cluster, path: &Path, tiling: &crate::wavepacket::fragments::Tiling, slab: &[f32])
    -> anyhow::Result<()> {
    let [n1, n2, n3] = tiling.shape;
    let (rows, owned) = (wavepacket_rows(cluster, tiling), wavepacket_owned_rows(cluster, tiling));
    let row = n2 * n3;
    let sized = if slab.len() == rows.len() * row { Ok(()) } else {
        Err(anyhow::anyhow!("{} samples for rows {rows:?} of a {n1} x {n2} x {n3} volume", slab.len()))
    };
    cluster.agree("checking the volume", sized)?;
    let part = &slab[(owned.start - rows.start) * row..(owned.end - rows.start) * row];
    let bytes: Vec<u8> = part.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_shares(cluster, path, &crate::io::npy::header_f32(&tiling.shape), (n1 * row * 4) as u64, (owned.start * row * 4) as u64,
        &bytes)
}

/// The engine numbers of `tr`, the devices [`run_share`] runs a rank's cubes on.
fn engine_ids(tr: &crate::wavepacket::fragments::Fragmented) -> Vec<usize> { (0..tr.engines()).collect() }

/// The wave-packet applications (`wavepacket denoise`, `compress`, `interpolate`) across ranks:
/// each rank holds its slab of the volume ([`wavepacket_rows`]), transforms and thresholds its
/// block of the cubes from it; the statistics the applications take over the whole volume are
/// combined over the ranks (the noise sample gathered, the magnitude histogram summed, the
/// largest coefficient's maximum: each the single-process value); the thresholded cubes are added
/// into every rank's slab through [`add_cubes_into_slabs`] (each sample as in one process's
/// volume), ready for the next pass (POCS) and for [`write_volume_shares`].
pub struct RankCubes<'a> {
    pub cluster: &'a Cluster,
    pub tr: &'a crate::wavepacket::fragments::Fragmented,
}

impl RankCubes<'_> {
    fn check_slab(&self, slab: &[f32]) -> anyhow::Result<()> {
        let rows = crate::wavepacket::apps::CubeJob::rows(self);
        self.cluster.agree("checking the volume",
            crate::wavepacket::validate_rows(slab, rows.start, self.tr.tiling.shape, "wave-packet processing"))
    }
}

impl crate::wavepacket::apps::CubeJob for RankCubes<'_> {
    fn fragmented(&self) -> &crate::wavepacket::fragments::Fragmented { self.tr }

    fn rows(&self) -> Range<usize> { wavepacket_rows(self.cluster, &self.tr.tiling) }

    fn owned(&self) -> Range<usize> { wavepacket_owned_rows(self.cluster, &self.tr.tiling) }

    fn forward_each(&self, slab: &[f32], look: &(dyn Fn(usize, &[num_complex::Complex32]) + Sync)) -> anyhow::Result<()> {
        self.check_slab(slab)?;
        let first = self.rows().start;
        let local = run_share(&engine_ids(self.tr), self.cluster.share(self.tr.tiling.count()), |&k, t| {
            look(t, &self.tr.forward_cube_from_rows(k, slab, first, t)?);
            Ok(())
        });
        self.cluster.agree("transforming the cubes", local.map(|_| ()))
    }

    fn all_samples(&self, local: Vec<f32>) -> anyhow::Result<Vec<f32>> {
        Ok(self.cluster.all_gather_varcount(&local).concat())
    }

    fn sum_counts(&self, local: Vec<u64>) -> anyhow::Result<Vec<u64>> {
        let mut total = vec![0u64; local.len()];
        self_sum(self.cluster, &local, &mut total);
        Ok(total)
    }

    fn sum_reals(&self, local: Vec<f64>) -> anyhow::Result<Vec<f64>> {
        let mut total = vec![0f64; local.len()];
        self.cluster.world.all_reduce_into(&local[..], &mut total[..], mpi::collective::SystemOperation::sum());
        Ok(total)
    }

    fn max(&self, local: f32) -> anyhow::Result<f32> {
        let mut m = 0.0f32;
        self.cluster.world.all_reduce_into(&local, &mut m, mpi::collective::SystemOperation::max());
        Ok(m)
    }

    fn threshold(&self, slab: &[f32], thr: &[f32]) -> anyhow::Result<(Vec<f32>, u64)> {
        let tr = self.tr;
        self.check_slab(slab)?;
        let first = self.rows().start;
        let n = tr.tiling.count();
        let local = run_share(&engine_ids(self.tr), self.cluster.share(n), |&k, t| {
            let mut c = tr.forward_cube_from_rows(k, slab, first, t)?;
            let kept = crate::wavepacket::threshold_host(&tr.frame, thr, &mut c);
            Ok((tr.inverse_cube(k, &c, t)?, kept))
        });
        let local = self.cluster.agree("thresholding the cubes", local)?;
        let (cubes, kept): (Vec<Vec<f32>>, Vec<u64>) = local.into_iter().unzip();
        let mut total = [0u64];
        self_sum(self.cluster, &[kept.iter().sum()], &mut total);
        let slab = add_cubes_into_slabs(self.cluster, &tr.tiling, cubes);
        let slab = self.cluster.agree("adding the cubes", slab)?;
        Ok((slab, total[0]))
    }
}

/// Element-wise sum over the ranks (integers: any order gives the same sum).
fn self_sum(cluster: &Cluster, local: &[u64], out: &mut [u64]) {
    cluster.world.all_reduce_into(local, out, mpi::collective::SystemOperation::sum());
}

/// Runs this rank's work items `mine` (global numbers) on its devices; results in item order. An
/// error names the work item by its global number and the local device.
pub fn run_share<D: Sync, R: Send>(devices: &[D], mine: Range<usize>, work: impl Fn(&D, usize) -> anyhow::Result<R> + Sync)
    -> anyhow::Result<Vec<R>> {
    let ids: Vec<usize> = mine.collect();
    // Test hook (CI's failing-rank check): the work item numbered here fails as a device would.
    let inject = injected("SEISGPU_TEST_FAIL_ITEM");
    multi::map_on_devices(devices, &ids, |d, _, &i| {
        if inject == Some(i) {
            bail!("injected failure (SEISGPU_TEST_FAIL_ITEM={i})");
        }
        work(d, i)
    })
        .map_err(|e| anyhow::anyhow!("work item {} on local device {}: {:#}", ids[e.item], e.device, e.source))
}

/// Runs this rank's work items `mine` (global numbers) on its devices, each device taking a
/// contiguous block of them ([`multi::run_blocks`]) into its state (`start`, `step` per item in
/// order, `finish`); the devices' results in device order (devices without items left out). An
/// error names the work item by its global number and the local device.
pub fn run_share_blocks<S, R: Send>(devices: &[Backend], mine: Range<usize>,
    start: impl Fn(&Backend) -> anyhow::Result<S> + Sync, step: impl Fn(&mut S, usize) -> anyhow::Result<()> + Sync,
    finish: impl Fn(S) -> anyhow::Result<R> + Sync) -> anyhow::Result<Vec<R>> {
    // Test hook (CI's failing-rank check): the work item numbered here fails as a device would.
    let inject = injected("SEISGPU_TEST_FAIL_ITEM");
    multi::run_blocks(devices, mine, start, |_, s, i| {
        if inject == Some(i) {
            bail!("injected failure (SEISGPU_TEST_FAIL_ITEM={i})");
        }
        step(s, i)
    }, |_, s| finish(s))
        .map(|r| r.into_iter().flatten().collect())
        .map_err(|e| anyhow::anyhow!("work item {} on local device {}: {:#}", e.item, e.device, e.source))
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
