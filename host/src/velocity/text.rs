//! Per-CMP velocity functions as text: what `velan` writes and a person can edit.
//!
//! ```text
//! # seisgpu velocity functions: one CMP per line
//! # units: time s, velocity m/s (RMS), x y m
//! cdp=1200 x=451000 y=6780000 0.000:1500 0.500:1800 1.200:2400
//! cdp=1210 x=451250 y=6780000 0.000:1500 0.520:1820 1.250:2450
//! ```
//!
//! `#` starts a comment; blank lines are skipped. Each line: optional `cdp=N`, `x=M`, `y=M`
//! (at least `cdp` or `x`), then abscissa:velocity pairs, abscissae increasing. A comment line
//! `# units: depth m, ...` makes the abscissae depths (m); otherwise they are two-way times (s).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use super::{Domain, Location, VelocityFunction};
use crate::io::AtomicFile;

/// One CMP's function.
#[derive(Debug, Clone, PartialEq)]
pub struct CmpFunction {
    pub cdp: Option<i32>,
    pub x: f64,
    pub y: f64,
    pub function: VelocityFunction,
}

/// Per-CMP functions and the rule between them (see [`CmpFunctions::function_at`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CmpFunctions {
    pub domain: Domain,
    /// In the order read.
    pub functions: Vec<CmpFunction>,
    /// Where they came from, for messages.
    pub source: String,
}

impl CmpFunctions {
    /// Checks the set: not empty, one domain, no CDP number twice.
    pub fn new(domain: Domain, functions: Vec<CmpFunction>, source: String) -> Result<Self> {
        if functions.is_empty() {
            crate::bail_input!("{source}: no velocity functions");
        }
        let mut cdps: Vec<i32> = functions.iter().filter_map(|f| f.cdp).collect();
        cdps.sort_unstable();
        if let Some(w) = cdps.windows(2).find(|w| w[0] == w[1]) {
            crate::bail_input!("{source}: CDP {} has two velocity functions", w[0]);
        }
        Ok(CmpFunctions { domain, functions, source })
    }

    /// The function at `at`: linear in CDP number between the two functions whose CDPs bracket
    /// `at.cdp` when every function and `at` have CDP numbers; otherwise linear in position along
    /// the line from the first function to the last (positions projected onto it); the nearest
    /// function beyond the ends.
    pub fn function_at(&self, at: &Location) -> VelocityFunction {
        let f = &self.functions;
        if f.len() == 1 {
            return f[0].function.clone();
        }
        let by_cdp = at.cdp.is_some() && f.iter().all(|c| c.cdp.is_some());
        let coord: Vec<f64> = if by_cdp {
            f.iter().map(|c| c.cdp.unwrap_or(0) as f64).collect()
        } else {
            let (a, b) = (&f[0], &f[f.len() - 1]);
            let (dx, dy) = (b.x - a.x, b.y - a.y);
            let len = (dx * dx + dy * dy).sqrt();
            if !(len > 0.0) {
                // All at one place: the nearest (the first).
                return f[0].function.clone();
            }
            f.iter().map(|c| ((c.x - a.x) * dx + (c.y - a.y) * dy) / len).collect()
        };
        let q = if by_cdp {
            at.cdp.unwrap_or(0) as f64
        } else {
            let (a, b) = (&f[0], &f[f.len() - 1]);
            let (dx, dy) = (b.x - a.x, b.y - a.y);
            ((at.x - a.x) * dx + (at.y - a.y) * dy) / (dx * dx + dy * dy).sqrt()
        };
        let mut order: Vec<usize> = (0..f.len()).collect();
        order.sort_by(|&i, &j| coord[i].total_cmp(&coord[j]));
        let j = order.partition_point(|&i| coord[i] < q);
        if j == 0 {
            return f[order[0]].function.clone();
        }
        if j == order.len() {
            return f[order[order.len() - 1]].function.clone();
        }
        let (i0, i1) = (order[j - 1], order[j]);
        let span = coord[i1] - coord[i0];
        let w = if span > 0.0 { ((q - coord[i0]) / span) as f32 } else { 0.0 };
        VelocityFunction::blend(&f[i0].function, &f[i1].function, w)
    }
}

/// Reads a text file of per-CMP functions; `domain` (from the argument's prefix) overrides the
/// file's `# units:` line.
pub fn read(path: &Path, domain: Option<Domain>) -> Result<CmpFunctions> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read velocity file {}", path.display()))?;
    parse(&text, &path.display().to_string(), domain)
}

/// Parses the text of a per-CMP file (`source` names it in errors).
pub fn parse(text: &str, source: &str, domain: Option<Domain>) -> Result<CmpFunctions> {
    let mut file_domain = Domain::Time;
    for line in text.lines() {
        if let Some(c) = line.trim_start().strip_prefix('#')
            && let Some(u) = c.trim_start().strip_prefix("units:")
            && u.trim_start().starts_with("depth")
        {
            file_domain = Domain::Depth;
        }
    }
    let domain = domain.unwrap_or(file_domain);
    let mut functions = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{source}:{}", n + 1);
        let (mut cdp, mut x, mut y) = (None, None, None);
        let mut knots = Vec::new();
        for tok in line.split_whitespace() {
            if let Some((k, v)) = tok.split_once('=') {
                let num = |what: &str| -> Result<f64> {
                    let x: f64 = v.parse().map_err(|_| crate::Error::input(format!("{at}: {what} `{v}` is not a number")))?;
                    if !x.is_finite() {
                        crate::bail_input!("{at}: {what} `{v}` is not finite");
                    }
                    Ok(x)
                };
                match k {
                    "cdp" => cdp = Some(v.parse::<i32>().map_err(|_| crate::Error::input(format!("{at}: cdp `{v}` is not an integer")))?),
                    "x" => x = Some(num("x")?),
                    "y" => y = Some(num("y")?),
                    o => crate::bail_input!("{at}: unknown key `{o}` (expected cdp=, x=, y=)"),
                }
            } else if let Some((t, v)) = tok.split_once(':') {
                let t: f32 = t.parse().map_err(|_| crate::Error::input(format!("{at}: {} `{t}` in `{tok}` is not a number", domain.name())))?;
                let v: f32 = v.parse().map_err(|_| crate::Error::input(format!("{at}: velocity `{v}` in `{tok}` is not a number")))?;
                knots.push((t, v));
            } else {
                crate::bail_input!("{at}: `{tok}` is neither key=value nor {}:velocity", domain.name());
            }
        }
        if cdp.is_none() && x.is_none() {
            crate::bail_input!("{at}: a function needs cdp= or x= (where it applies)");
        }
        let function = VelocityFunction::new(domain, knots, &at)?;
        functions.push(CmpFunction { cdp, x: x.unwrap_or(0.0), y: y.unwrap_or(0.0), function });
    }
    CmpFunctions::new(domain, functions, source.to_string())
}

/// The file's text: a header of `#` comments (units, and `notes`, one per line) and one line per
/// function, times to the millisecond and velocities to 0.1 m/s.
pub fn format(set: &CmpFunctions, notes: &[String]) -> String {
    let mut s = String::new();
    s += "# seisgpu velocity functions: one CMP per line, abscissa:velocity pairs; edit freely\n";
    s += &match set.domain {
        Domain::Time => "# units: time s (two-way), velocity m/s, x y m\n".to_string(),
        Domain::Depth => "# units: depth m, velocity m/s, x y m\n".to_string(),
    };
    for n in notes {
        for l in n.lines() {
            s += &format!("# {l}\n");
        }
    }
    for f in &set.functions {
        if let Some(c) = f.cdp {
            s += &format!("cdp={c} ");
        }
        s += &format!("x={} y={}", f.x, f.y);
        for &(t, v) in &f.function.knots {
            match set.domain {
                Domain::Time => s += &format!(" {t:.3}:{v:.1}"),
                Domain::Depth => s += &format!(" {t:.1}:{v:.1}"),
            }
        }
        s += "\n";
    }
    s
}

/// Writes the functions (temporary file, then renamed).
pub fn write(path: &Path, set: &CmpFunctions, notes: &[String]) -> Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(format(set, notes).as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    f.commit().with_context(|| format!("cannot finish {}", path.display()))?;
    Ok(())
}
