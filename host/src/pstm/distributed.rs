//! PSTM across MPI ranks (`seisgpu pstm migrate` under mpirun).

use crate::backend::Backend;
use crate::exec::mpi::{read_trace_share, run_rank, Cluster, RankImage, TraceSource};

/// [`super::work_items`] split in blocks over the ranks and over each rank's devices (each rank
/// reads only its items' traces of a SEG-Y input; the built-in input is made on every rank, each
/// taking its share), run as a [`super::Migration`]: each device adds its items into one resident
/// image, a rank's image is its devices' sum in device order; the ranks' images are summed in rank
/// order as they are written, the counts summed over the ranks.
pub fn migrate(cluster: &Cluster, source: &TraceSource, params: &super::PstmParams, mode: super::TraveltimeMode,
    model: super::TraveltimeModel, devices: &[Backend]) -> anyhow::Result<RankImage<super::PstmImage>> {
    use super::MigrationStats;
    cluster.agree("checking the parameters", params.validate(mode, model))?;
    let (share, _) = read_trace_share(cluster, source, super::work_items)?;
    cluster.agree("checking the input", share.traces.validate("input traces").map_err(|r| crate::error::Error::Input(r).into()))?;
    let job = super::Migration::new(params, mode, model, share.all_headers.len(), |r| share.slice(r));
    let local = run_rank(cluster, &job, devices, "migrating")?;
    let s = local.as_ref().map_or(MigrationStats::default(), |i| i.stats);
    let counts = [s.traces_used as u64, s.pairs, s.contributions, s.exact_evals];
    let mut total = [0u64; 4];
    cluster.sum_counts(&counts, &mut total);
    let mut image = super::zero_image(params);
    image.data = Vec::new();
    image.stats = MigrationStats { traces_used: total[0] as usize, pairs: total[1], contributions: total[2], exact_evals: total[3] };
    Ok(RankImage { image, partial: local.map(|i| i.data) })
}
