//! The wall-clock phase log of the multi-device jobs: the scaling bench clears it before a run and
//! prints the last run's phases (where a job's serial time goes). Diagnostics only: nothing else
//! reads it. Below every algorithm and `crate::exec`, which record into it.

use std::sync::Mutex;

/// Wall-clock marks of the multi-device jobs (the scaling notes, docs/notes/scale.md): `(phase, ms)`, where ms is
/// (phases named "... at") the time from the start of the split (`crate::exec::split::run_blocks`, `fold_on_devices`) to the event, or
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_marks_line_gives_ranges_over_devices() {
        assert_eq!(marks_line(&[("plan", 1.24), ("devices set up at", 2.0), ("devices set up at", 5.0), ("host sum", 3.0),
            ("image sum", 150.4), ("image sum", 150.42)]),
            "plan 1.2 ms, devices set up at 2.0-5.0 ms, host sum 3.0 ms, image sum 150 ms");
        assert_eq!(marks_line(&[]), "");
    }
}
