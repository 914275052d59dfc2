"""Nonlinear beamforming (paper 1, ``seisgpu nlbf``): :func:`estimate` finds the local traveltime
operator dt = A dx + B dy + C dx dy + D dx^2 + E dy^2 of every NLBF parameter trace and time sample
with the 2+2+1 semblance search; :func:`enhance` then stacks every trace with its neighbours
along the operators.

The search options have the names, units and defaults of ``seisgpu nlbf estimate --help``: with
no ``preset``, the ranges of A and B come from the data (to +-1/``min_velocity`` s/m; steps from
the sample interval and the apertures, C, D, E from the apertures), as the CLI does for a file;
the line saying so is the result's ``search``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from . import _native
from ._common import Traces, gpu_results, gpus_arg, traces_in


@dataclass
class Estimate:
    """The search's result: ``A``, ``B`` (s/m), ``C``, ``D``, ``E`` (s/m^2), ``S`` (semblance),
    each float32 [ny, nx, samples] over the grid of parameter traces (NaN where a parameter trace
    has an empty aperture and was not estimated: ``unestimated`` [ny, nx]); ``positions``
    [ny, nx, 2]: their (x, y) in the chosen coordinates (m); ``search``: how the ranges came from
    the data (None with a preset); ``enhanced``: the enhanced traces [traces, samples] and
    ``copied``: traces next to unestimated ones, copied through (:func:`enhance` only)."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    E: np.ndarray
    S: np.ndarray
    positions: np.ndarray
    unestimated: np.ndarray
    search: Optional[str]
    device: str
    enhanced: Optional[np.ndarray] = None
    copied: Optional[int] = None


def _range(r, name):
    if r is None or isinstance(r, str):
        return r
    vals = np.atleast_1d(np.asarray(r, dtype=np.float64))
    if vals.size == 1:
        return repr(float(vals[0]))
    if vals.size != 3:
        raise ValueError(f"{name}: a range is (min, step, max) or 'min:step:max', got {r!r}")
    return ":".join(repr(float(v)) for v in vals)


def _aperture(a, name):
    if a is None:
        return None
    if isinstance(a, str):
        parts = a.lower().split("x")
        try:
            a = tuple(float(p) for p in parts)
        except ValueError:
            raise ValueError(f"{name}: aperture `{a}` is not <x>x<y> (metres)") from None
    a = tuple(float(v) for v in a)
    if len(a) != 2:
        raise ValueError(f"{name}: an aperture is (x, y) in metres")
    return a


def _search(preset, x, y, x_scale, y_scale, spacing_x, spacing_y, aperture_ad, aperture_be, aperture_c, window, a, b, c, d, e,
            min_velocity, variant):
    return dict(preset=preset, x=x, y=y, x_scale=x_scale, y_scale=y_scale, spacing_x=spacing_x, spacing_y=spacing_y,
                aperture_ad=_aperture(aperture_ad, "aperture_ad"), aperture_be=_aperture(aperture_be, "aperture_be"),
                aperture_c=_aperture(aperture_c, "aperture_c"), window=None if window is None else int(window),
                a=_range(a, "a"), b=_range(b, "b"), c=_range(c, "c"), d=_range(d, "d"), e=_range(e, "e"),
                min_velocity=float(min_velocity), variant=str(variant))


_DOC_SEARCH = """
    Args:
        data, dt, t0: one prestack gather (cross-spread, shot or receiver gather, or a 2-D line)
            [traces, samples], sample interval (s), first sample time (s); or a :class:`seisgpu.Traces`.
            A float32 C-contiguous array is read in place while the GIL is released: do not write
            to it from another thread until the call returns.
        sx, sy, gx, gy, offset, cdp, inline, crossline, channel, ffid, source_station,
            receiver_station: the trace headers ``x`` and ``y`` may name.
        preset: every search parameter from ``synthetic-2d`` (the paper's 2-D values) or
            ``crossspread-3d``; default the paper's 2-D values with the ranges from the data.
        x, y: header giving the operator's x / y: receiver-x, receiver-y, source-x, source-y,
            receiver-station, source-station, midpoint-x, midpoint-y, offset, inline, crossline,
            cdp, channel, ffid.
        x_scale, y_scale: metres per unit of the x / y header value.
        spacing_x, spacing_y: spacing of the NLBF parameter traces (m).
        aperture_ad, aperture_be, aperture_c: apertures of the (A, D), (B, E) and C scans,
            (x, y) extents in metres or ``"400x35"``.
        window: time window N in samples (odd).
        a, b: search ranges of A, B (s/m); c, d, e: of C, D, E (s/m^2); (min, step, max) or
            ``"min:step:max"``, or one value.
        min_velocity: smallest apparent velocity the search keeps (m/s), for the ranges from the data.
        variant: ``auto`` (fast GPU version on a GPU, else the CPU reference), ``cpu``,
            ``gpu-paper`` or ``gpu-fast``.
        device, gpu, gpus: as in :func:`seisgpu.ktm.migrate` (``gpus``: parameter traces split;
            results independent of the count).
"""


@gpu_results("A", "B", "C", "D", "E", "S")
def estimate(data: Union[np.ndarray, Traces], dt: Optional[float] = None, *, t0: Optional[float] = None, sx=None, sy=None,
             gx=None, gy=None, offset=None, cdp=None, inline=None, crossline=None, channel=None, ffid=None,
             source_station=None, receiver_station=None, preset: Optional[str] = None, x: Optional[str] = None,
             y: Optional[str] = None, x_scale: Optional[float] = None, y_scale: Optional[float] = None,
             spacing_x: Optional[float] = None, spacing_y: Optional[float] = None, aperture_ad=None, aperture_be=None,
             aperture_c=None, window: Optional[int] = None, a=None, b=None, c=None, d=None, e=None,
             min_velocity: float = 1400.0, variant: str = "auto", device: str = "auto", gpu: int = 0,
             gpus: Union[None, int, str] = None) -> Estimate:
    tr = traces_in(data, dt, t0, sx=sx, sy=sy, gx=gx, gy=gy, offset=offset, cdp=cdp, inline=inline, crossline=crossline,
                   channel=channel, ffid=ffid, source_station=source_station, receiver_station=receiver_station)
    s = _search(preset, x, y, x_scale, y_scale, spacing_x, spacing_y, aperture_ad, aperture_be, aperture_c, window, a, b, c, d, e,
                min_velocity, variant)
    r = _native.nlbf_estimate(tr.data, tr.dt, tr.t0, tr.headers, s, device, int(gpu), gpus_arg(gpus))
    return Estimate(**r)


estimate.__doc__ = """The 2+2+1 search for local traveltime operators (``seisgpu nlbf estimate``).
""" + _DOC_SEARCH + """
    Returns:
        :class:`Estimate`.
"""


@gpu_results("A", "B", "C", "D", "E", "S", "enhanced")
def enhance(data: Union[np.ndarray, Traces], dt: Optional[float] = None, *, t0: Optional[float] = None, sx=None, sy=None,
            gx=None, gy=None, offset=None, cdp=None, inline=None, crossline=None, channel=None, ffid=None,
            source_station=None, receiver_station=None, aperture=None, preset: Optional[str] = None, x: Optional[str] = None,
            y: Optional[str] = None, x_scale: Optional[float] = None, y_scale: Optional[float] = None,
            spacing_x: Optional[float] = None, spacing_y: Optional[float] = None, aperture_ad=None, aperture_be=None,
            aperture_c=None, window: Optional[int] = None, a=None, b=None, c=None, d=None, e=None,
            min_velocity: float = 1400.0, variant: str = "auto", device: str = "auto", gpu: int = 0,
            gpus: Union[None, int, str] = None) -> Estimate:
    tr = traces_in(data, dt, t0, sx=sx, sy=sy, gx=gx, gy=gy, offset=offset, cdp=cdp, inline=inline, crossline=crossline,
                   channel=channel, ffid=ffid, source_station=source_station, receiver_station=receiver_station)
    s = _search(preset, x, y, x_scale, y_scale, spacing_x, spacing_y, aperture_ad, aperture_be, aperture_c, window, a, b, c, d, e,
                min_velocity, variant)
    r = _native.nlbf_enhance(tr.data, tr.dt, tr.t0, tr.headers, s, _aperture(aperture, "aperture"), device, int(gpu),
                             gpus_arg(gpus))
    return Estimate(**r)


enhance.__doc__ = """The search, then every trace stacked with its neighbours along the interpolated
    operators (``seisgpu nlbf enhance``): the result's ``enhanced`` traces [traces, samples].

    aperture: neighbours stacked with each trace, (x, y) extents in metres (default: the C aperture).
""" + _DOC_SEARCH + """
    Returns:
        :class:`Estimate` with ``enhanced`` and ``copied``.
"""
