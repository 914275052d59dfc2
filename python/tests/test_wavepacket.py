"""seisgpu.wavepacket against the CLI (the same numbers) and its round trip."""

import json

import numpy as np
import pytest

from seisgpu import wavepacket

OPTS = dict(cube=32, overlap=8)
CLI_OPTS = ("--cube", 32, "--overlap", 8)


@pytest.fixture
def volume():
    rng = np.random.default_rng(30)
    n1, n2, n3 = 20, 18, 40
    t = np.arange(n3)
    v = np.zeros((n1, n2, n3), np.float32)
    for i in range(n1):
        for j in range(n2):
            v[i, j] = np.exp(-0.05 * (t - 15 - 0.4 * i - 0.2 * j) ** 2)
    return v + 0.1 * rng.standard_normal(v.shape).astype(np.float32)


def test_round_trip_matches_cli(tmp_path, cli, volume):
    np.save(tmp_path / "v.npy", volume)
    cli("wavepacket", "forward", "--input", tmp_path / "v.npy", "-o", tmp_path / "c.wpk", *CLI_OPTS)
    cli("wavepacket", "inverse", "--input", tmp_path / "c.wpk", "-o", tmp_path / "r.npy")
    c = wavepacket.forward(volume, device="cpu", **OPTS)
    assert c.data.dtype == np.complex64 and c.cube == 32 and c.redundancy > 1
    back = wavepacket.inverse(c, device="cpu")
    np.testing.assert_array_equal(back, np.load(tmp_path / "r.npy"))
    assert np.linalg.norm(back - volume) < 1e-3 * np.linalg.norm(volume)


def test_denoise_compress_interpolate_match_cli(tmp_path, cli, volume):
    np.save(tmp_path / "v.npy", volume)
    r = cli("wavepacket", "denoise", "--input", tmp_path / "v.npy", "-o", tmp_path / "d.npy", "--k", 2.5, *CLI_OPTS)
    d = wavepacket.denoise(volume, k=2.5, device="cpu", **OPTS)
    np.testing.assert_array_equal(d.volume, np.load(tmp_path / "d.npy"))
    assert d.stats["sigma"] == pytest.approx(json.loads(r.stdout)["sigma"])
    cli("wavepacket", "compress", "--input", tmp_path / "v.npy", "-o", tmp_path / "c.npy", "--cr", 0.05, *CLI_OPTS)
    c = wavepacket.compress(volume, cr=0.05, device="cpu", **OPTS)
    np.testing.assert_array_equal(c.volume, np.load(tmp_path / "c.npy"))
    assert 0 < c.stats["rel_error"] < 1
    dead = volume.copy()
    dead[::3, ::2] = 0
    np.save(tmp_path / "dead.npy", dead)
    cli("wavepacket", "interpolate", "--input", tmp_path / "dead.npy", "-o", tmp_path / "i.npy", "--iterations", 5, *CLI_OPTS)
    i = wavepacket.interpolate(dead, iterations=5, device="cpu", **OPTS)
    np.testing.assert_array_equal(i.volume, np.load(tmp_path / "i.npy"))
    assert i.stats["missing_traces"] == 7 * 9
    mask = np.ones(volume.shape[:2], bool)
    mask[::3, ::2] = False
    np.testing.assert_array_equal(wavepacket.interpolate(dead, mask=mask, iterations=5, device="cpu", **OPTS).volume, i.volume)


def test_checks(volume):
    with pytest.raises(ValueError, match="volume: 2-D"):
        wavepacket.forward(volume[0])
    with pytest.raises(ValueError, match="gather: unknown gather `fast`"):
        wavepacket.forward(volume, gather="fast", **OPTS)
    with pytest.raises(ValueError, match="cube side 8 is too small"):
        wavepacket.forward(volume, cube=8, overlap=2)
    with pytest.raises(ValueError, match="mask: shape"):
        wavepacket.interpolate(volume, mask=np.ones((3, 3)), **OPTS)
    # Fortran order and float64 are converted.
    a = wavepacket.compress(volume, device="cpu", **OPTS).volume
    b = wavepacket.compress(np.asfortranarray(volume.astype(np.float64)), device="cpu", **OPTS).volume
    np.testing.assert_array_equal(a, b)
