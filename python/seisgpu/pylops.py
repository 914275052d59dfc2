"""PyLops operators: :class:`Kirchhoff`, whose forward is Kirchhoff modelling
(:func:`seisgpu.ktm.model`) and whose adjoint is Kirchhoff migration (:func:`seisgpu.ktm.migrate`),
for least-squares migration with PyLops' solvers (``cgls``, ``lsqr``, ...)."""

from __future__ import annotations

from typing import Optional, Union

import numpy as np
import pylops

from . import _native, ktm
from ._common import device_f32, gpus_arg, header_arrays, is_gpu


class Kirchhoff(pylops.LinearOperator):
    """Kirchhoff modelling as a ``pylops.LinearOperator`` from an image to traces.

    Model: the image, ``dims`` = (nx, ny, ntau) (or (classes, nx, ny, ntau) with
    ``offset_classes``). Data: the traces, ``dimsd`` = (traces, ns). ``matvec`` models traces
    (:func:`seisgpu.ktm.model`), ``rmatvec`` migrates them (:func:`seisgpu.ktm.migrate`) with the
    same options, its exact adjoint: the pair passes ``pylops.utils.dottest`` to float32 rounding
    (``rtol=1e-3``: float32 inner products of random vectors).

    Args:
        sx, gx: source and receiver x of every trace (m); sy, gy: their y (m, default 0).
        ns: samples per trace; dt: sample interval (s); t0: time of the first sample (s).
        x0, dx, nx, y0, dy, ny, tau0, dtau, ntau: the image grid (m, m, bins; s two-way); every
            one left as None comes from the geometry (CDP extent at its bin spacing, the traces'
            time axis), as in :func:`seisgpu.ktm.migrate`; the chosen grid is in ``self.grid``.
        velocity and every other option: as :func:`seisgpu.ktm.migrate` (names, units, defaults).
        device, gpu: where both directions run; gpus: the migration over N devices (or ``"all"``).
        dtype: float32 (the computation's precision).

    Vectors may be NumPy or CuPy arrays: CuPy vectors on the operator's GPU (``gpu``) are read and
    returned on the device with no host copy (:func:`seisgpu.ktm.migrate` and :func:`seisgpu.ktm.model`
    on GPU arrays), so PyLops' solvers run with ``cupy`` arrays end to end; the operator passes
    ``pylops.utils.dottest(op, ..., backend="cupy")`` as with NumPy.
    """

    def __init__(self, sx, gx, ns: int, dt: float, *, sy=None, gy=None, t0: float = 0.0,
                 x0: Optional[float] = None, dx: Optional[float] = None, nx: Optional[int] = None,
                 y0: Optional[float] = None, dy: Optional[float] = None, ny: Optional[int] = None,
                 tau0: Optional[float] = None, dtau: Optional[float] = None, ntau: Optional[int] = None,
                 velocity=2000.0, device: str = "auto", gpu: int = 0, gpus: Union[None, int, str] = None,
                 dtype="float32", name: str = "K", **options):
        n = np.size(sx)
        geometry = {k: v for k, v in dict(sx=sx, sy=sy, gx=gx, gy=gy).items() if v is not None}
        self.geometry = header_arrays(geometry, n)
        self.ns, self.dt, self.t0 = int(ns), float(dt), float(t0)
        request = dict(x0=x0, dx=dx, nx=nx, y0=y0, dy=dy, ny=ny, tau0=tau0, dtau=dtau, ntau=ntau)
        g, self.grid_note = _native.ktm_grid(self.ns, self.dt, self.t0, self.geometry, request)
        self.grid = ktm.grid_of(g)
        self.x, self.y, self.tau = ktm.axes(self.grid)
        self.options = dict(options, velocity=velocity)
        self.device, self.gpu, self.gpus = device, int(gpu), gpus_arg(gpus)
        classes = options.get("offset_classes")
        image = (self.grid["nx"], self.grid["ny"], self.grid["ntau"])
        if classes is not None:
            count = int(ktm._numbers(classes, 3, "offset_classes")[2])
            image = (count,) + image
        super().__init__(dtype=np.dtype(dtype), dims=image, dimsd=(n, self.ns), explicit=False, name=name)

    def _matvec(self, x):
        image = _vector(x).reshape(self.dims)
        out = ktm.model(image, self.ns, self.dt, t0=self.t0, **self.geometry, **self.grid, **self.options,
                        device=self.device, gpu=self.gpu)
        return out.ravel().astype(self.dtype, copy=False)

    def _rmatvec(self, y):
        data = _vector(y).reshape(self.dimsd)
        img = ktm.migrate(data, self.dt, t0=self.t0, **self.geometry, **self.grid, **self.options, device=self.device,
                          gpu=self.gpu, gpus=self.gpus)
        return img.data.reshape(self.dims).ravel().astype(self.dtype, copy=False)


def _vector(v):
    """A model or data vector as float32: a CuPy vector stays on its GPU (the operator then runs
    there without host copies), anything else becomes a NumPy array."""
    if is_gpu(v):
        return device_f32(v, "vector")
    return np.asarray(v, dtype=np.float32)
