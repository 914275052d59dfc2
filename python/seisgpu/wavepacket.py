"""The 3D wave-packet transform with USFFT (paper 3) and its applications
(``seisgpu wavepacket``): :func:`forward` / :func:`inverse`, :func:`denoise`, :func:`compress`,
:func:`interpolate`, on volumes [n1, n2, samples] (samples fastest; float32 C-contiguous used as
is, other real dtypes and orders converted).

Volumes larger than one cube are cut into overlapping cubes (``cube``, ``overlap``) and blended.
Every function takes the transform options of the CLI (names, units, defaults):

    eps: USFFT accuracy epsilon (relative, in (0, 1)); default 1e-4.
    gather: spectrum evaluation: ``separable`` (USFFT per axis), ``stencil`` (the paper's 3D USFFT)
        or ``lattice`` (exact FFT on the frame lattice); default separable.
    finest: finest scale: ``isotropic`` (redundancy under 4) or ``directional`` (better denoising
        and interpolation, redundancy 5-7); default directional for denoise/interpolate, else isotropic.
    wedges: wedges per face axis at the finest directional scale (0 = automatic).
    scales: scales including the low-pass (0 = automatic).
    tau: radial window transition, as a fraction of the scale's radius (default 0.5).
    beta: angular window overlap, as a fraction of the wedge half-width (default 0.35).
    guard: zero guard band added around each cube (samples per side; default 0).
    cube: cube side (samples); default the one of 64, 128, 256 whose cubes hold the fewest samples.
    overlap: minimum overlap of neighbouring cubes (samples; default 32).
    all_gpus: send cubes to every visible GPU.
    device, gpu, gpus: as everywhere (``gpus=N``: one cube engine per device).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from . import _native
from ._common import as_f32, from_gpu, gpu_results, gpus_arg, is_gpu


def _frame(eps, gather, finest, wedges, scales, tau, beta, guard, cube, overlap, all_gpus) -> dict:
    return dict(eps=float(eps), gather=str(gather), finest=finest, wedges=int(wedges), scales=int(scales), tau=float(tau),
                beta=float(beta), guard=int(guard), cube=None if cube is None else int(cube), overlap=int(overlap),
                all_gpus=bool(all_gpus))


def _volume(v) -> np.ndarray:
    return as_f32(v, "volume", 3)


@dataclass
class Coefficients:
    """Wave-packet coefficients of a volume: ``data`` complex64 (cube after cube, ``per_cube``
    each), the volume ``shape``, the ``cube`` side, the transform options ``frame`` (for
    :func:`inverse`), ``description`` of the frame (scales, boxes, redundancy), ``device``."""

    data: np.ndarray
    shape: tuple
    cube: int
    per_cube: int
    frame: dict
    description: str
    device: str

    @property
    def redundancy(self) -> float:
        """Coefficients per volume sample."""
        return self.data.size / float(np.prod(self.shape))


@gpu_results("data")
def forward(volume, *, eps: float = 1e-4, gather: str = "separable", finest: Optional[str] = None, wedges: int = 0,
            scales: int = 0, tau: float = 0.5, beta: float = 0.35, guard: int = 0, cube: Optional[int] = None,
            overlap: int = 32, all_gpus: bool = False, device: str = "auto", gpu: int = 0,
            gpus: Union[None, int, str] = None) -> Coefficients:
    """Volume -> wave-packet coefficients (``seisgpu wavepacket forward``); options in the module doc."""
    vol = _volume(volume)
    frame = _frame(eps, gather, finest or "isotropic", wedges, scales, tau, beta, guard, cube, overlap, all_gpus)
    c, side, per, desc, note = _native.wp_forward(vol, frame, device, int(gpu), gpus_arg(gpus))
    return Coefficients(c, vol.shape, side, per, frame, desc, note)


@gpu_results()
def inverse(coefficients: Coefficients, *, device: str = "auto", gpu: int = 0, gpus: Union[None, int, str] = None) -> np.ndarray:
    """Coefficients -> volume (``seisgpu wavepacket inverse``), on the frame they were made with."""
    if not isinstance(coefficients, Coefficients):
        raise ValueError("coefficients: a seisgpu.wavepacket.Coefficients from forward()")
    data = from_gpu(coefficients.data, "coefficients") if is_gpu(coefficients.data) else coefficients.data
    c = np.ascontiguousarray(data, dtype=np.complex64)
    return _native.wp_inverse(c, tuple(coefficients.shape), coefficients.cube, coefficients.frame, device, int(gpu), gpus_arg(gpus))


@dataclass
class Result:
    """An application's volume [n1, n2, samples] and its numbers (``stats``: for denoise ``sigma``,
    ``estimated``, ``kept_fraction``; for compress ``kept``, ``cr``, ``rel_error``, ``snr_db``; for
    interpolate ``missing_traces``, ``iterations``), ``device``."""

    volume: np.ndarray
    stats: dict
    device: str

    def __array__(self, dtype=None, copy=None):
        volume = from_gpu(self.volume, "volume") if is_gpu(self.volume) else self.volume
        return volume if dtype is None else volume.astype(dtype)


@gpu_results("volume")
def denoise(volume, *, sigma: Optional[float] = None, k: float = 3.0, eps: float = 1e-4, gather: str = "separable",
            finest: Optional[str] = None, wedges: int = 0, scales: int = 0, tau: float = 0.5, beta: float = 0.35, guard: int = 0,
            cube: Optional[int] = None, overlap: int = 32, all_gpus: bool = False, device: str = "auto", gpu: int = 0,
            gpus: Union[None, int, str] = None) -> Result:
    """Random-noise suppression: hard threshold at ``k`` sigma per box (``seisgpu wavepacket denoise``).

    sigma: noise standard deviation in data units; estimated from the finest scale when None.
    k: threshold factor (threshold = k sigma ||psi_b||, dimensionless). Other options: module doc.
    """
    frame = _frame(eps, gather, finest, wedges, scales, tau, beta, guard, cube, overlap, all_gpus)
    v, s, estimated, kept, note = _native.wp_denoise(_volume(volume), frame, None if sigma is None else float(sigma), float(k),
                                                     device, int(gpu), gpus_arg(gpus))
    return Result(v, dict(sigma=s, estimated=estimated, kept_fraction=kept), note)


@gpu_results("volume")
def compress(volume, *, cr: float = 0.02, eps: float = 1e-4, gather: str = "separable", finest: Optional[str] = None,
             wedges: int = 0, scales: int = 0, tau: float = 0.5, beta: float = 0.35, guard: int = 0, cube: Optional[int] = None,
             overlap: int = 32, all_gpus: bool = False, device: str = "auto", gpu: int = 0,
             gpus: Union[None, int, str] = None) -> Result:
    """Compression: keep the ``cr`` x samples largest coefficients and reconstruct
    (``seisgpu wavepacket compress``). cr: compression ratio = kept coefficients / samples."""
    frame = _frame(eps, gather, finest, wedges, scales, tau, beta, guard, cube, overlap, all_gpus)
    v, kept, ratio, rel, snr, note = _native.wp_compress(_volume(volume), frame, float(cr), device, int(gpu), gpus_arg(gpus))
    return Result(v, dict(kept=kept, cr=ratio, rel_error=rel, snr_db=snr), note)


@gpu_results("volume")
def interpolate(volume, *, mask=None, method: str = "pocs", iterations: int = 30, final_fraction: float = 0.002,
                cr: float = 0.02, eps: float = 1e-4, gather: str = "separable", finest: Optional[str] = None, wedges: int = 0,
                scales: int = 0, tau: float = 0.5, beta: float = 0.35, guard: int = 0, cube: Optional[int] = None,
                overlap: int = 32, all_gpus: bool = False, device: str = "auto", gpu: int = 0,
                gpus: Union[None, int, str] = None) -> Result:
    """Interpolation of missing (dead) traces (``seisgpu wavepacket interpolate``).

    mask: [n1, n2], nonzero = live trace; default: the all-zero traces are the dead ones.
    method: ``pocs`` (iterative thresholding, decreasing threshold) or ``single`` (one pass).
    iterations: POCS iterations; final_fraction: POCS final threshold as a fraction of the largest
    coefficient; cr: single pass: compression ratio of the kept coefficients. Other options: module doc.
    """
    vol = _volume(volume)
    m = None
    if mask is not None:
        m = from_gpu(mask, "mask") if is_gpu(mask) else np.asarray(mask)
        if m.dtype.kind not in "fiub":
            raise ValueError(f"mask: dtype {m.dtype} is not a number or boolean type")
        m = np.ascontiguousarray(m != 0)
    frame = _frame(eps, gather, finest, wedges, scales, tau, beta, guard, cube, overlap, all_gpus)
    v, missing, its, note = _native.wp_interpolate(vol, frame, m, str(method), int(iterations), float(final_fraction), float(cr),
                                                   device, int(gpu), gpus_arg(gpus))
    return Result(v, dict(missing_traces=missing, iterations=its), note)
