//! Box jobs: one cube of a box queued from its staged samples to its partial sum on the way down.

use super::*;

impl GpuEngine {
    /// One cube of a box, its raw samples staged ([`GpuEngine::stage_slab`]), queued on
    /// the compute stream: `wp_cut` (taper and padding) into the volume buffer, forward, the edit
    /// `op`, inverse, `wp_fold` into the box's partial sum (zeroed at the box's first cube). Behind
    /// the box's last cube the sum goes down into `partial` on a stream of its own (the next box
    /// folds into the other sum meanwhile), slab by slab: each returned slab's event completes
    /// when its rows are there ([`BoxDown`]).
    /// [`CubeOp::Identity`] and [`CubeOp::Threshold`] never move the coefficients; the kept
    /// counts of a threshold add up over the box and go down behind its last cube
    /// ([`GpuEngine::kept`]).
    ///
    /// The cut and the fold go by slabs of x0 planes ([`SLABS`]): a slab is cut once its
    /// samples are up (a block staged by [`GpuEngine::stage_block`] goes up slab by slab) and
    /// enters the forward's first pass at once; after the inverse's last pass each slab is folded
    /// and, behind the box's last cube, goes down while the next slabs compute. So a cube's own
    /// upload and download overlap its compute, which matters for the first and last cube of a
    /// device (480^3 on 4 GPUs: two cubes each).
    ///
    /// With `out` (a page-locked output volume, [`crate::runtime::memory::page_locked`]) the box's
    /// fresh block goes straight into it and only the covered shell into `partial` (the host's
    /// fold then reads and adds a third of the samples, not all: the ordered fold had
    /// become the 4-GPU critical path at 2-5 ms per 256^3 box).
    ///
    /// # Safety
    /// `partial` must be page-locked memory that stays alive and untouched until the event
    /// completes; so must `out`'s fresh block of the box.
    pub(crate) unsafe fn cube_into_box(&mut self, job: &crate::wavepacket::tiling::CubeInBox, tapers: &[f32], op: CubeOp,
        partial: &mut [f32], out: Option<crate::runtime::memory::Place>) -> Result<Option<BoxDown>> {
        let n = self.frame.n();
        ensure!(job.cube == n, "cube {}: side {} on an engine of {n}", job.t, job.cube);
        job.check(tapers.len(), partial.len())?;
        let stream = self.gpu.stream().clone();
        if self.boxed.is_none() {
            let status = self.frame.scales() + 1;
            self.boxed = Some(Boxed { raw: self.gpu.zeros::<f32>(n * n * n)?, tapers: None,
                acc: [self.gpu.zeros::<f32>(1)?, self.gpu.zeros::<f32>(1)?], downloaded: [None, None], which: 0,
                down: self.gpu.context().new_stream().context("creating the box download stream")?,
                bad: self.gpu.zeros::<u32>(1)?,
                status: [PinnedBuf::new(&self.gpu, status)?, PinnedBuf::new(&self.gpu, status)?], timeline: Vec::new(),
                lead: None, trace: std::env::var("SEISGPU_WP_TRACE").ok().filter(|v| v != "fold").map(|_| Vec::new()) });
        }
        let bx = self.boxed.as_mut().unwrap();
        let timed = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        if bx.timeline.is_empty() && bx.lead.is_none() {
            bx.lead = Some(stream.record_event(timed).context("recording a job's start")?);
        }
        // The staged raw samples become the cube's: a slab's cut waits for that slab's upload (a
        // 3D block's slab events), or for everything staged (host-copied slabs).
        let st = self.staging.as_mut().filter(|st| st.queued).with_context(|| format!("cube {}: no raw samples staged", job.t))?;
        let up_all = st.copy.record_event(None).context("recording the cube upload")?;
        let up_slabs = std::mem::take(&mut st.slabs);
        std::mem::swap(&mut bx.raw, &mut st.spare);
        st.queued = false;
        if bx.tapers.as_ref().is_none_or(|(h, _)| h.as_slice() != tapers) {
            bx.tapers = Some((tapers.to_vec(), self.gpu.upload(tapers)?));
        }
        let need = job.box_samples();
        let w = bx.which;
        if job.first {
            // This sum's last download is through before it is zeroed again.
            if let Some(ev) = bx.downloaded[w].take() {
                stream.wait(&ev).context("ordering a box download before the next box")?;
            }
            if bx.acc[w].len() < need {
                bx.acc[w] = self.gpu.zeros::<f32>(need)?;
            }
            stream.memset_zeros(&mut bx.acc[w].slice_mut(..need)).context("zeroing a box's partial sum")?;
            stream.memset_zeros(&mut bx.bad).context("clearing a box's input check")?;
        }
        let gpu = self.gpu.clone();
        let (c, [n0, n1, n2]) = (n as u32, job.inside.map(|v| v as u32));
        let (len, off) = (job.len as u32, job.off as u32);
        let mut started = None;
        // Before the forward reads a slab: its raw samples up, its cut (taper and padding).
        let mut cut = |e: &mut GpuEngine, r: std::ops::Range<usize>| -> Result<()> {
            let stream = e.gpu.stream().clone();
            let rows = r.start.min(job.inside[0])..r.end.min(job.inside[0]);
            if !rows.is_empty() {
                let up = up_slabs.iter().find(|(end, _)| *end >= rows.end).map_or(&up_all, |(_, ev)| ev);
                stream.wait(up).context("ordering a slab's upload before its cut")?;
            }
            if started.is_none() {
                started = Some(stream.record_event(timed).context("recording a cube's start")?);
            }
            let bx = e.boxed.as_mut().unwrap();
            let (_, tap) = bx.tapers.as_ref().unwrap();
            let [w0, w1, w2] = job.taper.map(|o| tap.slice(o..o + n));
            let (a0, planes) = (r.start as u32, r.len() as u32);
            launch!(gpu, WP_CUT, grid_1d(r.len() * n * n, 256), &c, &a0, &planes, &n0, &n1, &n2, &bx.raw, &w0, &w1, &w2,
                &mut e.vol, &mut bx.bad)?;
            // The raw buffer is free for the next-but-one cube once its last cut is through.
            if r.end == n && let Some(st) = e.staging.as_mut() {
                st.free = Some(stream.record_event(None).context("recording a cube's cut")?);
            }
            Ok(())
        };
        let traced = self.boxed.as_ref().is_some_and(|b| b.trace.is_some());
        let marks = || if traced { Marks::on(&stream) } else { Marks::off() };
        let (mut fwd_marks, mut inv_marks) = (marks(), marks());
        self.forward_slabbed(&mut fwd_marks, &mut cut)?;
        let started = started.context("a cube's forward cut no slab")?;
        let threshold = matches!(op, CubeOp::Threshold(_));
        match op {
            CubeOp::Identity => {}
            CubeOp::Threshold(thr) => self.threshold_queue(thr, job.first)?,
            CubeOp::Host(edit) => self.host_edit(edit)?,
        }
        // The box's status goes down with it, into its sum's slot (the other slot may still be
        // read for the previous box): its kept counts are final after the last cube's edit, its
        // input check after the last cut.
        let scales = self.frame.scales();
        if job.last {
            let bx = self.boxed.as_mut().unwrap();
            let status = bx.status[w].as_mut_slice()?;
            if threshold {
                let (kept, _) = self.kept.as_ref().context("no kept counts")?;
                stream.memcpy_dtoh(kept, &mut status[..scales]).context("downloading the kept counts")?;
            }
            stream.memcpy_dtoh(&bx.bad, &mut status[scales..]).context("downloading a box's input check")?;
        }
        let fresh_written = job.last && out.is_some() && job.fresh.is_some();
        // The face: once the host's fold has reached this box's x0 row, the volume's
        // samples there come up on the face stream; each slab with face planes adds them into
        // the sum after its fold, and they go down with the fresh block.
        let face_up = match (job.face, job.last) {
            (Some(f), true) => {
                let vol = out.with_context(|| format!("cube {}: a face to add but no page-locked output", job.t))?;
                let fs = self.face.as_mut().with_context(|| format!("cube {}: a face to add but no face counter", job.t))?;
                let need: usize = f.extent.iter().product();
                if fs.buf.len() < need {
                    fs.buf = self.gpu.zeros::<f32>(need)?;
                }
                // The copy rewrites `buf` while the previous face's add may still read it. cudarc
                // orders a read after the last write, not a write after reads (`Place::device`
                // takes the buffer as read, for either end of a copy), so this wait is ours.
                if let Some(ev) = fs.free.take() {
                    fs.stream.wait(&ev).context("ordering a face copy after the previous face's add")?;
                }
                use cudarc::driver::sys;
                self.gpu.context().bind_to_thread().context("binding the context")?;
                // SAFETY: the counter is mapped page-locked memory that outlives the engine's
                // streams (`quiesce`); a job that stops sets it past every box.
                unsafe { sys::cuStreamWaitValue32_v2(fs.stream.cu_stream(), fs.flag_device, f.after as u32,
                    sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32) }.result()
                    .context("queueing a face's wait for the fold")?;
                use crate::runtime::memory::{copy_3d, Place};
                let src = Place { start: [0, 1, 2].map(|a| job.origin[a] + f.at[a]), ..vol };
                unsafe { copy_3d(&fs.stream, src, Place::device(&fs.buf, &fs.stream, f.extent, [0; 3]), f.extent) }
                    .context("copying a box's face up")?;
                Some((f, fs.stream.record_event(None).context("recording a face's copy")?))
            }
            (Some(_), false) | (None, _) => None,
        };
        let mut face_waited = false;
        let mut slabs_down = Vec::new();
        // After the inverse wrote a slab: its fold into the box's sum and, behind the box's last
        // cube, its rows' download (on the download stream, while the next slabs compute).
        let mut fold = |e: &mut GpuEngine, r: std::ops::Range<usize>| -> Result<()> {
            let rows = r.start.min(job.inside[0])..r.end.min(job.inside[0]);
            if rows.is_empty() {
                return Ok(());
            }
            let stream = e.gpu.stream().clone();
            let bx = e.boxed.as_mut().unwrap();
            {
                let (_, tap) = bx.tapers.as_ref().unwrap();
                let [w0, w1, w2] = job.taper.map(|o| tap.slice(o..o + n));
                let (a0, a1) = (rows.start as u32, rows.end as u32);
                launch!(gpu, WP_FOLD, grid_1d(rows.len() * job.inside[1] * job.inside[2], 256), &c, &a0, &a1, &n0, &n1, &n2,
                    &len, &off, &e.vol, &w0, &w1, &w2, &mut bx.acc[w])?;
            }
            if let Some((f, up)) = &face_up {
                // The face's planes of this slab (the face starts at plane 0 of the box).
                let (a0, a1) = (rows.start, rows.end.min(f.extent[0]));
                if a0 < a1 {
                    if !face_waited {
                        stream.wait(up).context("ordering a face's add after its copy")?;
                        face_waited = true;
                    }
                    let fs = e.face.as_ref().unwrap();
                    let [_, c1, c2] = f.at.map(|v| v as u32);
                    let [_, m1, m2] = f.extent.map(|v| v as u32);
                    let (a0, a1) = (a0 as u32, a1 as u32);
                    launch!(gpu, WP_ADD_FACE, grid_1d((a1 - a0) as usize * f.extent[1] * f.extent[2], 256), &a0, &a1, &n1, &len,
                        &c1, &c2, &m1, &m2, &fs.buf, &mut bx.acc[w])?;
                }
            }
            if !job.last {
                return Ok(());
            }
            let folded = stream.record_event(None).context("recording a slab's fold")?;
            bx.down.wait(&folded).context("ordering a slab's download after its fold")?;
            // The sum is addressed as the compute stream sees it: the download stream is ordered
            // after the fold by `folded`, and the compute stream must not wait for the download.
            // (Addressed on the download stream, cudarc's read event there made each slab's fold
            // wait for the previous slab's download: on 4 x H200, whose downloads share the host's
            // bandwidth, the inverse's last pass became download-bound, +0.3-0.7 ms a cube.) The
            // sum is written again only by later slabs' folds (other rows) and by the box two
            // later, after `downloaded`.
            use crate::runtime::memory::{copy_3d, Place};
            let shape = [job.inside[0], job.inside[1], job.len];
            let acc = |at| Place::device(&bx.acc[w], &stream, shape, at);
            match (out, job.fresh) {
                (Some(vol), Some((at, extent))) => {
                    if let Some((at, extent)) = rows_of_block(at, extent, &rows) {
                        let dst = Place { start: [0, 1, 2].map(|a| job.origin[a] + at[a]), ..vol };
                        unsafe { copy_3d(&bx.down, acc(at), dst, extent) }
                            .context("downloading a box's fresh block into the volume")?;
                    }
                    for &(at, extent) in job.covered.iter().flatten() {
                        if let Some((at, extent)) = rows_of_block(at, extent, &rows) {
                            unsafe { copy_3d(&bx.down, acc(at), Place::host(partial, shape, at), extent) }
                                .context("downloading a box's covered samples")?;
                        }
                    }
                }
                _ => {
                    let at = [rows.start, 0, 0];
                    unsafe { copy_3d(&bx.down, acc(at), Place::host(partial, shape, at), [rows.len(), shape[1], shape[2]]) }
                        .context("downloading a box's partial sum")?;
                }
            }
            let down = bx.down.record_event(None).context("recording a slab's download")?;
            slabs_down.push((rows, down));
            Ok(())
        };
        inv_marks.mark("start")?;
        self.inverse_slabbed(&mut inv_marks, &mut fold)?;
        if face_up.is_some() && let Some(fs) = self.face.as_mut() {
            fs.free = Some(stream.record_event(None).context("recording a face's add")?);
        }
        let bx = self.boxed.as_mut().unwrap();
        if let Some(tr) = bx.trace.as_mut() {
            tr.push((job.t, fwd_marks, inv_marks));
        }
        bx.timeline.push((started, stream.record_event(timed).context("recording a cube's end")?));
        if !job.last {
            return Ok(None);
        }
        bx.downloaded[w] = Some(bx.down.record_event(timed).context("recording a box's download")?);
        bx.which ^= 1;
        Ok(Some(BoxDown { slabs: slabs_down, slot: w, fresh_written, face_added: face_up.is_some() }))
    }

    /// The device's time in the cubes since the last call (from each cut, once the samples were
    /// up, to the fold) and its idle time between them (waiting for samples, or for the host to
    /// queue the next cube), in ms; `None` before any cube. Waits for the last cube.
    pub(crate) fn take_device_times(&mut self) -> Result<Option<DeviceTimes>> {
        let Some(bx) = self.boxed.as_mut() else { return Ok(None) };
        let tl = std::mem::take(&mut bx.timeline);
        let lead = bx.lead.take();
        let (Some(first), Some(last)) = (tl.first(), tl.last()) else { return Ok(None) };
        last.1.synchronize().context("waiting for the last cube")?;
        let mut busy = 0.0;
        for (a, b) in &tl {
            busy += a.elapsed_ms(b).context("reading a cube's events")? as f64;
        }
        let span = first.0.elapsed_ms(&last.1).context("reading the cubes' events")? as f64;
        let first_slab = match &lead {
            Some(l) => l.elapsed_ms(&first.0).context("reading a job's first events")? as f64,
            None => 0.0,
        };
        // The last box's sum went down from the slot before the current one.
        let last_download = match &bx.downloaded[bx.which ^ 1] {
            Some(d) => {
                d.synchronize().context("waiting for the last box's download")?;
                last.1.elapsed_ms(d).context("reading the last download's event")? as f64
            }
            None => 0.0,
        };
        if let Some(tr) = bx.trace.as_mut() {
            let dev = self.gpu.context().ordinal();
            for ((t, f, i), (a, b)) in std::mem::take(tr).into_iter().zip(&tl) {
                let mut line = format!("trace: device {dev} cube {t}: {:.2} ms;", a.elapsed_ms(b)?);
                for (dir, m) in [("fwd", f), ("inv", i)] {
                    let mut sums: Vec<(&str, f64)> = Vec::new();
                    for (label, ms) in m.finish()? {
                        match sums.iter_mut().find(|(l, _)| *l == label) {
                            Some(x) => x.1 += ms,
                            None => sums.push((label, ms)),
                        }
                    }
                    line += &format!(" {dir}");
                    for (l, ms) in sums {
                        line += &format!(" {l} {ms:.2}");
                    }
                }
                eprintln!("{line}");
            }
        }
        Ok(Some(DeviceTimes { busy, idle: span - busy, first_slab, last_download }))
    }

    /// A box's status once its event has completed: the coefficients its threshold kept (`None`
    /// without one) and whether every raw sample was finite.
    pub(crate) fn box_status(&self, done: &BoxDown, threshold: bool) -> Result<(Option<u64>, bool)> {
        let bx = self.boxed.as_ref().context("no box has run on this engine")?;
        let status = bx.status[done.slot].as_slice()?;
        let (kept, bad) = status.split_at(self.frame.scales());
        Ok((threshold.then(|| kept.iter().map(|&k| k as u64).sum()), bad[0] == 0))
    }
}
