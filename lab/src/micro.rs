//! Micro-benchmarks of CPU code and single kernels (`cargo bench -p seisgpu-lab`, `lab/benches/`):
//! each case is timed with [`measure_cpu`] (warm-up, then the median of wall-clock repeats) and
//! printed as one line, with its throughput when the case says how much work one run is.
//! `cargo bench -p seisgpu-lab --bench io -- ibm` runs only the cases whose name contains `ibm`.
//! Without `--bench` on the command line (`cargo test --benches`) every case runs once, unprinted:
//! a check that the benchmarks still run, not a measurement.

use seisgpu_host::runtime::timing::{measure_cpu, Stats};

/// A named group of cases with shared repeat counts.
pub struct Group {
    name: String,
    timed: bool,
    filters: Vec<String>,
    warmup: usize,
    repeats: usize,
}

impl Group {
    /// A group named `name` (the prefix of its cases' names): 1 warm-up run, 10 timed runs.
    pub fn new(name: &str) -> Group {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let timed = args.iter().any(|a| a == "--bench");
        let filters = args.into_iter().filter(|a| !a.starts_with('-')).collect();
        Group { name: name.to_string(), timed, filters, warmup: 1, repeats: 10 }
    }

    /// Timed runs per case (at least 1).
    pub fn repeats(mut self, repeats: usize) -> Group {
        self.repeats = repeats.max(1);
        self
    }

    /// Times `f` as case `case`; `work` is what one run does (amount, unit, e.g. `(1e6, "sample")`)
    /// for the throughput column. Returns the timing (`None` when filtered out or not timed).
    pub fn case<R>(&self, case: &str, work: Option<(f64, &str)>, mut f: impl FnMut() -> R) -> Option<Stats> {
        let name = format!("{}/{case}", self.name);
        if !self.filters.is_empty() && !self.filters.iter().any(|p| name.contains(p.as_str())) {
            return None;
        }
        if !self.timed {
            std::hint::black_box(f());
            return None;
        }
        let s = measure_cpu(self.warmup, self.repeats, || {
            std::hint::black_box(f());
        });
        let rate = work.map(|(w, unit)| crate::report::human(w / (s.median_ms * 1e-3), unit)).unwrap_or_default();
        println!("{name:<58} median {:>10.3} ms  (min {:.3}, max {:.3}, {} runs)  {rate}", s.median_ms, s.min_ms, s.max_ms, s.repeats);
        Some(s)
    }
}
