"""Every function on the GPU against the CPU reference (skipped without a GPU)."""

import numpy as np
import pytest

import seisgpu
from seisgpu import nlbf, pstm, srm, wavepacket

from conftest import survey


def close(a, b, rel=1e-4):
    np.testing.assert_allclose(a, b, rtol=0, atol=rel * max(np.abs(b).max(), 1e-30))


def test_pstm_on_gpu(gpu):
    data, geom = survey(n=80, ns=120, seed=50)
    kw = dict(nx=8, ny=4, dx=25, dy=25, x0=0, y0=0, velocity=1800)
    for traveltime in ("exact", "static8"):
        cpu = pstm.migrate(data, 0.004, **geom, **kw, traveltime=traveltime, device="cpu").data
        close(pstm.migrate(data, 0.004, **geom, **kw, traveltime=traveltime, device="gpu").data, cpu)


def test_nmo_and_velan_on_gpu(gpu):
    rng = np.random.default_rng(51)
    offset = np.tile(np.arange(12) * 50.0, 4)
    cdp = np.repeat(np.arange(1, 5), 12)
    t = np.arange(200) * 0.004
    tt = np.sqrt(0.4**2 + (offset / 2000.0) ** 2)
    data = (np.exp(-(((t[None, :] - tt[:, None]) / 0.01) ** 2)) + 0.01 * rng.standard_normal((48, 200))).astype(np.float32)
    kw = dict(offset=offset, cdp=cdp)
    close(seisgpu.nmo(data, 0.004, **kw, velocity=2000, device="gpu"), seisgpu.nmo(data, 0.004, **kw, velocity=2000, device="cpu"))
    g = seisgpu.velan(data, 0.004, **kw, min_fold=4, device="gpu")
    c = seisgpu.velan(data, 0.004, **kw, min_fold=4, device="cpu")
    close(g.semblance, c.semblance, 1e-3)


def test_wavepacket_on_gpu(gpu):
    v = np.random.default_rng(52).standard_normal((20, 18, 40)).astype(np.float32)
    cpu = wavepacket.compress(v, cube=32, overlap=8, device="cpu").volume
    close(wavepacket.compress(v, cube=32, overlap=8, device="gpu").volume, cpu, 1e-3)
    c = wavepacket.forward(v, cube=32, overlap=8, device="gpu")
    close(wavepacket.inverse(c, device="gpu"), v, 1e-3)


def test_srm_on_gpu(gpu):
    from test_srm import shots

    data, dt, g = shots()
    kw = dict(velocity=2000, dx=20, dy=20, dz=10, nz=40, aperture=100, fmax=30, degree=10)
    close(srm.migrate(data, dt, **g, **kw, device="gpu").data, srm.migrate(data, dt, **g, **kw, device="cpu").data, 1e-3)


def test_nlbf_on_gpu(gpu):
    rng = np.random.default_rng(53)
    gx = np.tile(np.arange(24) * 25.0, 6)
    sx = np.repeat(np.arange(6) * 200.0, 24)
    t = np.arange(150) * 0.004
    tt = 0.2 + np.abs(gx - sx) / 3000.0
    data = (np.exp(-(((t[None, :] - tt[:, None]) / 0.012) ** 2)) + 0.05 * rng.standard_normal((144, 150))).astype(np.float32)
    kw = dict(sx=sx, gx=gx, aperture_ad="400x450", aperture_be=(100, 450), aperture_c=(400, 450), spacing_x=50, spacing_y=200,
              a="-6e-4:4e-5:6e-4", b=(-3e-4, 6e-5, 3e-4), c=0, d=0, e=0)
    cpu = nlbf.enhance(data, 0.004, **kw, device="cpu")
    on_gpu = nlbf.enhance(data, 0.004, **kw, device="gpu")
    close(on_gpu.S, cpu.S, 1e-3)
    close(on_gpu.enhanced, cpu.enhanced, 1e-3)


def test_gpu_arrays_are_accepted(gpu):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the GPU-array input is not tested")
    data, geom = survey(n=40, ns=100, seed=54)
    grid = dict(x0=0, dx=25, nx=9, y0=0, dy=25, ny=5, tau0=0, dtau=0.004, ntau=100)
    want = seisgpu.ktm.migrate(data, 0.004, **geom, **grid, device="gpu").data
    got = seisgpu.ktm.migrate(cupy.asarray(data), 0.004, **{k: cupy.asarray(v) for k, v in geom.items()}, **grid, device="gpu").data
    np.testing.assert_array_equal(got, want)


def test_several_gpus(gpu):
    note = seisgpu.devices("gpu", gpus="all")
    count = int(note.split()[0])
    if count < 2:
        print(f"SKIPPED: one GPU only ({note})")
        pytest.skip(f"one GPU only: {note}")
    data, geom = survey(n=200, ns=100, seed=55)
    grid = dict(x0=0, dx=25, nx=9, y0=0, dy=25, ny=5, tau0=0, dtau=0.004, ntau=100)
    one = seisgpu.ktm.migrate(data, 0.004, **geom, **grid, device="gpu").data
    two = seisgpu.ktm.migrate(data, 0.004, **geom, **grid, device="gpu", gpus=2)
    assert two.device.startswith("2 GPU")
    close(two.data, one)
    v = np.random.default_rng(56).standard_normal((40, 36, 40)).astype(np.float32)
    close(wavepacket.compress(v, cube=32, overlap=8, device="gpu", gpus=2).volume,
          wavepacket.compress(v, cube=32, overlap=8, device="gpu").volume, 1e-3)
