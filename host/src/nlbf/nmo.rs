//! NMO correction with a stretch mute.

use super::{cpu, gpu, validate_traces, Result};
use crate::backend::Backend;
use crate::traces::{TraceHeader, TraceSet};

/// NMO parameters: an RMS velocity function and the stretch mute.
#[derive(Debug, Clone, PartialEq)]
pub struct NmoParams {
    /// (two-way time s, RMS velocity m/s) pairs, times increasing; linear in between, constant
    /// beyond the ends.
    pub velocity: Vec<(f32, f32)>,
    /// Largest stretch (t - t0) / t0 kept; beyond it samples are muted (e.g. 0.5 = 50 %).
    pub max_stretch: f32,
}

/// The velocity function sampled at every output time.
pub fn vrms_table(p: &NmoParams, ns: usize, dt: f32, t_first: f32) -> Result<Vec<f32>> {
    if p.velocity.is_empty() {
        return super::bad_parameter("velocity", "NMO: no velocity given");
    }
    for (i, &(t, v)) in p.velocity.iter().enumerate() {
        if !(t.is_finite() && v.is_finite() && v > 0.0) {
            return super::bad_parameter("velocity", format!("NMO velocity pair {i} ({t} s, {v} m/s): time must be finite, velocity positive"));
        }
        if i > 0 && t <= p.velocity[i - 1].0 {
            return super::bad_parameter("velocity", format!("NMO velocity times must increase (pair {i} at {t} s)"));
        }
    }
    if !(p.max_stretch.is_finite() && p.max_stretch > 0.0) {
        return super::bad_parameter("max-stretch", format!("NMO stretch mute {} must be positive", p.max_stretch));
    }
    let v = &p.velocity;
    Ok((0..ns)
        .map(|i| {
            let t = t_first + i as f32 * dt;
            match v.iter().position(|&(tv, _)| tv >= t) {
                None => v[v.len() - 1].1,
                Some(0) => v[0].1,
                Some(j) => {
                    let ((t0, v0), (t1, v1)) = (v[j - 1], v[j]);
                    v0 + (v1 - v0) * (t - t0) / (t1 - t0)
                }
            }
        })
        .collect())
}

/// NMO correction with a stretch mute; the offset is the source-receiver distance from the
/// coordinates, or the header's offset where the coordinates are absent.
pub fn nmo(backend: &Backend, traces: &TraceSet, params: &NmoParams) -> crate::error::Result<TraceSet> {
    Ok(nmo_in(backend, traces, params)?)
}

/// [`nmo`] with the module's error.
pub(super) fn nmo_in(backend: &Backend, traces: &TraceSet, params: &NmoParams) -> Result<TraceSet> {
    validate_traces(traces)?;
    let vrms = vrms_table(params, traces.ns, traces.dt, traces.t0)?;
    let offsets = nmo_offsets(&traces.headers);
    let data = match backend {
        Backend::Cpu => cpu::nmo(&traces.data, traces.ns, traces.dt, traces.t0, &offsets, &vrms, params.max_stretch),
        Backend::Gpu(g) => gpu::nmo(g, &traces.data, traces.ns, traces.dt, traces.t0, &offsets, &vrms, params.max_stretch)?,
    };
    Ok(TraceSet { headers: traces.headers.clone(), data: data.into(), ns: traces.ns, dt: traces.dt, t0: traces.t0 })
}

/// |offset| per trace: the coordinates' distance, else the header's offset.
pub fn nmo_offsets(h: &[TraceHeader]) -> Vec<f32> {
    h.iter().map(|t| { let d = t.distance(); if d > 0.0 { d as f32 } else { t.offset.abs() as f32 } }).collect()
}
