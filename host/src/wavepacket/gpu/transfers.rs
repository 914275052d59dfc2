//! Transfers: page-locked buffers, raw-sample staging on the copy stream, host edits of the
//! coefficients, and the volume and coefficient uploads and downloads.

use super::*;

impl GpuEngine {
    /// Page-locked host buffers for the volume and the coefficients (allocated on first use): the
    /// transfers from and to them run at full PCIe speed.
    pub fn pinned_buffers(&mut self) -> Result<(&mut [f32], &mut [Complex32])> {
        if self.pinned.is_none() {
            let n = self.frame.n();
            self.pinned = Some((PinnedBuf::new(&self.gpu, n * n * n)?, PinnedBuf::new(&self.gpu, c2(self.frame.total))?));
        }
        let (v, c) = self.pinned.as_mut().unwrap();
        let c = c.as_mut_slice()?;
        // SAFETY: (re, im) f32 pairs are the layout of Complex32.
        let c = unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr() as *mut Complex32, c.len() / 2) };
        Ok((v.as_mut_slice()?, c))
    }

    /// Forward from the pinned volume buffer to the pinned coefficient buffer (synchronised).
    pub fn forward_pinned(&mut self) -> Result<()> {
        self.pinned_buffers()?;
        let stream = self.gpu.stream().clone();
        let (v, _) = self.pinned.as_ref().unwrap();
        stream.memcpy_htod(v.as_slice()?, &mut self.vol)?;
        self.forward_device()?;
        let (_, c) = self.pinned.as_mut().unwrap();
        let c = c.as_mut_slice()?;
        for j in 0..self.frame.scales() {
            let r = self.frame.scale_range(j);
            stream.memcpy_dtoh(&self.boxes[j], &mut c[2 * r.start..2 * r.end])?;
        }
        stream.synchronize()?;
        Ok(())
    }

    /// Inverse from the pinned coefficient buffer to the pinned volume buffer (synchronised).
    pub fn inverse_pinned(&mut self) -> Result<()> {
        self.pinned_buffers()?;
        let stream = self.gpu.stream().clone();
        {
            let (_, c) = self.pinned.as_ref().unwrap();
            let c = c.as_slice()?;
            for j in 0..self.frame.scales() {
                let r = self.frame.scale_range(j);
                stream.memcpy_htod(&c[2 * r.start..2 * r.end], &mut self.boxes[j])?;
            }
        }
        self.inverse_device()?;
        let (v, _) = self.pinned.as_mut().unwrap();
        stream.memcpy_dtoh(&self.vol, v.as_mut_slice()?)?;
        stream.synchronize()?;
        Ok(())
    }

    /// Queues the copy of `slab` of a cube's raw samples into the spare device buffer from sample
    /// `at` on, on the engine's copy stream (the cube goes up slab by slab as the host
    /// copies it, so the first upload starts within a slab's copy, and the next cube goes up while
    /// the current one computes; on the compute stream it waited behind the previous cube, ~5 ms
    /// a cube on 4 GPUs). [`GpuEngine::cube_into_box`] swaps it in. Asynchronous where `slab` is
    /// page-locked memory.
    ///
    /// # Safety
    /// `slab` must stay alive and unchanged until the copy stream has passed the copy
    /// ([`GpuEngine::wait_staged`]).
    pub(crate) unsafe fn stage_slab(&mut self, slab: &[f32], at: usize) -> Result<()> {
        ensure!(at + slab.len() <= self.vol.len(), "slab of {} samples at {at} for a {}^3 engine", slab.len(), self.frame.n());
        let st = self.staging_free()?;
        let mut dst = st.spare.slice_mut(at..at + slab.len());
        st.copy.memcpy_htod(slab, &mut dst).context("uploading a slab of the cube")?;
        st.queued = true;
        Ok(())
    }

    /// Cube t's raw samples ((n0, n1, n2) = `inside` at `start`) straight from a page-locked
    /// volume of `shape` ([`crate::wavepacket::Engine::page_locked`]): one 3D copy on the copy stream, no host
    /// pass (the host copies of four engines' first cubes at once took 4-16 ms each on
    /// 4 x H200, against ~1.3 ms of DMA per 67 MB cube). [`GpuEngine::cube_into_box`] swaps them in
    /// as it does staged slabs; `wp_cut` checks them.
    ///
    /// # Safety
    /// `vol` must stay alive and unchanged until the copy stream has passed the copy
    /// ([`GpuEngine::wait_staged`]).
    pub(crate) unsafe fn stage_block(&mut self, vol: &[f32], shape: [usize; 3], start: [usize; 3], inside: [usize; 3])
        -> Result<()> {
        let n = self.frame.n();
        ensure!(inside.iter().all(|&d| d <= n), "block {inside:?} for a {n}^3 engine");
        use crate::runtime::memory::{copy_3d, Place};
        let planes = self.slab_planes;
        let st = self.staging_free()?;
        // By slabs of x0 planes, an event after each: the cut starts on a slab once it is up.
        for r in slabs(inside[0], planes) {
            let spare = Place::device(&st.spare, &st.copy, inside, [r.start, 0, 0]);
            let from = Place::host(vol, shape, [start[0] + r.start, start[1], start[2]]);
            unsafe { copy_3d(&st.copy, from, spare, [r.len(), inside[1], inside[2]]) }?;
            st.queued = true;
            st.slabs.push((r.end, st.copy.record_event(None).context("recording a slab's upload")?));
        }
        Ok(())
    }

    /// The page-locked counter that lets this engine add box faces itself
    /// ([`crate::wavepacket::tiling::CubeBox::face`]), reset to 0: the folding thread writes into it how many
    /// boxes are folded (every one before that number), and a face's copy waits until it reaches
    /// the face's [`crate::wavepacket::tiling::Face::after`].
    pub(crate) fn face_flag(&mut self) -> Result<Option<*mut u32>> {
        if self.face.is_none() {
            use cudarc::driver::sys;
            // (Stream memory operations, `cuStreamWaitValue32_v2`, are always there since CUDA 12.)
            let ctx = self.gpu.context().clone();
            let mut flag = PinnedBuf::<u32>::mapped(&self.gpu, 1)?;
            ctx.bind_to_thread().context("binding the context")?;
            let mut flag_device = 0u64;
            let host = flag.as_mut_slice()?.as_mut_ptr() as *mut std::ffi::c_void;
            // SAFETY: `flag` is page-locked, mapped memory of this context, alive with the state.
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut flag_device, host, 0) }.result()
                .context("mapping the face counter")?;
            let stream = ctx.new_stream().context("creating the face stream")?;
            self.face = Some(FaceState { stream, flag, flag_device, buf: self.gpu.zeros::<f32>(1)?, free: None });
        }
        let f = self.face.as_mut().unwrap();
        let p = f.flag.as_mut_slice()?.as_mut_ptr();
        // SAFETY: no stream waits on the counter between jobs (each job's waits all pass).
        unsafe { std::sync::atomic::AtomicU32::from_ptr(p).store(0, std::sync::atomic::Ordering::SeqCst) };
        Ok(Some(p))
    }

    /// Waits until the engine's streams are through (nothing in flight into host buffers), after a
    /// failed job; its cube marks are dropped (the next job's [`GpuEngine::take_device_times`]
    /// counts its own cubes only).
    pub(crate) fn quiesce(&mut self) -> Result<()> {
        if let Some(bx) = self.boxed.as_mut() {
            bx.timeline.clear();
            bx.lead = None;
            if let Some(tr) = bx.trace.as_mut() {
                tr.clear();
            }
        }
        self.gpu.stream().synchronize().context("waiting for the engine's work")?;
        if let Some(st) = &self.staging {
            st.copy.synchronize().context("waiting for the engine's uploads")?;
        }
        if let Some(bx) = &self.boxed {
            bx.down.synchronize().context("waiting for the engine's downloads")?;
        }
        if let Some(f) = &self.face {
            f.stream.synchronize().context("waiting for the engine's face copies")?;
        }
        Ok(())
    }

    /// The staging state, made on first use, its spare buffer free to write (the copy stream waits
    /// for the cut that last read it).
    pub(super) fn staging_free(&mut self) -> Result<&mut Staging> {
        if self.staging.is_none() {
            let spare = self.gpu.zeros::<f32>(self.vol.len())?;
            let copy = self.gpu.context().new_stream().context("creating the cube upload stream")?;
            self.staging = Some(Staging { spare, copy, queued: false, free: None, slabs: Vec::new() });
        }
        let st = self.staging.as_mut().unwrap();
        if !st.queued {
            // A new cube: the slab events of one that never swapped in (a failed job) are stale.
            st.slabs.clear();
        }
        // The spare buffer held the raw samples of the cube before the current one: its cut must
        // be through before they are overwritten.
        if let Some(ev) = st.free.take() {
            st.copy.wait(&ev).context("ordering a cube upload after the previous cut")?;
        }
        Ok(st)
    }

    /// Waits until the staged slabs have gone up (their host memory may be written again).
    pub(crate) fn wait_staged(&self) -> Result<()> {
        if let Some(st) = &self.staging {
            st.copy.synchronize().context("waiting for the cube upload")?;
        }
        Ok(())
    }

    /// A host edit of the device coefficients: down into the page-locked buffer, the edit, up.
    pub(super) fn host_edit(&mut self, edit: &mut dyn FnMut(&mut [Complex32])) -> Result<()> {
        let stream = self.gpu.stream().clone();
        self.pinned_buffers()?;
        {
            let (_, c) = self.pinned.as_mut().unwrap();
            let c = c.as_mut_slice()?;
            for j in 0..self.frame.scales() {
                let r = self.frame.scale_range(j);
                stream.memcpy_dtoh(&self.boxes[j], &mut c[2 * r.start..2 * r.end]).context("downloading coefficients")?;
            }
        }
        stream.synchronize().context("waiting for the forward transform")?;
        edit(self.pinned_buffers()?.1);
        let (_, c) = self.pinned.as_ref().unwrap();
        let c = c.as_slice()?;
        for j in 0..self.frame.scales() {
            let r = self.frame.scale_range(j);
            stream.memcpy_htod(&c[2 * r.start..2 * r.end], &mut self.boxes[j]).context("uploading coefficients")?;
        }
        Ok(())
    }

    /// Queues the hard threshold of the device coefficients (`wp_threshold`, one launch per
    /// scale): coefficient c of box b (numbered over all scales) becomes 0 where
    /// `below_threshold(c, thr[b])`, as [`crate::wavepacket::threshold_host`] does on the host; the kept counts
    /// go down into a page-locked buffer behind it ([`GpuEngine::kept`] once the stream has passed).
    pub fn threshold_device(&mut self, thr: &[f32]) -> Result<()> {
        self.threshold_queue(thr, true)?;
        let (kept, kept_host) = self.kept.as_mut().unwrap();
        self.gpu.stream().memcpy_dtoh(kept, kept_host.as_mut_slice()?).context("downloading the kept counts")?;
        Ok(())
    }

    /// The threshold's launches; the kept counts start from zero when `reset` is set, else add up
    /// (over a box's cubes).
    pub(super) fn threshold_queue(&mut self, thr: &[f32], reset: bool) -> Result<()> {
        ensure!(thr.len() == self.frame.box_count(), "{} thresholds for a frame of {} boxes", thr.len(), self.frame.box_count());
        let scales = self.frame.scales();
        for j in 0..scales {
            let count = self.frame.geom.boxes[j] as usize * self.frame.geom.box_points(j);
            // The kernel divides in 32 bits and counts into a u32 per scale.
            ensure!(count < u32::MAX as usize, "scale {j} has {count} coefficients: too many for the device threshold (use a host edit)");
        }
        if self.thresholds.as_ref().is_none_or(|(h, _)| h.as_slice() != thr) {
            self.thresholds = Some((thr.to_vec(), self.gpu.upload(thr)?));
        }
        if self.kept.is_none() {
            self.kept = Some((self.gpu.zeros::<u32>(scales)?, PinnedBuf::new(&self.gpu, scales)?));
        }
        let stream = self.gpu.stream().clone();
        let gpu = self.gpu.clone();
        let (_, thr_dev) = self.thresholds.as_ref().unwrap();
        let (kept, _) = self.kept.as_mut().unwrap();
        if reset {
            stream.memset_zeros(kept).context("zeroing the kept counts")?;
        }
        let mut first_box = 0usize;
        for j in 0..scales {
            let np = self.frame.geom.box_points(j);
            let count = self.frame.geom.boxes[j] as usize * np;
            let (count32, np32) = (count as u32, np as u32);
            let t = thr_dev.slice(first_box..);
            let mut k = kept.slice_mut(j..j + 1);
            launch!(gpu, WP_THRESHOLD, grid_1d(count, 256), &count32, &np32, &t, &mut self.boxes[j], &mut k)?;
            first_box += self.frame.geom.boxes[j] as usize;
        }
        Ok(())
    }

    /// Coefficients kept by the last [`GpuEngine::threshold_device`] (valid once the stream has
    /// passed it, e.g. after the cube's event).
    pub fn kept(&self) -> Result<u64> {
        let (_, h) = self.kept.as_ref().context("no device threshold has run on this engine")?;
        Ok(h.as_slice()?.iter().map(|&k| k as u64).sum())
    }

    pub fn upload_volume(&mut self, f: &[f32]) -> Result<()> {
        ensure!(f.len() == self.vol.len(), "volume of {} samples for a {}^3 engine", f.len(), self.frame.n());
        self.gpu.stream().memcpy_htod(f, &mut self.vol).context("uploading the cube")?;
        Ok(())
    }

    pub fn download_volume(&self) -> Result<Vec<f32>> { Ok(self.gpu.download(&self.vol)?) }

    pub fn upload_coeffs(&mut self, c: &[Complex32]) -> Result<()> {
        ensure!(c.len() == self.frame.total, "{} coefficients for a frame of {}", c.len(), self.frame.total);
        let stream = self.gpu.stream().clone();
        for j in 0..self.frame.scales() {
            let src = as_f32(&c[self.frame.scale_range(j)]);
            stream.memcpy_htod(src, &mut self.boxes[j]).context("uploading coefficients")?;
        }
        Ok(())
    }

    pub fn download_coeffs(&self, out: &mut [Complex32]) -> Result<()> {
        ensure!(out.len() == self.frame.total, "coefficient buffer of {} for a frame of {}", out.len(), self.frame.total);
        let stream = self.gpu.stream();
        for j in 0..self.frame.scales() {
            let dst = as_f32_mut(&mut out[self.frame.scale_range(j)]);
            stream.memcpy_dtoh(&self.boxes[j], dst).context("downloading coefficients")?;
        }
        stream.synchronize().context("waiting for the coefficients")?;
        Ok(())
    }

    /// The per-scale device buffers of the box coefficients (interleaved complex).
    pub fn box_buffers(&self) -> &[CudaSlice<f32>] { &self.boxes }
    pub fn box_buffers_mut(&mut self) -> &mut [CudaSlice<f32>] { &mut self.boxes }
    pub fn volume_buffer(&self) -> &CudaSlice<f32> { &self.vol }
    pub fn volume_buffer_mut(&mut self) -> &mut CudaSlice<f32> { &mut self.vol }
}
