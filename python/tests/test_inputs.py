"""Traces given in every form: a C-contiguous float32 array is read in place (not copied) and left
as it was; float64, Fortran-ordered, strided and unaligned arrays are converted first. Every form
gives the numbers of a call on a fresh C-contiguous float32 copy."""

import numpy as np
import pytest

import seisgpu
from seisgpu import ktm, nlbf, pstm, srm, wavepacket

from conftest import survey


def forms(data):
    """(name, array) of the same traces in each form the Python layer converts."""
    wide = np.zeros((2 * data.shape[0], data.shape[1]), np.float32)
    wide[::2] = data
    raw = np.zeros(data.size * 4 + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(data.shape)
    unaligned[:] = data
    assert not unaligned.flags.aligned and unaligned.flags.c_contiguous
    return [("float64", data.astype(np.float64)), ("fortran", np.asfortranarray(data)), ("every other row", wide[::2]),
            ("unaligned", unaligned), ("float32 in place", data)]


def cmp_line(cmps=6, fold=12, ns=150, seed=3):
    """CMP gathers with one hyperbola at 0.3 s (v 2000 m/s) plus noise."""
    rng = np.random.default_rng(seed)
    offset = np.tile(np.arange(fold) * 50.0, cmps)
    cdp = np.repeat(np.arange(1, cmps + 1), fold).astype(np.float64)
    t = np.arange(ns) * 0.004
    tt = np.sqrt(0.3**2 + (offset / 2000.0) ** 2)
    data = np.exp(-(((t[None, :] - tt[:, None]) / 0.012) ** 2)) + 0.05 * rng.standard_normal((cmps * fold, ns))
    return data.astype(np.float32), dict(offset=offset, cdp=cdp)


def shot_line(seed=4):
    """Four shots of 24 receivers every 25 m, a direct arrival plus noise."""
    rng = np.random.default_rng(seed)
    gx = np.tile(np.arange(24) * 25.0, 4)
    sx = np.repeat(np.arange(4) * 150.0, 24)
    t = np.arange(100) * 0.004
    tt = 0.05 + np.abs(gx - sx) / 3000.0
    data = np.exp(-(((t[None, :] - tt[:, None]) / 0.012) ** 2)) + 0.05 * rng.standard_normal((96, 100))
    return data.astype(np.float32), dict(sx=sx, gx=gx)


GRID = dict(x0=0.0, dx=20.0, nx=12, y0=0.0, dy=20.0, ny=6, tau0=0.0, dtau=0.008, ntau=40)
NLBF = dict(aperture_ad=(150, 150), aperture_be=(150, 150), aperture_c=(150, 150), spacing_x=100, spacing_y=100,
            a="-2e-4:1e-4:2e-4", b="-2e-4:1e-4:2e-4", c=0, d=0, e=0, device="cpu")


def calls():
    """(name, traces, call(data) -> the result's arrays) of every function that takes traces."""
    s, geom = survey(n=40, ns=80, seed=7)
    g, cmps = cmp_line()
    shots, sgeom = shot_line()
    srm_geom = dict(sx=sgeom["sx"], sy=np.zeros(96), gx=sgeom["gx"], gy=np.zeros(96))
    return [
        ("ktm.migrate", s, lambda d: [ktm.migrate(d, 0.004, **geom, **GRID, device="cpu").data]),
        ("pstm.migrate", s, lambda d: [pstm.migrate(d, 0.004, **geom, nx=12, ny=6, dx=20.0, dy=20.0, x0=0.0, y0=0.0, nz=40, dtau=0.008,
                                                    aperture=300.0, device="cpu").data]),
        ("nmo", g, lambda d: [seisgpu.nmo(d, 0.004, **cmps, velocity=2000, device="cpu")]),
        ("velan", g, lambda d: (lambda r: [r.semblance, r.vrms, r.nmo])(seisgpu.velan(d, 0.004, **cmps, nv=20, nmo=True, device="cpu"))),
        ("nlbf.estimate", shots, lambda d: (lambda r: [r.A, r.B, r.S])(nlbf.estimate(d, 0.004, **sgeom, **NLBF))),
        ("nlbf.enhance", shots, lambda d: (lambda r: [r.A, r.S, r.enhanced])(nlbf.enhance(d, 0.004, **sgeom, **NLBF))),
        ("srm.migrate", shots, lambda d: [srm.migrate(d, 0.004, **srm_geom, velocity=2000, dx=25, dy=25, dz=10, nz=20, aperture=200,
                                                      fmax=30, degree=10, device="cpu").data]),
    ]


@pytest.mark.parametrize("name, data, call", calls(), ids=[c[0] for c in calls()])
def test_every_form_of_the_traces_gives_the_numbers_of_a_fresh_copy(name, data, call):
    want = call(np.ascontiguousarray(data.copy()))
    for form, d in forms(data):
        before = np.array(d, copy=True)
        got = call(d)
        for w, a in zip(want, got):
            if name == "srm.migrate":
                # Its CPU reference's sums vary in the last bit from call to call, whatever the input.
                np.testing.assert_allclose(a, w, rtol=0, atol=1e-5 * np.abs(w).max(), err_msg=f"{name} on {form} traces")
            else:
                np.testing.assert_array_equal(a, w, err_msg=f"{name} on {form} traces")
        np.testing.assert_array_equal(d, before, err_msg=f"{name} wrote to its {form} input")
    # The results are NumPy's own arrays, not views of the input.
    for a in call(data):
        assert not np.shares_memory(a, data), name


def test_every_form_of_a_volume_gives_the_numbers_of_a_fresh_copy():
    rng = np.random.default_rng(8)
    volume = rng.standard_normal((20, 18, 40)).astype(np.float32)
    opts = dict(cube=32, overlap=8, device="cpu")
    want = wavepacket.compress(np.ascontiguousarray(volume.copy()), cr=0.05, **opts).volume
    wide = np.zeros((40, 18, 40), np.float32)
    wide[::2] = volume
    raw = np.zeros(volume.size * 4 + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(volume.shape)
    unaligned[:] = volume
    for form, v in (("float64", volume.astype(np.float64)), ("fortran", np.asfortranarray(volume)), ("strided", wide[::2]),
                    ("unaligned", unaligned), ("float32 in place", volume)):
        before = v.copy()
        np.testing.assert_array_equal(wavepacket.compress(v, cr=0.05, **opts).volume, want, err_msg=form)
        np.testing.assert_array_equal(v, before, err_msg=f"compress wrote to its {form} input")


def test_traces_that_are_not_real_numbers_are_refused():
    data, cmps = cmp_line()
    with pytest.raises(ValueError, match="data: dtype complex64"):
        seisgpu.nmo(data.astype(np.complex64), 0.004, **cmps, velocity=2000, device="cpu")
    with pytest.raises(ValueError, match="data: 1-D array"):
        seisgpu.nmo(data.ravel(), 0.004, **cmps, velocity=2000, device="cpu")


def test_the_binding_refuses_arrays_it_cannot_read_in_place():
    """The native entry reads C-contiguous float32 as it is and refuses any other layout (the
    Python layer converts before calling it), so no layout is read as garbage."""
    data, cmps = cmp_line()
    headers = {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in cmps.items()}
    for d in (np.asfortranarray(data), data[:, ::2]):
        with pytest.raises(ValueError, match="data: the array must be C-contiguous"):
            seisgpu._native.nmo(d, 0.004, 0.0, headers, "2000", 0.5, "cpu", 0)


def test_a_header_that_is_not_an_integer_is_named_with_its_first_trace():
    data, cmps = cmp_line()
    cdp = cmps["cdp"].copy()
    cdp[5] = 1.5
    inline = np.zeros(len(cdp))
    inline[3] = 2.0**40
    with pytest.raises(ValueError, match="cdp: trace 5 has 1.5, not a 32-bit integer"):
        seisgpu.nmo(data, 0.004, offset=cmps["offset"], cdp=cdp, velocity=2000, device="cpu")
    with pytest.raises(ValueError, match="inline: trace 3 has 1099511627776, not a 32-bit integer"):
        seisgpu.nlbf.estimate(data, 0.004, offset=cmps["offset"], cdp=cdp, inline=inline, x="offset", **{k: v for k, v in NLBF.items()})
