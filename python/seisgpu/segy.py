"""SEG-Y input through segyio: :func:`traces` reads a segyio file's samples and the trace headers
the functions use, in metres and seconds, as ``seisgpu``'s own reader does (the same traces, so
the same results as the CLI on that file)."""

from __future__ import annotations

import numpy as np

from ._common import Traces


def _scaled(raw: np.ndarray, scalar: np.ndarray) -> np.ndarray:
    """SEG-Y scalar (bytes 71-72): positive multiplies, negative divides, zero means one."""
    raw = raw.astype(np.float64)
    s = scalar.astype(np.float64)
    return np.where(s > 1, raw * s, np.where(s < 0, raw / np.where(s < 0, -s, 1.0), raw))


def traces(f, keep_aux: bool = False) -> Traces:
    """The traces of an open segyio file (``segyio.open(path, ignore_geometry=True)``).

    Samples as float32 [traces, samples]; ``dt`` (s) from the file's sample interval, ``t0`` (s)
    from the first trace's delay recording time; headers ``sx``, ``sy``, ``gx``, ``gy`` (bytes
    73-88) with the coordinate scalar (71-72) applied, ``offset`` (37), ``cdp`` (21), ``inline``
    (189), ``crossline`` (193), ``ffid`` (9), ``channel`` (13), ``source_station`` (17),
    ``receiver_station`` (25), and ``cdp_x``, ``cdp_y`` (181-188)
    where they differ from the source-receiver midpoint (NaN elsewhere: the midpoint stands in).

    Auxiliary and dead traces are left out as the CLI does (identification codes 2 and up, and
    in a file that codes its seismic traces 1, every other code); ``keep_aux=True`` keeps them.
    """
    import segyio

    tf = segyio.TraceField
    n = f.tracecount
    if n == 0:
        raise ValueError(f"{getattr(f, '_filename', 'SEG-Y file')}: no traces")

    def field(key):
        return np.asarray(f.attributes(key)[:], dtype=np.int64)

    scalco = field(tf.SourceGroupScalar)
    coord = {name: _scaled(field(key), scalco) for name, key in
             (("sx", tf.SourceX), ("sy", tf.SourceY), ("gx", tf.GroupX), ("gy", tf.GroupY))}
    cx_raw, cy_raw = field(tf.CDP_X), field(tf.CDP_Y)
    cx, cy = _scaled(cx_raw, scalco), _scaled(cy_raw, scalco)
    mx, my = 0.5 * (coord["sx"] + coord["gx"]), 0.5 * (coord["sy"] + coord["gy"])
    unit = np.abs(_scaled(np.ones_like(scalco), scalco))
    own = ((cx_raw != 0) | (cy_raw != 0)) & ((np.abs(cx - mx) > unit) | (np.abs(cy - my) > unit))
    headers = dict(coord)
    headers.update(offset=field(tf.offset).astype(np.float64), cdp=field(tf.CDP).astype(np.float64),
                   inline=field(tf.INLINE_3D).astype(np.float64), crossline=field(tf.CROSSLINE_3D).astype(np.float64),
                   ffid=field(tf.FieldRecord).astype(np.float64), channel=field(tf.TraceNumber).astype(np.float64),
                   source_station=field(tf.EnergySourcePoint).astype(np.float64),
                   receiver_station=field(tf.CDP_TRACE).astype(np.float64))
    if own.any():
        headers["cdp_x"] = np.where(own, cx, np.nan)
        headers["cdp_y"] = np.where(own, cy, np.nan)
    keep = np.ones(n, dtype=bool)
    if not keep_aux:
        code = field(tf.TraceIdentificationCode)
        coded = (code == 1).any()
        keep = ~((code >= 2) | (coded & (code != 1)))
        if not keep.any():
            raise ValueError(f"{getattr(f, '_filename', 'SEG-Y file')}: every trace is auxiliary or dead (keep_aux=True keeps them)")
    data = np.asarray(f.trace.raw[:], dtype=np.float32)
    if data.ndim == 1:
        data = data.reshape(1, -1)
    samples = np.asarray(f.samples, dtype=np.float64)
    dt = segyio.tools.dt(f) * 1e-6
    t0 = float(samples[0]) * 1e-3
    return Traces(np.ascontiguousarray(data[keep]), float(dt), t0, {k: np.ascontiguousarray(v[keep]) for k, v in headers.items()})
