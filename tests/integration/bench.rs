//! `seisgpu bench` through the CLI: the workload and kernel filters, the report files, merging.

use crate::common::{fresh_dir, printed, run_cli};

#[test]
fn bench_case_runs_only_the_named_workload() {
    let dir = fresh_dir("bench", "case");
    let out = dir.join("run");
    let o = run_cli(&["--device", "cpu", "bench", "all", "--case", "ktm-table2-128", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", printed(&o));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("bench.json")).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    assert!(!rows.is_empty(), "no rows: {}", printed(&o));
    for r in rows {
        assert_eq!(r["workload"], "ktm-table2-128", "a workload that was not asked for ran");
    }
    assert!(out.join("bench.md").exists());
    // The report merges back into the same table.
    let merged = dir.join("merged");
    let o = run_cli(&["bench", "--merge", out.join("bench.json").to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    assert!(o.status.success(), "{}", printed(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("ktm-table2-128"));
    assert!(merged.join("bench.json").exists() && merged.join("bench.md").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_unknown_case_or_kernel_lists_the_known_ones() {
    let o = run_cli(&["--device", "cpu", "bench", "all", "--case", "ktm-table1,nothing"]);
    assert!(!o.status.success());
    let e = printed(&o);
    assert!(e.contains("unknown workload `nothing`") && e.contains("ktm-table2-128") && e.contains("nlbf-crossspread-3d"), "{e}");
    // Only the selected benchmarks' workloads are known.
    let o = run_cli(&["--device", "cpu", "bench", "nlbf", "--case", "ktm-table1"]);
    let e = printed(&o);
    assert!(!o.status.success() && e.contains("unknown workload `ktm-table1`") && !e.contains("ktm-table2"), "{e}");
    let o = run_cli(&["--device", "cpu", "bench", "srm", "--kernels", "cluster,warp"]);
    let e = printed(&o);
    assert!(!o.status.success() && e.contains("unknown kernel `warp`") && e.contains("paper, paperq56, cluster, clusterd"), "{e}");
    let o = run_cli(&["--device", "cpu", "bench", "ktm", "--kernels", "paper"]);
    assert!(!o.status.success() && printed(&o).contains("srm is not among"), "{}", printed(&o));
    let o = run_cli(&["--device", "cpu", "ktm", "bench", "--case", "ktm-table2-4096"]);
    let e = printed(&o);
    assert!(!o.status.success() && e.contains("ktm-table2-128, ktm-table2-256, ktm-table1"), "{e}");
    let o = run_cli(&["--device", "cpu", "srm", "bench", "--kernels", "best"]);
    assert!(!o.status.success() && printed(&o).contains("unknown kernel `best`"), "{}", printed(&o));
}

#[test]
fn bench_help_lists_the_filters() {
    let o = run_cli(&["bench", "--help"]);
    assert!(o.status.success());
    let h = String::from_utf8_lossy(&o.stdout);
    for flag in ["--case", "--kernels", "--size", "--out", "--merge"] {
        assert!(h.contains(flag), "bench --help lacks {flag}:\n{h}");
    }
}

#[test]
fn scaling_case_names_the_scaling_workloads() {
    // With --gpus the names are the scaling workloads'; an unknown one lists them, and no report is written.
    let dir = fresh_dir("bench", "scale-case");
    let out = dir.join("run");
    let o = run_cli(&["--device", "cpu", "--gpus", "2", "bench", "ktm", "--case", "ktm-table2-128", "--out", out.to_str().unwrap()]);
    let e = printed(&o);
    assert!(!o.status.success() && e.contains("no scaling workload of that name") && e.contains("scale-ktm-table2-256"), "{e}");
    assert!(!out.join("scaling.md").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
