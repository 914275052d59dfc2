"""seisgpu on NumPy arrays: Kirchhoff prestack time migration and its adjoint (:mod:`seisgpu.ktm`),
a PyLops operator pair for least-squares migration (:mod:`seisgpu.pylops`), PSTM with interpolated
traveltimes (:mod:`seisgpu.pstm`), NMO (:func:`nmo`) and velocity analysis (:func:`velan`), and
SEG-Y input through segyio (:mod:`seisgpu.segy`).

Every function takes ``device="auto"|"gpu"|"cpu"`` and ``gpu=N`` (and ``gpus=N|"all"`` where the
CLI has ``--gpus``), as the CLI's ``--device``, ``--gpu``, ``--gpus``: ``auto`` runs on the GPU
when an NVIDIA driver and a GPU are present and this build has GPU kernels, on the CPU otherwise.
The GIL is released while a function computes. Errors raise ValueError (bad arguments or data),
:class:`GpuError` (a RuntimeError: the GPU failed) or OSError (a file) with the CLI's message. Ctrl-C is seen between calls,
not inside one: the computation of a call runs to its end first.
"""

from . import _native, ktm, nlbf, pstm, segy, srm, wavepacket
from ._common import Traces
from .gathers import nmo, velan

GpuError = _native.GpuError

__all__ = ["GpuError", "Traces", "ktm", "nlbf", "pstm", "nmo", "velan", "segy", "srm", "wavepacket", "devices", "has_kernels", "set_threads", "threads", "last_call_seconds"]


def devices(device: str = "auto", gpu: int = 0, gpus=None) -> str:
    """Where ``device``, ``gpu``, ``gpus`` run, in words (``"GPU 0: NVIDIA H200 (auto)"``, or
    ``"CPU (16 threads), because no GPU is usable: ..."``); opens the devices (they stay open)."""
    from ._common import gpus_arg

    return _native.describe_devices(device, int(gpu), gpus_arg(gpus))


def has_kernels() -> bool:
    """Whether this build carries the GPU kernels (``pip install`` builds them with the pinned
    nightly toolchain; a build with ``SEISGPU_SKIP_PTX=1`` has none and runs on the CPU)."""
    return _native.has_kernels()


def set_threads(threads: int) -> None:
    """Threads of the CPU paths (0 = all cores), as the CLI's ``--threads``; only before the first computation."""
    _native.set_threads(int(threads))


def threads() -> int:
    """Threads of the CPU paths."""
    return _native.threads()


def last_call_seconds() -> float:
    """Wall-clock seconds of the host library's entry in this thread's last call (NaN before the
    first), measured inside the binding around the entry (GIL released): a call's Python time
    minus this is what the binding and the Python layer add (``python/bench/overhead.py``)."""
    return _native.last_call_seconds()
