//! GPU driver (in progress).
use std::sync::Arc;

use super::prep::Prepared;
use super::{GpuLimits, Plan, Variant};
use crate::runtime::Gpu;

pub fn migrate(_gpu: &Arc<Gpu>, _plan: &Plan, _prep: &Prepared, _variant: Variant, _limits: &GpuLimits) -> anyhow::Result<Vec<f32>> {
    anyhow::bail!("GPU migration is not implemented yet")
}
pub fn model(_gpu: &Arc<Gpu>, _plan: &Plan, _image: &[f32], _limits: &GpuLimits) -> anyhow::Result<Vec<f32>> {
    anyhow::bail!("GPU modelling is not implemented yet")
}
