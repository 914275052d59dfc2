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
from . import _common
from ._common import Traces, as_f32, gpus_arg, header_arrays, traces_in, traces_parts


@dataclass
class Image:
    """A migrated image and its axes.

    ``data``: float32 [classes, nx, ny, ntau] (one image per offset class, 1 without classes;
    tau fastest): a NumPy array, or a CuPy array when the traces were on the GPU. ``x`` (m, nx), ``y`` (m, ny): bin centres; ``tau`` (s, ntau): two-way vertical
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
        data = self.data.get() if _common.is_gpu(self.data) else self.data
        return data if dtype is None else data.astype(dtype)

    @property
    def stack(self):
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
    if _common.is_gpu(velocity):
        velocity = _common.from_gpu(velocity, "velocity")
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
            Used as is, the array is read in place while the GIL is released: do not write to it
            from another thread until the call returns (as with NumPy's own functions).
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

    GPU arrays: ``data`` may be a CuPy array (or any ``__cuda_array_interface__`` / DLPack float
    array on a GPU, or a :class:`Traces` holding one). On a GPU run (``device`` ``"gpu"``, or
    ``"auto"`` finding one; ``gpu`` must be the array's device, else ValueError) the traces are
    read where they are and the image is a new CuPy array on that device: no host copy of either
    (the headers and the velocity are copied, they are small). The traces' preparation then runs
    on the GPU whatever ``prep_on_gpu`` says. The producer's stream is synchronised first and the
    computation is finished on return. With ``device="cpu"``, ``gpus=`` or the ``vti`` model the
    traces are copied to the host and the image back to the GPU.

    Raises:
        ValueError: bad arguments or data (the CLI's message); RuntimeError: the GPU or a file failed.
    """
    grid = dict(x0=x0, dx=dx, nx=nx, y0=y0, dy=dy, ny=ny, tau0=tau0, dtau=dtau, ntau=ntau)
    opts = options(velocity, aperture, max_angle, taper, no_rho, prep_on_gpu, no_weights, no_antialias, aa_max, aa_spacing,
                   mute_stretch, offset_classes, traveltime, traveltime_model, eta, kernel, paper_block, max_traces_per_chunk,
                   max_columns_per_tile)
    samples, dt_, t0_, given = traces_parts(data, dt, t0, sx=sx, sy=sy, gx=gx, gy=gy, cdp_x=cdp_x, cdp_y=cdp_y)
    home = _common.gpu_device_of(samples)
    if home is not None:
        if _resident(home, device, gpu, gpus, traveltime_model):
            return _migrate_resident(samples, dt_, t0_, given, grid, opts, int(gpu))
        # Host staging (device="cpu", gpus=, VTI): the result goes back to the traces' GPU.
        img = migrate(Traces(_common.from_gpu(samples, "data"), dt_, t0_, given), device=device, gpu=gpu, gpus=gpus, **grid,
                      **_option_args(opts, velocity, offset_classes, paper_block, aa_spacing))
        return _common.to_gpu(img, ("data",), home)
    tr = traces_in(data, dt, t0, sx=sx, sy=sy, gx=gx, gy=gy, cdp_x=cdp_x, cdp_y=cdp_y)
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
        float32 [traces, ns]; traces in no offset class are zeros. A CuPy array when ``image`` is
        one (or any ``__cuda_array_interface__`` / DLPack GPU array): on a GPU run (``gpu`` the
        array's device, else ValueError) the image is read where it is and the traces are written
        into a new CuPy array on that device, with no host copy; with ``device="cpu"`` the image
        is copied to the host and the traces back.
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
    opts = options(velocity, aperture, max_angle, taper, no_rho, prep_on_gpu, no_weights, no_antialias, aa_max, aa_spacing,
                   mute_stretch, offset_classes, traveltime, traveltime_model, eta, kernel, paper_block, max_traces_per_chunk,
                   max_columns_per_tile)
    home = _common.gpu_device_of(image)
    if home is not None and _resident(home, device, gpu, None, traveltime_model):
        return _model_resident(image, int(ns), float(dt), float(t0 or 0.0), headers, grid, opts, int(gpu))
    img = as_f32(image, "image")
    if img.ndim not in (3, 4):
        raise ValueError(f"image: {img.ndim}-D array of shape {img.shape}, expected [nx, ny, ntau] or [classes, nx, ny, ntau]")
    out, _, _, _ = _native.ktm_model(img, int(ns), float(dt), float(t0 or 0.0), headers, grid, opts, device, int(gpu))
    return out if home is None else _common.to_gpu(out, (), home)


def _resident(home: int, device: str, gpu, gpus, traveltime_model: str) -> bool:
    """Whether a call on a GPU array (on GPU ``home``) runs on that GPU without host copies: a
    one-GPU run of the exact-DSR engine on the array's own GPU (ValueError for another GPU)."""
    if device == "cpu" or gpus is not None or traveltime_model != "dsr":
        return False
    if device != "gpu" and not (_native.has_kernels() and _native.describe_devices(device, int(gpu), None).startswith("GPU")):
        return False
    if int(gpu) != home:
        raise ValueError(f"the GPU array is on GPU {home}, the call runs on GPU {int(gpu)}: pass gpu={home}, or move the array")
    return True


def _migrate_resident(samples, dt: float, t0: float, given: dict, grid: dict, opts: dict, gpu: int) -> Image:
    import cupy

    d = _common.device_f32(samples, "data", 2)
    n, ns = d.shape
    _common.check_finite(d, "data", ns)
    headers = header_arrays(given, n)
    g, _ = _native.ktm_grid(ns, dt, t0, headers, grid)
    g = grid_of(g)
    classes = 1 if opts["offset_classes"] is None else opts["offset_classes"][2]
    with cupy.cuda.Device(gpu):
        out = cupy.empty((classes, g["nx"], g["ny"], g["ntau"]), dtype=cupy.float32)
    _, offsets, skipped, line, note = _native.ktm_migrate_resident(d.data.ptr, ns, dt, t0, headers, g, opts, gpu, out.data.ptr,
                                                                  out.size)
    x, y, tau = axes(g)
    return Image(out, x, y, tau, np.asarray(offsets, dtype=np.float64), skipped, g, line, note)


def _model_resident(image, ns: int, dt: float, t0: float, headers: dict, grid: dict, opts: dict, gpu: int):
    import cupy

    img = _common.device_f32(image, "image")
    if img.ndim not in (3, 4):
        raise ValueError(f"image: {img.ndim}-D array of shape {img.shape}, expected [nx, ny, ntau] or [classes, nx, ny, ntau]")
    _common.check_finite(img, "image")
    n = len(next(iter(headers.values())))
    g, _ = _native.ktm_grid(ns, dt, t0, headers, grid)
    g = grid_of(g)
    if tuple(img.shape[-3:]) != (g["nx"], g["ny"], g["ntau"]):
        raise ValueError(f"image: shape {tuple(img.shape)} does not match the grid {g['nx']} x {g['ny']} x {g['ntau']}")
    with cupy.cuda.Device(gpu):
        out = cupy.empty((n, ns), dtype=cupy.float32)
    _native.ktm_model_resident(img.data.ptr, img.size, ns, dt, t0, headers, g, opts, gpu, out.data.ptr)
    return out


def _option_args(opts: dict, velocity, offset_classes, paper_block, aa_spacing) -> dict:
    """:func:`migrate`'s keyword arguments back from :func:`options` (for the host-staged call)."""
    o = dict(opts)
    return dict(velocity=velocity, aperture=o["aperture"], max_angle=o["max_angle"], taper=o["taper"], no_rho=not o["rho"],
                prep_on_gpu=o["prep_on_gpu"], no_weights=not o["weights"], no_antialias=not o["antialias"], aa_max=o["aa_max"],
                aa_spacing=aa_spacing, mute_stretch=o["mute_stretch"], offset_classes=offset_classes, traveltime=o["traveltime"],
                traveltime_model=o["traveltime_model"], eta=o["eta"], kernel=o["kernel"], paper_block=paper_block,
                max_traces_per_chunk=o["max_traces_per_chunk"], max_columns_per_tile=o["max_columns_per_tile"])
