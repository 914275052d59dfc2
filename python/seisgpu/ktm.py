"""Kirchhoff prestack time migration (``seisgpu ktm``): :func:`migrate` images prestack traces into
an (inline x, crossline y, two-way time tau) image, :func:`model` is its exact adjoint (Kirchhoff
modelling, demigration). The two pass the dot-product test, so they serve as the operator pair of
least-squares migration (:class:`seisgpu.pylops.Kirchhoff`).

Parameters have the names, units and defaults of ``seisgpu ktm migrate --help``. Image grid
options left as None come from the data, as the CLI does for a SEG-Y input: the extent of the
traces' CDP positions (``cdp_x``/``cdp_y`` when given, else the source-receiver midpoints) at
their bin spacing, and the traces' time axis; the chosen grid is in the result's ``grid_note``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._common import Traces, as_f32, gpus_arg, header_arrays, traces_in


@dataclass
class Image:
    """A migrated image and its axes.

    ``data``: float32 [classes, nx, ny, ntau] (one image per offset class, 1 without classes;
    tau fastest). ``x`` (m, nx), ``y`` (m, ny): bin centres; ``tau`` (s, ntau): two-way vertical
    time. ``offsets``: each class's centre offset (m; [0.0] without classes). ``skipped_traces``:
    input traces in no offset class. ``grid``: the grid's nine numbers by name (for :func:`model`
    and for calls on the same grid). ``grid_note``: how the grid was taken from the data (None
    when all of it was given). ``device``: where it ran."""

    data: np.ndarray
    x: np.ndarray
    y: np.ndarray
    tau: np.ndarray
    offsets: np.ndarray
    skipped_traces: int
    grid: dict
    grid_note: Optional[str]
    device: str

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    @property
    def stack(self) -> np.ndarray:
        """The image summed over offset classes, [nx, ny, ntau]."""
        return self.data.sum(axis=0)


GRID_KEYS = ("x0", "dx", "nx", "y0", "dy", "ny", "tau0", "dtau", "ntau")


def grid_of(t) -> dict:
    # The times are float32 in the library: their shortest decimal form (0.004, not 0.004000000189989805).
    f32 = lambda v: float(str(np.float32(v)))
    return dict(zip(GRID_KEYS, (float(t[0]), float(t[1]), int(t[2]), float(t[3]), float(t[4]), int(t[5]), f32(t[6]),
                                f32(t[7]), int(t[8]))))


def axes(g: dict):
    x = g["x0"] + g["dx"] * np.arange(g["nx"])
    y = g["y0"] + g["dy"] * np.arange(g["ny"])
    tau = (np.float32(g["tau0"]) + np.float32(g["dtau"]) * np.arange(g["ntau"], dtype=np.float32)).astype(np.float64)
    return x, y, tau


def velocity_arg(velocity):
    """The velocity as ``_native`` takes it: the CLI's text, v_rms(tau) or v_rms(x, y, tau)."""
    if isinstance(velocity, str):
        return velocity
    if np.isscalar(velocity):
        return repr(float(velocity))
    arr = np.asarray(velocity)
    if arr.ndim == 2 and arr.shape[1] == 2:
        # (t, v) pairs: the CLI's `t:v,t:v` text.
        return ",".join(f"{float(t)!r}:{float(v)!r}" for t, v in arr)
    if arr.ndim not in (1, 3):
        raise ValueError(f"velocity: shape {arr.shape}; expected a number, text, (n, 2) t:v pairs, [ntau] or [nx, ny, ntau]")
    return as_f32(arr, "velocity")


def _numbers(v, n: int, name: str, sep: str = ","):
    if v is None:
        return None
    if isinstance(v, str):
        try:
            parts = [float(p) for p in v.split(sep)]
        except ValueError:
            raise ValueError(f"{name}: `{v}` is not a list of {n} numbers separated by `{sep}`") from None
    else:
        parts = [float(p) for p in v]
    if len(parts) != n:
        raise ValueError(f"{name}: expected {n} numbers, got {len(parts)}")
    return tuple(parts)


def options(velocity, aperture, max_angle, taper, no_rho, prep_on_gpu, no_weights, no_antialias, aa_max, aa_spacing,
            mute_stretch, offset_classes, traveltime, traveltime_model, eta, kernel, paper_block, max_traces_per_chunk,
            max_columns_per_tile) -> dict:
    classes = _numbers(offset_classes, 3, "offset_classes")
    if classes is not None:
        if classes[2] != int(classes[2]) or classes[2] < 1:
            raise ValueError(f"offset_classes: count {classes[2]} must be a positive whole number")
        classes = (classes[0], classes[1], int(classes[2]))
    block = _numbers(paper_block, 2, "paper_block", "x")
    return dict(velocity=velocity_arg(velocity), aperture=None if aperture is None else float(aperture), max_angle=float(max_angle),
                taper=float(taper), rho=not no_rho, prep_on_gpu=bool(prep_on_gpu), weights=not no_weights,
                antialias=not no_antialias, aa_max=float(aa_max), aa_spacing=_numbers(aa_spacing, 2, "aa_spacing"),
                mute_stretch=None if mute_stretch is None else float(mute_stretch), offset_classes=classes,
                traveltime=str(traveltime), traveltime_model=str(traveltime_model), eta=float(eta), kernel=str(kernel),
                paper_block=(int(block[0]), int(block[1])), max_traces_per_chunk=max_traces_per_chunk,
                max_columns_per_tile=max_columns_per_tile)


def migrate(data: Union[np.ndarray, Traces], dt: Optional[float] = None, *, t0: Optional[float] = None,
            sx=None, sy=None, gx=None, gy=None, cdp_x=None, cdp_y=None,
            x0: Optional[float] = None, dx: Optional[float] = None, nx: Optional[int] = None,
            y0: Optional[float] = None, dy: Optional[float] = None, ny: Optional[int] = None,
            tau0: Optional[float] = None, dtau: Optional[float] = None, ntau: Optional[int] = None,
            velocity=2000.0, aperture: Optional[float] = None, max_angle: float = 90.0, taper: float = 0.1,
            no_rho: bool = False, prep_on_gpu: bool = False, no_weights: bool = False, no_antialias: bool = False,
            aa_max: float = 8.0, aa_spacing=None, mute_stretch: Optional[float] = None, offset_classes=None,
            traveltime: str = "exact", traveltime_model: str = "dsr", eta: float = 0.0, kernel: str = "columns",
            paper_block="128x1", max_traces_per_chunk: Optional[int] = None, max_columns_per_tile: Optional[int] = None,
            device: str = "auto", gpu: int = 0, gpus: Union[None, int, str] = None) -> Image:
    """Kirchhoff prestack time migration of traces into an image (``seisgpu ktm migrate``).

    Args:
        data: traces [traces, samples] (float32 C-contiguous is used as is; other real dtypes and
            orders are converted), or a :class:`seisgpu.Traces` (from :func:`seisgpu.segy.traces`).
        dt: sample interval (s); t0: time of the first sample (s, default 0).
        sx, sy, gx, gy: source and receiver coordinates (m), one per trace (sy, gy default 0: a 2-D
            line along x). cdp_x, cdp_y: CDP coordinates (m), only for the default grid's extent.
        x0, dx, nx / y0, dy, ny: image origin (m), bin spacing (m) and bin count, inline x and
            crossline y; default from the data's CDPs.
        tau0, dtau, ntau: first image time (s, two-way vertical), time step (s) and samples; default
            the traces' time axis.
        velocity: RMS velocity v_rms (m/s): a constant; ``t:v`` pairs as text (``"0:1500,1.2:2400"``,
            s two-way : m/s) or an (n, 2) array; a velocity file (what ``seisgpu velan -o`` writes, a
            .npy grid with its JSON sidecar, a SEG-Y velocity volume); an array [ntau] on the image
            times or [nx, ny, ntau] on the image grid.
        aperture: largest image point to midpoint distance (m); default no limit.
        max_angle: largest angle from the vertical at the image point to the midpoint (degrees, <= 90).
        taper: cosine taper over this outer fraction of the aperture radius.
        no_rho: skip the rho (anticausal half-derivative) filter on the traces.
        prep_on_gpu: GPU runs: rho filter and trace layout on the GPU instead of the host's cores.
        no_weights: skip the amplitude weights (cos / sqrt(v r)).
        no_antialias: skip the anti-aliasing triangle filter.
        aa_max: longest anti-aliasing triangle half-length (samples).
        aa_spacing: trace spacing for the anti-alias limit, (dx, dy) (m); default the bin size.
        mute_stretch: stretch mute: drop contributions stretched by more than this fraction (0..1).
        offset_classes: common-offset image gathers, (first, width, count) of |offset| (m, m, classes).
        traveltime: ``exact``, ``static8`` or ``dynamic`` (the last two in the PSTM engine, unit
            weights: give ``no_weights=True, no_antialias=True``).
        traveltime_model: ``dsr`` or ``vti`` (with ``eta``, in the PSTM engine).
        eta: anellipticity for ``vti`` (dimensionless, >= 0).
        kernel: GPU kernel: ``columns``, ``columns-v1``, ``columns-fast`` or ``paper``.
        paper_block: block shape of the paper kernel, ``"XxY"`` (threads per trace loop x image-time loop).
        max_traces_per_chunk, max_columns_per_tile: caps on the GPU work units (normally planned
            from free GPU memory).
        device: ``auto`` (GPU when present, else CPU), ``gpu`` (error without one) or ``cpu``.
        gpu: GPU ordinal. gpus: split the work over N devices (N GPUs, or N CPU work queues with
            ``device="cpu"``) or ``"all"`` GPUs; the images are summed in device order.

    Returns:
        :class:`Image`: ``data`` [classes, nx, ny, ntau] with its axes ``x``, ``y``, ``tau``.

    Raises:
        ValueError: bad arguments or data (the CLI's message); RuntimeError: the GPU or a file failed.
    """
    tr = traces_in(data, dt, t0, sx=sx, sy=sy, gx=gx, gy=gy, cdp_x=cdp_x, cdp_y=cdp_y)
    grid = dict(x0=x0, dx=dx, nx=nx, y0=y0, dy=dy, ny=ny, tau0=tau0, dtau=dtau, ntau=ntau)
    opts = options(velocity, aperture, max_angle, taper, no_rho, prep_on_gpu, no_weights, no_antialias, aa_max, aa_spacing,
                   mute_stretch, offset_classes, traveltime, traveltime_model, eta, kernel, paper_block, max_traces_per_chunk,
                   max_columns_per_tile)
    img, g, offsets, skipped, line, note = _native.ktm_migrate(tr.data, tr.dt, tr.t0, tr.headers, grid, opts, device, int(gpu),
                                                               gpus_arg(gpus))
    g = grid_of(g)
    x, y, tau = axes(g)
    return Image(img, x, y, tau, np.asarray(offsets, dtype=np.float64), skipped, g, line, note)


def model(image, ns: Optional[int] = None, dt: Optional[float] = None, *, geometry: Optional[Traces] = None,
          t0: Optional[float] = None, sx=None, sy=None, gx=None, gy=None, cdp_x=None, cdp_y=None,
          x0: Optional[float] = None, dx: Optional[float] = None, nx: Optional[int] = None,
          y0: Optional[float] = None, dy: Optional[float] = None, ny: Optional[int] = None,
          tau0: Optional[float] = None, dtau: Optional[float] = None, ntau: Optional[int] = None,
          velocity=2000.0, aperture: Optional[float] = None, max_angle: float = 90.0, taper: float = 0.1,
          no_rho: bool = False, prep_on_gpu: bool = False, no_weights: bool = False, no_antialias: bool = False,
          aa_max: float = 8.0, aa_spacing=None, mute_stretch: Optional[float] = None, offset_classes=None,
          traveltime: str = "exact", traveltime_model: str = "dsr", eta: float = 0.0, kernel: str = "columns",
          paper_block="128x1", max_traces_per_chunk: Optional[int] = None, max_columns_per_tile: Optional[int] = None,
          device: str = "auto", gpu: int = 0) -> np.ndarray:
    """Kirchhoff modelling, the exact adjoint of :func:`migrate` (``seisgpu ktm model``): traces
    in the geometry ``sx, sy, gx, gy`` from an image.

    Args:
        image: [nx, ny, ntau] or [classes, nx, ny, ntau] on the image grid, or an :class:`Image`
            (its grid is then used for every grid option left as None).
        ns: samples per output trace; dt: sample interval (s); t0: time of the first sample (s, default 0).
        geometry: a :class:`seisgpu.Traces` whose sampling and headers the output takes (in place
            of ``ns``, ``dt``, ``t0``, ``sx``, ``sy``, ``gx``, ``gy``, ``cdp_x``, ``cdp_y``).
        Every other argument as in :func:`migrate` (same names, units and defaults): given the same
        ones, ``model`` is the adjoint of ``migrate`` (``<migrate(d), m> = <d, model(m)>``).

    Returns:
        float32 [traces, ns]; traces in no offset class are zeros.
    """
    grid = dict(x0=x0, dx=dx, nx=nx, y0=y0, dy=dy, ny=ny, tau0=tau0, dtau=dtau, ntau=ntau)
    if isinstance(image, Image):
        grid = {k: (image.grid[k] if v is None else v) for k, v in grid.items()}
        image = image.data
    given = {k: v for k, v in dict(sx=sx, sy=sy, gx=gx, gy=gy, cdp_x=cdp_x, cdp_y=cdp_y).items() if v is not None}
    if geometry is not None:
        given = dict({k: v for k, v in geometry.headers.items() if k in ("sx", "sy", "gx", "gy", "cdp_x", "cdp_y")}, **given)
        ns = geometry.ns if ns is None else ns
        dt = geometry.dt if dt is None else dt
        t0 = geometry.t0 if t0 is None else t0
    if "sx" not in given or "gx" not in given:
        raise ValueError("sx, gx: the source and receiver x of every output trace (m) are needed (or geometry=)")
    if ns is None or dt is None:
        raise ValueError("ns, dt: the output traces' samples and sample interval (s) are needed (or geometry=)")
    headers = header_arrays(given, np.size(given["sx"]))
    img = as_f32(image, "image")
    if img.ndim not in (3, 4):
        raise ValueError(f"image: {img.ndim}-D array of shape {img.shape}, expected [nx, ny, ntau] or [classes, nx, ny, ntau]")
    opts = options(velocity, aperture, max_angle, taper, no_rho, prep_on_gpu, no_weights, no_antialias, aa_max, aa_spacing,
                   mute_stretch, offset_classes, traveltime, traveltime_model, eta, kernel, paper_block, max_traces_per_chunk,
                   max_columns_per_tile)
    out, _, _, _ = _native.ktm_model(img, int(ns), float(dt), float(t0 or 0.0), headers, grid, opts, device, int(gpu))
    return out
