//! Choosing traces by their headers: `--select key=lo:hi,...` ranges, and the rule that keeps
//! non-seismic traces (dead, dummy, time break, sweep, auxiliary channels) out of processing.

use std::str::FromStr;

use crate::traces::TraceHeader;

/// A header field a selection can test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectKey {
    Ffid,
    Channel,
    Offset,
    Cdp,
    Inline,
    Crossline,
    TraceId,
}

impl SelectKey {
    const ALL: [(&'static str, SelectKey); 7] = [("ffid", SelectKey::Ffid), ("channel", SelectKey::Channel), ("offset", SelectKey::Offset),
        ("cdp", SelectKey::Cdp), ("inline", SelectKey::Inline), ("crossline", SelectKey::Crossline), ("traceid", SelectKey::TraceId)];
    fn value(self, h: &TraceHeader) -> f64 {
        match self {
            SelectKey::Ffid => h.ffid as f64,
            SelectKey::Channel => h.channel as f64,
            SelectKey::Offset => h.offset,
            SelectKey::Cdp => h.cdp as f64,
            SelectKey::Inline => h.inline as f64,
            SelectKey::Crossline => h.crossline as f64,
            SelectKey::TraceId => h.trace_id as f64,
        }
    }
}

/// One `key=lo:hi` condition: `lo <= value <= hi`, either end open when `None`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Condition {
    pub key: SelectKey,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

/// Traces whose headers meet every condition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TraceSelection {
    pub conditions: Vec<Condition>,
}

impl TraceSelection {
    pub fn matches(&self, h: &TraceHeader) -> bool {
        self.conditions.iter().all(|c| {
            let v = c.key.value(h);
            c.lo.is_none_or(|lo| v >= lo) && c.hi.is_none_or(|hi| v <= hi)
        })
    }
}

/// Parses `key=lo:hi[,key=...]` (keys ffid, channel, offset, cdp, inline, crossline, traceid;
/// `lo:hi` inclusive, either end may be left empty; `key=v` for one value).
impl FromStr for TraceSelection {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut conditions = Vec::new();
        let names = || SelectKey::ALL.iter().map(|k| k.0).collect::<Vec<_>>().join(", ");
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(format!("`{s}`: empty condition (expected key=lo:hi,...)"));
            }
            let (key, range) = part.split_once('=').ok_or_else(|| format!("`{part}`: expected key=lo:hi or key=value"))?;
            let key = key.trim().to_ascii_lowercase();
            let key = SelectKey::ALL.iter().find(|k| k.0 == key).map(|k| k.1)
                .ok_or_else(|| format!("`{part}`: unknown key `{key}` (expected one of {})", names()))?;
            let num = |t: &str| -> Result<Option<f64>, String> {
                let t = t.trim();
                if t.is_empty() {
                    return Ok(None);
                }
                match t.parse::<f64>() {
                    Ok(v) if v.is_finite() => Ok(Some(v)),
                    _ => Err(format!("`{part}`: `{t}` is not a number")),
                }
            };
            let (lo, hi) = match range.split_once(':') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => {
                    let v = num(range)?.ok_or_else(|| format!("`{part}`: no value after `=`"))?;
                    (Some(v), Some(v))
                }
            };
            if let (Some(a), Some(b)) = (lo, hi)
                && a > b
            {
                return Err(format!("`{part}`: the range is empty ({a} > {b})"));
            }
            conditions.push(Condition { key, lo, hi });
        }
        Ok(TraceSelection { conditions })
    }
}

/// Which traces are not seismic data: identification codes (bytes 29-30) 2 and up (SEG-Y rev 2:
/// 2 dead, 3 dummy, 4 time break, 5 uphole, 6 sweep, 7 timing, 8 water break, 9+ others), and,
/// in a file that codes its seismic traces 1, every trace coded anything else (auxiliary
/// channels coded 0, negative codes). A file with no trace coded 1 keeps its 0 and negative ones.
pub fn non_seismic(headers: &[TraceHeader]) -> Vec<bool> {
    let coded = headers.iter().any(|h| h.trace_id == 1);
    headers.iter().map(|h| h.trace_id >= 2 || (coded && h.trace_id != 1)).collect()
}

/// The traces chosen from a file's headers, and how many were left out why.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Choice {
    /// Indices of the chosen traces, ascending.
    pub indices: Vec<usize>,
    /// Traces the selection ranges left out.
    pub unselected: usize,
    /// Non-seismic traces left out (after the selection).
    pub non_seismic: usize,
}

/// Applies `selection` (all traces when `None`) and, unless `keep_non_seismic`, the
/// [`non_seismic`] rule.
pub fn choose(headers: &[TraceHeader], selection: Option<&TraceSelection>, keep_non_seismic: bool) -> Choice {
    let aux = non_seismic(headers);
    let mut c = Choice::default();
    for (i, h) in headers.iter().enumerate() {
        if selection.is_some_and(|s| !s.matches(h)) {
            c.unselected += 1;
        } else if aux[i] && !keep_non_seismic {
            c.non_seismic += 1;
        } else {
            c.indices.push(i);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(ffid: i32, channel: i32, offset: f64, trace_id: i16) -> TraceHeader {
        TraceHeader { ffid, channel, offset, trace_id, ..Default::default() }
    }

    #[test]
    fn parses_ranges_values_and_open_ends() {
        let s: TraceSelection = "ffid=10:20, channel=5,offset=:-100.5,cdp=300:,traceid=1".parse().unwrap();
        assert_eq!(s.conditions.len(), 5);
        assert_eq!(s.conditions[0], Condition { key: SelectKey::Ffid, lo: Some(10.0), hi: Some(20.0) });
        assert_eq!(s.conditions[1], Condition { key: SelectKey::Channel, lo: Some(5.0), hi: Some(5.0) });
        assert_eq!(s.conditions[2], Condition { key: SelectKey::Offset, lo: None, hi: Some(-100.5) });
        assert_eq!(s.conditions[3], Condition { key: SelectKey::Cdp, lo: Some(300.0), hi: None });
        let s: TraceSelection = "INLINE=-5:-1".parse().unwrap();
        assert_eq!(s.conditions[0], Condition { key: SelectKey::Inline, lo: Some(-5.0), hi: Some(-1.0) });
    }

    #[test]
    fn errors_name_the_bad_part() {
        let e = |s: &str| s.parse::<TraceSelection>().unwrap_err();
        assert!(e("ffid=1:2,shot=3").contains("`shot=3`: unknown key `shot`"), "{}", e("ffid=1:2,shot=3"));
        assert!(e("ffid=1:x").contains("`x` is not a number"));
        assert!(e("ffid").contains("`ffid`: expected key=lo:hi"));
        assert!(e("ffid=").contains("no value"));
        assert!(e("ffid=5:1").contains("empty"));
        assert!(e("ffid=1,,channel=2").contains("empty condition"));
        assert!(e("offset=nan").contains("not a number"));
    }

    #[test]
    fn selection_and_non_seismic_rule() {
        // A land shot: 2 auxiliary channels coded 0, a dead trace coded 2, seismic coded 1.
        let hs = vec![h(7, 1, 0.0, 0), h(7, 2, 0.0, 0), h(7, 3, -100.0, 1), h(7, 4, -50.0, 2), h(7, 5, 50.0, 1), h(8, 1, 100.0, 1)];
        assert_eq!(non_seismic(&hs), [true, true, false, true, false, false]);
        let c = choose(&hs, None, false);
        assert_eq!((c.indices, c.unselected, c.non_seismic), (vec![2, 4, 5], 0, 3));
        let c = choose(&hs, None, true);
        assert_eq!(c.indices, (0..6).collect::<Vec<_>>());
        let s: TraceSelection = "ffid=7,offset=-60:".parse().unwrap();
        let c = choose(&hs, Some(&s), false);
        assert_eq!((c.indices, c.unselected, c.non_seismic), (vec![4], 2, 3));
        // All coded 0 (many writers leave the field unset): all kept; negative codes too then.
        let zeros = vec![h(1, 1, 0.0, 0), h(1, 2, 0.0, 0), h(1, 3, 0.0, -1)];
        assert_eq!(choose(&zeros, None, false).indices, [0, 1, 2]);
        // Dead and time-break traces go even where nothing is coded 1.
        let dead = vec![h(1, 1, 0.0, 0), h(1, 2, 0.0, 2), h(1, 3, 0.0, 4), h(1, 4, 0.0, 9)];
        assert_eq!(choose(&dead, None, false).indices, [0]);
    }
}
