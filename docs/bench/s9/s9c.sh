#!/usr/bin/env bash
# Session 9, round C (4 x H200), the final code: Kirchhoff SEG-Y images written by the GPU ranks'
# shares (against --gpus N, byte for byte), SRM from SEG-Y on GPU ranks (the CLI's new layout
# path), SRM strong scaling once more on a fresh machine, and the whole GPU test suite.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf mpi.tgz && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
W=/tmp/s9c; O=$W/mpi; mkdir -p $O
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
same() { command cmp -s "$2" "$3" && echo "SAME $1" || echo "DIFFER $1"; }
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; grep "traces read\|^error" $O/last.log; echo "rc $rc"; return $rc; }
cmp() { python3 scripts/compare-npy.py "$@"; }
$BIN synth diffractor -o $O/diff.sgy --ns 1000 > /dev/null 2>&1
K=(ktm migrate --input $O/diff.sgy --nx 81 --ny 1 --ntau 500)
for g in 2 4; do
  run $BIN --device gpu --gpus $g "${K[@]}" -o $O/ktm-g$g.sgy
  run "${M[@]}" -np $g $BIN --device gpu "${K[@]}" -o $O/ktm-mpi$g.sgy
  same "ktm SEG-Y image: $g GPU ranks (each writes its traces) vs --gpus $g" $O/ktm-g$g.sgy $O/ktm-mpi$g.sgy
done
$BIN synth line2d -o $O/line.sgy --ns 500 > /dev/null 2>&1
python3 - $O/line.sgy $O/line-moved.sgy <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
ns = struct.unpack(">H", b[3220:3222])[0]
for o in range(3600, len(b), 240 + 4 * ns):
    sc = struct.unpack(">h", b[o + 70:o + 72])[0]
    add = int(round(1000 * abs(sc))) if sc < 0 else int(round(1000 / (sc or 1)))
    sx, sy, gx, gy = struct.unpack(">iiii", b[o + 72:o + 88])
    b[o + 72:o + 88] = struct.pack(">iiii", sx + add, sy, gx + add, gy)
open(sys.argv[2], "wb").write(b)
PY
python3 -c "import numpy as np; np.save('$O/v.npy', np.full((40, 100), 2000.0, np.float32))"
S=(srm --traces $O/line-moved.sgy --velocity $O/v.npy --x0 1000 --dx 25 --dz 10 --fmax 20 --nz 40 --table-rows 48 --planes 8)
run $BIN --device gpu "${S[@]}" -o $O/srm-1.npy
for g in 2 4; do
  run "${M[@]}" -np $g $BIN --device gpu "${S[@]}" -o $O/srm-mpi$g.npy
  cmp "srm SEG-Y: $g GPU ranks vs 1 GPU" $O/srm-1.npy $O/srm-mpi$g.npy 1e-6
done
ls -a $O | grep tmp || echo "no temporary file left"
) > $W/mpi.log 2>&1
grep -v "^+ \|^rc 0" $W/mpi.log
timeout 200 bundlez/bundle/seisgpu --device gpu --gpus all bench srm --size paper --out $W/srm > $W/srm.log 2>&1; echo "srm rc $?"
grep '^| scale' $W/srm/scaling.md
grep -o '"note": "[14] gpus*[^"]*"' $W/srm/bench.json | cut -c1-1200
echo "== tests"
timeout 330 bundlez/bundle/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s9c.tgz -C $W --exclude='*.npy' --exclude='*.sgy' --exclude='*.wpk' .
