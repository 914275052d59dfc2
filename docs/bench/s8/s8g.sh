#!/usr/bin/env bash
# Session 8, round G (4 x H200): the final code's MPI changes on GPU ranks: SRM reading its shots' rows of
# .npy traces (-np 2, 4 against 1 GPU), an output folder that does not exist, a failing share write.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf mpi.tgz && cd ..
echo "commit $(cat bundlez/commit)"
W=/tmp/s8g; O=$W/mpi; mkdir -p $O
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; grep "traces read\|^error" $O/last.log; echo "rc $rc"; return $rc; }
cmp() { python3 scripts/compare-npy.py "$@"; }
$BIN synth line2d -o $O/line.sgy --ns 500 --npy $O/line.npy > /dev/null 2>&1
python3 - $O/line.sgy $O/geometry.npy <<'PY'
import struct, sys, numpy as np
b = open(sys.argv[1], "rb").read()
ns = struct.unpack(">H", b[3220:3222])[0]
g = []
for o in range(3600, len(b), 240 + 4 * ns):
    sc = struct.unpack(">h", b[o + 70:o + 72])[0]
    f = 1 / abs(sc) if sc < 0 else (sc or 1)
    sx, sy, gx, gy = struct.unpack(">iiii", b[o + 72:o + 88])
    g.append([sx * f + 1000, sy * f, gx * f + 1000, gy * f])
np.save(sys.argv[2], np.array(g, np.float32))
PY
python3 -c "import numpy as np; np.save('$O/v.npy', np.full((40, 100), 2000.0, np.float32))"
S=(srm --traces $O/line.npy --geometry $O/geometry.npy --dt 4 --velocity $O/v.npy --x0 1000 --dx 25 --dz 10 --fmax 20 --nz 40 --table-rows 48 --planes 8)
run $BIN --device gpu "${S[@]}" -o $O/srm-1.npy
for g in 2 4; do
  run "${M[@]}" -np $g $BIN --device gpu "${S[@]}" -o $O/srm-mpi$g.npy
  cmp "srm .npy: $g GPU ranks vs 1 GPU" $O/srm-1.npy $O/srm-mpi$g.npy 1e-6
done
run "${M[@]}" -np 2 $BIN --device gpu "${S[@]}" -o $O/missing/image.npy
cp $O/srm-1.npy $O/keep.npy
run "${M[@]}" -np 2 -x SEISGPU_TEST_FAIL_WRITE_RANK=1 $BIN --device gpu "${S[@]}" -o $O/keep.npy
command cmp -s $O/keep.npy $O/srm-1.npy && echo "old file unchanged" || echo "old file CHANGED"
ls -a $O | grep tmp || echo "no temporary file left"
) > $W/mpi.log 2>&1
cat $W/mpi.log | grep -v "^+ \|^rc 0"
tar czf $OUT/s8g.tgz -C $W --exclude='*.npy' --exclude='*.sgy' .
