//! A [`VelocityModel`] resolved onto what each migration takes: `ktm`'s [`ktm::Velocity`] on its
//! image grid, `pstm`'s v_rms per image sample and `srm`'s interval-velocity grid.

use anyhow::Result;

use super::{Domain, Location, VelocityModel};
use crate::{ktm, srm};

/// `ktm`'s velocity on the image grid `g`: a constant stays a constant; t:v pairs at equal
/// spacing that cover the image are passed as they are (the numbers of the `t:v` list), other
/// pairs are sampled on the image times; per-CMP functions and grids are sampled on every image
/// column (a laterally varying v_rms(x, y, tau)).
pub fn ktm_velocity(model: &VelocityModel, g: &ktm::ImageGrid, what: &str) -> Result<ktm::Velocity> {
    model.expect_domain(Domain::Time, what)?;
    let tau_last = g.tau_last();
    match model {
        VelocityModel::Function(f) if f.knots.len() == 1 => Ok(ktm::Velocity::Constant(f.knots[0].1)),
        VelocityModel::Function(f) => {
            let k = &f.knots;
            let dt = k[1].0 - k[0].0;
            let even = k.windows(2).all(|w| ((w[1].0 - w[0].0) - dt).abs() <= 1e-4 * dt.abs().max(1e-6));
            let eps = 1e-4 * g.dtau;
            if even && k[0].0 <= g.tau0 + eps && k[k.len() - 1].0 >= tau_last - eps {
                return Ok(ktm::Velocity::Function { t0: k[0].0, dt, v: k.iter().map(|p| p.1).collect() });
            }
            Ok(ktm::Velocity::Function { t0: g.tau0, dt: g.dtau, v: f.sample(g.tau0, g.dtau, g.ntau) })
        }
        _ => {
            let mut v = Vec::with_capacity(g.len());
            for ix in 0..g.nx {
                for iy in 0..g.ny {
                    v.extend(model.sample_at(&Location::at(g.x(ix), g.y(iy)), g.tau0, g.dtau, g.ntau));
                }
            }
            Ok(ktm::Velocity::Volume(ktm::VelocityVolume { x0: g.x0, dx: g.dx, nx: g.nx, y0: g.y0, dy: g.dy, ny: g.ny, t0: g.tau0,
                dt: g.dtau, nt: g.ntau, v }))
        }
    }
}

/// `pstm`'s v_rms per image sample ([`crate::pstm::PstmParams::vrms`]) on the image grid `g`:
/// `g.ntau` values (image times) for a model that is the same everywhere, else `nx*ny*ntau`
/// values, the model's function at every image column (column `ix*ny + iy`, time fastest).
pub fn pstm_vrms(model: &VelocityModel, g: &ktm::ImageGrid, what: &str) -> Result<Vec<f32>> {
    model.expect_domain(Domain::Time, what)?;
    if let VelocityModel::Function(f) = model {
        return Ok(f.sample(g.tau0, g.dtau, g.ntau));
    }
    let mut v = Vec::with_capacity(g.nx * g.ny * g.ntau);
    for ix in 0..g.nx {
        for iy in 0..g.ny {
            v.extend(model.sample_at(&Location::at(g.x(ix), g.y(iy)), g.tau0, g.dtau, g.ntau));
        }
    }
    Ok(v)
}

/// `srm`'s interval-velocity grid: `nx` x `ny` nodes from `(x0, y0)` at `(dx, dy)`, `nz` depths
/// from 0 at `dz`, sampled from a depth-domain model (v(z), per-CMP v(z) or a v(x, y, z) grid).
#[allow(clippy::too_many_arguments)]
pub fn srm_model(model: &VelocityModel, nx: usize, ny: usize, nz: usize, dx: f64, dy: f64, dz: f64, x0: f64, y0: f64, what: &str)
    -> Result<srm::VelocityModel> {
    if model.domain() != Domain::Depth {
        crate::bail_param!("velocity", "{what}: srm needs interval velocity in depth (`depth:0:1500,1000:2500`, or a depth model file); this one is in time");
    }
    if nx == 0 || ny == 0 || nz < 2 {
        crate::bail_param!("nz", "{what}: a velocity grid of {nx} x {ny} x {nz} nodes (x, y, depth): at least 1 x 1 x 2 are needed");
    }
    // Coordinates in the wrong unit would ask for an absurd grid: an error, not an abort.
    let len = nx.checked_mul(ny).and_then(|n| n.checked_mul(nz)).filter(|&n| n <= 1 << 31);
    let Some(len) = len else {
        crate::bail_param!("dx", "{what}: a velocity grid of {nx} x {ny} x {nz} nodes (x, y, depth) is too large; check the traces' coordinates, --dx, --dy and --aperture");
    };
    let mut v = vec![0f32; len];
    for iy in 0..ny {
        for ix in 0..nx {
            let col = model.sample_at(&Location::at(x0 + ix as f64 * dx, y0 + iy as f64 * dy), 0.0, dz as f32, nz);
            for (iz, &c) in col.iter().enumerate() {
                v[(iz * ny + iy) * nx + ix] = c;
            }
        }
    }
    let m = srm::VelocityModel { v, nx, ny, nz, dx, dy, dz, x0, y0 };
    m.validate().map_err(|e| crate::Error::parameter("velocity", format!("{what}: {e}")))?;
    Ok(m)
}

/// The deepest abscissa of the model's knots (m for a depth model): how deep a model given as
/// functions reaches.
pub fn deepest(model: &VelocityModel) -> f64 {
    match model {
        VelocityModel::Function(f) => f.knots.last().map_or(0.0, |k| k.0 as f64),
        VelocityModel::PerCmp(c) => c.functions.iter().filter_map(|f| f.function.knots.last()).map(|k| k.0 as f64).fold(0.0, f64::max),
        VelocityModel::Grid(g) => g.origin[2] + (g.n[2].saturating_sub(1)) as f64 * g.step[2],
    }
}
