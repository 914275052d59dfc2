"""seisgpu.srm against the CLI (the same numbers)."""

import numpy as np
import pytest

from seisgpu import srm


def shots(seed=40):
    """Two shots of 24 receivers on a 2-D line, a reflection at 300 m depth plus noise."""
    rng = np.random.default_rng(seed)
    sx = np.repeat([100.0, 300.0], 24)
    gx = np.tile(np.arange(24) * 20.0, 2)
    ns, dt = 128, 0.004
    t = np.arange(ns) * dt
    tt = 2 * np.sqrt(300.0**2 + (0.5 * (gx - sx)) ** 2) / 2000.0
    a = (np.pi * 20 * (t[None, :] - tt[:, None])) ** 2
    data = ((1 - 2 * a) * np.exp(-a) + 0.05 * rng.standard_normal((48, ns))).astype(np.float32)
    return data, dt, dict(sx=sx, sy=np.zeros(48), gx=gx, gy=np.zeros(48))


def test_migrate_matches_cli(tmp_path, cli):
    data, dt, g = shots()
    np.save(tmp_path / "t.npy", data)
    np.save(tmp_path / "g.npy", np.stack([g["sx"], g["sy"], g["gx"], g["gy"]], axis=1))
    args = ("--dx", 20, "--dy", 20, "--dz", 10, "--nz", 40, "--aperture", 100, "--fmax", 30, "--degree", 10)
    cli("srm", "--traces", tmp_path / "t.npy", "--geometry", tmp_path / "g.npy", "--dt", 4, "--velocity", "depth:2000", *args,
        "-o", tmp_path / "img.npy")
    img = srm.migrate(data, dt, **g, velocity=2000, dx=20, dy=20, dz=10, nz=40, aperture=100, fmax=30, degree=10, device="cpu")
    want = np.load(tmp_path / "img.npy")
    assert img.data.shape == want.shape
    # The CPU reference's sums vary in the last bit from process to process (1e-7 here, whatever
    # the caller): equal to f32 rounding, not bit for bit.
    np.testing.assert_allclose(img.data, want, rtol=0, atol=1e-5 * np.abs(want).max())
    assert img.z[1] == 10 and img.x[1] - img.x[0] == 20
    # A model grid as it is gives the same image on the same grid.
    grid = np.full(img.data.shape, 2000.0, np.float32)
    same = srm.migrate(data, dt, **g, velocity=grid, dx=20, dy=20, dz=10, x0=img.x[0], y0=img.y[0], aperture=100, fmax=30,
                       degree=10, device="cpu")
    np.testing.assert_allclose(same.data, img.data, rtol=0, atol=1e-5 * np.abs(want).max())


def test_checks():
    data, dt, g = shots()
    with pytest.raises(ValueError, match="filter: unknown filter `best`"):
        srm.migrate(data, dt, **g, velocity=2000, nz=10, filter="best")
    with pytest.raises(ValueError, match="velocity: shape"):
        srm.migrate(data, dt, **g, velocity=np.ones(5), device="cpu")
    with pytest.raises(ValueError, match="reaches no depth"):
        srm.migrate(data, dt, **g, velocity=2000, device="cpu")
