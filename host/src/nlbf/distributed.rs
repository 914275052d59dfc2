//! NLBF across MPI ranks (`seisgpu nlbf estimate` and `enhance` under mpirun): each rank reads
//! every trace header, plans the whole search, and reads only the input traces its parameter
//! traces' apertures hold; the picks and semblance are the single-device search's, bit for bit.

use std::ops::Range;
use std::path::Path;

use anyhow::Context;

use crate::backend::Backend;
use crate::exec::mpi::{read_layout, read_traces, run_rank_queue, write_on_root, write_shares, Cluster, TraceSource};
use crate::traces::TraceSet;

/// This rank's part of the NLBF search ([`estimate`]).
pub struct Share {
    /// The whole search's setup (every parameter trace; its aperture lists in input trace numbers).
    pub setup: super::Setup,
    /// The parameter traces this rank searched, and their estimate (a grid of one row of them).
    pub ptraces: Range<usize>,
    pub estimate: super::Estimate,
    /// Input traces this rank read.
    pub traces_read: usize,
}

/// The NLBF search across the ranks (`seisgpu nlbf estimate` under mpirun): every rank reads the
/// trace headers and plans the whole search ([`super::Setup::from_layout`]); the parameter
/// traces' [`super::work_items`] are split in blocks over the ranks, and each rank reads only
/// the input traces its parameter traces' apertures hold
/// ([`super::Setup::subset_reading`]: neighbouring ranks' apertures overlap, so some
/// traces are read by two) and searches its block on its devices. Every pick and semblance is
/// that of the single-device search, bit for bit; [`write_estimate`] writes them.
pub fn estimate(cluster: &Cluster, source: &TraceSource, params: &super::EstimateParams, devices: &[Backend],
    variant: Option<super::Variant>) -> anyhow::Result<Share> {
    let layout = cluster.agree("reading the trace headers", read_layout(source))?;
    estimate_from(cluster, source, &layout, params, devices, variant).map(|(share, _)| share)
}

/// [`estimate`] with the input's layout read ([`read_layout`]); also returns the input
/// traces the rank read (ascending trace numbers, their traces).
fn estimate_from(cluster: &Cluster, source: &TraceSource, layout: &TraceSet, params: &super::EstimateParams,
    devices: &[Backend], variant: Option<super::Variant>) -> anyhow::Result<(Share, (Vec<usize>, TraceSet))> {
    use super::{self as nlbf, NlbfDevice, Setup, Variant};
    let setup = cluster.agree("planning the search", Setup::from_layout(layout, params).map_err(anyhow::Error::from))?;
    let variant = variant.unwrap_or_else(|| devices.iter().find(|b| b.gpu().is_some()).map_or(Variant::Cpu, |b| nlbf::variant_for(b, &setup)));
    let items = nlbf::work_items(setup.np());
    let mine = cluster.share(items.len());
    let ptraces = if mine.is_empty() { 0..0 } else { items[mine.start].start..items[mine.end - 1].end };
    let (local_setup, wanted) = setup.subset_reading(ptraces.clone());
    let traces = cluster.agree("reading the input traces", read_traces(source, layout, &wanted, "input traces"))?;
    let line = format!("seisgpu: rank {}: parameter traces {ptraces:?} of {}, {} of {} input traces read\n", cluster.rank(),
        setup.np(), wanted.len(), layout.len());
    eprint!("{line}");
    let devs: Vec<NlbfDevice> = devices.iter().map(NlbfDevice::new).collect();
    // The search's queue job over every work item, holding this rank's outputs: the rank runs its
    // block of the items on its devices, each item written in place.
    let n = ptraces.len() * local_setup.ns;
    let (mut code, mut sem) = (vec![0u32; n], vec![0f32; n]);
    let job = nlbf::Search::new(&local_setup, &traces.data, variant, &items, mine, ptraces.start, &mut code, &mut sem);
    let job = cluster.agree("planning the search's work items", job.map_err(anyhow::Error::from))?;
    run_rank_queue(cluster, &job, &devs, "searching", ())?;
    drop(job);
    let estimate = nlbf::Estimate::from_setup(&local_setup, code, sem);
    Ok((Share { setup, ptraces, estimate, traces_read: wanted.len() }, (wanted, traces)))
}

/// This rank's part of the NLBF enhancement ([`enhance`]).
pub struct Enhanced {
    /// The search's part ([`estimate`]).
    pub search: Share,
    /// Input traces this rank enhanced, their enhanced and their input samples (`[k * ns + t]`).
    pub traces: Range<usize>,
    pub enhanced: Vec<f32>,
    pub input: Vec<f32>,
    /// Input traces in all, samples per trace.
    pub ntr: usize,
    pub ns: usize,
}

/// `nlbf enhance` across the ranks: the search as [`estimate`] (each rank its parameter
/// traces), the picks gathered so that every rank holds the whole estimate (4 bytes per
/// estimation), then each rank enhances its block of the input traces from only the traces their
/// neighbour lists hold ([`super::EnhanceSetup::subset_reading`]: the whole enhancement's
/// values, bit for bit) on its devices ([`super::Enhancement`] through the queue). Of those traces, the ones the search read are kept
/// from it; only the others are read.
pub fn enhance(cluster: &Cluster, source: &TraceSource, params: &super::EstimateParams,
    enhance: &super::EnhanceParams, devices: &[Backend], variant: Option<super::Variant>) -> anyhow::Result<Enhanced> {
    use super::{self as nlbf, EnhanceSetup, Estimate};
    let layout = cluster.agree("reading the trace headers", read_layout(source))?;
    let (search, (had, had_traces)) = estimate_from(cluster, source, &layout, params, devices, variant)?;
    let s = &search.setup;
    cluster.agree("gathering the picks", if s.estimations() < i32::MAX as usize { Ok(()) } else {
        Err(anyhow::anyhow!("{} estimations: too many to gather in one MPI message", s.estimations()))
    })?;
    let code = cluster.all_gather_varcount(&search.estimate.code).concat();
    let est = Estimate::from_setup(s, code, Vec::new());
    let setup = cluster.agree("planning the enhancement",
        EnhanceSetup::from_layout(&layout, &params.coords, &est, enhance).map_err(anyhow::Error::from))?;
    let mine = cluster.share(layout.len());
    let (sub, order) = setup.subset_reading(mine.clone());
    // The traces the search read are kept; the others are read in ascending order; all are
    // placed in the subset's order (the outputs first).
    let mut missing: Vec<usize> = order.iter().copied().filter(|t| had.binary_search(t).is_err()).collect();
    missing.sort_unstable();
    let read = read_traces(source, &layout, &missing, "input traces").map(|t| {
        let ns = t.ns;
        let mut data = Vec::with_capacity(order.len() * ns);
        for &k in &order {
            let (from, at) = match had.binary_search(&k) {
                Ok(at) => (&had_traces.data, at),
                Err(_) => (&t.data, missing.binary_search(&k).expect("a read trace")),
            };
            data.extend_from_slice(&from[at * ns..(at + 1) * ns]);
        }
        data
    });
    let data = cluster.agree("reading the traces to enhance", read)?;
    drop(had_traces);
    let line = format!("seisgpu: rank {}: enhancing traces {mine:?} of {} from {} traces ({} of them read now, the others kept \
        from the search)\n", cluster.rank(), layout.len(), order.len(), missing.len());
    eprint!("{line}");
    // The enhancement's queue job over the rank's own traces (the subset's outputs), on its
    // devices: each block from only the traces its lists hold, every sample the whole
    // enhancement's (on one device: one block, the whole subset in one call).
    let job = nlbf::Enhancement { setup: &sub, est: &est, data: &data, blocks: nlbf::enhance_blocks(mine.len(), devices.len()) };
    let enhanced = crate::exec::run_queue(&job, devices, Vec::with_capacity(mine.len() * layout.ns))
        .map_err(|e| {
            let b = job.blocks.get(e.item).cloned().unwrap_or_default();
            // The item's own error under the same text, so that its kind (bad data) survives.
            e.source.context(format!("enhancing traces {:?}: device {} failed on work item {}", b.start + mine.start..b.end + mine.start, e.device, e.item))
        });
    let enhanced = cluster.agree("enhancing", enhanced)?;
    let ns = layout.ns;
    let input = data[..mine.len() * ns].to_vec();
    Ok(Enhanced { search, traces: mine, enhanced, input, ntr: layout.len(), ns })
}

/// Writes `nlbf enhance`'s outputs from every rank's part into `dir`: the estimate
/// ([`write_estimate`]), enhanced.npy and input.npy (traces x samples, each rank its
/// block of traces; one process's files byte for byte). Collective.
pub fn write_enhanced(cluster: &Cluster, dir: &Path, part: &Enhanced, extra: serde_json::Value) -> anyhow::Result<()> {
    write_estimate(cluster, dir, &part.search, extra)?;
    // The header of the single process's trace files (`io::output::write_traces`), so the bytes agree.
    let head = crate::io::npy::header_f32(&[part.ntr, part.ns]);
    let (body, at) = ((part.ntr * part.ns * 4) as u64, (part.traces.start * part.ns * 4) as u64);
    for (name, v) in [("enhanced.npy", &part.enhanced), ("input.npy", &part.input)] {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        write_shares(cluster, &dir.join(name), &head, body, at, &bytes)?;
    }
    Ok(())
}

/// Writes the NLBF estimate from every rank's part into `dir`: each rank writes its parameter
/// traces' block of A.npy .. E.npy and S.npy ([`write_shares`]; the bytes of one process's files),
/// rank 0 positions.npy and nlbf.json (`extra`: the run's description). Collective.
pub fn write_estimate(cluster: &Cluster, dir: &Path, share: &Share, extra: serde_json::Value) -> anyhow::Result<()> {
    use super::{output, Estimate, Param};
    let made = if cluster.is_root() { std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display())) } else { Ok(()) };
    cluster.agree("creating the output folder", made)?;
    let s = &share.setup;
    let head = output::npy_header("<f4", &[s.grid.ny, s.grid.nx, s.ns]);
    let body = (s.estimations() * 4) as u64;
    for p in Param::ALL {
        let bytes: Vec<u8> = share.estimate.volume(p).iter().flat_map(|v| v.to_le_bytes()).collect();
        write_shares(cluster, &dir.join(format!("{}.npy", p.name())), &head, body, (share.ptraces.start * s.ns * 4) as u64, &bytes)?;
    }
    write_on_root(cluster, "writing the estimate's description", || {
        output::write_description(dir, &Estimate::from_setup(s, Vec::new(), Vec::new()), extra)
            .map(|_| ()).with_context(|| format!("writing the estimate's description to {}", dir.display()))
    })
}
