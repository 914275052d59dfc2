"""Least-squares Kirchhoff migration of a synthetic point diffractor against plain migration.

A 2-D line of shots over one point diffractor (25 Hz Ricker, v = 2000 m/s). Plain migration
(the adjoint, seisgpu.ktm.migrate) blurs the point over the migration operator's footprint
(the aperture's smile tails and the wavelet); least-squares migration (PyLops' CGLS on the
seisgpu.pylops.Kirchhoff operator) inverts the modelling and focuses it. The PNG shows both
images and the lateral and vertical amplitude profiles through the diffractor.

    python examples/lsm_diffractor.py [out.png] [--device cpu|gpu|auto] [--iterations N]
"""

import argparse
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pylops  # noqa: E402

import seisgpu  # noqa: E402
from seisgpu.pylops import Kirchhoff  # noqa: E402


def ricker(t, f):
    a = (np.pi * f * t) ** 2
    return (1 - 2 * a) * np.exp(-a)


def diffractor_data(sx, gx, ns, dt, xd, tau_d, v, f):
    """Traces of a point diffractor at (xd, two-way time tau_d): a Ricker wavelet along the
    double-square-root traveltime, amplitude falling as 1 / sqrt(path)."""
    half = 0.5 * tau_d
    ts = np.sqrt(half**2 + ((sx - xd) / v) ** 2)
    tg = np.sqrt(half**2 + ((gx - xd) / v) ** 2)
    t = np.arange(ns) * dt
    tt = (ts + tg)[:, None]
    return (ricker(t[None, :] - tt, f) / np.sqrt((ts * tg)[:, None] / half**2)).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="lsm_diffractor.png", help="PNG to write")
    ap.add_argument("--device", default="auto", help="auto, gpu or cpu")
    ap.add_argument("--iterations", type=int, default=30, help="CGLS iterations (count)")
    a = ap.parse_args()

    v, dt, ns, f = 2000.0, 0.004, 200, 25.0
    xd, tau_d = 300.0, 0.4
    shots = np.arange(0.0, 601.0, 60.0)
    receivers = np.arange(0.0, 601.0, 10.0)
    sx = np.repeat(shots, receivers.size)
    gx = np.tile(receivers, shots.size)
    data = diffractor_data(sx, gx, ns, dt, xd, tau_d, v, f)

    op = Kirchhoff(sx, gx, ns, dt, x0=0.0, dx=10.0, nx=61, y0=0.0, dy=10.0, ny=1, tau0=0.0, dtau=dt, ntau=ns,
                   velocity=v, device=a.device)
    print(f"{data.shape[0]} traces of {ns} samples; image {op.dims}; running on {seisgpu.devices(a.device)}")

    t = time.perf_counter()
    mig = (op.H @ data.ravel()).reshape(op.dims)[:, 0, :]
    t_mig = time.perf_counter() - t
    t = time.perf_counter()
    m_ls = pylops.optimization.basic.cgls(op, data.ravel(), x0=np.zeros(op.shape[1], np.float32), niter=a.iterations,
                                          show=False)[0]
    t_ls = time.perf_counter() - t
    lsm = m_ls.reshape(op.dims)[:, 0, :]

    def residual(m):
        d = op @ m.ravel()
        scale = np.vdot(d, data.ravel()) / np.vdot(d, d)
        return np.linalg.norm(data.ravel() - scale * d) / np.linalg.norm(data)

    ix, it = int(round(xd / 10.0)), int(round(tau_d / dt))

    def width(profile, spacing):
        """Width of the main lobe at half its peak amplitude (m or s)."""
        p = np.abs(profile) / np.abs(profile).max()
        k = int(np.argmax(p))
        lo, hi = k, k
        while lo > 0 and p[lo - 1] >= 0.5:
            lo -= 1
        while hi < p.size - 1 and p[hi + 1] >= 0.5:
            hi += 1
        return (hi - lo + 1) * spacing

    w_mig, w_lsm = width(mig[:, it], 10.0), width(lsm[:, it], 10.0)
    r_mig, r_lsm = residual(mig[:, None, :]), residual(lsm[:, None, :])
    print(f"migration: {t_mig:.2f} s, lateral half-amplitude width {w_mig:.0f} m, relative residual {r_mig:.3f}")
    print(f"LSM ({a.iterations} CGLS iterations): {t_ls:.2f} s, width {w_lsm:.0f} m, relative residual {r_lsm:.3f}")

    x, tau = op.x, op.tau
    fig, axs = plt.subplots(1, 4, figsize=(17, 5), gridspec_kw=dict(width_ratios=[1, 1, 1, 1]))
    ext = [x[0], x[-1], tau[-1], tau[0]]
    for ax, img, title in ((axs[0], mig, f"migration (adjoint)\nresidual {r_mig:.2f}"),
                           (axs[1], lsm, f"least-squares migration, {a.iterations} CGLS\nresidual {r_lsm:.2f}")):
        c = np.abs(img).max()
        ax.imshow(img.T, aspect="auto", cmap="gray_r", vmin=-c, vmax=c, extent=ext)
        ax.set_title(title)
        ax.set_xlabel("x (m)")
        ax.set_ylabel("two-way time tau (s)")
    axs[2].plot(x, mig[:, it] / np.abs(mig[:, it]).max(), label=f"migration ({w_mig:.0f} m)")
    axs[2].plot(x, lsm[:, it] / np.abs(lsm[:, it]).max(), label=f"LSM ({w_lsm:.0f} m)")
    axs[2].set_title(f"lateral profile at tau = {tau_d} s\n(half-amplitude width)")
    axs[2].set_xlabel("x (m)")
    axs[2].set_ylabel("normalised amplitude")
    axs[2].legend()
    axs[3].plot(mig[ix] / np.abs(mig[ix]).max(), tau, label="migration")
    axs[3].plot(lsm[ix] / np.abs(lsm[ix]).max(), tau, label="LSM")
    axs[3].set_ylim(tau_d + 0.12, tau_d - 0.12)
    axs[3].set_title(f"vertical profile at x = {xd:.0f} m")
    axs[3].set_xlabel("normalised amplitude")
    axs[3].set_ylabel("two-way time tau (s)")
    axs[3].legend()
    fig.suptitle("seisgpu: Kirchhoff migration vs least-squares migration of a point diffractor (PyLops CGLS)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=90)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
