"""What the Python layer adds to each algorithm's call: the Python call's wall-clock time against
the host library's time for the same call, measured inside the binding around the host entry
(``seisgpu.last_call_seconds()``), as a markdown table.

    python python/bench/overhead.py                     # GPU, paper-size workloads (CuPy for the zero-copy rows)
    python python/bench/overhead.py --device cpu        # CPU, small workloads (tries the script anywhere)
    python python/bench/overhead.py --only ktm --repeats 7

Each row: one warm-up call, then ``--repeats`` (>= 5) timed calls; the medians of the Python
call's time and of the Rust-side time, and the overhead (Python / Rust - 1). The input arrays are
made before the timing. The ``ktm ... cupy`` rows pass CuPy arrays on the GPU and get CuPy
arrays back, with no host copy of the traces or the image (their Python time includes the
CuPy allocation of the result and the stream synchronisation).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

import seisgpu
from seisgpu import ktm, nlbf, pstm, srm, wavepacket


def scattered(n, ns, nx, ny, d, max_offset, seed):
    """Random traces over an nx x ny area of d m bins: sources anywhere on it, receivers within
    ``max_offset`` (m), Gaussian noise samples (the cost does not depend on the data)."""
    rng = np.random.default_rng(seed)
    sx, sy = rng.uniform(0, (nx - 1) * d, n), rng.uniform(0, (ny - 1) * d, n)
    a, h = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, max_offset, n)
    data = rng.standard_normal((n, ns), dtype=np.float32)
    return data, dict(sx=sx, sy=sy, gx=sx + h * np.cos(a), gy=sy + h * np.sin(a))


def cmp_gathers(cmps, fold, ns, seed):
    """CMP gathers: ``fold`` offsets every 50 m per CMP, one hyperbola at 0.8 s plus noise."""
    rng = np.random.default_rng(seed)
    offset = np.tile(np.arange(fold) * 50.0, cmps)
    cdp = np.repeat(np.arange(1, cmps + 1), fold).astype(np.float64)
    t = np.arange(ns, dtype=np.float32) * 0.004
    tt = np.sqrt(0.8**2 + (offset / 2200.0) ** 2).astype(np.float32)
    data = np.exp(-(((t[None, :] - tt[:, None]) / 0.012) ** 2)) + 0.05 * rng.standard_normal((cmps * fold, ns), dtype=np.float32)
    return data.astype(np.float32), dict(offset=offset, cdp=cdp)


# KTM: `seisgpu bench ktm`'s ktm-table2-4096 (4096 traces of 1024 samples into 255 x 255 x 1024, bare
# migration, v_rms 1500 m/s + 250 m/s every 0.5 s); small: 128 traces of 256 into 31 x 29 x 128.
VRMS = ",".join(f"{0.5 * k}:{1500 + 250 * k}" for k in range(12))
BARE = dict(no_rho=True, no_weights=True, no_antialias=True, velocity=VRMS)


def ktm_case(paper):
    n, ns, nx, ny, ntau, dtau = (4096, 1024, 255, 255, 1024, 0.004) if paper else (128, 256, 31, 29, 128, 0.008)
    data, geom = scattered(n, ns, nx, ny, 25.0, 4000.0, 20)
    grid = dict(x0=0.0, dx=25.0, nx=nx, y0=0.0, dy=25.0, ny=ny, tau0=0.0, dtau=dtau, ntau=ntau)
    return f"{n} traces x {ns} -> {nx} x {ny} x {ntau}", data, geom, grid


def workloads(paper, device, only, cupy_rows):
    """(algorithm, workload, zero-copy, make() -> call) rows; make() builds the inputs (untimed)."""
    rows = []

    def ktm_rows():
        what, data, geom, grid = ktm_case(paper)
        kw = dict(**geom, **grid, **BARE, device=device)
        rows.append(("ktm migrate", what, False, lambda: lambda: ktm.migrate(data, 0.004, **kw)))
        image = ktm.migrate(data, 0.004, **kw).data
        rows.append(("ktm model", what, False, lambda: lambda: ktm.model(image, data.shape[1], 0.004, **kw)))
        if cupy_rows:
            import cupy

            def mig():
                d = cupy.asarray(data)
                return lambda: ktm.migrate(d, 0.004, **kw)

            def mod():
                m = cupy.asarray(image)
                return lambda: ktm.model(m, data.shape[1], 0.004, **kw)

            rows.append(("ktm migrate, cupy in/out", what, True, mig))
            rows.append(("ktm model, cupy in/out", what, True, mod))

    def pstm_rows():
        # Paper Table 2's columns and times (50 x 1097 x 1504 at 4 ms, 1000 m aperture) with 20,000 of
        # its 450,000 traces (Python makes the input in memory); small: 10 x 23 x 400, 1500 traces.
        nx, ny, nz, n, ns = (50, 1097, 1504, 20000, 1500) if paper else (10, 23, 400, 1500, 500)
        data, geom = scattered(n, ns, nx, ny, 25.0, 3000.0, 30)
        kw = dict(**geom, nx=nx, ny=ny, dx=25.0, dy=25.0, x0=0.0, y0=0.0, nz=nz, dtau=0.004, aperture=1000.0 if paper else 400.0,
                  velocity=2000.0, device=device)
        rows.append(("pstm migrate (static8)", f"{n} traces x {ns} -> {nx} x {ny} x {nz}", False,
                     lambda: lambda: pstm.migrate(data, 0.004, **kw)))

    def gathers_rows():
        # `seisgpu bench velan`'s survey shape with fewer CMPs: 60-fold CMPs of 1500 samples (paper:
        # 10,000 CMPs, 200 velocities); small: 64 CMPs of 500 samples, 50 velocities.
        cmps, fold, ns, nv = (1000, 60, 1500, 200) if paper else (64, 60, 500, 50)
        data, kw = cmp_gathers(cmps, fold, ns, 40)
        rows.append(("nmo", f"{cmps} CMPs x {fold} traces x {ns}", False,
                     lambda: lambda: seisgpu.nmo(data, 0.004, **kw, velocity=2200, device=device)))
        rows.append(("velan", f"{cmps} CMPs x {fold} x {ns}, {nv} velocities", False,
                     lambda: lambda: seisgpu.velan(data, 0.004, **kw, nv=nv, device=device)))

    def nlbf_rows():
        # Paper 1's synthetic 2-D search (A, B 21 values, D, E 11, apertures 400 x 35 / 35 x 400 / 400 x 400 m,
        # 140 m parameter-trace spacing) on a 2.5 s record of 96 shots x 192 receivers every 25 m;
        # small: 12 shots x 48 receivers, 1 s.
        nsrc, nrec, ns = (96, 192, 626) if paper else (12, 48, 250)
        rng = np.random.default_rng(50)
        gx = np.tile(np.arange(nrec) * 25.0, nsrc)
        sx = np.repeat(np.arange(nsrc) * 25.0 * nrec / nsrc, nrec)
        t = np.arange(ns, dtype=np.float32) * 0.004
        tt = 0.2 + np.abs(gx - sx) / 3000.0
        data = (np.exp(-(((t[None, :] - tt[:, None]) / 0.012) ** 2)) + 0.05 * rng.standard_normal((nsrc * nrec, ns))).astype(np.float32)
        kw = dict(sx=sx, gx=gx, aperture_ad=(400, 35), aperture_be=(35, 400), aperture_c=(400, 400), spacing_x=140, spacing_y=140,
                  a="-1e-4:1e-5:1e-4", b="-1e-4:1e-5:1e-4", c="-1.25e-7:0.25e-7:1.25e-7", d="-1.25e-7:0.25e-7:1.25e-7",
                  e="-1.25e-7:0.25e-7:1.25e-7", device=device)
        rows.append(("nlbf enhance", f"{nsrc} shots x {nrec} receivers x {ns}", False,
                     lambda: lambda: nlbf.enhance(data, 0.004, **kw)))

    def wavepacket_rows():
        # `seisgpu bench wavepacket`'s 256^3 cube at eps 1e-4 (compression to 2 %); small: 64 x 64 x 64.
        n = 256 if paper else 64
        v = np.random.default_rng(60).standard_normal((n, n, n), dtype=np.float32)
        rows.append(("wavepacket compress", f"{n} x {n} x {n}, cr 0.02", False,
                     lambda: lambda: wavepacket.compress(v, cr=0.02, device=device)))

    def srm_rows():
        # Shot records on a 2-D line (the CLI bench times the extrapolation operator alone, not a
        # whole migration): 16 shots x 200 receivers of 1000 samples, 25 m, 300 depth steps of 10 m;
        # small: 2 shots x 48 receivers of 128, 40 steps.
        nshot, nrec, ns, nz = (16, 200, 1000, 300) if paper else (2, 48, 128, 40)
        rng = np.random.default_rng(70)
        sx = np.repeat(np.linspace(0, (nrec - 1) * 25.0, nshot), nrec)
        gx = np.tile(np.arange(nrec) * 25.0, nshot)
        data = rng.standard_normal((nshot * nrec, ns), dtype=np.float32)
        kw = dict(sx=sx, sy=np.zeros_like(sx), gx=gx, gy=np.zeros_like(gx), velocity=2000, dx=25, dy=25, dz=10, nz=nz,
                  aperture=1000, fmax=30, device=device)
        rows.append(("srm migrate", f"{nshot} shots x {nrec} receivers x {ns}, {nz} depths", False,
                     lambda: lambda: srm.migrate(data, 0.004, **kw)))

    for name, add in (("ktm", ktm_rows), ("pstm", pstm_rows), ("gathers", gathers_rows), ("nlbf", nlbf_rows),
                      ("wavepacket", wavepacket_rows), ("srm", srm_rows)):
        if not only or name in only:
            add()
    return rows


def measure(call, repeats, sync):
    """Median Python and Rust seconds of ``repeats`` calls after one warm-up (each result freed after
    its call's timing)."""
    call()
    sync()
    py, rust = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        out = call()
        sync()
        py.append(time.perf_counter() - t)
        rust.append(seisgpu.last_call_seconds())
        # Freed after the timing: the Rust side's time does not include freeing its result either
        # (a result of 1.2 GB takes ~0.1 s to unmap, whoever owns it).
        del out
    return statistics.median(rust), statistics.median(py)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="gpu", choices=["gpu", "cpu"], help="where the algorithms run (gpu: paper-size workloads; cpu: small ones)")
    ap.add_argument("--size", choices=["paper", "small"], help="workload size (default: paper on the GPU, small on the CPU)")
    ap.add_argument("--repeats", type=int, default=5, help="timed calls per row after the warm-up (at least 5)")
    ap.add_argument("--only", nargs="*", default=[], help="algorithms to run: ktm, pstm, gathers, nlbf, wavepacket, srm (default all)")
    args = ap.parse_args(argv)
    if args.repeats < 5:
        ap.error("--repeats: at least 5 (the median of fewer says little)")
    paper = (args.size or ("paper" if args.device == "gpu" else "small")) == "paper"
    print(f"devices: {seisgpu.devices(args.device)}; {'paper' if paper else 'small'} workloads; median of {args.repeats} after a warm-up",
          file=sys.stderr)
    sync, cupy_rows = (lambda: None), False
    if args.device == "gpu":
        try:
            import cupy

            sync, cupy_rows = (lambda: cupy.cuda.Device().synchronize()), True
        except ImportError:
            print("CuPy is not installed: the zero-copy rows are left out", file=sys.stderr)
    rows = workloads(paper, args.device, args.only, cupy_rows)
    print("| algorithm | workload | Rust s | Python s | overhead % |")
    print("|---|---|---:|---:|---:|")
    for name, what, _, make in rows:
        rust, py = measure(make(), args.repeats, sync)
        print(f"| {name} | {what} | {rust:.4f} | {py:.4f} | {100 * (py / rust - 1):.2f} |", flush=True)


if __name__ == "__main__":
    main()
