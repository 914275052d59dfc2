//! Impulse responses of the operator and their comparison with exact phase-shift extrapolation
//! (`seisgpu extrapolate`, the accuracy test): the response to a unit impulse is the operator's
//! kernel, whose 2D FFT is G(x(kx, ky)) as long as the kernel (radius 4 N nodes per step) fits in
//! the grid.

use num_complex::Complex32;
use rustfft::FftPlanner;

use super::cpu;
use super::design::Operator;
use super::Taper;

/// `steps` depth steps of a unit impulse at node (nx/2, ny/2) in constant velocity `v` (m/s) at
/// frequency `freq` (Hz), without edge taper: interleaved complex plane, nx * ny.
pub fn impulse_response(op: &Operator, nx: usize, ny: usize, v: f64, freq: f64, steps: usize) -> Vec<f32> {
    let mut plane = vec![0.0f32; 2 * nx * ny];
    plane[2 * ((ny / 2) * nx + nx / 2)] = 1.0;
    let slow = vec![(1.0 / v) as f32; nx * ny];
    let map = op.row_map(2.0 * std::f64::consts::PI * freq);
    let taper = Taper::none(nx, ny);
    for _ in 0..steps {
        cpu::step_planes(op, &[map], &slow, &taper, nx, ny, &mut plane);
    }
    plane
}

/// 2D FFT (forward) of an interleaved complex plane, rows (x) then columns (y).
pub fn fft2(plane: &[f32], nx: usize, ny: usize) -> Vec<Complex32> {
    let mut c: Vec<Complex32> = plane.chunks(2).map(|v| Complex32::new(v[0], v[1])).collect();
    let mut planner = FftPlanner::<f32>::new();
    let fx = planner.plan_fft_forward(nx);
    for row in c.chunks_mut(nx) {
        fx.process(row);
    }
    let fy = planner.plan_fft_forward(ny);
    let mut col = vec![Complex32::new(0.0, 0.0); ny];
    for x in 0..nx {
        for y in 0..ny {
            col[y] = c[y * nx + x];
        }
        fy.process(&mut col);
        for y in 0..ny {
            c[y * nx + x] = col[y];
        }
    }
    c
}

/// Errors of an impulse response against exp(i steps kz dz) at the grid's wavenumbers whose
/// propagation angle is at most `angle_deg`.
#[derive(Debug, Clone, Copy)]
pub struct ResponseError {
    /// max | |G| - |exact| |
    pub amplitude: f64,
    /// max |arg(G / exact)| (radians)
    pub phase: f64,
    /// max |G - exact|
    pub total: f64,
    /// Wavenumbers compared.
    pub count: usize,
}

#[allow(clippy::too_many_arguments)]
pub fn compare_with_phase_shift(plane: &[f32], nx: usize, ny: usize, dx: f64, dy: f64, dz: f64, v: f64, freq: f64,
    steps: usize, angle_deg: f64) -> ResponseError {
    let spec = fft2(plane, nx, ny);
    let k = 2.0 * std::f64::consts::PI * freq / v;
    let kmax = k * angle_deg.to_radians().sin();
    let tau = 2.0 * std::f64::consts::PI;
    let (mut amp, mut ph, mut tot, mut count) = (0.0f64, 0.0f64, 0.0f64, 0usize);
    for iy in 0..ny {
        let ky = tau * (if iy <= ny / 2 { iy as f64 } else { iy as f64 - ny as f64 }) / (ny as f64 * dy);
        let ky = if ny == 1 { 0.0 } else { ky };
        for ix in 0..nx {
            let kx = tau * (if ix <= nx / 2 { ix as f64 } else { ix as f64 - nx as f64 }) / (nx as f64 * dx);
            let kh = (kx * kx + ky * ky).sqrt();
            if kh > kmax {
                continue;
            }
            // The impulse sits at (nx/2, ny/2): undo its linear phase.
            let shift = tau * ((ix * (nx / 2)) as f64 / nx as f64 + (iy * (ny / 2)) as f64 / ny as f64);
            let s = spec[iy * nx + ix];
            let g = num_complex::Complex64::new(s.re as f64, s.im as f64) * num_complex::Complex64::from_polar(1.0, shift);
            let e = num_complex::Complex64::from_polar(1.0, steps as f64 * dz * (k * k - kh * kh).sqrt());
            amp = amp.max((g.norm() - 1.0).abs());
            ph = ph.max((g * e.conj()).arg().abs());
            tot = tot.max((g - e).norm());
            count += 1;
        }
    }
    ResponseError { amplitude: amp, phase: ph, total: tot, count }
}
