"""Shared by the tests: the CLI (the Rust CPU reference the bindings must match), small SEG-Y
files written with segyio, and the GPU check."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import seisgpu

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cli_path():
    """The `seisgpu` binary of this checkout (`cargo build --release`), or $SEISGPU_CLI."""
    p = pathlib.Path(os.environ.get("SEISGPU_CLI", ROOT / "target" / "release" / "seisgpu"))
    return p if p.is_file() else None


@pytest.fixture
def cli():
    """Runs the CLI on the CPU; skips the test when the binary is not built."""
    path = cli_path()
    if path is None:
        pytest.skip("no seisgpu CLI binary (cargo build --release, or set SEISGPU_CLI): the comparison with the CLI is skipped")

    def run(*args):
        r = subprocess.run([str(path), "--device", "cpu", *map(str, args)], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"seisgpu {' '.join(map(str, args))} failed:\n{r.stderr}")
        return r

    return run


@pytest.fixture
def segyio():
    return pytest.importorskip("segyio", reason="segyio is not installed: the SEG-Y tests are skipped")


def write_segy(path, data, dt, headers, scalar=-10):
    """A small unstructured SEG-Y file (IEEE floats): `data` [traces, samples], `dt` (s), header
    arrays sx, sy, gx, gy (m, stored with `scalar`), cdp, offset."""
    import segyio

    n, ns = data.shape
    spec = segyio.spec()
    spec.format = 5
    spec.samples = np.arange(ns) * dt * 1e3
    spec.tracecount = n
    spec.ilines = None
    spec.xlines = None
    with segyio.create(str(path), spec) as f:
        f.bin[segyio.BinField.Interval] = int(round(dt * 1e6))
        f.bin[segyio.BinField.Samples] = ns
        unit = 1.0 / -scalar if scalar < 0 else float(scalar)
        for i in range(n):
            h = {segyio.TraceField.TRACE_SAMPLE_INTERVAL: int(round(dt * 1e6)), segyio.TraceField.TRACE_SAMPLE_COUNT: ns,
                 segyio.TraceField.SourceGroupScalar: scalar, segyio.TraceField.TraceIdentificationCode: 1,
                 segyio.TraceField.TRACE_SEQUENCE_FILE: i + 1}
            for name, key in (("sx", segyio.TraceField.SourceX), ("sy", segyio.TraceField.SourceY),
                              ("gx", segyio.TraceField.GroupX), ("gy", segyio.TraceField.GroupY)):
                if name in headers:
                    h[key] = int(round(headers[name][i] / unit))
            for name, key in (("cdp", segyio.TraceField.CDP), ("offset", segyio.TraceField.offset)):
                if name in headers:
                    h[key] = int(headers[name][i])
            f.header[i] = h
            f.trace[i] = data[i].astype(np.float32)


def gpu_note():
    """None when a GPU with kernels is usable, else why not."""
    if not seisgpu.has_kernels():
        return "this build has no GPU kernels (built with SEISGPU_SKIP_PTX=1)"
    note = seisgpu.devices("auto")
    return None if note.startswith("GPU") else note


@pytest.fixture
def gpu():
    why = gpu_note()
    if why is not None:
        print(f"SKIPPED: no usable GPU ({why})")
        pytest.skip(f"no usable GPU: {why}")


def survey(n=60, ns=120, seed=0, line=False):
    """Random traces over a small area: sources and receivers in metres on a 10 cm grid (what a
    SEG-Y scalar of -10 stores exactly)."""
    rng = np.random.default_rng(seed)
    sx = np.round(rng.uniform(0, 400, n), 1)
    gx = np.round(sx + rng.uniform(-300, 300, n), 1)
    sy = np.zeros(n) if line else np.round(rng.uniform(0, 200, n), 1)
    gy = np.zeros(n) if line else np.round(sy + rng.uniform(-100, 100, n), 1)
    data = rng.standard_normal((n, ns)).astype(np.float32)
    return data, dict(sx=sx, sy=sy, gx=gx, gy=gy)
