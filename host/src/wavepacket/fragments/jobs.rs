//! The cube transforms of a [`Fragmented`] as queue jobs ([`crate::exec::QueueJob`]): the
//! engines pull cubes as they free up, and each cube's result is folded on the calling thread in
//! cube order (coefficients one cube after the other, cubes added into the volume), so the result
//! is the same bit for bit for any number of engines and any timing. The same jobs run a rank's
//! block of the cubes under MPI (`super::super::distributed`, [`crate::exec::mpi::run_rank_queue`]).
//!
//! The threshold of one process's applications goes through [`Fragmented::process_with`] instead:
//! its engines keep state across cubes (a box's partial sum, the previous box's download behind
//! the next box's first cube) and hand slabs of a box to the fold while the box is still coming down.

use std::marker::PhantomData;
use std::sync::Mutex;

use anyhow::{ensure, Result};
use num_complex::Complex32;

use super::{Engine, Fragmented, Tiling};
use crate::exec::QueueJob;

/// The coefficients of the cubes, from a slab of the volume's rows from `first_row` on (the whole
/// volume: 0), one cube after the other.
pub struct ForwardCubes<'a> {
    pub tr: &'a Fragmented,
    pub slab: &'a [f32],
    pub first_row: usize,
}

impl QueueJob for ForwardCubes<'_> {
    type Device = Mutex<Engine>;
    type Result = Vec<Complex32>;
    type Output = Vec<Complex32>;
    fn items(&self) -> usize { self.tr.tiling.count() }
    fn run(&self, eng: &Mutex<Engine>, t: usize) -> Result<Vec<Complex32>> { self.tr.forward_on(eng, self.slab, self.first_row, t) }
    fn fold(&self, out: &mut Vec<Complex32>, t: usize, c: Vec<Complex32>) -> Result<()> {
        ensure!(c.len() == self.tr.frame.total, "cube {t}: {} coefficients for a frame of {}", c.len(), self.tr.frame.total);
        out.extend_from_slice(&c);
        Ok(())
    }
}

/// The coefficients of each cube handed to `look` on the engine's thread (statistics passes);
/// nothing is kept.
pub struct LookAtCubes<'a> {
    pub tr: &'a Fragmented,
    pub slab: &'a [f32],
    pub first_row: usize,
    pub look: &'a (dyn Fn(usize, &[Complex32]) + Sync),
}

impl QueueJob for LookAtCubes<'_> {
    type Device = Mutex<Engine>;
    type Result = ();
    type Output = ();
    fn items(&self) -> usize { self.tr.tiling.count() }
    fn run(&self, eng: &Mutex<Engine>, t: usize) -> Result<()> {
        (self.look)(t, &self.tr.forward_on(eng, self.slab, self.first_row, t)?);
        Ok(())
    }
    fn fold(&self, _: &mut (), _: usize, _: ()) -> Result<()> { Ok(()) }
}

/// Where inverted cubes go, in cube order.
pub trait CubeSink {
    fn add(&mut self, tiling: &Tiling, t: usize, samples: Vec<f32>) -> Result<()>;
}

/// Kept one by one (an MPI rank's cubes, exchanged with the other ranks afterwards).
impl CubeSink for Vec<Vec<f32>> {
    fn add(&mut self, _: &Tiling, _: usize, samples: Vec<f32>) -> Result<()> {
        self.push(samples);
        Ok(())
    }
}

/// The samples of each cube from its coefficients (`coeffs`: those of the cubes from `first_cube`
/// on, one after the other), into a [`CubeSink`].
pub struct InverseCubes<'a, S> {
    pub tr: &'a Fragmented,
    pub coeffs: &'a [Complex32],
    pub first_cube: usize,
    sink: PhantomData<fn() -> S>,
}

impl<'a, S> InverseCubes<'a, S> {
    pub fn new(tr: &'a Fragmented, coeffs: &'a [Complex32], first_cube: usize) -> Self {
        InverseCubes { tr, coeffs, first_cube, sink: PhantomData }
    }
}

impl<S: CubeSink> QueueJob for InverseCubes<'_, S> {
    type Device = Mutex<Engine>;
    type Result = Vec<f32>;
    type Output = S;
    fn items(&self) -> usize { self.tr.tiling.count() }
    fn run(&self, eng: &Mutex<Engine>, t: usize) -> Result<Vec<f32>> {
        let per = self.tr.frame.total;
        let at = t.checked_sub(self.first_cube).map(|k| k * per).filter(|&at| at + per <= self.coeffs.len())
            .ok_or_else(|| anyhow::anyhow!("cube {t}: its coefficients are not held here (cubes from {} on)", self.first_cube))?;
        self.tr.inverse_on(eng, &self.coeffs[at..at + per], t)
    }
    fn fold(&self, out: &mut S, t: usize, samples: Vec<f32>) -> Result<()> { out.add(&self.tr.tiling, t, samples) }
}

/// Forward, hard threshold on the host ([`super::super::threshold_host`]), inverse: each cube's
/// samples, kept one by one, and the count of kept coefficients.
pub struct ThresholdCubes<'a> {
    pub tr: &'a Fragmented,
    pub slab: &'a [f32],
    pub first_row: usize,
    pub thr: &'a [f32],
}

impl QueueJob for ThresholdCubes<'_> {
    type Device = Mutex<Engine>;
    type Result = (Vec<f32>, u64);
    type Output = (Vec<Vec<f32>>, u64);
    fn items(&self) -> usize { self.tr.tiling.count() }
    fn run(&self, eng: &Mutex<Engine>, t: usize) -> Result<(Vec<f32>, u64)> {
        let mut c = self.tr.forward_on(eng, self.slab, self.first_row, t)?;
        let kept = super::super::threshold_host(&self.tr.frame, self.thr, &mut c);
        Ok((self.tr.inverse_on(eng, &c, t)?, kept))
    }
    fn fold(&self, (cubes, kept): &mut (Vec<Vec<f32>>, u64), _: usize, (samples, k): (Vec<f32>, u64)) -> Result<()> {
        cubes.push(samples);
        *kept += k;
        Ok(())
    }
}

/// The whole volume the cubes add up to ([`Tiling::accumulate`], in cube order). Its zeros are
/// written on another thread (`zeros`) while the engines transform the first cubes: left to the
/// folds, the first touch of its pages (442 MB at 480^3) fell on the last cubes' folds, a serial
/// tail after the devices finish.
pub(super) struct VolumeSum<'s> {
    pub out: Option<Vec<f32>>,
    pub zeros: Option<std::thread::ScopedJoinHandle<'s, Vec<f32>>>,
}

impl VolumeSum<'_> {
    fn zeroed(zeros: Option<std::thread::ScopedJoinHandle<'_, Vec<f32>>>) -> Result<Vec<f32>> {
        let z = zeros.ok_or_else(|| anyhow::anyhow!("no output volume"))?;
        z.join().map_err(|_| anyhow::anyhow!("zeroing the volume panicked"))
    }

    /// The volume (the zeros themselves where no cube came).
    pub fn finish(self) -> Result<Vec<f32>> {
        match self.out {
            Some(v) => Ok(v),
            None => Self::zeroed(self.zeros),
        }
    }
}

impl CubeSink for VolumeSum<'_> {
    fn add(&mut self, tiling: &Tiling, t: usize, samples: Vec<f32>) -> Result<()> {
        if self.out.is_none() {
            self.out = Some(Self::zeroed(self.zeros.take())?);
        }
        let Some(out) = self.out.as_mut() else { anyhow::bail!("no output volume") };
        tiling.accumulate(out, t, &samples);
        Ok(())
    }
}
