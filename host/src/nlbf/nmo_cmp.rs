//! NMO with a velocity that varies from CMP to CMP: each trace is corrected with the v_rms(t) of
//! its CMP ([`Location::of_header`]: its CDP number and the CDP's position), e.g. the per-CMP
//! functions `velan` picks.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::{cpu, gpu, nmo_offsets, validate_traces, vrms_table, NmoParams, Result};
use crate::backend::Backend;
use crate::traces::TraceSet;
use crate::velocity::{Domain, Location, VelocityModel};

/// NMO correction with a stretch mute, v_rms(t) from `model` at each trace's CMP. A model that is
/// the same everywhere (a constant or t:v pairs) is exactly [`nmo`] with its knots; otherwise the
/// traces are corrected CMP by CMP (one velocity table per distinct CMP location).
pub fn nmo_model(backend: &Backend, traces: &TraceSet, model: &VelocityModel, max_stretch: f32) -> crate::error::Result<TraceSet> {
    Ok(nmo_model_in(backend, traces, model, max_stretch)?)
}

fn nmo_model_in(backend: &Backend, traces: &TraceSet, model: &VelocityModel, max_stretch: f32) -> Result<TraceSet> {
    if model.domain() != Domain::Time {
        return super::bad_parameter("velocity", format!("NMO: the velocity must be v_rms(t) in two-way time, this one is in {}", model.domain().name()));
    }
    if let VelocityModel::Function(f) = model {
        return super::nmo::nmo_in(backend, traces, &NmoParams { velocity: f.knots.clone(), max_stretch });
    }
    validate_traces(traces)?;
    let (ns, dt, t_first) = (traces.ns, traces.dt, traces.t0);
    // Traces at one location share a table. Per-CMP functions that all have CDP numbers are
    // interpolated by CDP number alone, so there the CDP is the key (midpoints scatter within a
    // CMP); otherwise the exact CDP number and position.
    let by_cdp = matches!(model, VelocityModel::PerCmp(c) if c.functions.iter().all(|f| f.cdp.is_some()));
    let mut groups: BTreeMap<(Option<i32>, u64, u64), (Location, Vec<usize>)> = BTreeMap::new();
    for (i, h) in traces.headers.iter().enumerate() {
        let l = Location::of_header(h);
        let key = if by_cdp && l.cdp.is_some() { (l.cdp, 0, 0) } else { (l.cdp, l.x.to_bits(), l.y.to_bits()) };
        groups.entry(key).or_insert_with(|| (l, Vec::new())).1.push(i);
    }
    let groups: Vec<(Location, Vec<usize>)> = groups.into_values().collect();
    let offsets = nmo_offsets(&traces.headers);
    let one = |loc: &Location, idx: &[usize]| -> Result<Vec<f32>> {
        let f = model.function_at(loc);
        let vrms = vrms_table(&NmoParams { velocity: f.knots, max_stretch }, ns, dt, t_first)?;
        let mut data = Vec::with_capacity(idx.len() * ns);
        for &i in idx {
            data.extend_from_slice(traces.trace(i));
        }
        let off: Vec<f32> = idx.iter().map(|&i| offsets[i]).collect();
        match backend {
            Backend::Cpu => Ok(cpu::nmo(&data, ns, dt, t_first, &off, &vrms, max_stretch)),
            Backend::Gpu(g) => gpu::nmo(g, &data, ns, dt, t_first, &off, &vrms, max_stretch),
        }
    };
    let parts: Vec<Vec<f32>> = match backend {
        Backend::Cpu => groups.par_iter().map(|(loc, idx)| one(loc, idx)).collect::<Result<_>>()?,
        // One launch per CMP, one after the other on the device.
        Backend::Gpu(_) => groups.iter().map(|(loc, idx)| one(loc, idx)).collect::<Result<_>>()?,
    };
    let mut out = TraceSet { headers: traces.headers.clone(), data: vec![0.0; traces.data.len()].into(), ns, dt, t0: t_first };
    for ((_, idx), part) in groups.iter().zip(parts) {
        for (&i, tr) in idx.iter().zip(part.chunks(ns)) {
            out.trace_mut(i).copy_from_slice(tr);
        }
    }
    Ok(out)
}
