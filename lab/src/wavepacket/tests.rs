//! Tests of the wave-packet benchmark: plan, estimate, rows and report.

use super::*;

#[test]
fn small_bench_runs_on_the_cpu() {
    let t = Instant::now();
    let rows = bench(&Backend::Cpu, BenchSize::Small, &Ceilings::default()).unwrap();
    print!("{}", summary(&rows));
    println!("small CPU bench: {:.1} s", t.elapsed().as_secs_f64());
    assert!(rows.iter().any(|r| r.workload.contains("fragments")));
    assert!(rows.iter().all(|r| r.scope != "failed"), "{}", table(&rows));
    assert!(rows.iter().all(|r| r.stats.median_ms.is_finite() && r.stats.median_ms > 0.0), "{}", table(&rows));
    for n in [32, 48] {
        for eps in [1e-4, 1e-6] {
            assert!(rows.iter().any(|r| r.workload == workload("forward", n, eps) && r.variant == "cpu-reference"), "{n} {eps}");
        }
    }
}

/// The paper-size plan builds (every frame and tiling), holds what the multi-device pipeline needs, and
/// is estimated within the wave-packet share (about 150 s) of `bench all --size paper`'s ten
/// minutes on the H100 machine. Nothing is run.
#[test]
fn paper_plan_fits_the_suite_budget() {
    let p = plan(BenchSize::Paper);
    let text = dry_run(BenchSize::Paper, 16, true).unwrap();
    print!("{text}");
    for n in [128, 256, 512] {
        let at = |eps: f64| p.cubes.iter().find(|c| c.n == n && c.eps == eps).unwrap();
        assert_eq!(at(1e-4).gpu, ALL_GPU.to_vec(), "every GPU variant at {n}^3, eps 1e-4");
        assert!(at(1e-6).gpu.contains(&Gather::Separable), "separable at {n}^3, eps 1e-6");
        // The CPU reference only where it takes seconds; at most 3 repeats.
        assert_eq!(at(1e-4).cpu_repeats.is_some(), n <= 256);
        assert!(p.cubes.iter().all(|c| c.cpu_repeats.unwrap_or(0) <= 3));
    }
    assert!(p.cubes[0].cpu_extras && p.cubes[0].n == 128, "1-thread and stencil CPU rows at 128^3");
    assert_eq!(p.fragments.shape, [1024, 512, 512]);
    assert!(!p.fragments.on_cpu);
    let est = estimate(&p, 16, true).unwrap();
    let total: f64 = est.iter().map(Estimate::total).sum();
    assert!(total > 30.0 && total < 150.0, "estimated {total:.0} s");
    // The CPU-only paper run skips the fragments and the 512^3 cubes.
    let cpu_only = estimate(&p, 16, false).unwrap();
    assert!(cpu_only.iter().filter(|e| e.workload.contains("fragments") || e.workload.ends_with("@512")).all(|e| e.total() == 0.0));
    // At 512^3 the eps 1e-6 separable variant is checked against the eps 1e-4 lattice variant:
    // the boxes (and so the coefficient layout) do not depend on epsilon.
    let layout = |eps| Frame::new(512, &params(eps, Gather::Separable)).unwrap();
    assert_eq!(layout(1e-4).offsets, layout(1e-6).offsets);
}

/// The report's scaling chart groups rows by the workload name before '@' and the variant: the
/// GPU end-to-end rows of one direction and epsilon make one line over N.
#[test]
fn workload_names_make_scaling_series() {
    let stem = |s: String| s.split('@').next().unwrap().to_string();
    assert_eq!(workload("forward", 128, 1e-4), "wavepacket-forward-eps1e-4@128");
    assert_eq!(stem(workload("forward", 128, 1e-4)), stem(workload("forward", 512, 1e-4)));
    assert_ne!(stem(workload("forward", 128, 1e-4)), stem(workload("forward", 128, 1e-6)));
    assert_ne!(stem(workload("forward", 128, 1e-4)), stem(workload("inverse", 128, 1e-4)));
    let rows: Vec<BenchRow> = [128usize, 256, 512]
        .iter()
        .map(|&n| row(&workload("forward", n, 1e-4), "gpu-separable", "end-to-end", single(n as f64 / 10.0), (n * n * n) as f64,
            "samples", "ok", String::new()))
        .collect();
    let report = crate::report::Report {
        date: "test".into(),
        commit: "test".into(),
        device: "test".into(),
        cpu_threads: 1,
        ptx_arch: "sm_90".into(),
        ceilings: None,
        rows,
        failures: Vec::new(),
    };
    let dir = std::env::temp_dir().join(format!("seisgpu-wp-scaling-{}", std::process::id()));
    let files = report.write(&dir).unwrap();
    assert!(files.iter().any(|f| f.ends_with("scaling.png")), "{files:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_time_guard_stops_repeats() {
    let clock = Clock::new(0.0);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let mut runs = 0;
    let t = clock.repeat(2, 5, || {
        runs += 1;
        Ok(1.0)
    }).unwrap();
    assert_eq!((t.stats.repeats, runs), (1, 2), "one warm-up and one timed run once past the guard");
    assert!(t.guard_note(0.0).contains("1 of 5 repeats"));
    assert_eq!(clock.cut.get(), 1);
    let clock = Clock::new(1e9);
    assert_eq!(clock.repeat(1, 3, || Ok(1.0)).unwrap().stats.repeats, 3);
}

#[test]
fn demo_runs_on_the_cpu() {
    let d = demo(&Backend::Cpu, &std::env::temp_dir().join("seisgpu-wp-demo"), DemoSize::Small).unwrap();
    println!("{d:?}");
    assert!(d.quality.contains("dB"));
}
