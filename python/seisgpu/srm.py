"""Shot-record depth migration with Chebyshev-polynomial wavefield extrapolation (paper 4,
``seisgpu srm``): each shot's source and receiver wavefields extrapolated down in depth, frequency
by frequency, and cross-correlated into a depth image."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from . import _native
from ._common import Traces, as_f32, gpu_results, gpus_arg, is_gpu, traces_in


@dataclass
class DepthImage:
    """A depth image: ``data`` float32 [nz, ny, nx] (the CLI's .npy layout); axes ``z`` (m, from
    0), ``y``, ``x`` (m, the model grid's nodes); ``device``."""

    data: np.ndarray
    z: np.ndarray
    y: np.ndarray
    x: np.ndarray
    device: str

    def __array__(self, dtype=None, copy=None):
        data = self.data.get() if is_gpu(self.data) else self.data
        return data if dtype is None else data.astype(dtype)


@gpu_results("data")
def migrate(data: Union[np.ndarray, Traces], dt: Optional[float] = None, *, velocity, t0: Optional[float] = None,
            sx=None, sy=None, gx=None, gy=None, dx: float = 25.0, dy: float = 25.0, dz: float = 10.0, x0: float = 0.0,
            y0: float = 0.0, fmin: float = 5.0, fmax: float = 40.0, ricker: float = 20.0, degree: int = 15,
            max_angle: float = 60.0, filter: str = "optimised", taper_width: int = 20, taper_strength: float = 0.3,
            aperture: float = 1000.0, table_rows: int = 0, nz: int = 0, kernel: str = "best", planes: int = 16,
            device: str = "auto", gpu: int = 0, gpus: Union[None, int, str] = None) -> DepthImage:
    """Shot-record depth migration (``seisgpu srm``).

    Args:
        data, dt, t0: shot gathers [traces, samples] (traces of one shot share a source position),
            sample interval (s), first sample time (s); or a :class:`seisgpu.Traces`. A float32
            C-contiguous array is read in place while the GIL is released: do not write to it from
            another thread until the call returns.
        sx, sy, gx, gy: source and receiver coordinates (m) per trace.
        velocity: interval velocity (m/s, depth domain): a number (with ``nz``; the CLI's
            ``depth:2000``), ``depth:z:v`` pairs
            as text (``"depth:0:1500,800:2500"``, m:m/s), a depth-velocity file (per-CMP text, .npy
            grid with a JSON sidecar) laid over the traces' extent plus ``aperture`` at ``dx``,
            ``dy``, ``dz``; or a model grid as it is: an array [nz, ny, nx] or [nz, nx] (2-D line) at
            ``dx``, ``dy``, ``dz`` from (``x0``, ``y0``).
        dx, dy, dz: lateral grid spacings and depth step of the velocity model (m).
        x0, y0: position of a model grid's first node in the traces' coordinates (m).
        fmin, fmax: frequency band migrated (Hz); ricker: peak frequency of the source wavelet (Hz).
        degree: Chebyshev polynomial degree (Laplacian applications per depth step).
        max_angle: design angle (degrees from vertical); filter: ``optimised`` or ``taylor8``.
        taper_width, taper_strength: absorbing edge taper: width (nodes) and strength.
        aperture: extra width (m) around each shot's source and receivers.
        table_rows: coefficient-table rows (0: about one per 0.01 of w dz / v).
        nz: depth samples to image (0: the whole model).
        kernel: GPU kernel: ``best``, ``paper``, ``paperq56``, ``cluster``, ``clusterd`` or ``auto``.
        planes: frequency planes per GPU launch.
        device, gpu, gpus: as in :func:`seisgpu.ktm.migrate` (``gpus``: shots and frequencies split).

    Returns:
        :class:`DepthImage` [nz, ny, nx].
    """
    tr = traces_in(data, dt, t0, sx=sx, sy=sy, gx=gx, gy=gy)
    if isinstance(velocity, str):
        v = velocity
    elif np.isscalar(velocity):
        # A number is an interval velocity in depth (the CLI's `depth:` prefix).
        v = f"depth:{float(velocity)!r}"
    else:
        v = as_f32(velocity, "velocity")
    opts = dict(velocity=v, dx=float(dx), dy=float(dy), dz=float(dz), x0=float(x0), y0=float(y0), fmin=float(fmin),
                fmax=float(fmax), ricker=float(ricker), degree=int(degree), max_angle=float(max_angle), filter=str(filter),
                taper_width=int(taper_width), taper_strength=float(taper_strength), aperture=float(aperture),
                table_rows=int(table_rows), nz=int(nz), kernel=str(kernel), planes=int(planes))
    img, (gx0, gdx, gy0, gdy, gdz), note = _native.srm_migrate(tr.data, tr.dt, tr.t0, tr.headers, opts, device, int(gpu),
                                                               gpus_arg(gpus))
    nzi, nyi, nxi = img.shape
    return DepthImage(img, gdz * np.arange(nzi), gy0 + gdy * np.arange(nyi), gx0 + gdx * np.arange(nxi), note)
