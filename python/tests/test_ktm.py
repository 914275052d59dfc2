"""seisgpu.ktm against the CLI (the same numbers), its adjoint pair, and its argument checks."""

import numpy as np
import pytest

import seisgpu
from seisgpu import ktm

from conftest import survey, write_segy

GRID = dict(x0=0.0, dx=25.0, nx=9, y0=0.0, dy=25.0, ny=5, tau0=0.0, dtau=0.004, ntau=100)


def test_migrate_matches_cli(tmp_path, cli, segyio):
    data, geom = survey()
    write_segy(tmp_path / "in.sgy", data, 0.004, geom)
    cli("ktm", "migrate", "--input", tmp_path / "in.sgy", "--x0", 0, "--dx", 25, "--nx", 9, "--y0", 0, "--dy", 25, "--ny", 5,
        "--tau0", 0, "--dtau", 0.004, "--ntau", 100, "--velocity", "0:1800,0.4:2600", "--aperture", 300,
        "-o", tmp_path / "img.npy")
    want = np.load(tmp_path / "img.npy")
    with segyio.open(tmp_path / "in.sgy", ignore_geometry=True) as f:
        tr = seisgpu.segy.traces(f)
    img = ktm.migrate(tr, **GRID, velocity="0:1800,0.4:2600", aperture=300, device="cpu")
    assert img.data.shape == want.shape == (1, 9, 5, 100)
    np.testing.assert_array_equal(img.data, want)
    # The same from arrays (no file): the headers as numbers.
    img2 = ktm.migrate(data, 0.004, **geom, **GRID, velocity=np.array([[0, 1800], [0.4, 2600]]), aperture=300, device="cpu")
    np.testing.assert_array_equal(img2.data, want)
    np.testing.assert_allclose(img.x, 25.0 * np.arange(9))
    np.testing.assert_allclose(img.tau, 0.004 * np.arange(100), rtol=1e-6)


def test_default_grid_and_model_match_cli(tmp_path, cli, segyio):
    data, geom = survey(seed=1, line=True)
    write_segy(tmp_path / "in.sgy", data, 0.004, geom)
    cli("ktm", "migrate", "--input", tmp_path / "in.sgy", "--offset-classes", "0,200,2", "-o", tmp_path / "img.npy")
    want = np.load(tmp_path / "img.npy")
    with segyio.open(tmp_path / "in.sgy", ignore_geometry=True) as f:
        tr = seisgpu.segy.traces(f)
    img = ktm.migrate(tr, offset_classes=(0, 200, 2), device="cpu")
    assert img.grid_note is not None and "image grid from the data" in img.grid_note
    np.testing.assert_array_equal(img.data, want)
    np.testing.assert_allclose(img.offsets, [100.0, 300.0])
    rng = np.random.default_rng(2)
    image = rng.standard_normal(want.shape).astype(np.float32)
    np.save(tmp_path / "m.npy", image)
    cli("ktm", "model", "--input", tmp_path / "in.sgy", "--offset-classes", "0,200,2", "--image", tmp_path / "m.npy",
        "-o", tmp_path / "d.npy")
    traces = ktm.model(image, geometry=tr, **img.grid, offset_classes="0,200,2", device="cpu")
    np.testing.assert_array_equal(traces, np.load(tmp_path / "d.npy"))


@pytest.mark.parametrize("options", [{}, dict(no_rho=True, no_weights=True, no_antialias=True), dict(aperture=200, mute_stretch=0.5)])
def test_model_is_the_adjoint(options):
    data, geom = survey(n=40, ns=100, seed=3)
    img = ktm.migrate(data, 0.004, **geom, **GRID, device="cpu", **options)
    m = np.random.default_rng(4).standard_normal(img.data.shape).astype(np.float32)
    d = ktm.model(m, 100, 0.004, **geom, **GRID, device="cpu", **options)
    lhs, rhs = np.vdot(img.data.astype(np.float64), m), np.vdot(data.astype(np.float64), d)
    assert abs(lhs - rhs) <= 1e-4 * max(abs(lhs), abs(rhs))


def test_dtypes_and_orders_are_converted():
    data, geom = survey(n=30, ns=80, seed=5)
    want = ktm.migrate(data, 0.004, **geom, **GRID, device="cpu").data
    for variant in (data.astype(np.float64), np.asfortranarray(data), data[:, ::1].copy(order="F")):
        np.testing.assert_array_equal(ktm.migrate(variant, 0.004, **geom, **GRID, device="cpu").data, want)
    # Every other trace of a larger array: a strided view, copied.
    wide = np.zeros((60, 80), np.float32)
    wide[::2] = data
    np.testing.assert_array_equal(ktm.migrate(wide[::2], 0.004, **geom, **GRID, device="cpu").data, want)
    # Integer coordinates are fine.
    geom_int = {k: np.round(v).astype(np.int32) for k, v in geom.items()}
    ktm.migrate(data, 0.004, **geom_int, **GRID, device="cpu")


def test_bad_input_is_a_value_error_naming_it():
    data, geom = survey(n=10, ns=50)
    with pytest.raises(ValueError, match="data: dtype complex64"):
        ktm.migrate(data.astype(np.complex64), 0.004, **geom, **GRID)
    with pytest.raises(ValueError, match="data: 1-D"):
        ktm.migrate(data[0], 0.004, **geom, **GRID)
    with pytest.raises(ValueError, match=r"sx: shape \(9,\)"):
        ktm.migrate(data, 0.004, **dict(geom, sx=geom["sx"][:9]), **GRID)
    with pytest.raises(ValueError, match="dt"):
        ktm.migrate(data, None, **geom, **GRID)
    bad = data.copy()
    bad[3, 7] = np.nan
    with pytest.raises(ValueError, match="trace 3 sample 7 is not finite"):
        ktm.migrate(bad, 0.004, **geom, **GRID, device="cpu")
    with pytest.raises(ValueError, match="inline spacing dx = -1 m must be positive"):
        ktm.migrate(data, 0.004, **geom, **dict(GRID, dx=-1.0), device="cpu")
    with pytest.raises(ValueError, match="unknown device `tpu`"):
        ktm.migrate(data, 0.004, **geom, **GRID, device="tpu")
    with pytest.raises(ValueError, match="kernel: unknown kernel `fastest`"):
        ktm.migrate(data, 0.004, **geom, **GRID, kernel="fastest")
    with pytest.raises(ValueError, match="velocity"):
        ktm.migrate(data, 0.004, **geom, **GRID, velocity="fast", device="cpu")
    with pytest.raises(ValueError, match="image: shape"):
        ktm.model(np.zeros((3, 3, 3), np.float32), 50, 0.004, **geom, **GRID)
    with pytest.raises(ValueError, match="no source/receiver coordinates"):
        ktm.migrate(data, 0.004, sx=np.zeros(10), gx=np.zeros(10), device="cpu")


def test_velocity_forms_agree():
    data, geom = survey(n=30, ns=100, seed=6)
    const = ktm.migrate(data, 0.004, **geom, **GRID, velocity=2000, device="cpu").data
    for v in ("2000", np.full(100, 2000.0), np.full((9, 5, 100), 2000.0, np.float32)):
        np.testing.assert_allclose(ktm.migrate(data, 0.004, **geom, **GRID, velocity=v, device="cpu").data, const, rtol=1e-5,
                                   atol=1e-5 * np.abs(const).max())


def test_cpu_work_queues_match_one_device():
    data, geom = survey(n=64, ns=100, seed=7)
    one = ktm.migrate(data, 0.004, **geom, **GRID, device="cpu").data
    two = ktm.migrate(data, 0.004, **geom, **GRID, device="cpu", gpus=2)
    assert "2 CPU work queue" in two.device
    np.testing.assert_allclose(two.data, one, rtol=1e-5, atol=1e-5 * np.abs(one).max())


def test_gpu_matches_cpu(gpu):
    data, geom = survey(n=64, ns=100, seed=8)
    cpu = ktm.migrate(data, 0.004, **geom, **GRID, device="cpu").data
    on_gpu = ktm.migrate(data, 0.004, **geom, **GRID, device="gpu")
    assert on_gpu.device.startswith("GPU")
    np.testing.assert_allclose(on_gpu.data, cpu, rtol=1e-4, atol=1e-4 * np.abs(cpu).max())
    m = np.random.default_rng(9).standard_normal(cpu.shape).astype(np.float32)
    d_cpu = ktm.model(m, 100, 0.004, **geom, **GRID, device="cpu")
    d_gpu = ktm.model(m, 100, 0.004, **geom, **GRID, device="gpu")
    np.testing.assert_allclose(d_gpu, d_cpu, rtol=1e-4, atol=1e-4 * np.abs(d_cpu).max())


def test_the_gil_is_released_while_computing():
    """Another Python thread runs while a migration computes."""
    import threading
    import time

    data, geom = survey(n=400, ns=400, seed=10)
    grid = dict(x0=0.0, dx=10.0, nx=40, y0=0.0, dy=10.0, ny=20, tau0=0.0, dtau=0.004, ntau=400)
    ticks, done = [], threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.01)
    start = time.perf_counter()
    ktm.migrate(data, 0.004, **geom, **grid, device="cpu")
    end = time.perf_counter()
    done.set()
    t.join()
    during = [x for x in ticks if start < x < end]
    assert end - start > 0.05, "the migration was too short to tell"
    assert len(during) >= 10, (len(during), end - start)
