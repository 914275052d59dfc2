"""Every function on the GPU against the CPU reference, and on CuPy arrays against NumPy ones
(skipped without a GPU, and the CuPy tests without CuPy, with the reason printed)."""

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
    # The search picks the largest semblance; where two trial operators tie to float rounding, the
    # GPU and the CPU may pick either (the Rust tests' agreement rule: at least 99.9 % of the picks
    # identical). A differing pick changes that sample's S and enhanced value, nothing else.
    for got, want in ((on_gpu.S, cpu.S), (on_gpu.enhanced, cpu.enhanced)):
        off = np.abs(got - want) > 1e-3 * np.abs(want).max()
        assert off.mean() <= 1e-3, f"{off.sum()} of {off.size} samples differ beyond 1e-3"


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


# --- GPU arrays (CuPy) in and out ------------------------------------------------------------

GRID = dict(x0=0, dx=25, nx=9, y0=0, dy=25, ny=5, tau0=0, dtau=0.004, ntau=100)
# Migration options: the default (rho filter, weights, anti-aliasing), bare, the rho filter without
# anti-aliasing (the plain layout after the FFT), and offset classes (traces reordered, some in none).
KTM_OPTIONS = [{}, dict(no_rho=True, no_weights=True, no_antialias=True), dict(no_antialias=True),
               dict(offset_classes=(0, 100, 2), kernel="columns-v1")]


@pytest.fixture
def cupy(gpu):
    why = "CuPy is not installed: the GPU-array tests are skipped"
    try:
        import cupy
    except ImportError:
        print(f"SKIPPED: {why}")
        pytest.skip(why)
    return cupy


@pytest.fixture
def no_host_copy(monkeypatch):
    """Fails a test whose GPU arrays go through host memory (the zero-copy path must not stage)."""
    from seisgpu import _common

    real = _common.from_gpu

    def guarded(a, name):
        # Headers are copied (they are small); samples must not be.
        if name in _common.HEADER_FIELDS:
            return real(a, name)
        raise AssertionError(f"{name} was copied to the host")

    monkeypatch.setattr(_common, "from_gpu", guarded)


def close_gpu(got, want, rel):
    """``got`` a CuPy array equal to the NumPy ``want`` to ``rel`` of its largest magnitude."""
    import cupy

    assert isinstance(got, cupy.ndarray), type(got)
    assert got.dtype == cupy.float32 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    close(cupy.asnumpy(got), want, rel)


@pytest.mark.parametrize("options", KTM_OPTIONS)
def test_ktm_migrate_on_cupy_arrays(cupy, no_host_copy, options):
    data, geom = survey(n=60, ns=100, seed=54)
    # The GPU path with the traces prepared on the GPU runs the same kernels: equal but for the
    # order of the kernels' atomic adds (1e-5); the host-prepared one differs by rustfft against
    # cuFFT's rounding (1e-4, as GPU against CPU).
    same = seisgpu.ktm.migrate(data, 0.004, **geom, **GRID, **options, prep_on_gpu=True, device="gpu")
    host = seisgpu.ktm.migrate(data, 0.004, **geom, **GRID, **options, device="gpu").data
    got = seisgpu.ktm.migrate(cupy.asarray(data), 0.004, **{k: cupy.asarray(v) for k, v in geom.items()}, **GRID, **options,
                              device="gpu")
    close_gpu(got.data, same.data, 1e-5)
    close_gpu(got.data, host, 1e-4)
    assert got.data.device.id == 0 and got.device.startswith("GPU")
    np.testing.assert_array_equal(got.offsets, same.offsets)
    assert got.skipped_traces == same.skipped_traces and got.grid == same.grid


@pytest.mark.parametrize("options", KTM_OPTIONS)
def test_ktm_model_on_cupy_arrays(cupy, no_host_copy, options):
    _, geom = survey(n=60, ns=100, seed=55)
    classes = options.get("offset_classes", (0, 0, 1))[2]
    m = np.random.default_rng(56).standard_normal((classes, 9, 5, 100)).astype(np.float32)
    want = seisgpu.ktm.model(m, 100, 0.004, **geom, **GRID, **options, device="gpu")
    got = seisgpu.ktm.model(cupy.asarray(m), 100, 0.004, **geom, **GRID, **options, device="gpu")
    close_gpu(got, want, 1e-4)
    if "offset_classes" in options:
        # Traces in no class stay zeros.
        assert (want == 0).all(axis=1).any()
        np.testing.assert_array_equal(cupy.asnumpy((got == 0).all(axis=1)), (want == 0).all(axis=1))


def test_ktm_on_float64_strided_and_dlpack_gpu_arrays(cupy, no_host_copy):
    """Other dtypes and orders are converted on the GPU; a DLPack-only producer is read in place."""
    data, geom = survey(n=40, ns=100, seed=57)
    want = seisgpu.ktm.migrate(data, 0.004, **geom, **GRID, prep_on_gpu=True, device="gpu").data
    d64 = cupy.asfortranarray(cupy.asarray(data, dtype=cupy.float64))
    close_gpu(seisgpu.ktm.migrate(d64, 0.004, **geom, **GRID, device="gpu").data, want, 1e-5)

    class DLPackOnly:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    close_gpu(seisgpu.ktm.migrate(DLPackOnly(cupy.asarray(data)), 0.004, **geom, **GRID, device="gpu").data, want, 1e-5)


def test_ktm_on_a_non_blocking_stream(cupy, no_host_copy):
    """Data written on the caller's own stream is complete before the migration reads it."""
    data, geom = survey(n=40, ns=100, seed=58)
    want = seisgpu.ktm.migrate(data, 0.004, **geom, **GRID, prep_on_gpu=True, device="gpu").data
    with cupy.cuda.Stream(non_blocking=True):
        d = cupy.zeros(data.shape, dtype=cupy.float32)
        d += cupy.asarray(data)
        got = seisgpu.ktm.migrate(d, 0.004, **geom, **GRID, device="gpu").data
    close_gpu(got, want, 1e-5)


def test_ktm_gpu_array_errors(cupy):
    data, geom = survey(n=40, ns=100, seed=59)
    d = cupy.asarray(data)
    with pytest.raises(ValueError, match="on GPU 0, the call runs on GPU 1"):
        seisgpu.ktm.migrate(d, 0.004, **geom, **GRID, device="gpu", gpu=1)
    with pytest.raises(ValueError, match="on GPU 0, the call runs on GPU 1"):
        seisgpu.ktm.model(cupy.zeros((9, 5, 100), cupy.float32), 100, 0.004, **geom, **GRID, device="gpu", gpu=1)
    bad = d.copy()
    bad[7, 11] = cupy.nan
    with pytest.raises(ValueError, match="trace 7 sample 11 is not finite"):
        seisgpu.ktm.migrate(bad, 0.004, **geom, **GRID, device="gpu")
    with pytest.raises(ValueError, match="complex"):
        seisgpu.ktm.migrate(d.astype(cupy.complex64), 0.004, **geom, **GRID, device="gpu")
    with pytest.raises(ValueError, match="does not match the grid"):
        seisgpu.ktm.model(cupy.zeros((9, 4, 100), cupy.float32), 100, 0.004, **geom, **GRID, device="gpu")
    # On the CPU a GPU array is staged through the host and the result comes back to its GPU.
    cpu = seisgpu.ktm.migrate(d, 0.004, **geom, **GRID, device="cpu")
    close_gpu(cpu.data, seisgpu.ktm.migrate(data, 0.004, **geom, **GRID, device="cpu").data, 0)
    if cupy.cuda.runtime.getDeviceCount() >= 2:
        with cupy.cuda.Device(1):
            d1 = cupy.asarray(data)
        with pytest.raises(ValueError, match="on GPU 1, the call runs on GPU 0"):
            seisgpu.ktm.migrate(d1, 0.004, **geom, **GRID, device="gpu", gpu=0)
        got = seisgpu.ktm.migrate(d1, 0.004, **geom, **GRID, device="gpu", gpu=1).data
        assert got.device.id == 1
        # The call leaves CuPy's current device as it was.
        assert cupy.cuda.runtime.getDevice() == 0


def test_pylops_dot_test_with_cupy(cupy, no_host_copy):
    import pylops

    from test_pylops import RTOL, small_op

    op, _ = small_op(device="gpu")
    cupy.random.seed(16)
    assert pylops.utils.dottest(op, *op.shape, rtol=RTOL, backend="cupy")
    x = cupy.random.standard_normal(op.shape[1], dtype=cupy.float32)
    y = op @ x
    assert isinstance(y, cupy.ndarray) and isinstance(op.H @ y, cupy.ndarray)
    close(cupy.asnumpy(y), op @ cupy.asnumpy(x), 1e-4)


def test_other_functions_return_cupy_arrays(cupy):
    """pstm, nmo, velan, wave packets, SRM and NLBF stage GPU arrays through the host and return CuPy arrays."""
    as_gpu = lambda d: {k: cupy.asarray(v) for k, v in d.items()}
    data, geom = survey(n=80, ns=120, seed=60)
    kw = dict(nx=8, ny=4, dx=25, dy=25, x0=0, y0=0, velocity=1800, device="gpu")
    close_gpu(pstm.migrate(cupy.asarray(data), 0.004, **as_gpu(geom), **kw).data, pstm.migrate(data, 0.004, **geom, **kw).data, 1e-5)

    offset = np.tile(np.arange(12) * 50.0, 4)
    cdp = np.repeat(np.arange(1, 5), 12).astype(np.float64)
    t = np.arange(200) * 0.004
    g = (np.exp(-(((t[None, :] - np.sqrt(0.4**2 + (offset / 2000.0) ** 2)[:, None]) / 0.01) ** 2))).astype(np.float32)
    kw = dict(offset=offset, cdp=cdp, device="gpu")
    close_gpu(seisgpu.nmo(cupy.asarray(g), 0.004, **kw, velocity=2000), seisgpu.nmo(g, 0.004, **kw, velocity=2000), 1e-5)
    v_gpu = seisgpu.velan(cupy.asarray(g), 0.004, **kw, min_fold=4, nmo=True)
    v = seisgpu.velan(g, 0.004, **kw, min_fold=4, nmo=True)
    close_gpu(v_gpu.semblance, v.semblance, 1e-5)
    close_gpu(v_gpu.vrms, v.vrms, 1e-5)
    close_gpu(v_gpu.nmo, v.nmo, 1e-5)

    vol = np.random.default_rng(61).standard_normal((20, 18, 40)).astype(np.float32)
    c = wavepacket.forward(cupy.asarray(vol), cube=32, overlap=8, device="gpu")
    assert isinstance(c.data, cupy.ndarray)
    close_gpu(wavepacket.inverse(c, device="gpu"), vol, 1e-3)
    close_gpu(wavepacket.compress(cupy.asarray(vol), cube=32, overlap=8, device="gpu").volume,
              wavepacket.compress(vol, cube=32, overlap=8, device="gpu").volume, 1e-5)

    from test_srm import shots

    d, dt, sg = shots()
    kw = dict(velocity=2000, dx=20, dy=20, dz=10, nz=40, aperture=100, fmax=30, degree=10, device="gpu")
    close_gpu(srm.migrate(cupy.asarray(d), dt, **sg, **kw).data, srm.migrate(d, dt, **sg, **kw).data, 1e-5)

    rng = np.random.default_rng(62)
    gx = np.tile(np.arange(24) * 25.0, 6)
    sx = np.repeat(np.arange(6) * 200.0, 24)
    t = np.arange(150) * 0.004
    nd = (np.exp(-(((t[None, :] - (0.2 + np.abs(gx - sx) / 3000.0)[:, None]) / 0.012) ** 2))
          + 0.05 * rng.standard_normal((144, 150))).astype(np.float32)
    kw = dict(sx=sx, gx=gx, aperture_ad="400x450", aperture_be=(100, 450), aperture_c=(400, 450), spacing_x=50, spacing_y=200,
              a="-6e-4:4e-5:6e-4", b=(-3e-4, 6e-5, 3e-4), c=0, d=0, e=0, device="gpu")
    e_gpu = nlbf.enhance(cupy.asarray(nd), 0.004, **kw)
    e = nlbf.enhance(nd, 0.004, **kw)
    close_gpu(e_gpu.S, e.S, 1e-5)
    close_gpu(e_gpu.enhanced, e.enhanced, 1e-5)
