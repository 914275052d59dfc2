//! The in-memory form of prestack data: trace headers (the geometry) and samples, trace-major.
//! SEG-Y reads into it and writes from it; every algorithm takes it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The header fields seisgpu uses, already scaled (coordinates in metres, times in seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Source position (m).
    pub sx: f64,
    pub sy: f64,
    /// Receiver (group) position (m).
    pub gx: f64,
    pub gy: f64,
    /// Signed source-receiver offset (m), as stored in the header.
    pub offset: f64,
    /// CDP / CMP ensemble number.
    pub cdp: i32,
    pub inline: i32,
    pub crossline: i32,
    /// Field record (shot) number and channel, for station-number coordinates.
    pub ffid: i32,
    pub channel: i32,
    /// Source and receiver station numbers (SEG-Y energy source point / trace number in ensemble).
    pub source_station: i32,
    pub receiver_station: i32,
    /// Trace identification code (SEG-Y bytes 29-30): 1 seismic data, 2 dead, 3 dummy, 4 time
    /// break, 6 sweep, ...; 0 unknown (often auxiliary channels).
    pub trace_id: i16,
    /// The CDP's own coordinates (m, bytes 181-188), when the file gives them; else `None` and
    /// the midpoint stands in ([`TraceHeader::cdp_position`]).
    pub cdp_xy: Option<(f64, f64)>,
    /// Energy source point number (bytes 197-200, with the scalar of bytes 201-202 applied).
    pub shot_point: f64,
}

impl Default for TraceHeader {
    /// Zero geometry, coded as a seismic trace (identification code 1).
    fn default() -> Self {
        TraceHeader { sx: 0.0, sy: 0.0, gx: 0.0, gy: 0.0, offset: 0.0, cdp: 0, inline: 0, crossline: 0, ffid: 0, channel: 0,
            source_station: 0, receiver_station: 0, trace_id: 1, cdp_xy: None, shot_point: 0.0 }
    }
}

impl TraceHeader {
    pub fn midpoint(&self) -> (f64, f64) { (0.5 * (self.sx + self.gx), 0.5 * (self.sy + self.gy)) }
    /// The CDP's coordinates: its own when the header gives them, else the source-receiver midpoint.
    pub fn cdp_position(&self) -> (f64, f64) { self.cdp_xy.unwrap_or_else(|| self.midpoint()) }
    /// Unsigned source-receiver distance from the coordinates (m).
    pub fn distance(&self) -> f64 { ((self.gx - self.sx).powi(2) + (self.gy - self.sy).powi(2)).sqrt() }
}

/// A set of traces with the same sampling. `data[i * ns .. (i + 1) * ns]` is trace i.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSet {
    pub headers: Vec<TraceHeader>,
    pub data: Samples,
    /// Samples per trace.
    pub ns: usize,
    /// Sample interval (s).
    pub dt: f32,
    /// Time of the first sample (s), usually 0 (SEG-Y delay recording time).
    pub t0: f32,
}

impl TraceSet {
    /// Zero-filled traces for the given headers.
    pub fn zeros(headers: Vec<TraceHeader>, ns: usize, dt: f32) -> Self {
        let n = headers.len();
        TraceSet { headers, data: vec![0.0; n * ns].into(), ns, dt, t0: 0.0 }
    }
    pub fn len(&self) -> usize { self.headers.len() }
    pub fn is_empty(&self) -> bool { self.headers.is_empty() }
    pub fn trace(&self, i: usize) -> &[f32] { &self.data[i * self.ns..(i + 1) * self.ns] }
    pub fn trace_mut(&mut self, i: usize) -> &mut [f32] {
        let ns = self.ns;
        &mut self.data[i * ns..(i + 1) * ns]
    }
    /// Traces `range` as a set of their own (a work item of a multi-device or MPI split).
    pub fn slice(&self, range: std::ops::Range<usize>) -> TraceSet {
        TraceSet {
            headers: self.headers[range.clone()].to_vec(),
            data: self.data[range.start * self.ns..range.end * self.ns].to_vec().into(),
            ns: self.ns,
            dt: self.dt,
            t0: self.t0,
        }
    }
    /// Record length (s).
    pub fn duration(&self) -> f32 { self.ns as f32 * self.dt }
    /// Checks the invariants every algorithm relies on, with a message naming what is wrong.
    pub fn validate(&self, what: &str) -> Result<(), String> {
        if self.ns == 0 {
            return Err(format!("{what}: traces have zero samples"));
        }
        if !(self.dt > 0.0) || !self.dt.is_finite() {
            return Err(format!("{what}: sample interval {} s is not positive", self.dt));
        }
        if self.data.len() != self.headers.len() * self.ns {
            return Err(format!("{what}: {} samples for {} traces of {} samples", self.data.len(), self.headers.len(), self.ns));
        }
        if let Some(i) = first_failing(&self.data, |v| v.abs() < f32::INFINITY) {
            return Err(format!("{what}: trace {} sample {} is not finite", i / self.ns, i % self.ns));
        }
        Ok(())
    }
}

/// The samples of a trace set, trace-major: owned, or shared read-only with whatever else holds
/// them (an array of the caller's, borrowed for a call, that the set must not copy: a survey's traces
/// are hundreds of MB). Reads go to the shared samples as they are; the first write through
/// [`DerefMut`] or [`Samples::to_mut`] copies them into an owned buffer (copy on write), so the
/// lender's array is never written.
#[derive(Clone)]
pub enum Samples {
    /// Samples the set owns.
    Owned(Vec<f32>),
    /// Samples read where their store holds them, until the first write.
    Shared(Arc<dyn AsRef<[f32]> + Send + Sync>),
}

impl Samples {
    /// Samples read where `store` holds them, until the first write.
    pub fn shared(store: Arc<dyn AsRef<[f32]> + Send + Sync>) -> Samples { Samples::Shared(store) }
    /// Whether the samples are still the shared store's (no write has copied them).
    pub fn is_shared(&self) -> bool { matches!(self, Samples::Shared(_)) }
    /// The samples as an owned vector: moved out when owned, copied when shared.
    pub fn into_vec(self) -> Vec<f32> {
        match self {
            Samples::Owned(v) => v,
            Samples::Shared(s) => (*s).as_ref().to_vec(),
        }
    }
    /// The owned vector, for what only a `Vec` does (push, resize, truncate): shared samples are
    /// copied into one first.
    pub fn to_mut(&mut self) -> &mut Vec<f32> {
        if let Samples::Shared(s) = self {
            *self = Samples::Owned((**s).as_ref().to_vec());
        }
        match self {
            Samples::Owned(v) => v,
            Samples::Shared(_) => unreachable!("copied into an owned vector above"),
        }
    }
}

impl Default for Samples {
    fn default() -> Self { Samples::Owned(Vec::new()) }
}

impl Deref for Samples {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            Samples::Owned(v) => v,
            Samples::Shared(s) => (**s).as_ref(),
        }
    }
}

impl DerefMut for Samples {
    fn deref_mut(&mut self) -> &mut [f32] { self.to_mut() }
}

impl From<Vec<f32>> for Samples {
    fn from(v: Vec<f32>) -> Self { Samples::Owned(v) }
}

impl From<Samples> for Vec<f32> {
    fn from(s: Samples) -> Self { s.into_vec() }
}

impl PartialEq for Samples {
    fn eq(&self, other: &Samples) -> bool { **self == **other }
}

impl PartialEq<[f32]> for Samples {
    fn eq(&self, other: &[f32]) -> bool { **self == *other }
}

impl PartialEq<Vec<f32>> for Samples {
    fn eq(&self, other: &Vec<f32>) -> bool { **self == **other }
}

impl PartialEq<Samples> for Vec<f32> {
    fn eq(&self, other: &Samples) -> bool { **self == **other }
}

impl<'a> IntoIterator for &'a Samples {
    type Item = &'a f32;
    type IntoIter = std::slice::Iter<'a, f32>;
    fn into_iter(self) -> Self::IntoIter { self.iter() }
}

impl std::fmt::Debug for Samples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { std::fmt::Debug::fmt(&**self, f) }
}

/// The index of the first of `values` for which `ok` is false. Scanned in parallel by blocks with
/// `ok` folded over each block without a branch per value (vectorised, given a branch-free `ok`
/// such as `|v| (v > 0.0) & (v < f32::INFINITY)`), then value by value in the first bad block:
/// 2.7 GB of trace samples took 4.2 s on 2 cores one `position` step at a time, 0.12 s so.
pub fn first_failing(values: &[f32], ok: impl Fn(f32) -> bool + Sync) -> Option<usize> {
    use rayon::prelude::*;
    const BLOCK: usize = 1 << 16;
    let k = values.par_chunks(BLOCK).position_first(|b| !b.iter().fold(true, |all, &v| all & ok(v)))?;
    Some(k * BLOCK + values[k * BLOCK..].iter().position(|&v| !ok(v)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples held by another owner, as the Python binding shares a NumPy array's.
    struct Borrowed(Vec<f32>);

    impl AsRef<[f32]> for Borrowed {
        fn as_ref(&self) -> &[f32] { &self.0 }
    }

    fn borrowed(values: &[f32]) -> (Arc<Borrowed>, Samples) {
        let store = Arc::new(Borrowed(values.to_vec()));
        (store.clone(), Samples::shared(store))
    }

    #[test]
    fn shared_samples_are_read_in_place_and_copied_on_the_first_write() {
        let (store, mut s) = borrowed(&[1.0, 2.0, 3.0, 4.0]);
        assert!(s.is_shared());
        assert_eq!(s.as_ptr(), store.0.as_ptr(), "read where the store holds them");
        assert_eq!((s.len(), s[2], &s[1..3]), (4, 3.0, &[2.0, 3.0][..]));
        let copy = s.clone();
        assert!(copy.is_shared() && copy.as_ptr() == store.0.as_ptr(), "a clone shares the store");
        assert_eq!(Arc::strong_count(&store), 3);
        s[1] = -2.0;
        assert!(!s.is_shared());
        assert_eq!(s, vec![1.0, -2.0, 3.0, 4.0]);
        assert_eq!(store.0, [1.0, 2.0, 3.0, 4.0], "the lender's samples are never written");
        assert_eq!(copy, store.0, "nor the other holders'");
        assert_eq!(Arc::strong_count(&store), 2, "the written samples let go of the store");
    }

    #[test]
    fn owned_and_shared_samples_compare_and_convert_alike() {
        let (_, shared) = borrowed(&[5.0, 6.0]);
        let owned = Samples::from(vec![5.0, 6.0]);
        assert_eq!(shared, owned);
        assert_eq!(format!("{shared:?}"), format!("{:?}", vec![5.0f32, 6.0]));
        let v = vec![7.0f32; 3];
        let p = v.as_ptr();
        let moved = Samples::from(v).into_vec();
        assert_eq!(moved.as_ptr(), p, "owned samples move out without a copy");
        assert_eq!(shared.clone().into_vec(), vec![5.0, 6.0]);
        let mut grown = shared;
        grown.to_mut().push(7.0);
        assert_eq!(grown, vec![5.0, 6.0, 7.0]);
        assert!(Samples::default().is_empty());
    }

    #[test]
    fn a_trace_set_on_shared_samples_reads_its_traces_and_slices_without_writing() {
        let (store, s) = borrowed(&(0..12).map(|v| v as f32).collect::<Vec<_>>());
        let mut t = TraceSet { headers: vec![TraceHeader::default(); 3], data: s, ns: 4, dt: 0.004, t0: 0.0 };
        t.validate("borrowed traces").unwrap();
        assert_eq!(t.trace(1), &[4.0, 5.0, 6.0, 7.0]);
        assert_eq!(t.slice(1..3).data, vec![4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
        assert!(t.data.is_shared());
        t.trace_mut(2)[0] = 100.0;
        assert_eq!((t.trace(2)[0], store.0[8]), (100.0, 8.0));
    }
}
