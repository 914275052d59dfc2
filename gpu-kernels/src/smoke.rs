//! Smoke kernels: the runtime's own tests (saxpy, a block reduction, a texture probe, a trap).

#[cfg(target_arch = "nvptx64")]
use crate::device::*;

crate::kernel! {
    /// y = a x + y. The host's one-line launch example.
    pub unsafe fn saxpy(n: u32, a: f32, x: *const f32, y: *mut f32) as SAXPY {
        let i = global_x();
        if i < n {
            unsafe { *y.add(i as usize) = crate::smoke::saxpy_one(a, *x.add(i as usize), *y.add(i as usize)) };
        }
    }
}

/// The math of one saxpy element, shared with the CPU check.
#[inline(always)]
pub fn saxpy_one(a: f32, x: f32, y: f32) -> f32 { a * x + y }

crate::kernel! {
    /// Sum of `x[0..n]` by one block: strided partial sums, warp shuffles, shared memory across warps.
    pub unsafe fn block_sum(n: u32, x: *const f32, out: *mut f32) as BLOCK_SUM {
        let warp_sums = dynamic_shared::<f32>();
        let t = thread_idx_x();
        let mut s = 0.0f32;
        let mut i = t;
        while i < n {
            s += unsafe { *x.add(i as usize) };
            i += block_dim_x();
        }
        s = warp_sum_f32(s);
        if lane_id() == 0 {
            unsafe { *warp_sums.add((t / 32) as usize) = s };
        }
        sync_threads();
        if t == 0 {
            let mut total = 0.0;
            for w in 0..block_dim_x().div_ceil(32) {
                total += unsafe { *warp_sums.add(w as usize) };
            }
            unsafe { *out = total };
        }
    }
}

crate::kernel! {
    /// Samples a 2D float texture at `n` (x, y) points (texel coordinates).
    pub unsafe fn tex2d_probe(tex: u64, n: u32, xy: *const f32, out: *mut f32) as TEX2D_PROBE {
        let i = global_x();
        if i < n {
            unsafe {
                let x = *xy.add(2 * i as usize);
                let y = *xy.add(2 * i as usize + 1);
                *out.add(i as usize) = tex2d(tex, x, y);
            }
        }
    }
}

crate::kernel! {
    /// Traps on purpose: the runtime test that a failed launch names its kernel.
    pub unsafe fn always_trap(flag: u32) as ALWAYS_TRAP {
        if flag != 0 {
            trap();
        }
    }
}

crate::kernel! {
    /// Samples a 3D float texture at `n` (x, y, z) points (texel coordinates).
    pub unsafe fn tex3d_probe(tex: u64, n: u32, xyz: *const f32, out: *mut f32) as TEX3D_PROBE {
        let i = global_x();
        if i < n {
            unsafe {
                let p = xyz.add(3 * i as usize);
                *out.add(i as usize) = tex3d(tex, *p, *p.add(1), *p.add(2));
            }
        }
    }
}

crate::kernel! {
    /// Samples a 2D float2 texture (complex values) at `n` points with point filtering.
    pub unsafe fn tex2d_f2_probe(tex: u64, n: u32, xy: *const f32, out: *mut f32) as TEX2D_F2_PROBE {
        let i = global_x();
        if i < n {
            unsafe {
                let (re, im) = tex2d_f2(tex, *xy.add(2 * i as usize), *xy.add(2 * i as usize + 1));
                *out.add(2 * i as usize) = re;
                *out.add(2 * i as usize + 1) = im;
            }
        }
    }
}

crate::kernel! {
    /// Cluster plumbing probe (sm_90 module): thread 0 of each CTA stores 1000 + its block index in its
    /// shared memory; after a cluster barrier it reads that value from the next CTA of its cluster
    /// (rank + 1, wrapping) through DSMEM and writes (rank, cluster size, value read) to
    /// out[3 b .. 3 b + 3]. Tells a failure of the cluster launch / DSMEM plumbing from a kernel bug.
    pub unsafe fn sm90_cluster_smoke(out: *mut u32) as SM90_CLUSTER_SMOKE {
        let sm = dynamic_shared::<u32>();
        let (rank, size) = (cluster_ctarank(), cluster_nctarank());
        let b = block_idx_x();
        if thread_idx_x() == 0 {
            unsafe { *sm = 1000 + b };
        }
        cluster_sync();
        if thread_idx_x() == 0 {
            let next = if rank + 1 < size { rank + 1 } else { 0 };
            let v = unsafe { ld_dsmem_u32(map_shared_rank(sm as *const u32, next)) };
            unsafe {
                *out.add(3 * b as usize) = rank;
                *out.add(3 * b as usize + 1) = size;
                *out.add(3 * b as usize + 2) = v;
            }
        }
        // No CTA exits while another may still read its shared memory.
        cluster_sync();
    }
}
