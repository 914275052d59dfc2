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

/// [`crate::traces::TraceSet::validate`] without its scan of every sample (sample count, interval,
/// data length): for the multi-device jobs, whose work items check their own samples in parallel.
pub fn validate_shape(traces: &crate::traces::TraceSet, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(traces.data.len() == traces.headers.len() * traces.ns,
        "{what}: {} samples for {} traces of {} samples", traces.data.len(), traces.headers.len(), traces.ns);
    traces.slice(0..0).validate(what).map_err(anyhow::Error::msg)
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
