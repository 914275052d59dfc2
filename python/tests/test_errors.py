"""Exceptions by the kind of error: ValueError for a parameter or the data, seisgpu.GpuError (a
RuntimeError) for the device, OSError for a file; the message is the CLI's."""

import numpy as np
import pytest

import seisgpu
from seisgpu import ktm


def _line(nsrc=4, nrec=24, ns=100, dt=0.004):
    sx = np.repeat(np.arange(nsrc) * 100.0, nrec)
    gx = np.tile(np.arange(nrec) * 25.0, nsrc)
    data = np.zeros((nsrc * nrec, ns), dtype=np.float32)
    return data, dt, sx, gx


def test_gpu_error_is_a_runtime_error():
    assert issubclass(seisgpu.GpuError, RuntimeError)


def test_parameter_and_input_errors_are_value_errors():
    data, dt, sx, gx = _line()
    with pytest.raises(ValueError, match="inline spacing dx = -1 m must be positive"):
        ktm.migrate(data, dt, sx=sx, gx=gx, velocity=2000.0, dx=-1.0, nx=10, ntau=50, device="cpu")
    data[3, 7] = np.nan
    with pytest.raises(ValueError, match="trace 3 sample 7 is not finite") as e:
        ktm.migrate(data, dt, sx=sx, gx=gx, velocity=2000.0, device="cpu")
    assert not isinstance(e.value, RuntimeError)


def test_file_errors_are_os_errors(tmp_path):
    data, dt, sx, gx = _line()
    out = tmp_path / "missing" / "picks.txt"
    with pytest.raises(OSError, match="does not exist"):
        seisgpu.velan(data, dt, sx=sx, gx=gx, cdp=np.ones(len(sx)), output=str(out), device="cpu")


def test_device_errors_are_gpu_errors():
    # No such GPU on any machine (and no driver or no kernels on some): the device is at fault.
    with pytest.raises(seisgpu.GpuError):
        seisgpu.devices("gpu", gpu=1_000_000)
