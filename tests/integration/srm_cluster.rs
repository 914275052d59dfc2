//! srm `cluster` kernel (thread-block clusters, the plane on chip; compute capability 9.0+): the
//! plumbing (sm_90 module, cluster launch, DSMEM) on a smoke kernel, then the depth step and a whole
//! migration against the CPU reference. GPU tests print SKIPPED without a GPU, or below 9.0.

use std::sync::Arc;

use seisgpu_host::backend::{gpu_or_skip, Backend};
use seisgpu_host::kernels::smoke::SM90_CLUSTER_SMOKE;
use seisgpu_host::kernels::srm::{RowMap, CLUSTER_MAX_REGS};
use seisgpu_host::runtime::cluster::{clusters_supported, cluster_function, max_active_clusters,
    ClusterConfig};
use seisgpu_host::runtime::{Gpu, PTX, PTX_SM90};
use seisgpu_host::srm::design::{DesignParams, Operator, Spacing};
use seisgpu_host::srm::gpu::{cluster_plan_for, ClusterKernel, DeviceOperator};
use seisgpu_host::srm::synthetic::point_scatterer;
use seisgpu_host::srm::{cpu, migrate, GpuOptions, GpuVariant, SrmParams, Taper};

use crate::common::{random_vec, rel_l2};
use crate::srm::{first_planes, poisoned_planes};

/// The GPU when it can run clusters; otherwise prints why the test is skipped.
fn cluster_gpu_or_skip(test: &str) -> Option<Arc<Gpu>> {
    let gpu = gpu_or_skip(test)?;
    if !clusters_supported(&gpu) {
        let cc = gpu.info().compute_capability;
        eprintln!("SKIPPED {test}: thread-block clusters need compute capability 9.0 ({} has {}.{})", gpu.info().name, cc.0, cc.1);
        return None;
    }
    Some(gpu)
}

#[test]
fn cluster_kernels_live_in_their_own_sm90_module() {
    // CPU-only: build.rs moved the `sm90_*` entry points (sm_90 instructions) out of the main module.
    assert!(!PTX.lines().any(|l| l.starts_with(".visible .entry sm90_")), "sm_90 kernels left in the main module");
    let entries: Vec<&str> = PTX_SM90.lines().filter_map(|l| l.strip_prefix(".visible .entry ")).collect();
    assert_eq!(entries, ["sm90_cluster_smoke(", "sm90_srm_step_cluster(", "sm90_srm_step_clusterd("]);
    assert!(PTX_SM90.lines().any(|l| l == ".target sm_90"), "{}", &PTX_SM90[..200]);
    let v = PTX_SM90.lines().find_map(|l| l.strip_prefix(".version ")).unwrap();
    let (maj, min) = v.split_once('.').unwrap();
    assert!((maj.parse::<u32>().unwrap(), min.parse::<u32>().unwrap()) >= (8, 6), "PTX ISA {v}");
    assert!(!PTX_SM90.lines().any(|l| l.trim_start().starts_with("call")), "an sm_90 kernel calls a function");
    // The step kernels carry their register cap right after their parameter lists.
    let lines: Vec<&str> = PTX_SM90.lines().collect();
    for k in ["sm90_srm_step_cluster", "sm90_srm_step_clusterd"] {
        let start = lines.iter().position(|l| *l == format!(".visible .entry {k}(")).unwrap();
        let close = (start..lines.len()).find(|&k| lines[k] == ")").unwrap();
        assert_eq!(lines[close + 1], format!(".maxnreg {CLUSTER_MAX_REGS}"), "{k}");
        assert!(seisgpu_host::runtime::cluster::sm90_kernel_names().contains(&k));
    }
}

#[test]
fn cluster_variant_parses_and_prints() {
    let v: GpuVariant = "cluster".parse().unwrap();
    assert_eq!(v, GpuVariant::Cluster);
    assert_eq!(v.to_string(), "cluster");
    assert!(seisgpu_host::srm::gpu::CANDIDATES.contains(&GpuVariant::Cluster));
    let d: GpuVariant = "clusterd".parse().unwrap();
    assert_eq!((d, d.to_string().as_str()), (GpuVariant::ClusterD, "clusterd"));
    assert!(seisgpu_host::srm::gpu::CANDIDATES.contains(&GpuVariant::ClusterD));
    assert!("clusterx".parse::<GpuVariant>().unwrap_err().contains("cluster"));
}

#[test]
fn cluster_smoke_reads_the_neighbours_shared_memory() {
    let Some(gpu) = cluster_gpu_or_skip("cluster_smoke_reads_the_neighbours_shared_memory") else { return };
    let name = SM90_CLUSTER_SMOKE.name();
    for size in [1u32, 2, 4, 8, 16] {
        let clusters = 3;
        let cfg = ClusterConfig { grid: (size * clusters, 1, 1), block: (64, 1, 1), cluster: (size, 1, 1), shared: 16 };
        let func = cluster_function(&gpu, name, &cfg).unwrap();
        let active = max_active_clusters(&gpu, name, &func, &cfg).unwrap();
        println!("cluster of {size}: up to {active} clusters resident");
        if active == 0 {
            assert!(size > 8, "a portable cluster size ({size}) cannot run");
            eprintln!("cluster of {size} CTAs cannot be placed on this GPU: not tested");
            continue;
        }
        let blocks = (size * clusters) as usize;
        let mut out = gpu.upload(&vec![u32::MAX; 3 * blocks]).unwrap();
        seisgpu_host::launch_cluster!(gpu, SM90_CLUSTER_SMOKE => &func, &cfg, buf_mut &mut out).unwrap();
        let got = gpu.download(&out).unwrap();
        for b in 0..blocks as u32 {
            let rank = b % size;
            let next = b - rank + (rank + 1) % size;
            let g = &got[3 * b as usize..3 * b as usize + 3];
            assert_eq!(g, [rank, size, 1000 + next], "block {b} in clusters of {size}: (rank, size, neighbour's value)");
        }
    }
    // A grid that is not a multiple of the cluster: a clear error naming the kernel.
    let bad = ClusterConfig { grid: (6, 1, 1), block: (32, 1, 1), cluster: (4, 1, 1), shared: 16 };
    let e = cluster_function(&gpu, name, &bad).unwrap_err().to_string();
    assert!(e.contains(name) && e.contains("multiple"), "{e}");
}

/// The cluster kernels: `cluster` and `clusterd`.
const CLUSTER_VARIANTS: [GpuVariant; 2] = [GpuVariant::Cluster, GpuVariant::ClusterD];

/// One depth step of `count` planes (both waves, buffers with room for `stride`) on an nx x ny grid
/// with each cluster kernel against `cpu::step_planes`, every buffer NaN-poisoned first.
fn step_matches_cpu(gpu: &Arc<Gpu>, nx: usize, ny: usize, count: usize, stride: usize) -> (u32, f64) {
    let mut r = (0, 0.0);
    for v in CLUSTER_VARIANTS {
        r = step_matches_cpu_with(gpu, v, nx, ny, count, stride);
    }
    r
}

fn step_matches_cpu_with(gpu: &Arc<Gpu>, variant: GpuVariant, nx: usize, ny: usize, count: usize, stride: usize) -> (u32, f64) {
    let nxy = nx * ny;
    let sp = Spacing { dx: 12.5, dy: 15.0, dz: 10.0, two_d: false };
    let tau = 2.0 * std::f64::consts::PI;
    let op = Operator::new(DesignParams::default(), sp, tau * 4.0 * 10.0 / 4000.0, tau * 50.0 * 10.0 / 1500.0, 40).unwrap();
    let dop = DeviceOperator::new(gpu, &op).unwrap();
    let slow: Vec<f32> = random_vec(nxy, "velocity").iter().map(|r| 1.0 / (2750.0 + 1250.0 * r)).collect();
    let maps: Vec<RowMap> = (0..count).map(|k| op.row_map(tau * (5.0 + 44.0 * k as f64 / count as f64))).collect();
    let taper = Taper::new(nx, ny, 10, 0.3);
    let waves = random_vec(2 * 2 * count * nxy, "wavefields");
    let mut want = waves.clone();
    let mut maps2 = maps.clone();
    maps2.extend_from_slice(&maps);
    cpu::step_planes(&op, &maps2, &slow, &taper, nx, ny, &mut want);
    let dslow = gpu.upload(&slow).unwrap();
    let mut pl = poisoned_planes(gpu, nx, ny, stride, count, &taper, &waves, &maps);
    let kernel = ClusterKernel::of(variant).unwrap();
    let (_, cfg, shape) = cluster_plan_for(gpu, kernel, nx as u32, ny as u32, count as u32).unwrap();
    println!("{variant}: {nx} x {ny}, {count} planes: {} CTAs of {} rows, {} threads, {} B shared; grid {:?}", shape.ctas, shape.rows,
        shape.threads, shape.shared, cfg.grid);
    pl.step(gpu, &dop, &dslow.slice(..), count, variant).unwrap();
    let out = gpu.download(&pl.x).unwrap();
    let got = first_planes(&out, nxy, stride, count);
    assert!(got.iter().all(|v| v.is_finite()), "{variant} {nx} x {ny}: unwritten (NaN) outputs");
    // The planes beyond `count` stay untouched (still NaN).
    assert!(out[2 * count * nxy..2 * stride * nxy].iter().all(|v| v.is_nan()), "{variant}: wrote beyond the {count} planes");
    let e = rel_l2(&got, &want);
    println!("{variant} {nx} x {ny}: rel L2 {e:.2e} vs CPU");
    assert!(e < 1e-5, "{variant} {nx} x {ny}: rel L2 {e}");
    (shape.ctas, e)
}

#[test]
fn cluster_depth_step_matches_cpu() {
    let Some(gpu) = cluster_gpu_or_skip("cluster_depth_step_matches_cpu") else { return };
    // Not multiples of anything; three planes in buffers with room for five.
    step_matches_cpu(&gpu, 131, 97, 3, 5);
    // ny = 157 is prime, so no cluster size divides it (the last strip is short); nx odd (a half pair).
    let (c, _) = step_matches_cpu(&gpu, 203, 157, 2, 3);
    assert!(c > 1 && 157 % c != 0);
    // Strips of two row segments whose last is cut by the grid (397 = 15 x 25 + 22): `clusterd` runs
    // that segment bottom-up from row 21 of the last strip.
    let (c, _) = step_matches_cpu(&gpu, 157, 397, 2, 2);
    assert_eq!(c, 16);
}

#[test]
fn cluster_depth_step_matches_cpu_on_the_paper_grid() {
    let Some(gpu) = cluster_gpu_or_skip("cluster_depth_step_matches_cpu_on_the_paper_grid") else { return };
    // The benchmark's shape: 400 x 400, 16 planes x 2 waves per launch.
    let (c, _) = step_matches_cpu(&gpu, 400, 400, 16, 16);
    println!("400 x 400: clusters of {c} CTAs");
}

#[test]
fn cluster_image_matches_cpu() {
    let Some(gpu) = cluster_gpu_or_skip("cluster_image_matches_cpu") else { return };
    let (n, d, dz, nz, v) = (37usize, 20.0, 20.0, 24usize, 2000.0);
    let (traces, model) = point_scatterer(n, 29, nz, d, dz, v, (300.0, 250.0), (400.0, 300.0, 300.0), 200, 0.004, 20.0, 1);
    let params = SrmParams { fmin: 5.0, fmax: 40.0, ricker_peak: 20.0, taper_width: 8, aperture: 1e9, table_rows: 48, nz,
        ..Default::default() };
    let want = migrate(&traces, &model, &params, GpuOptions::default(), &[Backend::Cpu]).unwrap();
    let shots = seisgpu_host::srm::validate_inputs(&traces, &model, &params).unwrap();
    let op = seisgpu_host::srm::design_for(&model, &params).unwrap();
    for variant in CLUSTER_VARIANTS {
        // 7 planes per launch: the band's bins do not divide evenly into batches.
        let opts = GpuOptions { variant, planes: 7 };
        let got = seisgpu_host::srm::gpu::migrate_shots(&gpu, &op, &traces, &model, &params, &shots, opts, false).unwrap();
        let e = rel_l2(&got.data, &want.data);
        println!("{variant}: image rel L2 {e:.2e}");
        assert!(e < 1e-5, "{variant}: image rel L2 {e}");
    }
}
