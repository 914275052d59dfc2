//! Amplitude scaling for display: automatic gain control and the clip level where colours (or
//! wiggles) saturate.

/// Where the colour scale saturates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clip {
    /// At this percentile (0, 100] of |amplitude|.
    Percentile(f64),
    /// At this amplitude (after gain).
    Value(f32),
}

impl Default for Clip {
    fn default() -> Self { Clip::Percentile(99.0) }
}

impl Clip {
    /// Checks the percentile is in (0, 100] and the value positive and finite.
    pub fn validate(self) -> anyhow::Result<()> {
        match self {
            Clip::Percentile(p) if !(p > 0.0 && p <= 100.0) => crate::bail_param!("clip-percentile", "clip percentile {p} is outside (0, 100]"),
            Clip::Value(v) if !(v > 0.0 && v.is_finite()) => crate::bail_param!("clip", "clip value {v} must be positive and finite"),
            _ => Ok(()),
        }
    }
    /// The amplitude where the scale saturates for `data`.
    pub fn level(self, data: &[f32]) -> f32 {
        match self {
            Clip::Percentile(p) => clip_level(data, p),
            Clip::Value(v) => v,
        }
    }
    /// A few words for a title: "clip 1.2e-3 (p99)".
    pub fn describe(self, level: f32) -> String {
        match self {
            Clip::Percentile(p) => format!("clip {} (p{p} of |a|)", format_amplitude(level as f64)),
            Clip::Value(_) => format!("clip {}", format_amplitude(level as f64)),
        }
    }
}

/// The |amplitude| at percentile `p` (0..=100), from at most ~1M evenly strided values; the
/// largest |amplitude| where that is 0 (sparse data), and the smallest positive f32 for all zeros.
pub fn clip_level(data: &[f32], p: f64) -> f32 {
    let stride = (data.len() / (1 << 20)).max(1);
    let mut a: Vec<f32> = data.iter().step_by(stride).map(|v| v.abs()).collect();
    if a.is_empty() {
        return 1.0;
    }
    let k = (((p / 100.0) * (a.len() - 1) as f64).round() as usize).min(a.len() - 1);
    let (_, v, _) = a.select_nth_unstable_by(k, |x, y| x.total_cmp(y));
    let v = *v;
    if v > 0.0 { v } else { data.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(f32::MIN_POSITIVE) }
}

/// Automatic gain control: each sample divided by the RMS amplitude of its trace in a centred
/// window of `window` samples (at least 1), so weak late arrivals show as strongly as early ones.
/// `data` is trace-major (`n_samples` per trace). Windows of zeros stay zero.
pub fn agc(data: &mut [f32], n_samples: usize, window: usize) {
    if n_samples == 0 {
        return;
    }
    let half = window.max(1) / 2;
    let mut prefix = vec![0.0f64; n_samples + 1];
    for tr in data.chunks_exact_mut(n_samples) {
        // Running sums of squares in f64: a long trace's sum keeps the precision of its samples.
        for (k, &v) in tr.iter().enumerate() {
            prefix[k + 1] = prefix[k] + (v as f64) * (v as f64);
        }
        let peak = prefix[n_samples];
        for (k, v) in tr.iter_mut().enumerate() {
            let (a, b) = (k.saturating_sub(half), (k + half + 1).min(n_samples));
            let ms = (prefix[b] - prefix[a]) / (b - a) as f64;
            // Windows whose energy is rounding noise of the trace's total are left at zero gain.
            *v = if ms > 1e-30 && ms > peak * 1e-15 { (*v as f64 / ms.sqrt()) as f32 } else { 0.0 };
        }
    }
}

/// Amplitudes for labels: 3 significant digits, exponent form outside 0.01..10^4.
pub fn format_amplitude(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-2..1e4).contains(&a) {
        format!("{v:.2e}")
    } else {
        let digits = (2 - a.log10().floor() as i32).max(0) as usize;
        format!("{v:.digits$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_is_the_99th_percentile() {
        let mut v: Vec<f32> = (0..1000).map(|i| i as f32 / 10.0 - 50.0).collect();
        v[3] = 1e9; // one spike does not set the scale
        let c = clip_level(&v, 99.0);
        assert!((49.0..=50.0).contains(&c), "{c}");
        assert_eq!(clip_level(&[0.0; 10], 99.0), f32::MIN_POSITIVE);
        assert!(Clip::Percentile(0.0).validate().is_err() && Clip::Value(f32::INFINITY).validate().is_err());
        assert_eq!(Clip::Value(2.5).level(&v), 2.5);
    }

    #[test]
    fn agc_levels_a_decaying_sinusoid() {
        // Two traces: a 25 Hz sinusoid at 4 ms decaying by e^-4 over 1 s, and a zero trace.
        let (ns, dt) = (250usize, 0.004f64);
        let mut d: Vec<f32> = (0..ns).map(|k| {
            let t = k as f64 * dt;
            ((-4.0 * t).exp() * (2.0 * std::f64::consts::PI * 25.0 * t).sin()) as f32
        }).collect();
        d.extend(vec![0.0; ns]);
        agc(&mut d, ns, 51);
        // Away from the ends the windowed RMS of a sinusoid is 1/sqrt(2) of its envelope: after AGC
        // every window of a whole period has RMS ~1.
        for start in [30usize, 100, 180] {
            let rms = (d[start..start + 40].iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / 40.0).sqrt();
            assert!((rms - 1.0).abs() < 0.1, "window at {start}: rms {rms}");
        }
        assert!(d[ns..].iter().all(|v| *v == 0.0));
        // A constant trace becomes all ones.
        let mut c = vec![-3.0f32; 20];
        agc(&mut c, 20, 5);
        assert!(c.iter().all(|v| (*v + 1.0).abs() < 1e-6), "{c:?}");
    }

    #[test]
    fn amplitudes_format_with_three_digits() {
        assert_eq!(format_amplitude(0.0), "0");
        assert_eq!(format_amplitude(1.23456), "1.23");
        assert_eq!(format_amplitude(-123.456), "-123");
        assert_eq!(format_amplitude(0.000123), "1.23e-4");
    }
}
