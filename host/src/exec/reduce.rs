//! Reductions of the devices' (and ranks') partial results: the element-wise sum in order, on the
//! host ([`sum_in_order`]) or on the GPUs where the parts are resident ([`sum_parts`]).
//!
//! The sum is the element-wise `((p0 + p1) + p2) + ...` in part order. On the GPUs
//! (`sum_to_host`) it is the same bits as [`sum_in_order`] on the downloaded parts: device `d` owns
//! slice `d` of the image (`super::split::even_ranges`), copies slice `d` of every part to itself
//! in part order and adds it into its accumulator with `saxpy` at a = 1 (1 * x + y rounds once, to
//! x + y, with or without FMA contraction; f32 addition is commutative bit for bit, so y + x = x + y).
//! Concatenations need no reduction here: the split returns the items' results in item order.

use std::sync::Arc;

use cudarc::driver::CudaSlice;

use crate::runtime::error::{GpuError, GpuResult};
use crate::runtime::launch::grid_1d;
use crate::runtime::phases::mark;
use crate::runtime::Gpu;

/// The element-wise sum of `parts` in their order (device order, or rank order): every element is
/// `((p0 + p1) + p2) + ...`, the same bits as adding the parts one after the other, computed in
/// one parallel pass (rayon) over the first part, which becomes the sum.
pub fn sum_in_order(parts: Vec<Vec<f32>>) -> anyhow::Result<Vec<f32>> {
    use rayon::prelude::*;
    let mut it = parts.into_iter();
    let Some(mut acc) = it.next() else { anyhow::bail!("no partial result to sum") };
    let rest: Vec<Vec<f32>> = it.collect();
    for (k, p) in rest.iter().enumerate() {
        anyhow::ensure!(p.len() == acc.len(), "partial result {} has {} samples, the first has {}", k + 1, p.len(), acc.len());
    }
    if rest.is_empty() {
        return Ok(acc);
    }
    const CHUNK: usize = 1 << 16;
    acc.par_chunks_mut(CHUNK).enumerate().for_each(|(c, a)| {
        let (o, n) = (c * CHUNK, a.len());
        for p in &rest {
            for (x, y) in a.iter_mut().zip(&p[o..o + n]) {
                *x += y;
            }
        }
    });
    Ok(acc)
}

/// One device's partial result (an image) in a multi-device job: on the host (a CPU work queue,
/// or a GPU image that was tiled through the host), or still resident on its GPU.
pub enum Part {
    Host(Vec<f32>),
    Gpu(Arc<Gpu>, cudarc::driver::CudaSlice<f32>),
}

impl Part {
    pub fn len(&self) -> usize {
        match self {
            Part::Host(v) => v.len(),
            Part::Gpu(_, s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
    /// The part on the host (one download for a resident one).
    pub fn into_host(self) -> anyhow::Result<Vec<f32>> {
        match self {
            Part::Host(v) => Ok(v),
            Part::Gpu(g, s) => {
                let v = g.download_prefaulted(&s)?;
                g.synchronize()?;
                Ok(v)
            }
        }
    }
}

/// The element-wise sum of `parts` in their order, the same bits as [`sum_in_order`] of the parts
/// on the host. Two or more resident parts (and no host part) are summed on the GPUs
/// ([`sum_to_host`]: slices of the sum exchanged over the peer links, each
/// GPU downloading its slice in parallel), so neither the N whole downloads nor the host sum are
/// serial time; otherwise the parts come down and [`sum_in_order`] adds them.
pub fn sum_parts(parts: Vec<Part>) -> anyhow::Result<Vec<f32>> {
    let t = std::time::Instant::now();
    let on_gpus = parts.len() >= 2 && parts.iter().all(|p| matches!(p, Part::Gpu(..)));
    if on_gpus {
        let views: Vec<(Arc<Gpu>, &cudarc::driver::CudaSlice<f32>)> = parts.iter().map(|p| match p {
            Part::Gpu(g, s) => (g.clone(), s),
            Part::Host(_) => unreachable!("checked above"),
        }).collect();
        let sum = sum_to_host(&views)?;
        mark("device sum + slice downloads", t);
        return Ok(sum);
    }
    let host = parts.into_iter().map(Part::into_host).collect::<anyhow::Result<Vec<_>>>()?;
    mark("image download", t);
    let t = std::time::Instant::now();
    let sum = sum_in_order(host)?;
    mark("host sum", t);
    Ok(sum)
}

/// Sums `parts` (equal-length device buffers, each on its GPU; several may share a GPU) in part
/// order into a new host vector: reduce-scatter over the devices, then every device downloads its
/// slice of the sum into its part of the result (in parallel, one host thread per device, each
/// first touching its own pages while its copies and adds run). The GPUs' queued work on the
/// parts' streams is waited for by the copies; `parts` must not change until this returns.
pub(crate) fn sum_to_host(parts: &[(Arc<Gpu>, &CudaSlice<f32>)]) -> anyhow::Result<Vec<f32>> {
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
    let ranges = super::split::even_ranges(n, owners.len());
    // calloc'd: untouched pages (huge pages requested), each owner thread faults in its own slice.
    let mut out = crate::runtime::pages::zeroed_host(n);
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
                mark("device sum: copies and adds queued at", t0);
                // The host pages of this slice, while the copies and adds run (on the rayon pool,
                // idle by now: one thread's page faults would take longer than the GPU's part).
                {
                    use rayon::prelude::*;
                    dst.par_chunks_mut(1 << 16).for_each(|c| c.fill(0.0));
                }
                mark("device sum: host pages touched at", t0);
                stream.memcpy_dtoh(&acc, dst).map_err(GpuError::driver("downloading the summed slice"))?;
                stream.synchronize().map_err(GpuError::driver("summing device images"))?;
                mark("device sum: slice down at", t0);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_sum_in_order_is_the_sequential_sum() {
        let parts: Vec<Vec<f32>> = (0..4).map(|k| (0..200_001).map(|i| ((i * 7919 + k * 104729) % 1000) as f32 * 1.37e-3 - 0.6)
            .collect()).collect();
        let mut seq = parts[0].clone();
        for p in &parts[1..] {
            seq.iter_mut().zip(p).for_each(|(a, b)| *a += b);
        }
        let got = sum_in_order(parts.clone()).unwrap();
        assert!(got.iter().zip(&seq).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(sum_in_order(vec![vec![1.0; 3], vec![1.0; 2]]).is_err());
        assert!(sum_in_order(vec![]).is_err());
    }
}
