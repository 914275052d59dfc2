//! Panels read from SEG-Y (and Seismic Unix) files: a range of traces, the horizontal axis
//! labelled by a trace-header key, time in ms or depth in m.
//!
//! Depth files: the sample interval field holds the depth interval in mm (so a 5 m interval reads
//! as "5 ms", as [`crate::io::output`] writes depth images), and a textual-header card that names the depth domain (see [`says_depth`]) or the
//! caller's `depth` flag says so.

use std::path::Path;


use super::npy::Panel;
use super::Axes;
use crate::io::segy::{SegyInfo, SegyReader};
use crate::traces::TraceHeader;

/// A textual-header card that marks a file whose samples are in depth, for writers.
pub const DEPTH_CARD: &str = "DEPTH DOMAIN: sample interval in mm (depth in m)";

/// The trace-header value that labels the horizontal axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Offset,
    Cdp,
    Channel,
    Ffid,
    Inline,
    Crossline,
    /// The trace's index in the file.
    Trace,
}

impl std::str::FromStr for Key {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "offset" => Key::Offset,
            "cdp" => Key::Cdp,
            "channel" => Key::Channel,
            "ffid" => Key::Ffid,
            "inline" | "iline" => Key::Inline,
            "crossline" | "xline" => Key::Crossline,
            "trace" => Key::Trace,
            o => return Err(format!("unknown header key `{o}` (expected offset, cdp, channel, ffid, inline, crossline or trace)")),
        })
    }
}

impl Key {
    fn value(self, h: &TraceHeader, index: u64) -> f64 {
        match self {
            Key::Offset => h.offset,
            Key::Cdp => h.cdp as f64,
            Key::Channel => h.channel as f64,
            Key::Ffid => h.ffid as f64,
            Key::Inline => h.inline as f64,
            Key::Crossline => h.crossline as f64,
            Key::Trace => index as f64,
        }
    }
    fn label(self) -> &'static str {
        match self {
            Key::Offset => "offset (m)",
            Key::Cdp => "CDP",
            Key::Channel => "channel",
            Key::Ffid => "FFID",
            Key::Inline => "inline",
            Key::Crossline => "crossline",
            Key::Trace => "trace (index in file)",
        }
    }
}

/// Whether the textual header says the samples are in depth: a card with "DEPTH DOMAIN",
/// "DOMAIN: DEPTH", "DEPTH AXIS" (what [`crate::io::output`] writes), "VERTICAL AXIS: DEPTH" or
/// "SAMPLES IN DEPTH" (punctuation and case aside).
/// Cards that merely mention a source or receiver depth do not count.
pub fn says_depth(info: &SegyInfo) -> bool {
    info.text_cards().iter().chain(info.extended_text.iter()).any(|c| card_says_depth(c))
}

fn card_says_depth(card: &str) -> bool {
    let words: String = card.to_uppercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { ' ' }).collect();
    let words = format!(" {} ", words.split_whitespace().collect::<Vec<_>>().join(" "));
    [" DEPTH DOMAIN ", " DOMAIN DEPTH ", " DEPTH AXIS ", " VERTICAL AXIS DEPTH ", " SAMPLES IN DEPTH "].iter().any(|p| words.contains(p))
}

/// The key that describes these traces best, and what they are: a gather (one FFID or CDP,
/// offsets varying) by offset, an inline or crossline by the other, a stack (CDPs varying at one
/// offset) by CDP, otherwise the trace index.
pub fn describe(headers: &[TraceHeader]) -> (Key, String) {
    let same = |f: &dyn Fn(&TraceHeader) -> f64| headers.windows(2).all(|w| f(&w[0]) == f(&w[1]));
    let Some(h0) = headers.first() else { return (Key::Trace, "traces".into()) };
    if headers.len() < 2 {
        return (Key::Trace, "one trace".into());
    }
    let offsets_vary = !same(&|h| h.offset);
    if offsets_vary && same(&|h| h.ffid as f64) {
        (Key::Offset, format!("gather, ffid {}", h0.ffid))
    } else if offsets_vary && same(&|h| h.cdp as f64) {
        (Key::Offset, format!("CDP gather, cdp {}", h0.cdp))
    } else if same(&|h| h.inline as f64) && !same(&|h| h.crossline as f64) {
        (Key::Crossline, format!("inline {}", h0.inline))
    } else if same(&|h| h.crossline as f64) && !same(&|h| h.inline as f64) {
        (Key::Inline, format!("crossline {}", h0.crossline))
    } else if !offsets_vary && !same(&|h| h.cdp as f64) {
        (Key::Cdp, "stack".into())
    } else {
        (Key::Trace, "traces".into())
    }
}

fn decimal(v: f32) -> f64 { v.to_string().parse().unwrap_or(v as f64) }

/// Which traces to read from a SEG-Y file.
#[derive(Debug, Clone)]
pub struct TraceRange {
    /// First trace (0-based index in the file).
    pub first: u64,
    /// Traces in the range [default: the rest of the file, bounded by `max_values`].
    pub count: Option<u64>,
    /// Every k-th trace of the range.
    pub every: u64,
    /// At most this many samples in all are read (memory bound); the default count is cut to it.
    pub max_values: u64,
}

impl Default for TraceRange {
    fn default() -> Self { TraceRange { first: 0, count: None, every: 1, max_values: 1 << 25 } }
}

/// Reads the traces of `range` from `path` into a panel labelled by `key` (or the best key),
/// time in ms or depth in m (`depth`, or the textual header says so). `.su` files are Seismic
/// Unix (read whole: they have no file header to index them by), anything else SEG-Y.
pub fn segy_panel(path: &Path, range: &TraceRange, key: Option<Key>, depth: bool) -> anyhow::Result<Panel> {
    let p = path.display();
    if range.every == 0 {
        crate::bail_param!("every", "--every must be at least 1");
    }
    let su = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("su"));
    let su_set = if su { Some(crate::io::su::read_su(path)?) } else { None };
    let (n, ns, dt, t0, text_depth) = if let Some(set) = &su_set {
        (set.len() as u64, set.ns, set.dt, set.t0, false)
    } else {
        let r = SegyReader::open(path)?;
        let info = r.info();
        if info.n_traces == 0 && info.trailing_bytes > 0 {
            crate::bail_input!("{p}: no complete trace: {} bytes follow the headers, a trace of {} samples takes {} (truncated file, or a wrong sample count \
                in binary header bytes 3221-3222 / trace header bytes 115-116)", info.trailing_bytes, info.ns, info.trace_bytes);
        }
        (info.n_traces, info.ns, info.dt, info.t0, says_depth(info))
    };
    if n == 0 {
        crate::bail_input!("{p}: the file holds no traces (nothing to plot)");
    }
    if ns == 0 {
        crate::bail_input!("{p}: traces of 0 samples (binary header bytes 3221-3222, trace header bytes 115-116): nothing to plot");
    }
    if !(dt > 0.0 && dt.is_finite()) || !t0.is_finite() {
        crate::bail_input!("{p}: sample interval {dt} s and first-sample time {t0} s cannot scale a time axis (binary header bytes 3217-3218, trace header bytes 109-110 and 117-118)");
    }
    if range.first >= n {
        crate::bail_param!("first", "{p}: --first {} is past the last trace (the file has {n} traces)", range.first);
    }
    let available = n - range.first;
    // Memory: at most max_values samples are read, whatever ns is.
    let max_traces = (range.max_values / ns as u64).max(1);
    let span = match range.count {
        Some(0) => crate::bail_param!("count", "--count must be at least 1"),
        Some(c) if c > available => crate::bail_param!("count", "{p}: --first {} --count {c} runs past the end (the file has {n} traces)", range.first),
        Some(c) if c.div_ceil(range.every) > max_traces => {
            crate::bail_param!("count", "{p}: {} traces of {ns} samples are more than a plot holds ({} values); use --every {} or a smaller --count", c.div_ceil(range.every),
                range.max_values, c.div_ceil(max_traces))
        }
        Some(c) => c,
        None => {
            let c = available.min(max_traces.min(5000) * range.every);
            if c < available {
                eprintln!("seisgpu plot: plotting traces {}..{} of {n}; use --first/--count/--every for others", range.first, range.first + c);
            }
            c
        }
    };
    let indices: Vec<u64> = (range.first..range.first + span).step_by(range.every as usize).collect();
    let (headers, data) = if let Some(set) = su_set {
        let headers: Vec<TraceHeader> = indices.iter().map(|&i| set.headers[i as usize]).collect();
        let data = indices.iter().flat_map(|&i| set.trace(i as usize).iter().copied()).collect();
        (headers, data)
    } else {
        let mut r = SegyReader::open(path)?;
        if range.first + span == n {
            // The range reaches the end of the file: a partial last trace is an error, not a
            // silently shorter plot.
            r.check_tail()?;
        }
        if range.every == 1 {
            let set = r.read_range(range.first, span)?;
            (set.headers, set.data.into_vec())
        } else {
            let mut headers = Vec::with_capacity(indices.len());
            let mut data = Vec::with_capacity(indices.len() * ns);
            for &i in &indices {
                let t = r.read_trace(i)?;
                headers.push(t.header);
                data.extend_from_slice(&t.samples);
            }
            (headers, data)
        }
    };
    let (best, what) = describe(&headers);
    let key = key.unwrap_or(best);
    let depth = depth || text_depth;
    // The f32 header values as the decimals they print as (0.004, not 0.004000000189989805), so
    // sample times are round numbers of ms.
    let (t0, dt) = (decimal(t0), decimal(dt));
    let mut axes = if depth { Axes::depth_m(t0 * 1e3, dt * 1e3) } else { Axes::time_s(t0, dt) };
    axes.trace_label = key.label().into();
    if key == Key::Trace {
        axes.first_trace = range.first as f64;
        axes.trace_step = range.every as f64;
    } else {
        axes.trace_values = Some(headers.iter().zip(&indices).map(|(h, &i)| key.value(h, i)).collect());
    }
    let name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let last = indices.last().copied().unwrap_or(range.first);
    let every = if range.every > 1 { format!(" every {}", range.every) } else { String::new() };
    let what = format!("{name}: {what}, traces {}..{last}{every}", range.first);
    Ok(Panel { n_traces: headers.len(), n_samples: ns, data, axes, what })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(ffid: i32, cdp: i32, offset: f64, il: i32, xl: i32) -> TraceHeader {
        TraceHeader { ffid, cdp, offset, inline: il, crossline: xl, ..Default::default() }
    }

    #[test]
    fn the_key_follows_what_varies() {
        let shot: Vec<_> = (0..4).map(|k| h(12, 100 + k, 50.0 * k as f64, 1, 1)).collect();
        assert_eq!(describe(&shot), (Key::Offset, "gather, ffid 12".into()));
        let cmp: Vec<_> = (0..4).map(|k| h(k, 7, 50.0 * k as f64, 1, 1)).collect();
        assert_eq!(describe(&cmp), (Key::Offset, "CDP gather, cdp 7".into()));
        let inline: Vec<_> = (0..4).map(|k| h(0, 100 + k, 0.0, 40, 10 + k)).collect();
        assert_eq!(describe(&inline), (Key::Crossline, "inline 40".into()));
        let stack: Vec<_> = (0..4).map(|k| h(0, 100 + k, 0.0, 0, 0)).collect();
        assert_eq!(describe(&stack), (Key::Cdp, "stack".into()));
        assert_eq!(describe(&stack[..1]).0, Key::Trace);
        assert_eq!("xline".parse::<Key>(), Ok(Key::Crossline));
        assert!(card_says_depth(DEPTH_CARD) && card_says_depth("C 7 domain: depth (m)") && card_says_depth("SAMPLES IN DEPTH, 5 M")
            && card_says_depth("DEPTH axis: 120 samples at 5 m from 0 m, as time: 1 ms = 1 m"));
        assert!(!card_says_depth("C 5 SOURCE DEPTH 10 M, SAMPLE INTERVAL 4 MS, TIME DOMAIN"));
        assert!("fold".parse::<Key>().is_err());
    }
}
