//! The paper-faithful 2+2+1 search (Tables 2-4): one `nlbf_paper` launch per parameter trace on
//! a pool of streams.

use super::*;

/// An attribute of a kernel of the embedded module (e.g. the most threads per block its register
/// use allows once the driver has compiled it for this GPU).
pub fn kernel_attribute(gpu: &Gpu, kernel: &str, attr: sys::CUfunction_attribute) -> Result<i32> {
    let f = gpu.function(kernel)?;
    let mut v = 0i32;
    unsafe { sys::cuFuncGetAttribute(&mut v, attr, f.cu_function()) }
        .result()
        .map_err(drv(format!("reading an attribute of `{kernel}`")))?;
    Ok(v)
}

/// (registers per thread, local memory bytes per thread, most threads per block) of `kernel` as
/// the driver compiled it for this GPU.
pub fn kernel_resources(gpu: &Gpu, kernel: &str) -> Result<(i32, i32, i32)> {
    use sys::CUfunction_attribute as A;
    Ok((kernel_attribute(gpu, kernel, A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
        kernel_attribute(gpu, kernel, A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
        kernel_attribute(gpu, kernel, A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?))
}

/// The most threads per block `kernel` can run with on this GPU.
pub fn max_threads(gpu: &Gpu, kernel: &str) -> Result<u32> {
    Ok(kernel_attribute(gpu, kernel, sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32)
}

/// Table 3's block size, lowered to what the compiled kernel allows (a register-heavy build of
/// `nlbf_paper` cannot run 1024 threads; the stride loop covers the rest).
pub fn paper_block(gpu: &Gpu, setup: &Setup) -> Result<u32> {
    let t = &setup.tables;
    let bd = k::paper_block_size(t.n_ad() as u32, t.n_be() as u32, t.nc as u32);
    Ok(bd.min(max_threads(gpu, k::kernels::NLBF_PAPER.name())? / 32 * 32).max(32))
}

/// Bytes of dynamic shared memory of `nlbf_paper` with block size `bd` (carver alignment included).
pub fn paper_shared(bd: u32) -> u32 { (bd * 4).next_multiple_of(16) * 2 + 16 }

/// The 2+2+1 search as the paper runs it (Tables 2-4). Returns (codes, semblance), `[p * ns + t]`.
pub fn estimate_paper(gpu: &Gpu, setup: &Setup, data: &[f32]) -> Result<(Vec<u32>, Vec<f32>)> {
    estimate_paper_subset(gpu, setup, data, &(0..setup.np()).collect::<Vec<_>>())
}

/// The paper-faithful search for the listed parameter traces (results `[i * ns + t]`).
pub fn estimate_paper_subset(gpu: &Gpu, setup: &Setup, data: &[f32], ptraces: &[usize]) -> Result<(Vec<u32>, Vec<f32>)> {
    let ns = setup.ns;
    let ap = &setup.apertures;
    let t = &setup.tables;
    let cap_rows = ap.max_len(0) + ap.max_len(1) + ap.max_len(2);
    let streams = gpu.streams();
    let main = gpu.stream();
    gpu.ensure_fits("the paper kernel's staging buffers", streams.len() * cap_rows * (ns + 2) * 4 + ptraces.len() * ns * 8)?;
    // Per stream: page-locked rows + geometry on the host, and their device twins.
    let mut h_rows = Vec::new();
    let mut h_geom = Vec::new();
    let mut d_rows = Vec::new();
    let mut d_geom = Vec::new();
    for _ in streams {
        h_rows.push(pinned::<f32>(gpu, cap_rows * ns, true)?);
        h_geom.push(pinned::<f32>(gpu, 2 * cap_rows, true)?);
        d_rows.push(gpu.zeros::<f32>(cap_rows * ns)?);
        d_geom.push(gpu.zeros::<f32>(2 * cap_rows)?);
    }
    let vals = gpu.upload(&t.vals)?;
    let mut out_code = gpu.zeros::<u32>(ptraces.len() * ns)?;
    let mut out_s = gpu.zeros::<f32>(ptraces.len() * ns)?;
    gpu.synchronize()?;
    let vals_p = dptr(&vals, main);
    let code_p = dptr_mut(&mut out_code, main);
    let s_p = dptr_mut(&mut out_s, main);
    let d_rows_p: Vec<DevPtr<f32>> = d_rows.iter_mut().map(|b| dptr_mut(b, main)).collect();
    let d_geom_p: Vec<DevPtr<f32>> = d_geom.iter_mut().map(|b| dptr_mut(b, main)).collect();

    // Table 3: grid = Nt, block = largest phase rounded up to a warp, capped at 1024.
    let bd = paper_block(gpu, setup)?;
    let cfg = LaunchConfig { grid_dim: (ns as u32, 1, 1), block_dim: (bd, 1, 1), shared_mem_bytes: paper_shared(bd) };
    let (ns32, h32, inv_dt) = (ns as u32, setup.half as u32, setup.inv_dt);
    let (na, nb, nc, nd, ne) = (t.na as u32, t.nb as u32, t.nc as u32, t.nd as u32, t.ne as u32);
    for (i, &p) in ptraces.iter().enumerate() {
        let slot = i % streams.len();
        let st = &streams[slot];
        // Fetch an available stream (Table 2, line 10): its previous copy and kernel are done.
        st.synchronize().map_err(drv("waiting for a pool stream"))?;
        let (rows, geom) = (pinned_mut(&mut h_rows[slot])?, pinned_mut(&mut h_geom[slot])?);
        let mut m = [0u32; 3];
        let mut r = 0usize;
        for (phase, mp) in m.iter_mut().enumerate() {
            // Lines 11-16: collect the traces of each aperture.
            for &tr in ap.list(phase, p) {
                rows[r * ns..(r + 1) * ns].copy_from_slice(&data[tr as usize * ns..(tr as usize + 1) * ns]);
                let (dx, dy) = setup.offset(p, tr);
                geom[2 * r] = dx;
                geom[2 * r + 1] = dy;
                r += 1;
            }
            *mp = ap.list(phase, p).len() as u32;
        }
        unsafe {
            htod(st, d_rows_p[slot], &rows[..r * ns])?;
            htod(st, d_geom_p[slot], &geom[..2 * r])?;
        }
        let (rows_p, geom_p) = (d_rows_p[slot], d_geom_p[slot]);
        let pi = i as u32;
        launch!(on st, gpu, k::kernels::NLBF_PAPER, cfg, &ns32, &h32, &inv_dt, &rows_p, &geom_p, &m[0], &m[1], &m[2], &vals_p, &na,
            &nb, &nc, &nd, &ne, &pi, &code_p, &s_p)?;
    }
    gpu.synchronize()?;
    let code = main.clone_dtoh(&out_code).map_err(drv("downloading picks"))?;
    let s = main.clone_dtoh(&out_s).map_err(drv("downloading semblance"))?;
    drop((d_rows, d_geom, vals));
    Ok((code, s))
}
