//! The transform's stages (the spectrum, the box gathers, the box FFTs, the combination) and their
//! launch shapes.

use super::*;

impl GpuEngine {
    // Public for the per-stage benchmark.

    /// The separable resampling and its adjoint for the frame's stencil half-width q.
    pub(super) fn separable_kernels(&self) -> Result<(SeparableKernel, SeparableKernel)> {
        let q = self.frame.geom.q;
        separable_kernels(q as u32).with_context(|| format!("no separable gather kernels for q = {q}"))
    }

    /// Forward USFFT up to the global spectrum (stencil: P^3 grid) or the lattice (separable,
    /// lattice). Separable: three rounds of batched 1D FFT + gather.
    pub fn spectrum_forward(&mut self, marks: &mut Marks) -> Result<()> { self.spectrum_forward_slabbed(marks, &mut |_, _| Ok(())) }

    /// [`GpuEngine::spectrum_forward`], `before(engine, planes)` queued before the x0 `planes` of
    /// the volume buffer are read: separable, the x2 pass goes slab by slab ([`slabs`]); the other
    /// gathers read the whole cube at once.
    pub(super) fn spectrum_forward_slabbed(&mut self, marks: &mut Marks, before: &mut SlabStep) -> Result<()> {
        let (n, m, p) = (self.frame.n() as u32, self.frame.m() as u32, self.frame.p() as u32);
        let g = self.g;
        let gpu = self.gpu.clone();
        let stream = gpu.stream().clone();
        let n3 = (n * n * n) as usize;
        match self.gather {
            Gather::Separable => {
                let (resample, _) = self.separable_kernels()?;
                {
                    // The resamplings write n of each line's P points: the rest stays zero.
                    let s = self.sep.as_mut().expect("separable buffers");
                    stream.memset_zeros(&mut s.a)?;
                    stream.memset_zeros(&mut s.b)?;
                    if let Some(c) = s.c.as_mut() {
                        stream.memset_zeros(c)?;
                    }
                }
                let (one, zero) = (1u32, 0u32);
                // The x2 pass slab by slab, and the x1 pass once the slabs of its own slab are
                // through (a slab's x1 lines need only its own planes; [`x1_planes`]).
                let x2_planes = self.slab_planes;
                for big in slabs(n as usize, self.x1_planes) {
                    for r in slabs_in(big.clone(), x2_planes) {
                        before(self, r.clone())?;
                        let s = self.sep.as_mut().expect("separable buffers");
                        let (a0, planes) = (r.start as u32, r.len() as u32);
                        launch!(gpu, WP_PREP_LINES, grid_1d(r.len() * (n * n) as usize, 256), &g, &a0, &planes, &self.vol,
                            &self.corr, &mut s.a)?;
                        marks.mark("corr:prep")?;
                        Separable::slab_plan(&s.plan_x2, r.len())?.exec_inplace_at(&mut s.a, r.start * (n * p) as usize, false)?;
                        marks.mark("fft:lines-x2")?;
                        let lines = LinesArg(lines_x2(n, m, &big));
                        launch!(gpu, resample, resample_cfg(planes, n, m), &g, &n, &n, &one, &p, &a0, &lines, &s.a, &mut s.b)?;
                        marks.mark("gather:resample-x2")?;
                    }
                    let s = self.sep.as_mut().expect("separable buffers");
                    Separable::slab_plan(&s.plan_x1, big.len())?.exec_inplace_at(&mut s.b, big.start * (m * p) as usize, false)?;
                    marks.mark("fft:lines-x1")?;
                    let c = match s.c.as_mut() {
                        Some(c) => c,
                        None => {
                            // C is A, through with the x2 pass: zeros where the x1 pass writes none.
                            stream.memset_zeros(&mut s.a)?;
                            &mut s.a
                        }
                    };
                    let lines = LinesArg(lines_x1(m, &big));
                    launch!(gpu, resample, resample_cfg(m, big.len() as u32, m), &g, &m, &n, &one, &p, &zero, &lines, &s.b, c)?;
                    marks.mark("gather:resample-x1")?;
                }
                let s = self.sep.as_mut().expect("separable buffers");
                let c = s.c.as_mut().unwrap_or(&mut s.a);
                s.plan_x0.exec_inplace(c, false)?;
                marks.mark("fft:lines-x0")?;
                let lines = LinesArg(Lines::rotation(m, m));
                launch!(gpu, resample, resample_cfg(m, m, m), &g, &m, &m, &zero, &m, &zero, &lines, &*c, &mut self.lat)?;
                marks.mark("gather:resample-x0")?;
            }
            Gather::Stencil => {
                before(self, 0..n as usize)?;
                let s = self.stencil.as_mut().expect("stencil buffers");
                stream.memset_zeros(&mut s.grid)?;
                launch!(gpu, WP_PREP_GRID, grid_1d(n3, 256), &g, &self.vol, &self.corr, &mut s.grid)?;
                marks.mark("corr:prep")?;
                s.plan.exec_inplace(&mut s.grid, false)?;
                marks.mark("fft:grid-3d")?;
            }
            Gather::Lattice => {
                before(self, 0..n as usize)?;
                stream.memset_zeros(&mut self.lat)?;
                launch!(gpu, WP_PREP_LATTICE, grid_1d(n3, 256), &g, &self.vol, &mut self.lat)?;
                marks.mark("corr:prep")?;
                self.lattice_plan.as_ref().expect("lattice plan").exec_inplace(&mut self.lat, false)?;
                marks.mark("fft:lattice-3d")?;
            }
        }
        Ok(())
    }

    /// Box points of every scale: window x norm x spectrum (the paper's per-box-point stencil for
    /// [`Gather::Stencil`], a lattice lookup otherwise).
    pub fn box_gather(&mut self) -> Result<()> {
        let g = self.g;
        let gpu = self.gpu.clone();
        let q = self.frame.geom.q;
        let stencil_kernel = gather_stencil_kernel(q as u32).with_context(|| format!("no stencil gather kernel for q = {q}"))?;
        for j in 0..self.frame.scales() {
            let count = self.frame.geom.boxes[j] as usize * self.frame.geom.box_points(j);
            let jj = j as u32;
            match self.gather {
                Gather::Stencil => {
                    let s = self.stencil.as_ref().expect("stencil buffers");
                    launch!(gpu, stencil_kernel, grid_1d(count, 128), &g, &jj, &self.tables[j], &s.grid, &mut self.boxes[j])?;
                }
                _ => launch!(gpu, WP_BOX_FILL, grid_1d(count, 256), &g, &jj, &self.tables[j], &self.lat, &mut self.boxes[j])?,
            }
        }
        Ok(())
    }

    /// Batched box FFTs, one cuFFT plan per scale (`inverse`: e^{+i}, the forward transform's step).
    pub fn box_ffts(&mut self, inverse: bool) -> Result<()> {
        for (plan, buf) in self.box_plans.iter().zip(self.boxes.iter_mut()) {
            plan.exec_inplace(buf, inverse)?;
        }
        Ok(())
    }

    /// Inverse's box side: the lattice gathers window x norm x value over the covering boxes.
    pub fn combine(&mut self) -> Result<()> {
        let stream = self.gpu.stream().clone();
        let (mut ptrs, mut tptrs) = (ScalePtrs::default(), ScalePtrs::default());
        let mut records = Vec::new();
        for (j, (b, t)) in self.boxes.iter().zip(&self.tables).enumerate() {
            let (ptr, rec) = b.device_ptr(&stream);
            ptrs.p[j] = ptr;
            records.push(rec);
            let (ptr, rec) = t.device_ptr(&stream);
            tptrs.p[j] = ptr;
            records.push(rec);
        }
        let m = self.frame.m();
        let (g, pa, ta) = (self.g, PtrsArg(ptrs), PtrsArg(tptrs));
        launch!(self.gpu, WP_COMBINE, grid_1d(m * m * m, 128), &g, &pa, &ta, &mut self.lat)?;
        drop(records);
        Ok(())
    }

    /// Adjoint USFFT from the lattice to the volume buffer (real part).
    pub fn spectrum_adjoint(&mut self, marks: &mut Marks) -> Result<()> { self.spectrum_adjoint_slabbed(marks, &mut |_, _| Ok(())) }

    /// [`GpuEngine::spectrum_adjoint`], `after(engine, planes)` queued once the x0 `planes` of the
    /// volume buffer are written: separable, the last (x2) pass goes slab by slab ([`slabs`]);
    /// the other gathers write the whole cube at once.
    pub(super) fn spectrum_adjoint_slabbed(&mut self, marks: &mut Marks, after: &mut SlabStep) -> Result<()> {
        let (n, m, p) = (self.frame.n() as u32, self.frame.m() as u32, self.frame.p() as u32);
        let g = self.g;
        let gpu = self.gpu.clone();
        let n3 = (n * n * n) as usize;
        match self.gather {
            Gather::Separable => {
                let (_, adjoint) = self.separable_kernels()?;
                let s = self.sep.as_mut().expect("separable buffers");
                let (one, zero) = (1u32, 0u32);
                let lines = LinesArg(Lines::rotation(m, m).adjoint());
                // C is A where the x1 pass is whole: read through before the x2 pass writes A.
                let c = s.c.as_mut().unwrap_or(&mut s.a);
                launch!(gpu, adjoint, adjoint_cfg(m, m, p), &g, &m, &m, &zero, &m, &zero, &lines, &self.lat, &mut *c)?;
                marks.mark("gather:adjoint-x0")?;
                s.plan_x0.exec_inplace(c, true)?;
                marks.mark("fft:lines-x0")?;
                // The x1 pass by its slabs ([`x1_planes`]), each followed by the x2 pass slab by
                // slab: a slab's output is done, and goes down, while the next slabs compute.
                let x2_planes = self.slab_planes;
                for big in slabs(n as usize, self.x1_planes) {
                    let s = self.sep.as_mut().expect("separable buffers");
                    let lines = LinesArg(lines_x1(m, &big).adjoint());
                    let c = s.c.as_ref().unwrap_or(&s.a);
                    launch!(gpu, adjoint, adjoint_cfg(m, big.len() as u32, p), &g, &m, &n, &one, &p, &zero, &lines, c, &mut s.b)?;
                    marks.mark("gather:adjoint-x1")?;
                    Separable::slab_plan(&s.plan_x1, big.len())?.exec_inplace_at(&mut s.b, big.start * (m * p) as usize, true)?;
                    marks.mark("fft:lines-x1")?;
                    for r in slabs_in(big.clone(), x2_planes) {
                        let s = self.sep.as_mut().expect("separable buffers");
                        let (a0, planes) = (r.start as u32, r.len() as u32);
                        let lines = LinesArg(lines_x2(n, m, &big).adjoint());
                        launch!(gpu, adjoint, adjoint_cfg(planes, n, p), &g, &n, &n, &one, &p, &a0, &lines, &s.b, &mut s.a)?;
                        marks.mark("gather:adjoint-x2")?;
                        Separable::slab_plan(&s.plan_x2, r.len())?.exec_inplace_at(&mut s.a, r.start * (n * p) as usize, true)?;
                        marks.mark("fft:lines-x2")?;
                        launch!(gpu, WP_CROP_LINES, grid_1d(r.len() * (n * n) as usize, 256), &g, &a0, &planes, &s.a, &self.corr,
                            &mut self.vol)?;
                        marks.mark("corr:crop")?;
                        after(self, r)?;
                    }
                }
            }
            Gather::Stencil => {
                let s = self.stencil.as_mut().expect("stencil buffers");
                let cfg = LaunchConfig {
                    grid_dim: (p.div_ceil(8), p.div_ceil(8), p.div_ceil(4)),
                    block_dim: (8, 8, 4),
                    shared_mem_bytes: 0,
                };
                launch!(gpu, WP_ADJOINT_STENCIL, cfg, &g, &s.k, &s.list_idx, &s.list_w, &self.lat, &mut s.grid)?;
                marks.mark("gather:adjoint-stencil")?;
                s.plan.exec_inplace(&mut s.grid, true)?;
                marks.mark("fft:grid-3d")?;
                launch!(gpu, WP_CROP_GRID, grid_1d(n3, 256), &g, &s.grid, &self.corr, &mut self.vol)?;
                marks.mark("corr:crop")?;
                after(self, 0..n as usize)?;
            }
            Gather::Lattice => {
                self.lattice_plan.as_ref().expect("lattice plan").exec_inplace(&mut self.lat, true)?;
                marks.mark("fft:lattice-3d")?;
                launch!(gpu, WP_CROP_LATTICE, grid_1d(n3, 256), &g, &self.lat, &mut self.vol)?;
                marks.mark("corr:crop")?;
                after(self, 0..n as usize)?;
            }
        }
        Ok(())
    }
}

/// Resampling launch: `a` lines of a from `a_first` by `b` lines of b from [`Lines::b_first`], M
/// lattice points; block (32 over b, 8 over M).
pub(super) fn resample_cfg(a: u32, b: u32, m: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (b.div_ceil(32), m.div_ceil(8), a), block_dim: (32, 8, 1), shared_mem_bytes: 0 }
}

/// Adjoint resampling launch: output lines (a, b) as [`resample_cfg`], P points each; 32 x 32
/// tiles through shared memory.
pub(super) fn adjoint_cfg(a: u32, b: u32, p: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (b.div_ceil(32), p.div_ceil(32), a), block_dim: (32, 8, 1), shared_mem_bytes: 32 * 33 * 8 }
}
