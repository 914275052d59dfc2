//! GPU driver (in progress).
use std::sync::Arc;
use super::design::Operator;
use super::{GpuOptions, Image, Shot, ShotGrid, SrmParams, VelocityModel};
use crate::runtime::Gpu;
use crate::traces::TraceSet;

#[allow(clippy::too_many_arguments)]
pub fn migrate_shots(_gpu: &Arc<Gpu>, _op: &Operator, _traces: &TraceSet, _model: &VelocityModel, _params: &SrmParams,
    _shots: &[(Shot, ShotGrid)], _opts: GpuOptions, _progress: bool) -> anyhow::Result<Image> {
    anyhow::bail!("srm on the GPU is not implemented yet")
}
