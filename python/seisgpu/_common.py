"""Shared by the algorithm modules: array conversion, trace input, device arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Union

import numpy as np

#: Header fields the functions read (all optional; float64 arrays, one value per trace).
HEADER_FIELDS = ("sx", "sy", "gx", "gy", "offset", "cdp", "inline", "crossline", "ffid", "channel", "source_station",
                 "receiver_station", "cdp_x", "cdp_y")


def from_gpu(a, name: str) -> np.ndarray:
    """A GPU array (``__cuda_array_interface__``: CuPy, Numba, PyTorch) copied to host memory: the
    library's drivers read host arrays and upload what they need themselves."""
    try:
        import cupy
    except ImportError:
        raise ValueError(f"{name}: a GPU array (__cuda_array_interface__) needs CuPy to be copied to the host; "
                         "pass a NumPy array") from None
    return cupy.asnumpy(cupy.asarray(a))


def as_f32(a, name: str, ndim: Optional[int] = None) -> np.ndarray:
    """``a`` as a C-contiguous float32 array: used as is when it already is one, otherwise copied
    (other real dtypes are converted, Fortran order is made C order; a GPU array is copied to the
    host). Complex, object and string arrays are refused with a ValueError naming the argument."""
    if hasattr(a, "__cuda_array_interface__"):
        a = from_gpu(a, name)
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"{name}: dtype {arr.dtype} is not a real number type (float32 expected)")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name}: {arr.ndim}-D array of shape {arr.shape}, expected {ndim}-D")
    return np.ascontiguousarray(arr, dtype=np.float32)


def as_f64(a, name: str, n: int) -> np.ndarray:
    """A per-trace header vector: a scalar broadcast to ``n`` traces, or ``n`` values."""
    if hasattr(a, "__cuda_array_interface__"):
        a = from_gpu(a, name)
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"{name}: dtype {arr.dtype} is not a real number type")
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name}: shape {arr.shape}, expected ({n},) (one value per trace)")
    return np.ascontiguousarray(arr, dtype=np.float64)


@dataclass
class Traces:
    """Prestack traces: ``data`` [traces, samples] (float32), sample interval ``dt`` (s), time of
    the first sample ``t0`` (s) and per-trace header arrays (``headers``: source ``sx``, ``sy``,
    receiver ``gx``, ``gy``, signed ``offset``, ``cdp_x``, ``cdp_y`` in m; ``cdp``, ``inline``,
    ``crossline``, ``ffid``, ``channel``, ``source_station``, ``receiver_station`` numbers). :func:`seisgpu.segy.traces` reads one from a
    segyio file; every function takes one in place of its ``data`` argument."""

    data: np.ndarray
    dt: float
    t0: float = 0.0
    headers: Dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def ns(self) -> int:
        return self.data.shape[1]

    @property
    def t(self) -> np.ndarray:
        """Sample times (s)."""
        return self.t0 + self.dt * np.arange(self.ns)


def traces_in(data, dt, t0, **geometry) -> Traces:
    """The traces of a call: a :class:`Traces` (its fields filled in where the call gives none)
    or an array [traces, samples] with ``dt`` (s) and header arrays."""
    if isinstance(data, Traces):
        headers = dict(data.headers)
        headers.update({k: v for k, v in geometry.items() if v is not None})
        dt = data.dt if dt is None else dt
        t0 = data.t0 if t0 is None else t0
        data = data.data
    else:
        headers = {k: v for k, v in geometry.items() if v is not None}
    if dt is None:
        raise ValueError("dt: the sample interval (s) is needed with an array input")
    arr = as_f32(data, "data", 2)
    n = arr.shape[0]
    return Traces(arr, float(dt), float(t0 or 0.0), header_arrays(headers, n))


def header_arrays(headers: Dict[str, object], n: int) -> Dict[str, np.ndarray]:
    out = {}
    for k, v in headers.items():
        if k not in HEADER_FIELDS:
            raise ValueError(f"trace header `{k}` is not one of {', '.join(HEADER_FIELDS)}")
        out[k] = as_f64(v, k, n)
    return out


def gpus_arg(gpus: Union[None, int, str]) -> Optional[str]:
    """``gpus``: None (one device), a positive count or ``"all"``, as the CLI's ``--gpus``."""
    if gpus is None:
        return None
    if isinstance(gpus, bool) or not isinstance(gpus, (int, str)):
        raise ValueError(f"gpus: {gpus!r}, expected a positive count or 'all'")
    return str(gpus)
