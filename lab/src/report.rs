//! Benchmark reports: one Markdown table, JSON, and PNG charts (speed-up per workload, fraction of
//! ceiling per kernel, scaling with problem size).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::bench::{BenchRow, Ceilings};
use seisgpu_host::io::AtomicFile;

/// Everything one `seisgpu bench` run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub date: String,
    pub commit: String,
    pub device: String,
    pub cpu_threads: usize,
    pub ptx_arch: String,
    pub ceilings: Option<Ceilings>,
    pub rows: Vec<BenchRow>,
    /// Algorithms whose benchmark failed, with the error.
    pub failures: Vec<(String, String)>,
}

impl Report {
    /// Speed-up of a row over the CPU reference of the same workload (and the same mode, the part of
    /// the variant name after its last space, e.g. `static8-dsr`). Compared as throughput (work per
    /// second), so a CPU reference timed on a documented subset of the work compares fairly.
    pub fn speedup(&self, row: &BenchRow) -> Option<f64> {
        if row.variant.starts_with("cpu") {
            return None;
        }
        let mode = |v: &str| v.rsplit_once(' ').map(|(_, m)| m.to_string()).unwrap_or_default();
        let cpu = self.rows.iter().find(|r| {
            r.workload == row.workload && r.variant.starts_with("cpu") && mode(&r.variant) == mode(&row.variant)
                && r.work_unit == row.work_unit
        })?;
        if cpu.work > 0.0 && row.work > 0.0 {
            Some(row.throughput() / cpu.throughput())
        } else {
            Some(cpu.stats.median_ms / row.stats.median_ms)
        }
    }

    /// Merges several runs' reports (e.g. algorithms benchmarked in separate runs on one device).
    pub fn merge(mut reports: Vec<Report>) -> anyhow::Result<Report> {
        anyhow::ensure!(!reports.is_empty(), "no reports to merge");
        let mut out = reports.remove(0);
        for r in reports {
            anyhow::ensure!(r.device == out.device, "reports from different devices ({} and {})", out.device, r.device);
            out.date = format!("{} and {}", out.date, r.date);
            if r.commit != out.commit {
                out.commit = format!("{} and {}", out.commit, r.commit);
            }
            out.rows.extend(r.rows);
            out.failures.extend(r.failures);
        }
        Ok(out)
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        s += &format!("Measured {} on {} (commit {}, PTX {}, CPU reference on {} threads).\n\n", self.date, self.device,
            self.commit, self.ptx_arch, self.cpu_threads);
        if let Some(c) = self.ceilings {
            s += &format!("Device ceilings measured in the same run: copy bandwidth {:.0} GB/s (read + write), FP32 FMA {:.1} TFLOP/s, SFU ex2 {:.2} Top/s.\n\n",
                c.bandwidth / 1e9, c.fp32 / 1e12, c.sfu / 1e12);
        }
        s += "| workload | variant | scope | median ms | min-max ms | throughput | of ceiling | speed-up vs CPU | check | paper |\n";
        s += "|---|---|---|---:|---:|---:|---:|---:|---|---|\n";
        for r in &self.rows {
            let frac = match (&r.ceiling, r.fraction_of_ceiling) {
                (Some(c), Some(f)) => format!("{:.0}% {c}", 100.0 * f),
                _ => "".into(),
            };
            let sp = self.speedup(r).map(|x| format!("{x:.1}x")).unwrap_or_default();
            s += &format!("| {} | {} | {} | {:.3} | {:.3}-{:.3} | {} | {} | {} | {} | {} |\n", r.workload, r.variant, r.scope,
                r.stats.median_ms, r.stats.min_ms, r.stats.max_ms, human(r.throughput(), &r.work_unit), frac, sp, r.check,
                r.paper.clone().unwrap_or_default());
        }
        let notes: Vec<_> = self.rows.iter().filter(|r| !r.note.is_empty()).collect();
        if !notes.is_empty() {
            s += "\nNotes:\n";
            for r in notes {
                s += &format!("- {} / {} / {}: {}\n", r.workload, r.variant, r.scope, r.note);
            }
        }
        for (algo, e) in &self.failures {
            s += &format!("\n**{algo} failed**: {e}\n");
        }
        s
    }

    /// Writes `bench.json`, `bench.md` and the PNG charts into `dir`; returns the files written.
    pub fn write(&self, dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let mut files = Vec::new();
        let json = dir.join("bench.json");
        let mut f = AtomicFile::create(&json)?;
        serde_json::to_writer_pretty(&mut f, self)?;
        f.commit()?;
        files.push(json);
        let md = dir.join("bench.md");
        let mut f = AtomicFile::create(&md)?;
        std::io::Write::write_all(&mut f, self.markdown().as_bytes())?;
        f.commit()?;
        files.push(md);
        seisgpu_host::plot::register_fonts();
        for (name, chart) in [
            ("speedup.png", Self::chart_speedup as fn(&Self, &Path) -> anyhow::Result<bool>),
            ("ceiling.png", Self::chart_ceiling),
            ("scaling.png", Self::chart_scaling),
        ] {
            let p = dir.join(name);
            if chart(self, &p)? {
                files.push(p);
            }
        }
        Ok(files)
    }

    /// Bars: best GPU speed-up over the CPU reference, per workload (end to end).
    fn chart_speedup(&self, path: &Path) -> anyhow::Result<bool> {
        let mut best: BTreeMap<String, f64> = BTreeMap::new();
        for r in self.rows.iter().filter(|r| r.variant.starts_with("gpu") && r.scope == "end-to-end") {
            if let Some(sp) = self.speedup(r) {
                let e = best.entry(r.workload.clone()).or_insert(0.0);
                *e = e.max(sp);
            }
        }
        bar_chart(path, "GPU speed-up over the all-core CPU reference (end to end)", "speed-up (x)", &best.into_iter().collect::<Vec<_>>())
    }

    /// Bars: each GPU kernel's fraction of the ceiling that bounds it.
    fn chart_ceiling(&self, path: &Path) -> anyhow::Result<bool> {
        let bars: Vec<(String, f64)> = self
            .rows
            .iter()
            .filter_map(|r| r.fraction_of_ceiling.map(|f| (format!("{} {}", r.workload, r.variant), 100.0 * f)))
            .collect();
        bar_chart(path, "Fraction of the bounding ceiling (%)", "% of ceiling", &bars)
    }

    /// Lines: throughput against work for workloads measured at several sizes (same name stem).
    fn chart_scaling(&self, path: &Path) -> anyhow::Result<bool> {
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for r in self.rows.iter().filter(|r| r.variant.starts_with("gpu") && r.scope == "end-to-end") {
            let stem = r.workload.split('@').next().unwrap_or(&r.workload).to_string();
            series.entry(format!("{stem} {}", r.variant)).or_default().push((r.work, r.throughput()));
        }
        series.retain(|_, v| v.len() >= 2);
        if series.is_empty() {
            return Ok(false);
        }
        let (xmin, xmax) = minmax(series.values().flatten().map(|p| p.0));
        let (ymin, ymax) = minmax(series.values().flatten().map(|p| p.1));
        let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Throughput against problem size (GPU, end to end)", ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d((xmin * 0.8..xmax * 1.25).log_scale(), (ymin * 0.5..ymax * 2.0).log_scale())?;
        chart.configure_mesh().x_desc("work (units of the workload)").y_desc("work per second").draw()?;
        for (i, (name, mut pts)) in series.into_iter().enumerate() {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let color = Palette99::pick(i).to_rgba();
            chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
        Ok(true)
    }
}

fn minmax(it: impl Iterator<Item = f64>) -> (f64, f64) {
    it.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)))
}

fn bar_chart(path: &Path, title: &str, xlabel: &str, bars: &[(String, f64)]) -> anyhow::Result<bool> {
    if bars.is_empty() {
        return Ok(false);
    }
    // Horizontal bars: long workload names stay readable.
    let xmax = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1e-9) * 1.15;
    let n = bars.len();
    let root = BitMapBackend::new(path, (1000, (120 + 28 * n) as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..xmax, (0..n).into_segmented())?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(xlabel)
        .y_labels(n)
        .y_label_style(("sans-serif", 13))
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()?;
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        let mut r = Rectangle::new([(0.0, SegmentValue::Exact(i)), (b.1, SegmentValue::Exact(i + 1))], BLUE.mix(0.7).filled());
        r.set_margin(3, 3, 0, 0);
        r
    }))?;
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        Text::new(format!(" {:.1}", b.1), (b.1, SegmentValue::CenterOf(i)), ("sans-serif", 13).into_font())
    }))?;
    root.present()?;
    Ok(true)
}

/// Formats a rate with an SI prefix and unit per second.
pub fn human(v: f64, unit: &str) -> String {
    if !v.is_finite() || v <= 0.0 {
        return String::new();
    }
    let (s, p) = if v >= 1e12 { (v / 1e12, "T") } else if v >= 1e9 { (v / 1e9, "G") } else if v >= 1e6 { (v / 1e6, "M") } else if v >= 1e3 { (v / 1e3, "k") } else { (v, "") };
    format!("{s:.2} {p}{unit}/s")
}
