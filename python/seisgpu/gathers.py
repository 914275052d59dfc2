"""NMO correction (``seisgpu nmo``) and velocity analysis (``seisgpu velan``) of prestack traces."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Union

import numpy as np

from . import _native
from ._common import Traces, gpu_results, traces_in
from .ktm import velocity_arg


@gpu_results()
def nmo(data: Union[np.ndarray, Traces], dt: Optional[float] = None, *, velocity, t0: Optional[float] = None,
        offset=None, sx=None, sy=None, gx=None, gy=None, cdp=None, cdp_x=None, cdp_y=None, max_stretch: float = 0.5,
        device: str = "auto", gpu: int = 0) -> np.ndarray:
    """NMO correction with a stretch mute (``seisgpu nmo``).

    Args:
        data, dt, t0: traces [traces, samples], sample interval (s), first sample time (s); or a
            :class:`seisgpu.Traces`. A float32 C-contiguous array is read in place while the GIL is
            released: do not write to it from another thread until the call returns.
        velocity: RMS velocity v_rms(t) (m/s): a constant; ``t:v`` pairs (s two-way : m/s) as text or
            an (n, 2) array; a velocity file (``velan`` picks, a .npy grid with its JSON sidecar, a
            SEG-Y velocity volume), interpolated to each trace's CDP.
        offset: signed source-receiver offset (m) per trace; sx, sy, gx, gy: coordinates (m), used
            for the offset where they are given; cdp, cdp_x, cdp_y: the trace's CMP for per-CMP velocities.
        max_stretch: stretch mute: samples whose stretch (t - t0) / t0 exceeds this are zeroed (0.5 = 50 %).
        device, gpu: where it runs (``auto``, ``gpu``, ``cpu``; GPU ordinal).

    Returns:
        float32 [traces, samples], NMO-corrected.
    """
    tr = traces_in(data, dt, t0, offset=offset, sx=sx, sy=sy, gx=gx, gy=gy, cdp=cdp, cdp_x=cdp_x, cdp_y=cdp_y)
    v = velocity_arg(velocity)
    if not isinstance(v, str):
        raise ValueError("velocity: a number, t:v pairs (text or an (n, 2) array) or a velocity file")
    out, _ = _native.nmo(tr.data, tr.dt, tr.t0, tr.headers, v, float(max_stretch), device, int(gpu))
    return out


@dataclass
class Velan:
    """Velocity analysis of CMP gathers.

    ``semblance``: float32 [cmps, velocities, samples]; ``velocities`` (m/s); ``t`` (s): the sample
    times; per CMP: ``cdp`` (number, or None for midpoint bins), ``x``, ``y`` (m, mean midpoint),
    ``fold``; ``picks``: per CMP an array [(t s, v_rms m/s, semblance)]; ``vrms``: float32
    [cmps, samples], the picked functions on the sample times (CMPs without picks take their
    neighbours'); ``nmo``: the input NMO-corrected with them (with ``nmo=True``), else None."""

    semblance: np.ndarray
    velocities: np.ndarray
    t: np.ndarray
    cdp: List[Optional[int]]
    x: np.ndarray
    y: np.ndarray
    fold: np.ndarray
    picks: List[np.ndarray]
    vrms: np.ndarray
    nmo: Optional[np.ndarray]
    device: str


@gpu_results("semblance", "vrms", "nmo")
def velan(data: Union[np.ndarray, Traces], dt: Optional[float] = None, *, t0: Optional[float] = None, offset=None,
          sx=None, sy=None, gx=None, gy=None, cdp=None, output: Optional[str] = None, vmin: float = 1400.0,
          vmax: float = 4500.0, nv: int = 100, window: float = 40.0, eta: float = 0.0, max_stretch: float = 0.5,
          threshold: float = 0.3, min_fold: int = 6, bin: float = 12.5, nmo: bool = False, device: str = "auto",
          gpu: int = 0) -> Velan:
    """Semblance velocity analysis of CMP gathers and automatic v_rms(t) picks (``seisgpu velan``).

    Gathers: traces with the same ``cdp`` number, or midpoint bins of ``bin`` m when no trace has one.

    Args:
        data, dt, t0, offset, sx, sy, gx, gy, cdp: the traces (see :func:`nmo`).
        output: also write the picks as the CLI's text file (one CMP per line; a ``velocity`` argument).
        vmin, vmax: lowest and highest trial velocity (m/s); nv: number of trial velocities.
        window: semblance time window (ms), centred on each output time.
        eta: anellipticity (0 to 0.5) of the non-hyperbolic moveout; 0 = hyperbolic.
        max_stretch: stretch mute (fraction): stretched samples are left out of the semblance.
        threshold: lowest semblance (0 to 1) of a pick; min_fold: fewest traces a CMP needs to be picked.
        bin: midpoint bin size (m) when the headers have no CDP numbers.
        nmo: also return the traces NMO-corrected with the picks.
        device, gpu: where the semblance runs.

    Returns:
        :class:`Velan`.
    """
    tr = traces_in(data, dt, t0, offset=offset, sx=sx, sy=sy, gx=gx, gy=gy, cdp=cdp)
    opts = dict(vmin=float(vmin), vmax=float(vmax), nv=int(nv), window=float(window), eta=float(eta),
                max_stretch=float(max_stretch), threshold=float(threshold), min_fold=int(min_fold), bin=float(bin),
                output=None if output is None else str(output), nmo=bool(nmo))
    r = _native.velan_scan(tr.data, tr.dt, tr.t0, tr.headers, opts, device, int(gpu))
    ns = tr.data.shape[1]
    return Velan(r["semblance"], r["velocities"], np.float32(r["t0"]) + np.float32(tr.dt) * np.arange(ns, dtype=np.float32),
                 r["cdp"], np.asarray(r["x"]), np.asarray(r["y"]), np.asarray(r["fold"]),
                 [np.asarray(p, dtype=np.float32).reshape(-1, 3) for p in r["picks"]], r["vrms"], r.get("nmo"), r["device"])
