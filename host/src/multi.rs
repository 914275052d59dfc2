//! Work split over several devices: one host thread per device pulling work items from a shared
//! queue (dynamic balancing: a faster device takes more items). Used by `--gpus N|all`.
//!
//! Results come back in item order, so reductions over them (image sums, coefficient merges) run in
//! a fixed order and are reproducible regardless of which device computed which item.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
    (0..n).map(Gpu::open).collect()
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
    fn gpu_count_parses() {
        assert_eq!("all".parse::<GpuCount>(), Ok(GpuCount::All));
        assert_eq!("4".parse::<GpuCount>(), Ok(GpuCount::N(4)));
        assert!("0".parse::<GpuCount>().is_err());
    }
}
