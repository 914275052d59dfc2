//! Shot-record migration across MPI ranks (`seisgpu srm` under mpirun): each rank reads every
//! trace header and only its shots' samples.

use anyhow::{bail, Context};

use crate::backend::Backend;
use crate::exec::mpi::{injected, read_layout, read_traces, Cluster, RankImage, TraceSource};
use crate::traces::TraceSet;

/// Shot-record migration across the ranks (`seisgpu srm` under mpirun): the (shot, frequency
/// group) items of [`super::MultiPlan`] split in blocks over the ranks and over each rank's
/// devices; each device adds its items of a shot into one window image ([`super::DeviceShots`]),
/// a rank adds its devices' windows into a model image in device order, and the ranks' images are
/// summed in rank order. Each rank reads every trace header and only its shots' samples
/// ([`read_share`]); the velocity model is on every rank.
pub fn migrate(cluster: &Cluster, source: &TraceSource, model: &super::VelocityModel, params: &super::SrmParams,
    opts: super::GpuOptions, devices: &[Backend]) -> anyhow::Result<RankImage<super::Image>> {
    use super::{DeviceShots, SrmDevice};
    let (plan, traces) = read_share(cluster, source, model, params, opts)?;
    let traces = &traces;
    let devs = devices.iter().map(|b| SrmDevice::new(b, &plan.op)).collect::<anyhow::Result<Vec<_>>>();
    let devs = cluster.agree("preparing the devices", devs)?;
    let opts = cluster.agree("choosing the GPU kernel", plan.resolve_variant(&devs, model, params, opts))?;
    let n = plan.items.len();
    // Test hook (CI's failing-rank check), as in `run_share_blocks`.
    let inject = injected("SEISGPU_TEST_FAIL_ITEM");
    let local = crate::exec::split::run_blocks(&devs, cluster.share(n), |_| Ok(DeviceShots::default()),
        |d, st, i| {
            if inject == Some(i) {
                bail!("injected failure (SEISGPU_TEST_FAIL_ITEM={i})");
            }
            plan.device_step(d, st, i, traces, model, params, opts)
        },
        |d, st| plan.device_finish(d, st))
        .map_err(|e| e.source.context(format!("work item {} on local device {}", e.item, e.device)))
        .and_then(|parts| {
            let parts: Vec<(usize, Vec<f32>)> = parts.into_iter().flatten().flatten().collect();
            if parts.is_empty() {
                return Ok(None);
            }
            let mut image = plan.zero_image(model);
            for (shot, part) in parts {
                plan.add_shot(&mut image, shot, &part)?;
            }
            Ok(Some(image))
        });
    let local = cluster.agree("migrating", local)?;
    let (nx, ny, nz) = local.as_ref().map_or((model.nx, model.ny, plan.nz), |i| (i.nx, i.ny, i.nz));
    Ok(RankImage { image: super::Image { data: Vec::new(), nx, ny, nz }, partial: local.map(|i| i.data) })
}

/// SRM's input on this rank: the plan (shots, windows, work items) from every trace's header, the
/// same on every rank, and the samples of the traces of the shots whose work items this rank runs,
/// read alone (a SEG-Y file: every header, then those traces' runs of consecutive trace numbers;
/// a .npy file: those rows; built-in data: taken from memory). The plan's shots of this rank number their traces in the
/// returned set; the other shots' trace lists are emptied (this rank never runs them).
pub fn read_share(cluster: &Cluster, source: &TraceSource, model: &super::VelocityModel, params: &super::SrmParams,
    opts: super::GpuOptions) -> anyhow::Result<(super::MultiPlan, TraceSet)> {
    // Every header and the sampling (no samples yet).
    let layout = read_layout(source).and_then(|l| match source {
        TraceSource::Segy(p) => super::check_segy_coordinates(&l.headers, p).map(|_| l),
        _ => Ok(l),
    });
    let layout = cluster.agree("reading the trace headers", layout)?;
    let plan = super::MultiPlan::from_headers(&layout, model, params, opts);
    let mut plan = cluster.agree("planning the migration", plan)?;
    let mine = cluster.share(plan.items.len());
    let mut shots: Vec<usize> = plan.items[mine].iter().map(|it| it.shot).collect();
    shots.dedup();
    let mut wanted: Vec<usize> = shots.iter().flat_map(|&s| plan.shots[s].0.traces.iter().copied()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let read = read_traces(source, &layout, &wanted, "shot gathers")
        .with_context(|| format!("reading the traces of shots {shots:?}"));
    let local = cluster.agree("reading the input traces", read)?;
    // One write of the whole line (the ranks share the terminal).
    let line = format!("seisgpu: rank {}: {} of {} traces read (shots {:?})\n", cluster.rank(), local.len(), layout.len(),
        shots.first().zip(shots.last()).map(|(a, b)| *a..*b + 1).unwrap_or(0..0));
    eprint!("{line}");
    for (s, (shot, _)) in plan.shots.iter_mut().enumerate() {
        if shots.contains(&s) {
            for t in shot.traces.iter_mut() {
                *t = wanted.binary_search(t).expect("a wanted trace");
            }
        } else {
            shot.traces.clear();
        }
    }
    Ok((plan, local))
}
