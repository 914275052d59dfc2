//! How a job runs: on one device, on several (GPUs, or CPU work queues with `--device cpu
//! --gpus N`), or across MPI ranks ([`mpi`], cargo feature `mpi`). An algorithm describes its job
//! once, as a [`Job`] (its work items, what a device sets up, what it does per item, what it gives
//! back, how the devices' parts reduce), and the runners here do the rest.
//!
//! A toy job, the sum of the squares of 0..100 with ten items of ten numbers each:
//!
//! ```
//! use seisgpu_host::exec::{self, Job};
//! use seisgpu_host::Backend;
//!
//! struct Squares;
//! impl Job for Squares {
//!     type Device = Backend;
//!     type State = u64;   // per device: its running sum
//!     type Part = u64;    // what a device gives back
//!     type Output = u64;
//!     fn items(&self) -> usize { 10 }
//!     fn start(&self, _: &Backend) -> anyhow::Result<u64> { Ok(0) }
//!     fn run(&self, _: &Backend, sum: &mut u64, item: usize) -> anyhow::Result<()> {
//!         *sum += (10 * item as u64..10 * item as u64 + 10).map(|x| x * x).sum::<u64>();
//!         Ok(())
//!     }
//!     fn finish(&self, _: &Backend, sum: u64) -> anyhow::Result<u64> { Ok(sum) }
//!     // Parts come in device order; a floating-point image would use `reduce::sum_parts`.
//!     fn reduce(&self, parts: Vec<u64>) -> anyhow::Result<u64> { Ok(parts.iter().sum()) }
//! }
//!
//! let one = exec::run(&Squares, &[Backend::Cpu]).unwrap();
//! let three = exec::run(&Squares, &[Backend::Cpu, Backend::Cpu, Backend::Cpu]).unwrap();
//! assert_eq!((one, three), (328350, 328350));
//! ```
//!
//! On three devices, device 0 runs items 0..4, device 1 items 4..7, device 2 items 7..10
//! (`split::device_blocks`: a static split, so a given device count always sums the same items
//! in the same order and its result is repeatable bit for bit), and the parts are reduced in
//! device order. Under MPI, each rank builds the same job from what it read (every rank the same
//! items, each holding the input of its own block), runs its block of the items
//! (`split::block_share`) on its local devices with the same runner ([`run_items`]) and reduces its
//! devices' parts; the ranks' results are then summed in rank order and written by every rank into
//! one file (`mpi::write_npy_sum`, `mpi::write_segy_sum`, `mpi::write_shares`). With one device
//! per rank, a job on R ranks sums exactly what one process with R devices sums, in the same order.
//!
//! A job whose items each give a result of their own (parameter traces' picks, a block of enhanced
//! traces, a wave-packet cube) is a [`QueueJob`] instead: the devices pull items from a queue as
//! they free up (a faster device takes more), and each item's result is folded into the output on
//! the calling thread in item order, so the output is the same bit for bit for any device count
//! and any timing. The same toy as a queue:
//!
//! ```
//! use seisgpu_host::exec::{self, QueueJob};
//! use seisgpu_host::Backend;
//!
//! struct Squares;
//! impl QueueJob for Squares {
//!     type Device = Backend;
//!     type Result = u64;  // one item's sum, computed on whichever device took it
//!     type Output = u64;
//!     fn items(&self) -> usize { 10 }
//!     fn run(&self, _: &Backend, item: usize) -> anyhow::Result<u64> {
//!         Ok((10 * item as u64..10 * item as u64 + 10).map(|x| x * x).sum())
//!     }
//!     // Item 0 first, then 1, 2, ... whichever device ran them.
//!     fn fold(&self, sum: &mut u64, _item: usize, part: u64) -> anyhow::Result<()> { *sum += part; Ok(()) }
//! }
//!
//! let one = exec::run_queue(&Squares, &[Backend::Cpu], 0).unwrap();
//! let three = exec::run_queue(&Squares, &[Backend::Cpu, Backend::Cpu, Backend::Cpu], 0).unwrap();
//! assert_eq!((one, three), (328350, 328350));
//! ```
//!
//! Which to pick: a [`Job`] when each device accumulates its items into resident state that is
//! costly to move (a migration image: one per device, reduced once); a [`QueueJob`] when items
//! give results small or final enough to hand back one by one, and the load is uneven or the
//! devices differ. Under MPI a rank runs its block of a queue job's items through the same queue
//! on its local devices ([`mpi::run_rank_queue`]), folded in item order.
//!
//! - [`devices`]: `--gpus N|all`, opening the GPUs or making CPU work queues.
//! - [`split`]: the static split, the dynamic queue (items whose results are concatenated or folded
//!   in item order), the block of an MPI rank.
//! - [`reduce`]: sums in device (or rank) order, on the host or on the GPUs.
//! - [`mpi`]: the ranks ([`mpi::Cluster`]), reading a rank's share, writing one file from every rank.
//!
//! The strong-scaling benchmark over these runners is `seisgpu_lab::scale`; the phase timing log it
//! prints is [`crate::runtime::phases`].

pub mod devices;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod reduce;
pub mod split;

use std::ops::Range;

pub use devices::{backends, open_gpus, GpuCount};
pub use split::WorkError;

/// One algorithm's job over work items, the same description for one device, several, or MPI
/// ranks. The runners call [`Job::start`] once per device that has items, [`Job::run`] for each of
/// its items in order, [`Job::finish`] once, then [`Job::reduce`] on the devices' parts in device order.
pub trait Job: Sync {
    /// What the job runs on: a [`crate::Backend`], or a device with resident data made once.
    type Device: Sync;
    /// Per device: a resident image, an accumulator, a work queue.
    type State;
    /// What one device gives back.
    type Part: Send;
    /// The reduced result of the devices' parts.
    type Output;
    /// The number of work items (the same on every rank).
    fn items(&self) -> usize;
    fn start(&self, device: &Self::Device) -> anyhow::Result<Self::State>;
    fn run(&self, device: &Self::Device, state: &mut Self::State, item: usize) -> anyhow::Result<()>;
    fn finish(&self, device: &Self::Device, state: Self::State) -> anyhow::Result<Self::Part>;
    /// Reduces the devices' parts, in device order (never empty).
    fn reduce(&self, parts: Vec<Self::Part>) -> anyhow::Result<Self::Output>;
}

/// Runs every item of `job` on `devices` (the static split) and reduces the parts.
pub fn run<J: Job>(job: &J, devices: &[J::Device]) -> anyhow::Result<J::Output> {
    let parts = run_items(job, devices, 0..job.items())?;
    job.reduce(parts)
}

/// Runs the items `items` of `job` on `devices`, device `d` taking the contiguous block `d` of them
/// (`split::device_blocks`); the parts of the devices that had items, in device order. The first
/// failure stops the other devices and names the device and the item.
pub fn run_items<J: Job>(job: &J, devices: &[J::Device], items: Range<usize>) -> Result<Vec<J::Part>, WorkError> {
    if devices.is_empty() {
        return Err(WorkError { device: 0, item: items.start, source: anyhow::anyhow!("no device to run on") });
    }
    let parts = split::run_blocks(devices, items, |d| job.start(d), |d, s, i| job.run(d, s, i), |d, s| job.finish(d, s))?;
    Ok(parts.into_iter().flatten().collect())
}

/// One algorithm's job over work items that the devices pull from a queue as they free up, each
/// item's result folded into the output in item order on the calling thread (see the module doc:
/// the output does not depend on the device count or the timing). The same description runs on
/// one device, several, or an MPI rank's block of the items ([`mpi::run_rank_queue`]).
pub trait QueueJob: Sync {
    /// What the job runs on: a [`crate::Backend`], or a device with resident data made once.
    type Device: Sync;
    /// What one item gives back to the calling thread.
    type Result: Send;
    /// What the items' results fold into.
    type Output;
    /// The number of work items (the same on every rank).
    fn items(&self) -> usize;
    /// Runs `item` on `device` (on the device's host thread).
    fn run(&self, device: &Self::Device, item: usize) -> anyhow::Result<Self::Result>;
    /// Folds `item`'s result into `out`, on the calling thread, items in ascending order.
    fn fold(&self, out: &mut Self::Output, item: usize, result: Self::Result) -> anyhow::Result<()>;
}

/// Runs every item of `job` on `devices` through the queue, folding the results into `out` in
/// item order.
pub fn run_queue<J: QueueJob>(job: &J, devices: &[J::Device], out: J::Output) -> Result<J::Output, WorkError> {
    run_queue_items(job, devices, 0..job.items(), out)
}

/// Runs the items `items` of `job` on `devices` through the queue (`split::fold_on_devices`),
/// folding their results into `out` in item order. The first failure stops the other devices
/// and names the device and the item (its number in the job; device `usize::MAX`: the fold).
pub fn run_queue_items<J: QueueJob>(job: &J, devices: &[J::Device], items: Range<usize>, out: J::Output)
    -> Result<J::Output, WorkError> {
    if devices.is_empty() {
        return Err(WorkError { device: 0, item: items.start, source: anyhow::anyhow!("no device to run on") });
    }
    let ids: Vec<usize> = items.collect();
    split::fold_on_devices(devices, &ids, out, |d, _, &i| job.run(d, i), |out, k, r| job.fold(out, ids[k], r))
        .map_err(|e| WorkError { item: ids[e.item], ..e })
}

/// [`crate::traces::TraceSet::validate`] without its scan of every sample (sample count, interval,
/// data length): for the multi-device jobs, whose work items check their own samples in parallel.
pub fn validate_shape(traces: &crate::traces::TraceSet, what: &str) -> anyhow::Result<()> {
    crate::ensure_input!(traces.data.len() == traces.headers.len() * traces.ns,
        "{what}: {} samples for {} traces of {} samples", traces.data.len(), traces.headers.len(), traces.ns);
    traces.slice(0..0).validate(what).map_err(|r| crate::error::Error::Input(r).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items record where they ran: a job's parts come in device order, each its block in order.
    struct Record(usize);
    impl Job for Record {
        type Device = usize;
        type State = Vec<(usize, usize)>;
        type Part = Vec<(usize, usize)>;
        type Output = Vec<(usize, usize)>;
        fn items(&self) -> usize { self.0 }
        fn start(&self, _: &usize) -> anyhow::Result<Self::State> { Ok(Vec::new()) }
        fn run(&self, d: &usize, s: &mut Self::State, i: usize) -> anyhow::Result<()> {
            anyhow::ensure!(i != 13, "bad trace");
            s.push((*d, i));
            Ok(())
        }
        fn finish(&self, _: &usize, s: Self::State) -> anyhow::Result<Self::Part> { Ok(s) }
        fn reduce(&self, parts: Vec<Self::Part>) -> anyhow::Result<Self::Output> { Ok(parts.concat()) }
    }

    /// Items record where they ran, folded in item order.
    struct Queue(usize);
    impl QueueJob for Queue {
        type Device = usize;
        type Result = (usize, usize);
        type Output = Vec<(usize, usize)>;
        fn items(&self) -> usize { self.0 }
        fn run(&self, d: &usize, i: usize) -> anyhow::Result<(usize, usize)> {
            anyhow::ensure!(i != 13, "bad trace");
            // Later items are faster: they come back out of order.
            std::thread::sleep(std::time::Duration::from_micros(((self.0 - i) * 30) as u64));
            Ok((*d, i))
        }
        fn fold(&self, out: &mut Self::Output, i: usize, r: (usize, usize)) -> anyhow::Result<()> {
            anyhow::ensure!(i == r.1, "item {i} folded with the result of item {}", r.1);
            anyhow::ensure!(i != 11, "image size mismatch");
            out.push(r);
            Ok(())
        }
    }

    #[test]
    fn queue_jobs_fold_in_item_order() {
        let got = run_queue(&Queue(10), &[0, 1, 2], Vec::new()).unwrap();
        assert_eq!(got.iter().map(|r| r.1).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
        assert!(got.iter().all(|r| r.0 < 3));
        // A block of the items (an MPI rank's): items keep their numbers.
        let got = run_queue_items(&Queue(10), &[0, 1], 4..8, Vec::new()).unwrap();
        assert_eq!(got.iter().map(|r| r.1).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        let e = run_queue_items(&Queue(20), &[0, 1], 12..20, Vec::new()).unwrap_err();
        assert!(e.item == 13 && e.to_string().contains("work item 13") && e.to_string().contains("bad trace"), "{e}");
        let e = run_queue_items(&Queue(20), &[0, 1], 10..13, Vec::new()).unwrap_err();
        assert!(e.item == 11 && e.device == usize::MAX && e.to_string().contains("image size mismatch"), "{e}");
        assert!(run_queue(&Queue(3), &[], Vec::new()).unwrap_err().to_string().contains("no device"));
        assert!(run_queue(&Queue(0), &[0], Vec::new()).unwrap().is_empty());
    }

    #[test]
    fn jobs_run_static_blocks_in_device_order() {
        let got = run(&Record(10), &[0, 1, 2]).unwrap();
        let want: Vec<(usize, usize)> = (0..10).map(|i| (if i < 4 { 0 } else if i < 7 { 1 } else { 2 }, i)).collect();
        assert_eq!(got, want);
        // Fewer items than devices: the idle devices give no part.
        assert_eq!(run_items(&Record(2), &[0, 1, 2], 0..2).unwrap().len(), 2);
        let e = run(&Record(20), &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("device 1") && e.contains("work item 13") && e.contains("bad trace"), "{e}");
        assert!(run(&Record(3), &[]).unwrap_err().to_string().contains("no device"));
    }
}
