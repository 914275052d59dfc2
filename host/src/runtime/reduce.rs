//! Sums of per-device images on the devices: a multi-device job's N resident images are
//! reduced over the peer links (NVLink where there is one) and only the sum comes down, each device
//! downloading its own slice of it in parallel, instead of N whole downloads and a host sum.
//!
//! The sum is the element-wise `((p0 + p1) + p2) + ...` in part order, the same bits as
//! [`crate::multi::sum_in_order`] on the downloaded parts: device `d` owns slice `d` of the image
//! ([`crate::multi::even_ranges`]), copies slice `d` of every part to itself in part order and adds
//! it into its accumulator with `saxpy` at a = 1 (1 * x + y rounds once, to x + y, with or without
//! FMA contraction; f32 addition is commutative bit for bit, so y + x = x + y).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use cudarc::driver::{sys, CudaSlice};

use super::context::Gpu;
use super::error::{GpuError, GpuResult};
use super::launch::grid_1d;

/// Context pairs (accessor, owner) already asked for peer access (raw context pointers).
static PEERS: Mutex<Option<HashSet<(usize, usize)>>> = Mutex::new(None);

impl Gpu {
    /// Lets this GPU read and write `peer`'s memory directly (cuCtxEnablePeerAccess), so copies
    /// between them go over NVLink/PCIe peer to peer, not through host memory. Once per pair of
    /// contexts; `Ok(false)` where the devices cannot be peers (copies still work, staged by the
    /// driver). Part of opening the devices ([`crate::multi::open_gpus`]): enabling maps the
    /// existing allocations, which is one-time setup, not per job.
    pub fn enable_peer_access(&self, peer: &Gpu) -> GpuResult<bool> {
        let (me, other) = (self.context().cu_ctx() as usize, peer.context().cu_ctx() as usize);
        if me == other {
            return Ok(true);
        }
        let mut guard = PEERS.lock().unwrap_or_else(|e| e.into_inner());
        let seen = guard.get_or_insert_with(HashSet::new);
        if seen.contains(&(me, other)) {
            return Ok(true);
        }
        let mut can = 0;
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.context().cu_device(), peer.context().cu_device()) }
            .result().map_err(GpuError::driver("asking whether two GPUs can be peers"))?;
        if can == 0 {
            return Ok(false);
        }
        self.context().bind_to_thread().map_err(GpuError::driver("binding the context"))?;
        match unsafe { sys::cuCtxEnablePeerAccess(peer.context().cu_ctx(), 0) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
            e => return Err(GpuError::driver("enabling peer access")(cudarc::driver::DriverError(e))),
        }
        seen.insert((me, other));
        Ok(true)
    }
}

/// Enables peer access between every pair of `gpus` (both ways); returns the pairs that cannot be
/// peers (their copies are staged through the host by the driver).
pub fn enable_peers(gpus: &[Arc<Gpu>]) -> GpuResult<Vec<(usize, usize)>> {
    let mut not = Vec::new();
    for (a, ga) in gpus.iter().enumerate() {
        for (b, gb) in gpus.iter().enumerate() {
            if a != b && !ga.enable_peer_access(gb)? {
                not.push((a, b));
            }
        }
    }
    Ok(not)
}

/// Sums `parts` (equal-length device buffers, each on its GPU; several may share a GPU) in part
/// order into a new host vector: reduce-scatter over the devices, then every device downloads its
/// slice of the sum into its part of the result (in parallel, one host thread per device, each
/// first touching its own pages while its copies and adds run). The GPUs' queued work on the
/// parts' streams is waited for by the copies; `parts` must not change until this returns.
pub fn sum_to_host(parts: &[(Arc<Gpu>, &CudaSlice<f32>)]) -> anyhow::Result<Vec<f32>> {
    let Some((_, first)) = parts.first() else { anyhow::bail!("no device image to sum") };
    let n = first.len();
    anyhow::ensure!(n <= u32::MAX as usize, "device images of {n} samples: too many for one sum");
    for (k, (_, p)) in parts.iter().enumerate() {
        anyhow::ensure!(p.len() == n, "device image {k} has {} samples, the first has {n}", p.len());
    }
    // Every distinct GPU owns one slice (in the order the GPUs first appear).
    let mut owners: Vec<Arc<Gpu>> = Vec::new();
    for (g, _) in parts {
        if !owners.iter().any(|o| Arc::ptr_eq(o, g)) {
            owners.push(g.clone());
        }
    }
    // Normally done when the GPUs were opened; best effort (unpeered copies are staged by the driver).
    for a in &owners {
        for b in &owners {
            let _ = a.enable_peer_access(b);
        }
    }
    let ranges = crate::multi::even_ranges(n, owners.len());
    // calloc'd: untouched pages (huge pages requested), each owner thread faults in its own slice.
    let mut out = super::memory::zeroed_host(n);
    let mut slices: Vec<&mut [f32]> = Vec::with_capacity(ranges.len());
    let mut rest = out.as_mut_slice();
    for r in &ranges {
        let (head, tail) = rest.split_at_mut(r.len());
        slices.push(head);
        rest = tail;
    }
    let t0 = std::time::Instant::now();
    let results: Vec<anyhow::Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = owners.iter().zip(ranges.iter().cloned()).zip(slices).map(|((gpu, range), dst)| {
            s.spawn(move || -> anyhow::Result<()> {
                if range.is_empty() {
                    return Ok(());
                }
                let m = range.len();
                let stream = gpu.stream();
                let copy = |src: &CudaSlice<f32>, to: &mut CudaSlice<f32>| -> GpuResult<()> {
                    stream.memcpy_dtod(&src.slice(range.clone()), to).map_err(GpuError::driver("copying an image slice between GPUs"))
                };
                let mut acc = unsafe { stream.alloc::<f32>(m) }.map_err(GpuError::driver("allocating the sum's slice"))?;
                copy(parts[0].1, &mut acc)?;
                let mut tmp: Option<CudaSlice<f32>> = None;
                let (m32, one) = (m as u32, 1.0f32);
                for (g, p) in &parts[1..] {
                    if Arc::ptr_eq(g, gpu) {
                        let own = p.slice(range.clone());
                        crate::launch!(gpu, gpu_kernels::smoke::SAXPY, grid_1d(m, 256), &m32, &one, &own, &mut acc)?;
                    } else {
                        let t = match &mut tmp {
                            Some(t) => t,
                            None => tmp.insert(unsafe { stream.alloc::<f32>(m) }.map_err(GpuError::driver("allocating a slice buffer"))?),
                        };
                        copy(p, t)?;
                        crate::launch!(gpu, gpu_kernels::smoke::SAXPY, grid_1d(m, 256), &m32, &one, &*t, &mut acc)?;
                    }
                }
                crate::multi::mark("device sum: copies and adds queued at", t0);
                // The host pages of this slice, while the copies and adds run (on the rayon pool,
                // idle by now: one thread's page faults would take longer than the GPU's part).
                {
                    use rayon::prelude::*;
                    dst.par_chunks_mut(1 << 16).for_each(|c| c.fill(0.0));
                }
                crate::multi::mark("device sum: host pages touched at", t0);
                stream.memcpy_dtoh(&acc, dst).map_err(GpuError::driver("downloading the summed slice"))?;
                stream.synchronize().map_err(GpuError::driver("summing device images"))?;
                crate::multi::mark("device sum: slice down at", t0);
                Ok(())
            })
        }).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a device thread panicked")))).collect()
    });
    for (d, r) in results.into_iter().enumerate() {
        r.map_err(|e| e.context(format!("summing the device images on GPU {}", owners[d].info().ordinal)))?;
    }
    Ok(out)
}
