//! The separable USFFT's buffers and plans, its lines, and the slabs of x0 planes its passes go by.

use super::*;

/// Buffers and plans of the separable USFFT, one line buffer per pass: A (N, N, P) for the x2
/// pass (x0, x1, x2 lines), B (N x M lines of P) for the x1 pass (k2, x0, x1 lines, a slab of x0
/// planes one block: [`lines_x1`]) and C (M, M, P) for the x0 pass (k1, k2, x0 lines). The x2
/// and x1 passes go slab by slab ([`slabs`]; each has its plans for the full slab and the last
/// one's where it is shorter), the x0 pass needs every plane. C is a buffer of its own only where
/// the x1 pass goes by slabs ([`x1_planes`]): A is then still in use by later x2 slabs. With the x1
/// pass whole, A is free when C is needed, and is C (`c` is `None`).
pub(super) struct Separable {
    pub(super) a: CudaSlice<f32>,
    pub(super) b: CudaSlice<f32>,
    pub(super) c: Option<CudaSlice<f32>>,
    pub(super) plan_x2: Vec<(usize, FftPlan)>,
    pub(super) plan_x1: Vec<(usize, FftPlan)>,
    pub(super) plan_x0: FftPlan,
}

impl Separable {
    /// A slab pass's plan (`plans`: [`Separable::plan_x2`] or [`Separable::plan_x1`]) for a slab of
    /// `planes` x0 planes.
    pub(super) fn slab_plan(plans: &[(usize, FftPlan)], planes: usize) -> Result<&FftPlan> {
        plans.iter().find(|(k, _)| *k == planes).map(|(_, p)| p).with_context(|| format!("no FFT plan for a slab of {planes} planes"))
    }

    /// Batched FFTs of P-point lines for the slabs of `n` x0 planes, `planes` each, `per_plane`
    /// lines a plane.
    pub(super) fn slab_plans(stream: &Arc<CudaStream>, n: usize, planes: usize, per_plane: usize, p: usize) -> Result<Vec<(usize, FftPlan)>> {
        let mut plans = vec![(planes, FftPlan::c2c_batched(stream, &[p], planes * per_plane)?)];
        if n % planes != 0 {
            plans.push((n % planes, FftPlan::c2c_batched(stream, &[p], (n % planes) * per_plane)?));
        }
        Ok(plans)
    }
}

/// The lines of the separable passes ([`Lines`]). The x2 pass reads A's (x0, x1) lines
/// and writes B's (k2, x0) lines, the x1 pass reads B's (k2, x0) lines and writes C's (k1, k2)
/// lines; the adjoints the other way round ([`Lines::adjoint`]). B holds the slabs of x0 planes one
/// after another, each slab's lines k2 by k2 and within a k2 its planes in order: a slab's x1 lines
/// are one block for its batched FFTs, and a warp's 32 planes of one k2 are neighbouring lines, as
/// they were with B laid out (k2, x0) whole (the slab-major (x0, k2) order, lines M apart, cost 2x
/// in `resample-x1`). B's line (k2, x0) for the slab `x0s`: `x0s.start * M` lines of earlier slabs,
/// then `k2 * x0s.len() + (x0 - x0s.start)`.
pub(super) fn slab_base(m: u32, x0s: &std::ops::Range<usize>) -> u32 { x0s.start as u32 * (m - 1) }
pub(crate) fn lines_x2(n: u32, m: u32, x0s: &std::ops::Range<usize>) -> Lines {
    Lines { in_base: 0, in0: n, in1: 1, out_base: slab_base(m, x0s), out0: x0s.len() as u32, out1: 1, b_first: 0, b_end: n }
}
pub(crate) fn lines_x1(m: u32, x0s: &std::ops::Range<usize>) -> Lines {
    Lines { in_base: slab_base(m, x0s), in0: x0s.len() as u32, in1: 1, out_base: 0, out0: m, out1: 1, b_first: x0s.start as u32,
        b_end: x0s.end as u32 }
}

/// Slabs of x0 planes per cube in the separable transform's x2 pass. A cube's forward
/// starts on its first slab once that slab's samples are up, and the inverse's last pass hands
/// each slab to the fold and the download as soon as it is done, so a cube's own DMA in and out
/// overlaps its compute (at 480^3 on 4 GPUs, 2 cubes each, the first cube's upload and the last
/// box's download were serial, ~1/10 of the time). Every transform runs the pass by slabs, whatever
/// its path, so the coefficients never depend on it (measured against the whole cube at once:
/// docs/notes/scale.md, wave packets step 4).
pub const SLABS: usize = 8;

/// Slabs of the separable x1 pass per cube for an engine made on its own: one, the whole cube
/// ([`GpuEngine::set_x1_slabs`]; a job of several cubes picks with [`x1_slabs_for`]).
pub const X1_SLABS: usize = 1;

/// Slabs of the x1 pass where each device takes at most [`FEW_CUBES`] cubes of a job.
pub const X1_SLABS_FEW: usize = 8;

/// Cubes per device up to which [`X1_SLABS_FEW`] pays.
pub const FEW_CUBES: usize = 2;

/// The x1 pass's slab count for a job of `cubes` cubes on `devices` devices. By slabs, the first
/// cube's upload and the last box's download overlap two passes instead of one, which matters
/// where a device has few cubes; each cube then costs a little more (smaller batched FFTs).
/// Measured on 4 x H200 (`seisgpu --gpus all bench wavepacket --size paper`, two runs each, ms):
/// 480^3 (8 cubes) on 4 GPUs, 2 cubes each: 35.4-35.5 whole, 33.9-34.5 with 8 slabs (3.64x ->
/// 3.80-3.86x); on 2 GPUs (4 each) 65.7 against 65.9, on 1 GPU (8) 129.4 against 130.8;
/// 928 x 928 x 480 (32 cubes): 514.2 against 521.0 on 1 GPU, 132.8 against 132.2-132.6 on 4 (8 each).
pub fn x1_slabs_for(cubes: usize, devices: usize) -> usize {
    if cubes <= FEW_CUBES * devices.max(1) { X1_SLABS_FEW } else { X1_SLABS }
}

/// x0 planes per slab for a cube of side `n` in `slabs` slabs: `n / slabs` rounded up.
pub(super) fn slab_planes(n: usize, slabs: usize) -> usize { n.div_ceil(slabs.clamp(1, n.max(1))).max(1) }

/// x0 planes per slab of the separable x1 pass in `slabs` slabs, a multiple of the x2 pass's
/// `planes` (each x1 slab runs after its x2 slabs in the forward, before them in the inverse).
pub(super) fn x1_planes(n: usize, planes: usize, slabs: usize) -> usize {
    n.div_ceil(slabs.clamp(1, n.max(1))).div_ceil(planes.max(1)).max(1) * planes.max(1)
}

/// The x0 slabs of `n` planes, `planes` each (the last one shorter where `planes` does not divide `n`).
pub fn slabs(n: usize, planes: usize) -> impl Iterator<Item = std::ops::Range<usize>> { slabs_in(0..n, planes) }

/// The slabs of the x0 planes `x0s`, `planes` each from its start (the last one shorter): the x2
/// slabs of an x1 slab ([`x1_planes`]).
pub fn slabs_in(x0s: std::ops::Range<usize>, planes: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let end = x0s.end;
    x0s.step_by(planes.max(1)).map(move |a| a..(a + planes).min(end))
}

/// The part of a block (`at`, `extent`, in a buffer's coordinates) in the x0 planes `rows`.
pub(super) fn rows_of_block(at: [usize; 3], extent: [usize; 3], rows: &std::ops::Range<usize>) -> Option<([usize; 3], [usize; 3])> {
    let (lo, hi) = (at[0].max(rows.start), (at[0] + extent[0]).min(rows.end));
    (lo < hi).then_some(([lo, at[1], at[2]], [hi - lo, extent[1], extent[2]]))
}
