//! The RMS velocity model on the image grid: v_rms(tau) or a v_rms(x, y, tau) volume interpolated
//! once, host side, with the checks that it covers the image.

use rayon::prelude::*;

use super::{ImageGrid, Velocity};

/// RMS velocity at every image time (v_rms(tau): `ntau` values) or image sample (volume).
/// Errors when the model does not cover the image or holds a non-positive value.
pub fn velocity_on_grid(vel: &Velocity, grid: &ImageGrid) -> anyhow::Result<Vec<f32>> {
    let (tau_first, tau_last) = (grid.tau0, grid.tau_last());
    let check_v = |v: &[f32], what: &str| -> anyhow::Result<()> {
        if let Some(i) = v.iter().position(|&x| x.is_nan() || x <= 0.0 || x.is_infinite()) {
            crate::bail_param!("velocity", "velocity model: {what} value {i} is {} m/s; RMS velocities must be positive and finite", v[i]);
        }
        Ok(())
    };
    let covers = |t0: f32, dt: f32, n: usize, what: &str| -> anyhow::Result<()> {
        let last = t0 + (n.max(1) - 1) as f32 * dt;
        let eps = 1e-4 * grid.dtau;
        crate::ensure_param!(t0 <= tau_first + eps && last >= tau_last - eps, "velocity",
            "velocity model does not cover the image: {what} spans {t0}..{last} s, the image {tau_first}..{tau_last} s");
        Ok(())
    };
    match vel {
        Velocity::Constant(v) => {
            check_v(&[*v], "the constant")?;
            Ok(vec![*v; grid.ntau])
        }
        Velocity::Function { t0, dt, v } => {
            crate::ensure_param!(!v.is_empty(), "velocity", "velocity model: v_rms(tau) has no samples");
            crate::ensure_param!(*dt > 0.0 || v.len() == 1, "velocity", "velocity model: time step {dt} s must be positive");
            check_v(v, "v_rms(tau)")?;
            covers(*t0, *dt, v.len(), "v_rms(tau)")?;
            Ok((0..grid.ntau).map(|it| interp1(v, *t0, *dt, grid.tau(it))).collect())
        }
        Velocity::Volume(vol) => {
            crate::ensure_param!(vol.nx >= 1 && vol.ny >= 1 && vol.nt >= 1 && vol.v.len() == vol.nx * vol.ny * vol.nt, "velocity",
                "velocity volume: {} values for {} x {} x {} samples", vol.v.len(), vol.nx, vol.ny, vol.nt);
            crate::ensure_param!(vol.dt > 0.0 || vol.nt == 1, "velocity", "velocity volume: time step {} s must be positive", vol.dt);
            check_v(&vol.v, "volume")?;
            covers(vol.t0, vol.dt, vol.nt, "the velocity volume")?;
            let axis = |o: f64, d: f64, n: usize, lo: f64, hi: f64, name: &str| -> anyhow::Result<()> {
                let tol = 1e-3;
                if n == 1 {
                    crate::ensure_param!((lo - o).abs() <= tol && (hi - o).abs() <= tol, "velocity",
                        "velocity model does not cover the image: one {name} position {o} m, the image spans {lo}..{hi} m");
                } else {
                    crate::ensure_param!(d > 0.0, "velocity", "velocity volume: {name} spacing {d} m must be positive");
                    let last = o + (n - 1) as f64 * d;
                    crate::ensure_param!(o <= lo + tol && last >= hi - tol, "velocity",
                        "velocity model does not cover the image: {name} spans {o}..{last} m, the image {lo}..{hi} m");
                }
                Ok(())
            };
            axis(vol.x0, vol.dx, vol.nx, grid.x0, grid.x(grid.nx - 1), "inline x")?;
            axis(vol.y0, vol.dy, vol.ny, grid.y0, grid.y(grid.ny - 1), "crossline y")?;
            let mut out = vec![0.0f32; grid.len()];
            out.par_chunks_mut(grid.ntau).enumerate().for_each(|(col, column)| {
                let (ix, iy) = (col / grid.ny, col % grid.ny);
                let (fx, ix0) = frac_index(grid.x(ix), vol.x0, vol.dx, vol.nx);
                let (fy, iy0) = frac_index(grid.y(iy), vol.y0, vol.dy, vol.ny);
                let ix1 = (ix0 + 1).min(vol.nx - 1);
                let iy1 = (iy0 + 1).min(vol.ny - 1);
                let tr = |a: usize, b: usize| &vol.v[(a * vol.ny + b) * vol.nt..(a * vol.ny + b + 1) * vol.nt];
                let (v00, v01, v10, v11) = (tr(ix0, iy0), tr(ix0, iy1), tr(ix1, iy0), tr(ix1, iy1));
                for (it, out) in column.iter_mut().enumerate() {
                    let t = grid.tau(it);
                    let g = |v: &[f32]| interp1(v, vol.t0, vol.dt, t) as f64;
                    let v = (1.0 - fx) * ((1.0 - fy) * g(v00) + fy * g(v01)) + fx * ((1.0 - fy) * g(v10) + fy * g(v11));
                    *out = v as f32;
                }
            });
            Ok(out)
        }
    }
}

/// Fractional position of `x` on an axis (clamped into it): (fraction, lower index).
fn frac_index(x: f64, o: f64, d: f64, n: usize) -> (f64, usize) {
    if n == 1 {
        return (0.0, 0);
    }
    let p = ((x - o) / d).clamp(0.0, (n - 1) as f64);
    let i = (p.floor() as usize).min(n - 2);
    (p - i as f64, i)
}

/// Linear interpolation of `v` (sampled at `t0 + i dt`) at `t`, clamped at the ends.
fn interp1(v: &[f32], t0: f32, dt: f32, t: f32) -> f32 {
    if v.len() == 1 {
        return v[0];
    }
    let (f, i) = frac_index(t as f64, t0 as f64, dt as f64, v.len());
    ((1.0 - f) * v[i] as f64 + f * v[i + 1] as f64) as f32
}
