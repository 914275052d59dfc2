//! Progress bars: drawn on a terminal, silent in pipes and CI (indicatif hides itself when stderr
//! is not a TTY).
//!
//! The long loops of the library (migration columns and chunks, NLBF parameter traces, NMO
//! traces, wave-packet cubes, extrapolation steps) report through [`work`]: a bar only when the
//! command line turned them on ([`enable`]), so library callers (tests, benchmarks with their own
//! bar) see nothing.

use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `len` steps labelled `what`.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}")
            .unwrap()
            .progress_chars("=> "),
    );
    pb.set_prefix(what.to_string());
    pb
}

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns the library's bars on (the command line does, for the commands without their own).
pub fn enable(on: bool) { ENABLED.store(on, Ordering::Relaxed); }

/// Whether the library's bars are on.
pub fn enabled() -> bool { ENABLED.load(Ordering::Relaxed) }

/// A bar over `len` steps of library work: [`bar`] when [`enable`]d (and stderr is a terminal),
/// else a hidden one that costs nothing to advance. Cleared from the terminal when dropped.
pub fn work(len: u64, what: &str) -> Work {
    Work(if enabled() { bar(len, what) } else { ProgressBar::hidden() })
}

/// A library bar ([`work`]); `inc` from any thread.
pub struct Work(ProgressBar);

impl Work {
    pub fn inc(&self, n: u64) { self.0.inc(n); }
    /// Grows the total (work found on the way).
    pub fn inc_length(&self, n: u64) { self.0.inc_length(n); }
}

impl Drop for Work {
    fn drop(&mut self) { self.0.finish_and_clear(); }
}

/// A queue job ([`crate::exec::QueueJob`]) whose items tick `Work` as they finish.
pub(crate) struct Ticked<'a, J>(pub &'a J, pub &'a Work);

impl<J: crate::exec::QueueJob> crate::exec::QueueJob for Ticked<'_, J> {
    type Device = J::Device;
    type Result = J::Result;
    type Output = J::Output;
    fn items(&self) -> usize { self.0.items() }
    fn run(&self, dev: &J::Device, item: usize) -> anyhow::Result<J::Result> {
        let r = self.0.run(dev, item);
        self.1.inc(1);
        r
    }
    fn fold(&self, out: &mut J::Output, item: usize, r: J::Result) -> anyhow::Result<()> { self.0.fold(out, item, r) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hidden_unless_enabled() {
        let w = super::work(10, "t");
        w.inc(3);
        assert!(w.0.is_hidden());
    }
}
