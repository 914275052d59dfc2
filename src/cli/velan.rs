//! `seisgpu velan`: semblance velocity analysis of CMP gathers, automatic v_rms picks, panels as
//! SEG-Y and PNG, NMO with the picks.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use seisgpu_host::plot::{render_png, Axes, Colormap, Look};
use seisgpu_host::traces::{TraceHeader, TraceSet};
use seisgpu_host::velan::{self, pick, Gathers, Panels, Scan, VelanParams};
use seisgpu_host::velocity::{text, VelocityFunction, VelocityModel};

use super::Global;

#[derive(clap::Args, Debug)]
#[command(allow_negative_numbers = true,
    long_about = "Velocity analysis: semblance S = sum_w (sum_i a_i)^2 / sum_w (N sum_i a_i^2) of every CMP gather along\n\
    hyperbolic moveout t = sqrt(t0^2 + x^2/v^2) (or Alkhalifah-Tsvankin with --eta), for trial velocities\n\
    --vmin..--vmax; automatic v_rms(t) picks per CMP written as an editable text file (the format every\n\
    --velocity argument reads). Gathers: traces with the same CDP number, or midpoint bins of --bin m when\n\
    the headers have no CDP numbers.",
    after_help = "Picking rule: at each time the best velocity; candidates where its semblance is >= --threshold and a\n\
    local maximum in time (+- the window, at least 40 ms); refined by a parabola in velocity; accepted\n\
    strongest first while every Dix interval velocity between consecutive picks stays between 0.8 x the\n\
    v_rms above it and 1.5 x --vmax; none in CMPs of fewer than --min-fold traces. Linear between\n\
    picks, constant beyond.\n\n\
    Example:\n  seisgpu synth line2d -o line.sgy\n  seisgpu velan line.sgy -o picks.txt --semblance panels.sgy --png panels --nmo nmo.sgy")]
pub struct Args {
    /// Prestack SEG-Y or SU input (CDP numbers or source/receiver coordinates in the headers).
    pub input: PathBuf,
    /// How the input file is read.
    #[command(flatten)]
    pub read: super::input::InputArgs,
    /// Output: the picked v_rms(t) functions, one CMP per line (text, editable).
    #[arg(short, long = "output", alias = "out", value_name = "OUTPUT")]
    pub out: PathBuf,
    /// Lowest trial velocity (m/s).
    #[arg(long, default_value_t = 1400.0)]
    pub vmin: f32,
    /// Highest trial velocity (m/s).
    #[arg(long, default_value_t = 4500.0)]
    pub vmax: f32,
    /// Number of trial velocities (count), evenly spaced from --vmin to --vmax.
    #[arg(long, default_value_t = 100)]
    pub nv: i64,
    /// Semblance time window (ms), centred on each output time.
    #[arg(long, default_value_t = 40.0)]
    pub window: f32,
    /// Anellipticity eta (dimensionless, 0 to 0.5) of the non-hyperbolic moveout; 0 = hyperbolic.
    #[arg(long, default_value_t = 0.0)]
    pub eta: f32,
    /// Stretch mute (fraction): samples stretched by more than (t - t0) / t0 are left out of the
    /// semblance and zeroed in --nmo.
    #[arg(long, default_value_t = 0.5)]
    pub max_stretch: f32,
    /// Lowest semblance (0 to 1) of a pick.
    #[arg(long, default_value_t = 0.3)]
    pub threshold: f32,
    /// Fewest traces (count) a CMP needs to be picked; smaller CMPs take their neighbours' functions.
    #[arg(long, default_value_t = 6)]
    pub min_fold: usize,
    /// Midpoint bin size (m) when the headers have no CDP numbers.
    #[arg(long, default_value_t = 12.5)]
    pub bin: f64,
    /// Also write the semblance panels (.sgy/.segy SEG-Y, .su, or .npy by extension): one trace per
    /// (CMP, velocity), the trial velocity (m/s, rounded) in the offset field, samples = semblance.
    #[arg(long)]
    pub semblance: Option<PathBuf>,
    /// Also write a PNG of each CMP's panel with its picked function into this folder.
    #[arg(long)]
    pub png: Option<PathBuf>,
    /// With --png: plot every N-th CMP only (count).
    #[arg(long, default_value_t = 1)]
    pub png_every: usize,
    /// Also write the gathers NMO-corrected with the picks (.sgy/.segy, .su or .npy, with the input's
    /// trace headers; CMPs without picks use their neighbours' functions).
    #[arg(long)]
    pub nmo: Option<PathBuf>,
}

pub fn run(a: &Args, global: &Global) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&a.threshold) {
        seisgpu_host::bail_param!("threshold", "--threshold {} must be between 0 and 1", a.threshold);
    }
    if a.png_every == 0 {
        seisgpu_host::bail_param!("png-every", "--png-every must be at least 1");
    }
    if !(a.nv >= 2 && a.nv <= 10_000) {
        seisgpu_host::bail_param!("nv", "--nv {} must be between 2 and 10000 trial velocities", a.nv);
    }
    if !(a.window > 0.0 && a.window.is_finite()) {
        seisgpu_host::bail_param!("window", "--window {} ms must be positive", a.window);
    }
    // Every output path checked before the scan.
    seisgpu_host::io::output::check_writable(&a.out)?;
    for path in [&a.semblance, &a.nmo].into_iter().flatten() {
        global.prepare_output(path)?;
    }
    if let Some(dir) = &a.png {
        seisgpu_host::io::output::prepare_dir(dir)?;
    }
    let (_, traces) = a.read.read(&a.input)?;
    let p = VelanParams { vmin: a.vmin, vmax: a.vmax, nv: a.nv as usize, window: a.window * 1e-3, eta: a.eta, max_stretch: a.max_stretch };
    p.validate(traces.dt)?;
    let backend = global.backend()?;
    let g = Gathers::new(&traces, a.bin).with_context(|| format!("grouping the traces of {}", a.input.display()))?;
    let scan = Scan::new(&p, &g)?;
    // Picks need --min-fold traces in a CMP: say so before the scan rather than after it.
    let largest = (0..g.len()).map(|i| g.traces(i).len()).max().unwrap_or(0);
    if largest < a.min_fold {
        seisgpu_host::bail_param!("min-fold", "{}: the fullest of its {} CMPs has {largest} traces, fewer than --min-fold {}: no CMP can be picked; \
            lower --min-fold, or check the CMP grouping (CDP numbers in bytes 21-24, else midpoints in --bin {} m bins)",
            a.input.display(), g.len(), a.min_fold, a.bin);
    }
    let t = Instant::now();
    let panels = velan::semblance(&backend, &g, &p)?;
    let scan_s = t.elapsed().as_secs_f64();
    let picks = pick::pick_all(&g, &panels, &scan, a.threshold, a.min_fold);
    let funcs = pick::functions(&g, &picks, &a.out.display().to_string());
    let model = funcs.clone().map(VelocityModel::PerCmp);
    let functions: Vec<Option<VelocityFunction>> = g.location.iter().map(|l| model.as_ref().map(|m| m.function_at(l))).collect();

    if let Some(path) = &a.semblance {
        write_panels(path, &g, &panels, &scan)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(dir) = &a.png {
        for i in (0..g.len()).step_by(a.png_every) {
            let name = match g.location[i].cdp {
                Some(c) => format!("cdp-{c}.png"),
                None => format!("cmp-{:05}.png", i + 1),
            };
            plot_panel(&dir.join(name), &g, &panels, &scan, i, &picks[i], functions[i].as_ref())?;
        }
        eprintln!("wrote {} PNG panels into {}", g.len().div_ceil(a.png_every), dir.display());
    }
    let Some(funcs) = funcs else {
        // The highest semblance of the CMPs that could be picked (a CMP of one trace is coherent by itself).
        let highest = (0..g.len()).filter(|&i| g.traces(i).len() >= a.min_fold)
            .flat_map(|i| panels.panel(i).iter().copied()).fold(0.0f32, f32::max);
        seisgpu_host::bail_param!("threshold", "no CMP of at least --min-fold {} traces has a semblance peak of at least --threshold {} (highest {highest:.3}); lower it or check --vmin/--vmax",
            a.min_fold, a.threshold);
    };
    let missing: Vec<String> = (0..g.len()).filter(|&i| picks[i].is_empty()).map(|i| match g.location[i].cdp {
        Some(c) => format!("cdp {c}"),
        None => format!("CMP at x={:.1} y={:.1}", g.location[i].x, g.location[i].y),
    }).collect();
    let mut notes = vec![
        format!("seisgpu velan {}: {} CMPs, {} velocities {}..{} m/s, window {} ms, eta {}, stretch mute {}, threshold {}, min fold {}",
            a.input.display(), g.len(), p.nv, p.vmin, p.vmax, a.window, p.eta, p.max_stretch, a.threshold, a.min_fold),
        "picks: semblance maxima in time, refined in velocity, accepted strongest first while Dix interval velocities stay plausible".into(),
    ];
    if !missing.is_empty() {
        notes.push(format!("no pick above the threshold (neighbours' functions apply): {}", missing.join(", ")));
    }
    text::write(&a.out, &funcs, &notes)?;
    if let Some(path) = &a.nmo {
        let vrms: Vec<Vec<f32>> = functions.iter().map(|f| f.as_ref().map_or_else(Vec::new, |f| f.sample(g.t_first, g.dt, g.ns))).collect();
        let out = velan::nmo_gathers(&traces, &g, &vrms, p.max_stretch);
        seisgpu_host::io::output::write_traces(path, &out, "seisgpu velan: gathers NMO-corrected with the picked v_rms")?;
        eprintln!("wrote {}", path.display());
    }
    let npicks: usize = picks.iter().map(Vec::len).sum();
    println!("velan: {} CMPs ({} traces) on {} in {scan_s:.3} s; {npicks} picks, {} CMPs without; wrote {}", g.len(), traces.len(),
        backend.name(), missing.len(), a.out.display());
    Ok(())
}

/// The panels as SEG-Y: one trace per (CMP, velocity).
fn write_panels(path: &Path, g: &Gathers, panels: &Panels, scan: &Scan) -> anyhow::Result<()> {
    let (nv, ns) = (panels.nv, panels.ns);
    let mut headers = Vec::with_capacity(g.len() * nv);
    for loc in &g.location {
        for (j, &v) in scan.velocities.iter().enumerate() {
            headers.push(TraceHeader { sx: loc.x, sy: loc.y, gx: loc.x, gy: loc.y, offset: v.round() as f64, cdp: loc.cdp.unwrap_or(0),
                channel: j as i32 + 1, receiver_station: j as i32 + 1, ..Default::default() });
        }
    }
    let set = TraceSet { headers, data: panels.values.clone().into(), ns, dt: g.dt, t0: g.t_first };
    let what = format!("seisgpu velan semblance panels: one trace per (CMP, trial velocity), offset field = velocity (m/s), \
        {nv} velocities {}..{} m/s", scan.velocities[0], scan.velocities[nv - 1]);
    seisgpu_host::io::output::write_traces(path, &set, &what)?;
    Ok(())
}

/// One CMP's panel (velocity across, time down) with the picked function drawn over it (blue line,
/// picks as blue squares).
fn plot_panel(path: &Path, g: &Gathers, panels: &Panels, scan: &Scan, i: usize, picks: &[pick::Pick], f: Option<&VelocityFunction>)
    -> anyhow::Result<()> {
    let (nv, ns) = (panels.nv, panels.ns);
    let mut data = panels.panel(i).to_vec();
    let (v0, dv) = (scan.velocities[0], scan.velocities[1] - scan.velocities[0]);
    let col = |v: f32| ((v - v0) / dv).round();
    let mut mark = |j: f32, k: usize| {
        if j >= 0.0 && (j as usize) < nv && k < ns {
            data[j as usize * ns + k] = -1.0;
        }
    };
    if let Some(f) = f {
        for k in 0..ns {
            mark(col(f.at(g.t_first + k as f32 * g.dt)), k);
        }
    }
    for p in picks {
        let k = ((p.t - g.t_first) / g.dt).round() as i64;
        for dk in -3..=3i64 {
            for dj in -1..=1 {
                if k + dk >= 0 {
                    mark(col(p.v) + dj as f32, (k + dk) as usize);
                }
            }
        }
    }
    let title = match g.location[i].cdp {
        Some(c) => format!("semblance, CDP {c}{}", if picks.is_empty() { " (no picks)" } else { "" }),
        None => format!("semblance, CMP at x={:.0} m{}", g.location[i].x, if picks.is_empty() { " (no picks)" } else { "" }),
    };
    // Semblance red, the picks (-1) blue: the signed map keeps them apart.
    let axes = Axes::time_s(g.t_first as f64, g.dt as f64).traces(v0 as f64, dv as f64, "velocity (m/s)");
    let look = Look { colormap: Some(Colormap::Seismic), ..Default::default() };
    render_png(path, &data, nv, ns, &title, &axes, &look)
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn path(&self) -> String { "velan".to_string() }
}
