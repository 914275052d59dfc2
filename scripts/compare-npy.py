#!/usr/bin/env python3
"""Compares two float32 .npy images: PASS/FAIL by relative L2 (or bit-exact with `exact`).

usage: compare-npy.py NAME REFERENCE CANDIDATE (TOLERANCE | exact)
Exit status 0 on PASS, 1 on FAIL (shape mismatch, non-finite values, error above the tolerance).
"""
import sys

import numpy as np


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    name, ref_path, got_path, tol = sys.argv[1:]
    ref, got = np.load(ref_path), np.load(got_path)
    if ref.shape != got.shape:
        print(f"FAIL {name}: shape {got.shape} ({got_path}) against {ref.shape} ({ref_path})")
        return 1
    if not (np.isfinite(ref).all() and np.isfinite(got).all()):
        print(f"FAIL {name}: non-finite samples")
        return 1
    norm = float(np.linalg.norm(ref.astype(np.float64)))
    err = float(np.linalg.norm(got.astype(np.float64) - ref.astype(np.float64))) / max(norm, 1e-300)
    if norm == 0.0:
        print(f"FAIL {name}: the reference image is all zeros")
        return 1
    if tol == "exact":
        ok = np.array_equal(ref.view(np.uint32), got.view(np.uint32))
        print(f"{'PASS' if ok else 'FAIL'} {name}: bit-exact {ok} (rel L2 {err:.2e})")
    else:
        ok = err < float(tol)
        print(f"{'PASS' if ok else 'FAIL'} {name}: rel L2 {err:.2e} (limit {tol})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
