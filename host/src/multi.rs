//! Work split over several devices: one host thread per device pulling work items from a shared
//! queue (dynamic balancing: a faster device takes more items). Used by `--gpus N|all`.
//!
//! Results come back in item order, so reductions over them (image sums, coefficient merges) run in
//! a fixed order and are reproducible regardless of which device computed which item.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use crate::backend::{Backend, DeviceChoice};
use crate::runtime::{Gpu, GpuError};

/// `--gpus N|all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuCount {
    All,
    N(usize),
}

impl std::str::FromStr for GpuCount {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(GpuCount::All);
        }
        match s.parse::<usize>() {
            Ok(0) | Err(_) => Err(format!("--gpus takes a positive count or `all`, not `{s}`")),
            Ok(n) => Ok(GpuCount::N(n)),
        }
    }
}

/// Opens the requested GPUs (ordinals 0..N).
pub fn open_gpus(count: GpuCount) -> Result<Vec<Arc<Gpu>>, GpuError> {
    let available = Gpu::device_count();
    let n = match count {
        GpuCount::All => available,
        GpuCount::N(n) if n > available => return Err(GpuError::BadOrdinal { ordinal: n - 1, count: available }),
        GpuCount::N(n) => n,
    };
    if n == 0 {
        return Err(GpuError::NoDevice);
    }
    let gpus: Vec<Arc<Gpu>> = (0..n).map(Gpu::open).collect::<Result<_, _>>()?;
    // Peer access between every pair, once, with the contexts (one-time setup, like them): the
    // device-side image sums ([`sum_parts`]) then copy over NVLink instead of through the host.
    // Best effort: where it fails the driver stages the copies through the host (slower, same sums).
    if gpus.len() > 1 {
        let _ = crate::runtime::reduce::enable_peers(&gpus);
    }
    Ok(gpus)
}

/// The devices of `--gpus N|all` under a `--device` choice, and a line saying what they are.
///
/// `--device cpu --gpus N` gives N CPU work queues (each runs the rayon reference on its items):
/// the split and the reduction are then exactly those of N GPUs, so they are tested on machines
/// without one. `all` is one queue on the CPU (the reference already uses every core). `auto`
/// takes the GPUs when they open and falls back to CPU queues, saying why.
pub fn backends(choice: DeviceChoice, count: GpuCount) -> Result<(Vec<Backend>, String), GpuError> {
    let cpu = |why: String| {
        let n = match count {
            GpuCount::All => 1,
            GpuCount::N(n) => n,
        };
        let note = format!("{n} CPU work queue(s) ({} threads){why}", rayon::current_num_threads());
        (vec![Backend::Cpu; n], note)
    };
    let gpus = |gpus: Vec<Arc<Gpu>>| {
        let names: Vec<String> = gpus.iter().map(|g| format!("{}: {}", g.info().ordinal, g.info().name)).collect();
        let note = format!("{} GPU(s) ({})", gpus.len(), names.join(", "));
        (gpus.into_iter().map(Backend::Gpu).collect(), note)
    };
    match choice {
        DeviceChoice::Cpu => Ok(cpu(", as requested".into())),
        DeviceChoice::Gpu => Ok(gpus(open_gpus(count)?)),
        DeviceChoice::Auto => match open_gpus(count) {
            Ok(g) => Ok(gpus(g)),
            Err(e) => Ok(cpu(format!(", because the GPUs asked for are not usable: {e}"))),
        },
    }
}

/// `n` things cut into `parts` contiguous ranges whose lengths differ by at most one (the first
/// `n % parts` are the longer ones); `parts` is capped at `n` (and at least 1), so no range is empty
/// unless `n` is 0.
pub fn even_ranges(n: usize, parts: usize) -> Vec<Range<usize>> {
    let parts = parts.clamp(1, n.max(1));
    (0..parts).map(|k| block_share(n, parts, k)).collect()
}

/// Part `k` of `parts` of `0..n` in [`even_ranges`]' split (an MPI rank's share of the work items).
pub fn block_share(n: usize, parts: usize, k: usize) -> Range<usize> {
    assert!(parts >= 1 && k < parts, "part {k} of {parts}");
    let (q, r) = (n / parts, n % parts);
    let start = k * q + k.min(r);
    start..start + q + usize::from(k < r)
}

/// The static split of the work items `items` over `ndevices` devices: device `d` takes the
/// contiguous block [`block_share`]`(items.len(), ndevices, d)` (shifted to `items.start`), the
/// same for every run. Used where each device accumulates its items into one resident result
/// (an image), so that a given device count always sums the same items in the same order.
pub fn device_blocks(items: Range<usize>, ndevices: usize) -> Vec<Range<usize>> {
    let n = items.len();
    (0..ndevices.max(1)).map(|d| {
        let b = block_share(n, ndevices.max(1), d);
        items.start + b.start..items.start + b.end
    }).collect()
}

/// Runs each device's [`device_blocks`] block of `items` on it, one host thread per device:
/// `start(device)` makes the device's state (a resident image), `step(device, state, item)` runs
/// the items in order, `finish(device, state)` gives the device's result. Devices with an empty
/// block give `None` (nothing is set up on them). Results come in device order. The first failure
/// stops the other devices before their next item and is returned naming device and item (the
/// block's first item for a failing `start`, its last for a failing `finish`).
pub fn run_blocks<D, S, R, A, B, C>(devices: &[D], items: Range<usize>, start: A, step: B, finish: C)
    -> Result<Vec<Option<R>>, WorkError>
where
    D: Sync,
    R: Send,
    A: Fn(&D) -> anyhow::Result<S> + Sync,
    B: Fn(&D, &mut S, usize) -> anyhow::Result<()> + Sync,
    C: Fn(&D, S) -> anyhow::Result<R> + Sync,
{
    assert!(!devices.is_empty(), "run_blocks needs at least one device");
    let blocks = device_blocks(items, devices.len());
    let stop = AtomicBool::new(false);
    let t0 = std::time::Instant::now();
    let outcomes: Vec<Result<Option<R>, WorkError>> = std::thread::scope(|s| {
        let handles: Vec<_> = devices.iter().zip(&blocks).enumerate().map(|(d, (dev, block))| {
            let (stop, start, step, finish) = (&stop, &start, &step, &finish);
            let block = block.clone();
            s.spawn(move || -> Result<Option<R>, WorkError> {
                if block.is_empty() {
                    return Ok(None);
                }
                let fail = |item: usize, source: anyhow::Error| {
                    stop.store(true, Ordering::Relaxed);
                    WorkError { device: d, item, source }
                };
                let mut state = start(dev).map_err(|e| fail(block.start, e.context("setting up the device")))?;
                mark("devices set up at", t0);
                for i in block.clone() {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(None); // another device failed: its error is the one reported
                    }
                    step(dev, &mut state, i).map_err(|e| fail(i, e))?;
                    if i == block.start {
                        mark("first item queued at", t0);
                    }
                }
                mark("all items queued at", t0);
                let r = finish(dev, state).map(Some).map_err(|e| fail(block.end - 1, e.context("collecting the device's result")));
                mark("device results in at", t0);
                r
            })
        }).collect();
        handles.into_iter().map(|h| h.join().expect("a device thread panicked")).collect()
    });
    let mut out = Vec::with_capacity(outcomes.len());
    let mut first_err: Option<WorkError> = None;
    for o in outcomes {
        match o {
            Ok(r) => out.push(r),
            // The lowest device's failure (deterministic when several fail).
            Err(e) => { first_err.get_or_insert(e); }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The element-wise sum of `parts` in their order (device order, or rank order): every element is
/// `((p0 + p1) + p2) + ...`, the same bits as adding the parts one after the other, computed in
/// one parallel pass (rayon) over the first part, which becomes the sum.
pub fn sum_in_order(parts: Vec<Vec<f32>>) -> anyhow::Result<Vec<f32>> {
    use rayon::prelude::*;
    let mut it = parts.into_iter();
    let Some(mut acc) = it.next() else { anyhow::bail!("no partial result to sum") };
    let rest: Vec<Vec<f32>> = it.collect();
    for (k, p) in rest.iter().enumerate() {
        anyhow::ensure!(p.len() == acc.len(), "partial result {} has {} samples, the first has {}", k + 1, p.len(), acc.len());
    }
    if rest.is_empty() {
        return Ok(acc);
    }
    const CHUNK: usize = 1 << 16;
    acc.par_chunks_mut(CHUNK).enumerate().for_each(|(c, a)| {
        let (o, n) = (c * CHUNK, a.len());
        for p in &rest {
            for (x, y) in a.iter_mut().zip(&p[o..o + n]) {
                *x += y;
            }
        }
    });
    Ok(acc)
}

/// [`crate::traces::TraceSet::validate`] without its scan of every sample (sample count, interval,
/// data length): for the multi-device jobs, whose work items check their own samples in parallel.
pub fn validate_shape(traces: &crate::traces::TraceSet, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(traces.data.len() == traces.headers.len() * traces.ns,
        "{what}: {} samples for {} traces of {} samples", traces.data.len(), traces.headers.len(), traces.ns);
    traces.slice(0..0).validate(what).map_err(anyhow::Error::msg)
}

/// One device's partial result (an image) in a multi-device job: on the host (a CPU work queue,
/// or a GPU image that was tiled through the host), or still resident on its GPU.
pub enum Part {
    Host(Vec<f32>),
    Gpu(Arc<Gpu>, cudarc::driver::CudaSlice<f32>),
}

impl Part {
    pub fn len(&self) -> usize {
        match self {
            Part::Host(v) => v.len(),
            Part::Gpu(_, s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
    /// The part on the host (one download for a resident one).
    pub fn into_host(self) -> anyhow::Result<Vec<f32>> {
        match self {
            Part::Host(v) => Ok(v),
            Part::Gpu(g, s) => {
                let v = g.download_prefaulted(&s)?;
                g.synchronize()?;
                Ok(v)
            }
        }
    }
}

/// The element-wise sum of `parts` in their order, the same bits as [`sum_in_order`] of the parts
/// on the host. Two or more resident parts (and no host part) are summed on the GPUs
/// ([`crate::runtime::reduce::sum_to_host`]: slices of the sum exchanged over the peer links, each
/// GPU downloading its slice in parallel), so neither the N whole downloads nor the host sum are
/// serial time; otherwise the parts come down and [`sum_in_order`] adds them.
pub fn sum_parts(parts: Vec<Part>) -> anyhow::Result<Vec<f32>> {
    let t = std::time::Instant::now();
    let on_gpus = parts.len() >= 2 && parts.iter().all(|p| matches!(p, Part::Gpu(..)));
    if on_gpus {
        let views: Vec<(Arc<Gpu>, &cudarc::driver::CudaSlice<f32>)> = parts.iter().map(|p| match p {
            Part::Gpu(g, s) => (g.clone(), s),
            Part::Host(_) => unreachable!("checked above"),
        }).collect();
        let sum = crate::runtime::reduce::sum_to_host(&views)?;
        mark("device sum + slice downloads", t);
        return Ok(sum);
    }
    let host = parts.into_iter().map(Part::into_host).collect::<anyhow::Result<Vec<_>>>()?;
    mark("image download", t);
    let t = std::time::Instant::now();
    let sum = sum_in_order(host)?;
    mark("host sum", t);
    Ok(sum)
}

/// Wall-clock marks of the multi-device jobs (the scaling notes, docs/notes/scale.md): `(phase, ms)`, where ms is
/// (phases named "... at") the time from the start of the split ([`run_blocks`], [`fold_on_devices`]) to the event, or
/// a duration for host steps around it (plan, sum). Diagnostics only: nothing reads them but the
/// scaling bench, which clears them before a run and prints the last run's ([`take_marks`]).
static MARKS: Mutex<Vec<(&'static str, f64)>> = Mutex::new(Vec::new());

/// Records `phase` at `since.elapsed()` (kept bounded: a job that nobody reads the marks of
/// stops recording after a few thousand).
pub fn mark(phase: &'static str, since: std::time::Instant) { mark_ms(phase, since.elapsed().as_secs_f64() * 1e3) }

/// Records `phase` with a duration measured otherwise (e.g. from CUDA events).
pub fn mark_ms(phase: &'static str, ms: f64) {
    if let Ok(mut m) = MARKS.lock() && m.len() < 4096 {
        m.push((phase, ms));
    }
}

/// The marks recorded since the last call, in recording order (and clears them).
pub fn take_marks() -> Vec<(&'static str, f64)> {
    MARKS.lock().map(|mut m| std::mem::take(&mut *m)).unwrap_or_default()
}

/// The marks as one line: each phase once, in order of first appearance, its time (`min-max`
/// where several devices recorded it), e.g. `plan 12.1 ms, device setup 3.0-5.2 ms, ...`.
pub fn marks_line(marks: &[(&'static str, f64)]) -> String {
    let mut seen: Vec<(&'static str, f64, f64)> = Vec::new();
    for &(p, ms) in marks {
        match seen.iter_mut().find(|(q, _, _)| *q == p) {
            Some((_, lo, hi)) => {
                *lo = lo.min(ms);
                *hi = hi.max(ms);
            }
            None => seen.push((p, ms, ms)),
        }
    }
    // Tenths of a ms below 100 ms (the serial ends of a 35 ms job are 1-2 ms).
    let ms = |v: f64| if v < 100.0 { format!("{v:.1}") } else { format!("{v:.0}") };
    seen.iter().map(|&(p, lo, hi)| if hi - lo >= 0.05 { format!("{p} {}-{} ms", ms(lo), ms(hi)) } else { format!("{p} {} ms", ms(hi)) })
        .collect::<Vec<_>>().join(", ")
}

/// A failed work item: which device, which item, and why.
#[derive(Debug, thiserror::Error)]
#[error("device {device} failed on work item {item}: {source:#}")]
pub struct WorkError {
    pub device: usize,
    pub item: usize,
    pub source: anyhow::Error,
}

/// Runs `work(device, item_index, item)` for every item, spreading items over `devices` with one
/// thread per device. The first failure stops the other threads from taking new items and is
/// returned naming the device and the item.
pub fn map_on_devices<D, I, R, F>(devices: &[D], items: &[I], work: F) -> Result<Vec<R>, WorkError>
where
    D: Sync,
    I: Sync,
    R: Send,
    F: Fn(&D, usize, &I) -> anyhow::Result<R> + Sync,
{
    assert!(!devices.is_empty(), "map_on_devices needs at least one device");
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let failure: Mutex<Option<WorkError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for (d, dev) in devices.iter().enumerate() {
            let (next, stop, results, failure, work) = (&next, &stop, &results, &failure, &work);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= items.len() {
                        break;
                    }
                    match work(dev, i, &items[i]) {
                        Ok(r) => results.lock().unwrap()[i] = Some(r),
                        Err(source) => {
                            stop.store(true, Ordering::Relaxed);
                            let mut f = failure.lock().unwrap();
                            if f.is_none() {
                                *f = Some(WorkError { device: d, item: i, source });
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap() {
        return Err(e);
    }
    Ok(results.into_inner().unwrap().into_iter().map(|r| r.expect("every item ran")).collect())
}

/// [`map_on_devices`] with the results folded into `acc` in item order as they arrive: `fold(acc,
/// item index, result)` runs on the calling thread for item 0, then 1, 2, ... (a result that comes
/// early waits for its predecessors), so a floating-point reduction (an image sum) is the same for
/// any number of devices and any timing, and at most the out-of-order results are held, not all.
/// A failing fold is reported against the item (device `usize::MAX`: the host).
pub fn fold_on_devices<D, I, R, A, F, G>(devices: &[D], items: &[I], mut acc: A, work: F, mut fold: G) -> Result<A, WorkError>
where
    D: Sync,
    I: Sync,
    R: Send,
    F: Fn(&D, usize, &I) -> anyhow::Result<R> + Sync,
    G: FnMut(&mut A, usize, R) -> anyhow::Result<()>,
{
    assert!(!devices.is_empty(), "fold_on_devices needs at least one device");
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let mut failure: Option<WorkError> = None;
    let t0 = std::time::Instant::now();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, usize, anyhow::Result<R>)>();
        for (d, dev) in devices.iter().enumerate() {
            let (next, stop, work, tx) = (&next, &stop, &work, tx.clone());
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= items.len() {
                        break;
                    }
                    let r = work(dev, i, &items[i]);
                    let failed = r.is_err();
                    if tx.send((d, i, r)).is_err() || failed {
                        stop.store(true, Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
        drop(tx);
        // The calling thread folds: results wait in `early` until every earlier item is in.
        let mut early: BTreeMap<usize, R> = BTreeMap::new();
        let mut due = 0;
        let (mut got, mut folding) = (0usize, 0.0f64);
        for (d, i, r) in rx {
            got += 1;
            if got == 1 {
                mark("first result at", t0);
            }
            if got == items.len() {
                mark("last result at", t0);
            }
            if failure.is_some() {
                continue; // drain, so the workers finish
            }
            let tf = std::time::Instant::now();
            match r {
                Err(source) => {
                    stop.store(true, Ordering::Relaxed);
                    failure = Some(WorkError { device: d, item: i, source });
                }
                Ok(r) => {
                    early.insert(i, r);
                    while let Some(r) = early.remove(&due) {
                        if let Err(source) = fold(&mut acc, due, r) {
                            stop.store(true, Ordering::Relaxed);
                            failure = Some(WorkError { device: usize::MAX, item: due, source });
                            break;
                        }
                        due += 1;
                    }
                }
            }
            folding += tf.elapsed().as_secs_f64();
        }
        mark("folded at", t0);
        mark_ms("host fold busy", folding * 1e3);
    });
    match failure {
        Some(e) => Err(e),
        None => Ok(acc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_item_order_whatever_the_device() {
        let devices = [10usize, 20, 30];
        let items: Vec<usize> = (0..100).collect();
        let out = map_on_devices(&devices, &items, |_, i, &x| Ok(x * 2 + i)).unwrap();
        assert_eq!(out, (0..100).map(|x| 3 * x).collect::<Vec<_>>());
    }

    #[test]
    fn a_failure_names_device_and_item() {
        let devices = [(), ()];
        let items: Vec<usize> = (0..50).collect();
        let e = map_on_devices(&devices, &items, |_, _, &x| if x == 17 { anyhow::bail!("bad trace") } else { Ok(x) })
            .unwrap_err();
        assert_eq!(e.item, 17);
        assert!(e.to_string().contains("work item 17") && e.to_string().contains("bad trace"), "{e}");
    }

    #[test]
    fn scale_fold_runs_in_item_order_whatever_the_timing() {
        // Items finish out of order (later items are faster); the fold still sees 0, 1, 2, ...
        let devices = [(), (), (), ()];
        let items: Vec<u64> = (0..40).collect();
        let seen = fold_on_devices(&devices, &items, Vec::new(), |_, _, &x| {
            std::thread::sleep(std::time::Duration::from_micros((40 - x) * 50));
            Ok(x)
        }, |acc: &mut Vec<u64>, i, r| {
            assert_eq!(i as u64, r);
            acc.push(r);
            Ok(())
        }).unwrap();
        assert_eq!(seen, items);
        // An f32 sum in item order is bit-identical for 1 and 3 devices.
        let vals: Vec<f32> = (0..1000).map(|k| ((k * 7919 % 1000) as f32 - 500.0) * 1.37e-3).collect();
        let sum = |n: usize| fold_on_devices(&vec![(); n], &vals, 0.0f32, |_, _, &v| Ok(v), |a, _, v| { *a += v; Ok(()) }).unwrap();
        assert_eq!(sum(1).to_bits(), sum(3).to_bits());
    }

    #[test]
    fn scale_fold_failure_names_device_and_item() {
        let devices = [(), ()];
        let items: Vec<usize> = (0..30).collect();
        let e = fold_on_devices(&devices, &items, 0usize, |_, _, &x| if x == 11 { anyhow::bail!("trace 5 is bad") } else { Ok(x) },
            |a, _, x| { *a += x; Ok(()) }).unwrap_err();
        assert_eq!(e.item, 11);
        assert!(e.to_string().contains("work item 11") && e.to_string().contains("trace 5 is bad"), "{e}");
        let e = fold_on_devices(&devices, &items, 0usize, |_, _, &x| Ok(x),
            |_, i, _| if i == 4 { anyhow::bail!("image size mismatch") } else { Ok(()) }).unwrap_err();
        assert_eq!(e.item, 4);
    }

    #[test]
    fn scale_even_ranges_cover_everything_once() {
        for n in [0usize, 1, 5, 16, 17, 1000] {
            for parts in 1..9 {
                let r = even_ranges(n, parts);
                assert_eq!(r.first().unwrap().start, 0);
                assert_eq!(r.last().unwrap().end, n);
                assert!(r.windows(2).all(|w| w[0].end == w[1].start));
                let (lo, hi) = (r.iter().map(|x| x.len()).min().unwrap(), r.iter().map(|x| x.len()).max().unwrap());
                assert!(hi - lo <= 1, "{n} in {parts}: {r:?}");
                assert!(n == 0 || lo >= 1);
            }
        }
        assert_eq!(block_share(10, 3, 0), 0..4);
        assert_eq!(block_share(10, 3, 2), 7..10);
    }

    #[test]
    fn scale_blocks_are_static_contiguous_and_in_order() {
        assert_eq!(device_blocks(0..16, 4), vec![0..4, 4..8, 8..12, 12..16]);
        assert_eq!(device_blocks(8..16, 3), vec![8..11, 11..14, 14..16]);
        assert_eq!(device_blocks(0..2, 3), vec![0..1, 1..2, 2..2]);
        // Each device sees its block in order; an empty block gives None.
        let got = run_blocks(&[(), (), ()], 0..2, |_| Ok(Vec::new()), |_, s: &mut Vec<usize>, i| {
            s.push(i);
            Ok(())
        }, |_, s| Ok(s)).unwrap();
        assert_eq!(got, vec![Some(vec![0]), Some(vec![1]), None]);
        let got = run_blocks(&[(); 4], 0..16, |_| Ok(Vec::new()), |_, s: &mut Vec<usize>, i| {
            s.push(i);
            Ok(())
        }, |_, s| Ok(s)).unwrap();
        assert_eq!(got.into_iter().flatten().flatten().collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
        let e = run_blocks(&[(); 3], 0..12, |_| Ok(()), |_, _, i| if i == 9 { anyhow::bail!("bad trace") } else { Ok(()) },
            |_, _| Ok(())).unwrap_err();
        assert_eq!((e.device, e.item), (2, 9));
        assert!(e.to_string().contains("work item 9") && e.to_string().contains("bad trace"), "{e}");
    }

    #[test]
    fn scale_sum_in_order_is_the_sequential_sum() {
        let parts: Vec<Vec<f32>> = (0..4).map(|k| (0..200_001).map(|i| ((i * 7919 + k * 104729) % 1000) as f32 * 1.37e-3 - 0.6)
            .collect()).collect();
        let mut seq = parts[0].clone();
        for p in &parts[1..] {
            seq.iter_mut().zip(p).for_each(|(a, b)| *a += b);
        }
        let got = sum_in_order(parts.clone()).unwrap();
        assert!(got.iter().zip(&seq).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(sum_in_order(vec![vec![1.0; 3], vec![1.0; 2]]).is_err());
        assert!(sum_in_order(vec![]).is_err());
    }

    #[test]
    fn scale_cpu_queues_for_device_cpu() {
        let (b, note) = backends(DeviceChoice::Cpu, GpuCount::N(3)).unwrap();
        assert_eq!(b.len(), 3);
        assert!(b.iter().all(|b| b.gpu().is_none()) && note.contains("3 CPU"), "{note}");
        assert_eq!(backends(DeviceChoice::Cpu, GpuCount::All).unwrap().0.len(), 1);
    }

    #[test]
    fn scale_marks_line_gives_ranges_over_devices() {
        assert_eq!(marks_line(&[("plan", 1.24), ("devices set up at", 2.0), ("devices set up at", 5.0), ("host sum", 3.0),
            ("image sum", 150.4), ("image sum", 150.42)]),
            "plan 1.2 ms, devices set up at 2.0-5.0 ms, host sum 3.0 ms, image sum 150 ms");
        assert_eq!(marks_line(&[]), "");
    }

    #[test]
    fn gpu_count_parses() {
        assert_eq!("all".parse::<GpuCount>(), Ok(GpuCount::All));
        assert_eq!("4".parse::<GpuCount>(), Ok(GpuCount::N(4)));
        assert!("0".parse::<GpuCount>().is_err());
    }
}
