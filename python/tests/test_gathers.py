"""seisgpu.pstm, seisgpu.nmo and seisgpu.velan against the CLI (the same numbers)."""

import numpy as np
import pytest

import seisgpu
from seisgpu import pstm

from conftest import survey, write_segy


@pytest.fixture
def line(tmp_path, cli, segyio):
    """A small 2-D line of shot gathers (three reflections) from `seisgpu synth`, and its traces."""
    path = tmp_path / "line.sgy"
    cli("synth", "line2d", "-o", path, "--ns", 300, "--sources", 8, "--receivers", 48)
    with segyio.open(path, ignore_geometry=True) as f:
        return path, seisgpu.segy.traces(f)


@pytest.mark.parametrize("traveltime", ["exact", "static8", "dynamic"])
def test_pstm_matches_cli(tmp_path, cli, segyio, traveltime):
    data, geom = survey(n=50, ns=120, seed=20)
    write_segy(tmp_path / "in.sgy", data, 0.004, geom)
    cli("pstm", "migrate", "--input", tmp_path / "in.sgy", "--traveltime", traveltime, "--nx", 8, "--ny", 4, "--dx", 25, "--dy",
        25, "--x0", 0, "--y0", 0, "--noff", 2, "--doffset", 200, "--velocity", 1800, "--velocity-gradient", 500,
        "-o", tmp_path / "img.npy")
    want = np.load(tmp_path / "img.npy")
    with segyio.open(tmp_path / "in.sgy", ignore_geometry=True) as f:
        tr = seisgpu.segy.traces(f)
    img = pstm.migrate(tr, traveltime=traveltime, nx=8, ny=4, dx=25, dy=25, x0=0, y0=0, noff=2, doffset=200, velocity=1800,
                       velocity_gradient=500, device="cpu")
    assert img.data.shape == want.shape == (8, 4, 2, 120)
    np.testing.assert_array_equal(img.data, want)
    np.testing.assert_allclose(img.offsets, [100.0, 300.0])
    assert img.traces_used > 0


def test_pstm_default_grid_and_checks(tmp_path, cli, segyio):
    data, geom = survey(n=40, ns=100, seed=21, line=True)
    write_segy(tmp_path / "in.sgy", data, 0.004, geom)
    cli("pstm", "migrate", "--input", tmp_path / "in.sgy", "--velocity", "0:1500,0.4:2500", "-o", tmp_path / "img.npy")
    img = pstm.migrate(data, 0.004, **geom, velocity=[[0, 1500], [0.4, 2500]], device="cpu")
    np.testing.assert_array_equal(img.data, np.load(tmp_path / "img.npy"))
    assert img.grid_note is not None
    with pytest.raises(ValueError, match="traveltime: unknown traveltime mode `fast`"):
        pstm.migrate(data, 0.004, **geom, traveltime="fast")
    with pytest.raises(ValueError, match="velocity_gradient"):
        pstm.migrate(data, 0.004, **geom, velocity="0:1500,1:2000", velocity_gradient=10)


def test_nmo_matches_cli(tmp_path, cli, line):
    path, tr = line
    cli("nmo", "--input", path, "--velocity", "0:1500,1.0:2200", "--max-stretch", 0.4, "-o", tmp_path / "nmo.npy")
    out = seisgpu.nmo(tr, velocity="0:1500,1.0:2200", max_stretch=0.4, device="cpu")
    np.testing.assert_array_equal(out, np.load(tmp_path / "nmo.npy"))
    # From arrays, offsets alone.
    out2 = seisgpu.nmo(tr.data.astype(np.float64), tr.dt, offset=tr.headers["offset"], velocity=np.array([[0, 1500], [1, 2200]]),
                       max_stretch=0.4, device="cpu")
    np.testing.assert_array_equal(out2, out)
    with pytest.raises(ValueError, match="velocity"):
        seisgpu.nmo(tr, velocity="-5", device="cpu")


def test_velan_matches_cli(tmp_path, cli, line):
    path, tr = line
    cli("velan", path, "-o", tmp_path / "picks.txt", "--semblance", tmp_path / "s.npy", "--nmo", tmp_path / "nmo.npy", "--nv", 60)
    r = seisgpu.velan(tr, nv=60, nmo=True, output=tmp_path / "mine.txt", device="cpu")
    semblance = np.load(tmp_path / "s.npy").reshape(r.semblance.shape)
    np.testing.assert_array_equal(r.semblance, semblance)
    np.testing.assert_array_equal(r.nmo, np.load(tmp_path / "nmo.npy"))
    assert r.velocities.shape == (60,) and r.velocities[0] == 1400 and r.velocities[-1] == 4500
    assert len(r.cdp) == r.semblance.shape[0] == r.vrms.shape[0]
    assert sum(len(p) for p in r.picks) > 0
    # The written picks drive NMO the same as the CLI's.
    mine = seisgpu.nmo(tr, velocity=str(tmp_path / "mine.txt"), device="cpu")
    theirs = seisgpu.nmo(tr, velocity=str(tmp_path / "picks.txt"), device="cpu")
    np.testing.assert_array_equal(mine, theirs)


def test_velan_checks(line):
    _, tr = line
    with pytest.raises(ValueError, match="threshold 2 must be between 0 and 1"):
        seisgpu.velan(tr, threshold=2)
    with pytest.raises(ValueError, match="no CMP has a semblance peak"):
        seisgpu.velan(tr, threshold=0.999, device="cpu")
