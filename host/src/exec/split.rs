//! The split of a job's work items over devices: the static split (device `d` takes the
//! contiguous block `d` of the items, into one resident result) and the dynamic queue (one host
//! thread per device pulling items: a faster device takes more), and the block of an MPI rank.
//!
//! Results come back in device or item order, so reductions over them (image sums, coefficient
//! merges) run in a fixed order and are reproducible regardless of which device computed which item.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::runtime::phases::{mark, mark_ms};

/// `n` things cut into `parts` contiguous ranges whose lengths differ by at most one (the first
/// `n % parts` are the longer ones); `parts` is capped at `n` (and at least 1), so no range is empty
/// unless `n` is 0.
pub(crate) fn even_ranges(n: usize, parts: usize) -> Vec<Range<usize>> {
    let parts = parts.clamp(1, n.max(1));
    (0..parts).map(|k| block_share(n, parts, k)).collect()
}

/// Part `k` of `parts` of `0..n` in [`even_ranges`]' split (an MPI rank's share of the work items).
pub(crate) fn block_share(n: usize, parts: usize, k: usize) -> Range<usize> {
    assert!(parts >= 1 && k < parts, "part {k} of {parts}");
    let (q, r) = (n / parts, n % parts);
    let start = k * q + k.min(r);
    start..start + q + usize::from(k < r)
}

/// The static split of the work items `items` over `ndevices` devices: device `d` takes the
/// contiguous block [`block_share`]`(items.len(), ndevices, d)` (shifted to `items.start`), the
/// same for every run. Used where each device accumulates its items into one resident result
/// (an image), so that a given device count always sums the same items in the same order.
pub(crate) fn device_blocks(items: Range<usize>, ndevices: usize) -> Vec<Range<usize>> {
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
pub(crate) fn run_blocks<D, S, R, A, B, C>(devices: &[D], items: Range<usize>, start: A, step: B, finish: C)
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

/// A failed work item: which device, which item, and why.
#[derive(Debug, thiserror::Error)]
#[error("device {device} failed on work item {item}: {source:#}")]
pub struct WorkError {
    pub device: usize,
    pub item: usize,
    pub source: anyhow::Error,
}

/// The dynamic queue: runs `work(device, item_index, item)` for every item, one host thread per
/// device pulling the next item as it frees up, with the results folded into `acc` in item order as they arrive: `fold(acc,
/// item index, result)` runs on the calling thread for item 0, then 1, 2, ... (a result that comes
/// early waits for its predecessors), so a floating-point reduction (an image sum) is the same for
/// any number of devices and any timing, and at most the out-of-order results are held, not all.
/// A failing fold is reported against the item (device `usize::MAX`: the host).
pub(crate) fn fold_on_devices<D, I, R, A, F, G>(devices: &[D], items: &[I], mut acc: A, work: F, mut fold: G) -> Result<A, WorkError>
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
}
