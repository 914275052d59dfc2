//! GPU driver (in progress).
use std::sync::Arc;

use anyhow::Result;
use num_complex::Complex32;

use super::Frame;
use crate::runtime::Gpu;

pub struct GpuEngine {
    frame: Arc<Frame>,
    _gpu: Arc<Gpu>,
}

impl GpuEngine {
    pub fn new(gpu: Arc<Gpu>, frame: Arc<Frame>) -> Result<Self> { Ok(Self { frame, _gpu: gpu }) }
    pub fn frame(&self) -> &Arc<Frame> { &self.frame }
    pub fn forward(&mut self, _f: &[f32]) -> Result<Vec<Complex32>> { anyhow::bail!("GPU path not built yet") }
    pub fn inverse(&mut self, _c: &[Complex32]) -> Result<Vec<f32>> { anyhow::bail!("GPU path not built yet") }
}
