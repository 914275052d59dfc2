"""seisgpu.nlbf against the CLI (the same numbers)."""

import numpy as np
import pytest

import seisgpu
from seisgpu import nlbf

# Small search ranges keep the CPU search to a second.
APERTURES = ("--aperture-ad", "400x450", "--aperture-be", "100x450", "--aperture-c", "400x450", "--spacing-x", 50, "--spacing-y",
             200, "--b", "-3e-4:6e-5:3e-4", "--c", "-5e-8:2.5e-8:5e-8", "--d", "-5e-8:2.5e-8:5e-8", "--e", "0")
KW = dict(aperture_ad="400x450", aperture_be=(100, 450), aperture_c=(400, 450), spacing_x=50, spacing_y=200, b=(-3e-4, 6e-5, 3e-4),
          c="-5e-8:2.5e-8:5e-8", d=(-5e-8, 2.5e-8, 5e-8), e=0)


@pytest.fixture
def gather(tmp_path, cli, segyio):
    path = tmp_path / "line.sgy"
    cli("synth", "line2d", "-o", path, "--ns", 200, "--sources", 6, "--receivers", 24)
    with segyio.open(path, ignore_geometry=True) as f:
        return path, seisgpu.segy.traces(f)


def test_estimate_and_enhance_match_cli(tmp_path, cli, gather):
    path, tr = gather
    cli("nlbf", "enhance", "--input", path, *APERTURES, "--a", "-6e-4:4e-5:6e-4", "-o", tmp_path / "out")
    r = nlbf.enhance(tr, **KW, a="-6e-4:4e-5:6e-4", device="cpu")
    for name in "ABCDES":
        np.testing.assert_array_equal(getattr(r, name), np.load(tmp_path / "out" / f"{name}.npy"), err_msg=name)
    np.testing.assert_array_equal(r.enhanced, np.load(tmp_path / "out" / "enhanced.npy"))
    assert r.search is not None and "search ranges from the data" in r.search
    assert (~r.unestimated).sum() > 0 and np.nanmax(r.S) > 0.3
    est = nlbf.estimate(tr, **KW, a="-6e-4:4e-5:6e-4", device="cpu")
    np.testing.assert_array_equal(est.S, r.S)
    assert est.enhanced is None and est.positions.shape == r.S.shape[:2] + (2,)


def test_preset_ranges_and_checks(tmp_path, cli, gather):
    path, tr = gather
    cli("nlbf", "estimate", "--input", path, "--preset", "synthetic-2d", *APERTURES, "--a", "-2e-4:2e-5:2e-4", "-o", tmp_path / "e")
    est = nlbf.estimate(tr, preset="synthetic-2d", **KW, a=(-2e-4, 2e-5, 2e-4), device="cpu")
    np.testing.assert_array_equal(est.S, np.load(tmp_path / "e" / "S.npy"))
    assert est.search is None
    with pytest.raises(ValueError, match="unknown preset `paper`"):
        nlbf.estimate(tr, preset="paper")
    with pytest.raises(ValueError, match="x: unknown coordinate `rx`"):
        nlbf.estimate(tr, x="rx")
    with pytest.raises(ValueError, match="variant gpu-fast needs a GPU"):
        nlbf.estimate(tr, variant="gpu-fast", device="cpu")
    with pytest.raises(ValueError, match="a: range"):
        nlbf.estimate(tr, a="1:2", device="cpu")
