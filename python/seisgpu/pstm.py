"""Prestack time migration in paper 5's PSTM engine (``seisgpu pstm migrate``): exact, static
8-point interpolated or dynamic traveltimes, straight-ray DSR or VTI (eta), offset classes.

Parameters have the names, units and defaults of ``seisgpu pstm migrate --help``; grid options
left as None come from the data (the traces' CDP extent at their bin spacing, their time axis).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from . import _native
from ._common import Traces, gpu_results, gpus_arg, is_gpu, traces_in
from .ktm import axes, grid_of, velocity_arg


@dataclass
class Image:
    """A PSTM image: ``data`` float32 [nx, ny, noff, nz] (the CLI's .npy layout, time fastest);
    ``x`` (m), ``y`` (m), ``tau`` (s, two-way) axes; ``offsets``: class centre offsets (m; [0.0] for
    one class); ``traces_used``, ``contributions``; ``grid``, ``grid_note``, ``device`` as in
    :class:`seisgpu.ktm.Image`."""

    data: np.ndarray
    x: np.ndarray
    y: np.ndarray
    tau: np.ndarray
    offsets: np.ndarray
    traces_used: int
    contributions: int
    grid: dict
    grid_note: Optional[str]
    device: str

    def __array__(self, dtype=None, copy=None):
        data = self.data.get() if is_gpu(self.data) else self.data
        return data if dtype is None else data.astype(dtype)

    @property
    def stack(self) -> np.ndarray:
        """The image summed over offset classes, [nx, ny, nz]."""
        return self.data.sum(axis=2)


@gpu_results("data")
def migrate(data: Union[np.ndarray, Traces], dt: Optional[float] = None, *, t0: Optional[float] = None,
            sx=None, sy=None, gx=None, gy=None, cdp_x=None, cdp_y=None,
            traveltime: str = "static8", traveltime_model: str = "dsr", tolerance: Optional[float] = None,
            max_step: int = 32, nx: Optional[int] = None, ny: Optional[int] = None, dx: Optional[float] = None,
            dy: Optional[float] = None, nz: Optional[int] = None, dtau: Optional[float] = None,
            x0: Optional[float] = None, y0: Optional[float] = None, noff: int = 1, offset0: float = 0.0,
            doffset: float = 1.0e6, velocity=2000.0, velocity_gradient: float = 0.0, eta: float = 0.08,
            aperture: float = 800.0, stretch: float = 0.5, warps: Optional[int] = None, max_regs: Optional[int] = None,
            texture: bool = False, device: str = "auto", gpu: int = 0, gpus: Union[None, int, str] = None) -> Image:
    """Prestack time migration of traces (``seisgpu pstm migrate``).

    Args:
        data, dt, t0, sx, sy, gx, gy, cdp_x, cdp_y: the traces as in :func:`seisgpu.ktm.migrate`.
        traveltime: ``exact`` (every image sample), ``static8`` (exact every 8th sample, linear
            between) or ``dynamic`` (steps of 8-32 samples chosen by an error test).
        traveltime_model: ``dsr`` (straight-ray double square root) or ``vti`` (non-hyperbolic, eta).
        tolerance: dynamic mode: largest midpoint interpolation error accepted (s; default 4e-4).
        max_step: dynamic mode: largest step (samples): 8, 16, 24 or 32.
        nx, ny: image columns along x and y; dx, dy: their spacing (m); x0, y0: the first column (m);
            nz: image time samples; dtau: their interval (s). Default: from the data.
        noff, offset0, doffset: offset classes: count, first class start (m) and class width (m).
        velocity: RMS velocity v_rms (m/s), as in :func:`seisgpu.ktm.migrate` (a constant is v_rms at
            tau = 0 with ``velocity_gradient``).
        velocity_gradient: increase of a constant velocity per second of image time (m/s/s).
        eta: effective eta for the VTI traveltime (dimensionless, >= 0).
        aperture: largest midpoint-to-column distance (m).
        stretch: stretch mute: samples with traveltime above (1 + stretch) x image time are muted.
        warps, max_regs, texture: GPU: columns (warps) per block, register cap, traces through a texture.
        device, gpu, gpus: as in :func:`seisgpu.ktm.migrate`.

    Returns:
        :class:`Image` with ``data`` [nx, ny, noff, nz].
    """
    tr = traces_in(data, dt, t0, sx=sx, sy=sy, gx=gx, gy=gy, cdp_x=cdp_x, cdp_y=cdp_y)
    opts = dict(traveltime=str(traveltime), traveltime_model=str(traveltime_model),
                tolerance=None if tolerance is None else float(tolerance), max_step=int(max_step), x0=x0, dx=dx, nx=nx, y0=y0,
                dy=dy, ny=ny, nz=nz, dtau=dtau, noff=int(noff), offset0=float(offset0), doffset=float(doffset),
                velocity=velocity_arg(velocity), velocity_gradient=float(velocity_gradient), eta=float(eta),
                aperture=float(aperture), stretch=float(stretch), warps=warps, max_regs=max_regs, texture=bool(texture))
    img, g, used, contributions, line, note = _native.pstm_migrate(tr.data, tr.dt, tr.t0, tr.headers, opts, device, int(gpu),
                                                                  gpus_arg(gpus))
    g = grid_of(g)
    x, y, tau = axes(g)
    offsets = offset0 + (np.arange(noff) + 0.5) * doffset if noff > 1 else np.zeros(1)
    return Image(img, x, y, tau, offsets, used, contributions, g, line, note)
