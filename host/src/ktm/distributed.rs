//! Kirchhoff migration across MPI ranks (`seisgpu ktm migrate` under mpirun).

use crate::backend::Backend;
use crate::exec::mpi::{read_trace_share, run_rank, Cluster, RankImage, TraceSource};

/// [`super::work_items`] split in blocks over the ranks, each rank reading only its block's trace
/// range and running it as a [`super::Migration`] on its devices (each device adding its block of
/// the rank's items into one resident image); a rank's image is its devices' sum in device order.
/// The ranks' images are summed in rank order as they are written (`exec::mpi::write_npy_sum`,
/// `write_segy_sum`): with one device per rank, the image of one process on as many devices, bit for bit.
pub fn migrate(cluster: &Cluster, source: &TraceSource, params: &super::Params, devices: &[Backend])
    -> anyhow::Result<RankImage<super::Image>> {
    let (share, _) = read_trace_share(cluster, source, super::work_items)?;
    let t = &share.traces;
    let plan = super::Plan::new(&share.all_headers, t.ns, t.dt, t.t0, params);
    let plan = cluster.agree("planning the migration", plan)?;
    let job = super::Migration::new(plan, params, share.all_headers.len(), |r| share.slice(r));
    let local = run_rank(cluster, &job, devices, "migrating")?;
    Ok(RankImage { image: job.image(Vec::new()), partial: local.map(|i| i.data) })
}
