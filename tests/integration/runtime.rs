//! The GPU runtime: launches, buffers, streams, textures, errors, FFT.

use seisgpu_host::backend::gpu_or_skip;
use seisgpu_host::kernels::ceilings::FMA_RATE;
use seisgpu_host::kernels::smoke::{saxpy_one, ALWAYS_TRAP, BLOCK_SUM, SAXPY, TEX2D_F2_PROBE, TEX2D_PROBE, TEX3D_PROBE};
use seisgpu_host::launch;
use seisgpu_host::runtime::{grid_1d, AddressMode, Filter, GpuError, LaunchConfig, Texture, TextureFormat};

use crate::common::random_vec;

#[test]
fn saxpy_matches_cpu_on_random_data() {
    let Some(gpu) = gpu_or_skip("saxpy_matches_cpu_on_random_data") else { return };
    let n = 1_000_003usize; // not a multiple of the block size
    let x = random_vec(n, "x");
    let y0 = random_vec(n, "y");
    let a = 1.7f32;
    let dx = gpu.upload(&x).unwrap();
    let mut dy = gpu.upload(&y0).unwrap();
    let nn = n as u32;
    launch!(gpu, SAXPY, grid_1d(n, 256), &nn, &a, &dx, &mut dy).unwrap();
    let y = gpu.download(&dy).unwrap();
    for i in 0..n {
        assert_eq!(y[i], saxpy_one(a, x[i], y0[i]), "element {i}");
    }
}

/// The worked example of docs/DEVELOPING.md: the AGC kernel against its CPU twin, bit for bit, on
/// random traces whose sample count is not a multiple of the block (the output starts as NaN).
#[test]
fn agc_kernel_matches_its_cpu_twin() {
    let Some(gpu) = gpu_or_skip("agc_kernel_matches_its_cpu_twin") else { return };
    use seisgpu_host::gain::{agc_rms_cpu, agc_rms_gpu};
    for (n_traces, ns, half) in [(37usize, 1001usize, 25usize), (3, 7, 100), (1, 1, 0)] {
        let data = random_vec(n_traces * ns, "traces");
        let want = agc_rms_cpu(&data, ns, half).unwrap();
        let got = agc_rms_gpu(&gpu, &data, ns, half).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "trace {} sample {}: gpu {g} cpu {w} ({n_traces} x {ns}, half {half})", i / ns, i % ns);
        }
    }
}

#[test]
fn block_sum_with_shuffles_and_shared_memory() {
    let Some(gpu) = gpu_or_skip("block_sum_with_shuffles_and_shared_memory") else { return };
    let n = 100_001usize;
    let x = random_vec(n, "x");
    let dx = gpu.upload(&x).unwrap();
    let mut out = gpu.poisoned(1).unwrap();
    let nn = n as u32;
    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (992, 1, 1), shared_mem_bytes: 32 * 4 };
    launch!(gpu, BLOCK_SUM, cfg, &nn, &dx, &mut out).unwrap();
    let got = gpu.download(&out).unwrap()[0] as f64;
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    assert!((got - want).abs() < 1e-3 * (1.0 + want.abs()), "got {got}, want {want}");
}

#[test]
fn round_trip_and_async_copies_on_the_stream_pool() {
    let Some(gpu) = gpu_or_skip("round_trip_and_async_copies_on_the_stream_pool") else { return };
    let data = random_vec(1 << 20, "data");
    for s in gpu.streams() {
        let d = s.clone_htod(&data).unwrap();
        let back = s.clone_dtoh(&d).unwrap();
        assert_eq!(back, data);
    }
    // Pinned buffers make the copies asynchronous: two streams upload while a third computes.
    let mut pinned = seisgpu_host::runtime::memory::PinnedBuf::<f32>::new(&gpu, data.len()).unwrap();
    pinned.as_mut_slice().unwrap().copy_from_slice(&data);
    let s1 = &gpu.streams()[1];
    let mut d = s1.alloc_zeros::<f32>(data.len()).unwrap();
    s1.memcpy_htod(pinned.raw(), &mut d).unwrap();
    let back = s1.clone_dtoh(&d).unwrap();
    assert_eq!(back, data);
}

#[test]
fn texture_linear_filtering_matches_cpu_within_hardware_weights() {
    let Some(gpu) = gpu_or_skip("texture_linear_filtering_matches_cpu_within_hardware_weights") else { return };
    let (w, h) = (37usize, 23usize);
    let img = random_vec(w * h, "image");
    let tex = Texture::new(&gpu, &img, (w, h, 1), TextureFormat::Float, Filter::Linear, AddressMode::Clamp).unwrap();
    let pts: Vec<f32> = random_vec(2 * 1000, "points")
        .chunks(2)
        .flat_map(|p| [(p[0] + 1.0) * 0.5 * (w as f32 - 1.0) + 0.5, (p[1] + 1.0) * 0.5 * (h as f32 - 1.0) + 0.5])
        .collect();
    let dp = gpu.upload(&pts).unwrap();
    let mut out = gpu.poisoned(1000).unwrap();
    let n = 1000u32;
    let handle = tex.handle();
    launch!(gpu, TEX2D_PROBE, grid_1d(1000, 128), &handle, &n, &dp, &mut out).unwrap();
    let got = gpu.download(&out).unwrap();
    for (i, p) in pts.chunks(2).enumerate() {
        // CPU bilinear at texel coordinates (centre of texel i at i + 0.5).
        let (x, y) = (p[0] - 0.5, p[1] - 0.5);
        let (x0, y0) = (x.floor().max(0.0) as usize, y.floor().max(0.0) as usize);
        let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
        let (fx, fy) = (x - x0 as f32, y - y0 as f32);
        let v = |xx: usize, yy: usize| img[yy * w + xx];
        let want = (1.0 - fy) * ((1.0 - fx) * v(x0, y0) + fx * v(x1, y0)) + fy * ((1.0 - fx) * v(x0, y1) + fx * v(x1, y1));
        // 8 fractional bits in the hardware weights: each axis's weight is off by up to 2^-8, times
        // the sample range (2), and the two axes add (one seed hit 0.0081 > 2/256 with one axis).
        assert!((got[i] - want).abs() < 2.0 * 2.0 / 256.0 + 1e-6, "point {i}: gpu {} cpu {want}", got[i]);
    }
}

#[test]
fn launch_errors_name_the_kernel() {
    let Some(gpu) = gpu_or_skip("launch_errors_name_the_kernel") else { return };
    // An invalid shape is caught before the launch, with the kernel's name.
    let flag = 0u32;
    let bad = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (2048, 1, 1), shared_mem_bytes: 0 };
    let e = launch!(gpu, ALWAYS_TRAP, bad, &flag).unwrap_err();
    assert!(e.to_string().contains("always_trap"), "{e}");
    // An unknown kernel lists the known ones.
    let e = launch!(gpu, "no_such_kernel", grid_1d(1, 32), &flag).unwrap_err();
    assert!(matches!(e, GpuError::UnknownKernel(..)), "{e}");
    assert!(e.to_string().contains("saxpy"), "{e}");
}

#[test]
fn cufft_3d_round_trip() {
    let Some(gpu) = gpu_or_skip("cufft_3d_round_trip") else { return };
    let dims = (12usize, 10usize, 14usize);
    let n = dims.0 * dims.1 * dims.2;
    let x = random_vec(2 * n, "spectrum");
    let mut d = gpu.upload(&x).unwrap();
    let plan = seisgpu_host::runtime::fft::FftPlan::c2c_3d(gpu.stream(), dims).unwrap();
    plan.exec_inplace(&mut d, false).unwrap();
    plan.exec_inplace(&mut d, true).unwrap();
    let back: Vec<f32> = gpu.download(&d).unwrap().iter().map(|v| v / n as f32).collect();
    assert!(crate::common::rel_l2(&back, &x) < 1e-6);
}

#[test]
fn info_reads_device_properties() {
    let Some(gpu) = gpu_or_skip("info_reads_device_properties") else { return };
    let info = gpu.info();
    println!("{info}");
    assert!(info.multiprocessors > 0 && info.total_memory > 0);
}

#[test]
fn texture_3d_linear_and_2d_float2_point() {
    let Some(gpu) = gpu_or_skip("texture_3d_linear_and_2d_float2_point") else { return };
    // 3D, linear filtering, at texel centres: exact sample values.
    let (w, h, d) = (9usize, 7usize, 5usize);
    let vol = random_vec(w * h * d, "volume");
    let tex = Texture::new(&gpu, &vol, (w, h, d), TextureFormat::Float, Filter::Linear, AddressMode::Clamp).unwrap();
    let mut pts = Vec::new();
    let mut want = Vec::new();
    for z in 0..d {
        for y in 0..h {
            for x in (0..w).step_by(2) {
                pts.extend([x as f32 + 0.5, y as f32 + 0.5, z as f32 + 0.5]);
                want.push(vol[(z * h + y) * w + x]);
            }
        }
    }
    let n = want.len() as u32;
    let dp = gpu.upload(&pts).unwrap();
    let mut out = gpu.poisoned(want.len()).unwrap();
    let handle = tex.handle();
    launch!(gpu, TEX3D_PROBE, grid_1d(want.len(), 64), &handle, &n, &dp, &mut out).unwrap();
    assert_eq!(gpu.download(&out).unwrap(), want);

    // 2D float2, point filtering: (re, im) pairs come back exactly.
    let (w, h) = (11usize, 6usize);
    let c = random_vec(2 * w * h, "complex");
    let tex = Texture::new(&gpu, &c, (w, h, 1), TextureFormat::Float2, Filter::Point, AddressMode::Clamp).unwrap();
    let pts: Vec<f32> = (0..w * h).flat_map(|i| [(i % w) as f32 + 0.5, (i / w) as f32 + 0.5]).collect();
    let dp = gpu.upload(&pts).unwrap();
    let mut out = gpu.poisoned(2 * w * h).unwrap();
    let (handle, n) = (tex.handle(), (w * h) as u32);
    launch!(gpu, TEX2D_F2_PROBE, grid_1d(w * h, 64), &handle, &n, &dp, &mut out).unwrap();
    assert_eq!(gpu.download(&out).unwrap(), c);
}

#[test]
fn copy_on_one_stream_overlaps_a_kernel_on_another() {
    let Some(gpu) = gpu_or_skip("copy_on_one_stream_overlaps_a_kernel_on_another") else { return };
    use seisgpu_host::runtime::memory::PinnedBuf;
    let (s0, s1) = (gpu.streams()[0].clone(), gpu.streams()[1].clone());
    let blocks = gpu.info().multiprocessors as u32 * 4;
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let mut out = gpu.zeros::<f32>((blocks * 256) as usize).unwrap();
    let (iters, seed) = (40_000u32, 0.5f32);
    let mut pinned = PinnedBuf::<f32>::new(&gpu, 64 << 20).unwrap();
    pinned.as_mut_slice().unwrap().fill(1.0);
    let mut dst = s1.alloc_zeros::<f32>(64 << 20).unwrap();
    let wall = |f: &mut dyn FnMut()| {
        gpu.synchronize().unwrap();
        let t = std::time::Instant::now();
        f();
        gpu.synchronize().unwrap();
        t.elapsed().as_secs_f64()
    };
    // Warm up both, then time each alone and both together.
    launch!(on s0, gpu, FMA_RATE, cfg, &iters, &seed, &mut out).unwrap();
    s1.memcpy_htod(pinned.raw(), &mut dst).unwrap();
    let kernel = wall(&mut || launch!(on s0, gpu, FMA_RATE, cfg, &iters, &seed, &mut out).unwrap());
    let copy = wall(&mut || s1.memcpy_htod(pinned.raw(), &mut dst).unwrap());
    let both = wall(&mut || {
        launch!(on s0, gpu, FMA_RATE, cfg, &iters, &seed, &mut out).unwrap();
        s1.memcpy_htod(pinned.raw(), &mut dst).unwrap();
    });
    println!("kernel {:.2} ms, copy {:.2} ms, both {:.2} ms", kernel * 1e3, copy * 1e3, both * 1e3);
    // Serial execution would take kernel + copy; overlap hides most of the shorter one.
    assert!(both < 0.9 * (kernel + copy), "no overlap: {both} s vs {kernel} + {copy} s");
}
