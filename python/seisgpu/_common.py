"""Shared by the algorithm modules: array conversion, trace input, device arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Union

import numpy as np

#: Header fields the functions read (all optional; float64 arrays, one value per trace).
HEADER_FIELDS = ("sx", "sy", "gx", "gy", "offset", "cdp", "inline", "crossline", "ffid", "channel", "source_station",
                 "receiver_station", "cdp_x", "cdp_y")


def _cupy(name: str):
    try:
        import cupy
    except ImportError:
        raise ValueError(f"{name}: a GPU array (__cuda_array_interface__ or DLPack) needs CuPy; pass a NumPy array") from None
    return cupy


def is_gpu(a) -> bool:
    """Whether ``a`` is an array in GPU memory: ``__cuda_array_interface__`` (CuPy, Numba,
    PyTorch) or DLPack on a CUDA device; for a :class:`Traces` or a result object, its ``data``."""
    if hasattr(a, "__cuda_array_interface__"):
        return True
    if hasattr(a, "__dlpack_device__") and not isinstance(a, np.ndarray):
        try:
            return a.__dlpack_device__()[0] in (2, 13)  # kDLCUDA, kDLCUDAManaged
        except Exception:
            return False
    data = getattr(a, "data", None)
    return data is not None and not isinstance(a, np.ndarray) and data is not a and is_gpu(data)


def device_array(a, name: str):
    """A GPU array as a CuPy array on the same memory and device (no copy), its producer's
    pending work waited for: the stream named in ``__cuda_array_interface__`` (v3) and CuPy's
    current stream on the array's device are synchronised; DLPack's exchange makes the producer's
    stream wait for ours."""
    cupy = _cupy(name)
    if isinstance(a, cupy.ndarray):
        arr = a
    elif hasattr(a, "__cuda_array_interface__"):
        cai = a.__cuda_array_interface__
        stream = cai.get("stream")
        if isinstance(stream, int) and stream not in (1, 2):  # 1, 2: the legacy and per-thread default streams
            cupy.cuda.runtime.streamSynchronize(stream)
        ptr = cai["data"][0]
        device = cupy.cuda.runtime.pointerGetAttributes(ptr).device if ptr else cupy.cuda.runtime.getDevice()
        # On the array's own device: cupy.asarray would copy it to the current one.
        with cupy.cuda.Device(device):
            arr = cupy.asarray(a)
    else:
        with cupy.cuda.Device(int(a.__dlpack_device__()[1])):
            arr = cupy.from_dlpack(a)
    with arr.device:
        cupy.cuda.get_current_stream().synchronize()
    return arr


def from_gpu(a, name: str) -> np.ndarray:
    """A GPU array copied to host memory (the host staging of the functions whose host
    preparation reads the traces on the host)."""
    return device_array(a, name).get()


def device_f32(a, name: str, ndim: Optional[int] = None):
    """A GPU array as a C-contiguous float32 CuPy array on its device: used as it is when it
    already is one, else converted on the device (no host copy). Checks as :func:`as_f32`."""
    cupy = _cupy(name)
    arr = device_array(a, name)
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"{name}: dtype {arr.dtype} is not a real number type (float32 expected)")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name}: {arr.ndim}-D array of shape {arr.shape}, expected {ndim}-D")
    with arr.device:
        out = cupy.ascontiguousarray(arr, dtype=cupy.float32)
        if out is not arr:
            cupy.cuda.get_current_stream().synchronize()
    return out


def check_finite(arr, name: str, per: Optional[int] = None):
    """A ValueError naming the first sample of a CuPy array that is not finite (``per``: samples
    per trace, to name the trace), as the host library does for host arrays."""
    cupy = _cupy(name)
    with arr.device:
        bad = ~cupy.isfinite(arr.ravel())
        if bool(bad.any()):
            i = int(cupy.argmax(bad))
            where = f"trace {i // per} sample {i % per}" if per else f"sample {i}"
            raise ValueError(f"{name}: {where} is not finite")


def to_gpu(out, fields=(), device: Optional[int] = None):
    """A result with its arrays (``out`` itself, or the named fields of a result object) moved to
    GPU ``device`` as CuPy arrays (a host-to-device copy)."""
    import dataclasses

    cupy = _cupy("result")
    with cupy.cuda.Device(device):
        if isinstance(out, np.ndarray):
            return cupy.asarray(out)
        moved = {f: cupy.asarray(getattr(out, f)) for f in fields if isinstance(getattr(out, f, None), np.ndarray)}
        return dataclasses.replace(out, **moved)


def gpu_device_of(a) -> Optional[int]:
    """The CUDA device of a GPU array (or of a :class:`Traces`' / result's data), None otherwise."""
    if not is_gpu(a):
        return None
    if not (hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack_device__")):
        a = a.data
    if hasattr(a, "device") and hasattr(a.device, "id"):
        return int(a.device.id)
    if hasattr(a, "__dlpack_device__"):
        return int(a.__dlpack_device__()[1])
    return device_array(a, "data").device.id


#: What the docstrings of the functions that stage GPU arrays through host memory say.
STAGED_NOTE = """
    GPU arrays: ``data`` (or ``volume``) may be a CuPy array (or any ``__cuda_array_interface__`` /
    DLPack GPU array, or a :class:`Traces` holding one). This function's host preparation reads the
    samples on the host, so they are copied to host memory first (the producer's stream is
    synchronised), and the result's arrays are copied back: they are CuPy arrays on the input's
    device. Only :func:`seisgpu.ktm.migrate` and :func:`seisgpu.ktm.model` compute on GPU arrays
    without host copies.
"""


def gpu_results(*fields):
    """Decorator of a function whose first argument may be a GPU array: staged through host
    memory by the function itself (:func:`as_f32`), its result's arrays (``fields`` of a result
    object, or the array it returns) returned as CuPy arrays on the input's device."""
    import functools

    def wrap(f):
        @functools.wraps(f)
        def call(data, *args, **kwargs):
            device = gpu_device_of(data)
            out = f(data, *args, **kwargs)
            return out if device is None else to_gpu(out, fields, device)

        call.__doc__ = (f.__doc__ or "").rstrip() + "\n" + STAGED_NOTE
        return call

    return wrap


def as_f32(a, name: str, ndim: Optional[int] = None) -> np.ndarray:
    """``a`` as an aligned C-contiguous float32 array: used as is when it already is one (the
    library then reads it in place), otherwise copied (other real dtypes are converted, Fortran
    order is made C order; a GPU array is copied to the host). Complex, object and string arrays
    are refused with a ValueError naming the argument."""
    if is_gpu(a) and not isinstance(a, Traces):
        a = from_gpu(a, name)
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"{name}: dtype {arr.dtype} is not a real number type (float32 expected)")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name}: {arr.ndim}-D array of shape {arr.shape}, expected {ndim}-D")
    out = np.ascontiguousarray(arr, dtype=np.float32)
    # A float32 view at an odd byte offset stays unaligned through ascontiguousarray.
    return out if out.flags.aligned else out.copy()


def as_f64(a, name: str, n: int) -> np.ndarray:
    """A per-trace header vector: a scalar broadcast to ``n`` traces, or ``n`` values."""
    if is_gpu(a):
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


def traces_parts(data, dt, t0, **geometry):
    """The parts of a call's traces, unconverted: (samples, dt, t0, headers), from a
    :class:`Traces` (its fields filled in where the call gives none) or an array with ``dt`` (s)
    and header arrays."""
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
    return data, float(dt), float(t0 or 0.0), headers


def traces_in(data, dt, t0, **geometry) -> Traces:
    """The traces of a call: a :class:`Traces` (its fields filled in where the call gives none)
    or an array [traces, samples] with ``dt`` (s) and header arrays; in host memory."""
    data, dt, t0, headers = traces_parts(data, dt, t0, **geometry)
    arr = as_f32(data, "data", 2)
    n = arr.shape[0]
    return Traces(arr, dt, t0, header_arrays(headers, n))


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
