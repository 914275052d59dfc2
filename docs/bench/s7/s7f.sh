#!/usr/bin/env bash
# Session 7, round F (4 x H200): MPI ranks on GPUs (issue 9). Open MPI comes from the bundle
# (scripts/mpi-bundle.sh); each pipeline on 1 GPU, --gpus 2 in one process, and mpirun -np 2 (one GPU
# per rank); outputs to $OUT (compared on the build machine with scripts/compare-npy.py); then the two
# failure checks of scripts/mpi-check.sh on GPU ranks.
set -u
cd bundlez && tar xzf mpi.tgz && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"
LD_LIBRARY_PATH=/usr/local/cuda/lib64 timeout 200 bundlez/bundle/integration ktm --test-threads=1 > $OUT/ktm-tests.log 2>&1; echo "ktm tests rc $?"
grep -E "test result|FAILED|panicked" $OUT/ktm-tests.log | head
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
O=/tmp/s7f; mkdir -p $O
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; tail -3 $O/last.log; echo "rc $rc"; return $rc; }
mpirun --version | head -1
run "${MPIRUN[@]}" hostname
$BIN synth diffractor -o /tmp/diff.sgy --ns 400 > /dev/null 2>&1
K=(ktm migrate --input /tmp/diff.sgy --nx 41 --ny 1 --ntau 150)
run $BIN --device gpu "${K[@]}" -o $O/ktm-1.npy
run $BIN --device gpu --gpus 2 "${K[@]}" -o $O/ktm-g2.npy
run "${MPIRUN[@]}" $BIN --device gpu "${K[@]}" -o $O/ktm-mpi.npy
P=(pstm migrate --traces 600 --nx 24 --ny 24 --nz 300)
run $BIN --device gpu "${P[@]}" -o $O/pstm-1.npy
run $BIN --device gpu --gpus 2 "${P[@]}" -o $O/pstm-g2.npy
run "${MPIRUN[@]}" $BIN --device gpu "${P[@]}" -o $O/pstm-mpi.npy
S=(srm --synthetic scatterer --fmax 20 --nz 30 --table-rows 48 --planes 8)
run $BIN --device gpu "${S[@]}" -o $O/srm-1.npy
run $BIN --device gpu --gpus 2 "${S[@]}" -o $O/srm-g2.npy
run "${MPIRUN[@]}" $BIN --device gpu "${S[@]}" -o $O/srm-mpi.npy
N=(nlbf estimate --synthetic demo)
run $BIN --device gpu "${N[@]}" --out $O/nlbf-1
run "${MPIRUN[@]}" $BIN --device gpu "${N[@]}" --out $O/nlbf-mpi
python3 - /tmp/diff.sgy /tmp/bad.sgy <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
ns = struct.unpack(">H", b[3220:3222])[0]
off = 3600 + 1000 * (240 + 4 * ns) + 240 + 4 * 7
b[off:off + 4] = b"\x7f\xff\xff\xff"
open(sys.argv[2], "wb").write(b)
PY
echo "== failing rank (trace 1000, rank 1's share)"
run "${MPIRUN[@]}" $BIN --device gpu ktm migrate --input /tmp/bad.sgy --nx 41 --ny 1 -o $O/bad.npy; grep -m2 "^error\|rank 1" $O/last.log; ls $O/bad.npy 2>&1
echo "== failing work item 13 (rank 1's)"
run "${MPIRUN[@]}" -x SEISGPU_TEST_FAIL_ITEM=13 $BIN --device gpu "${K[@]}" -o $O/bad2.npy; grep -m2 "^error\|rank 1" $O/last.log; ls $O/bad2.npy 2>&1
echo "== 2 ranks x 2 GPUs (ktm)"
run "${MPIRUN[@]}" $BIN --device gpu --gpus 2 "${K[@]}" -o $O/ktm-mpi-g2.npy
run $BIN --device gpu --gpus 4 "${K[@]}" -o $O/ktm-g4.npy
tar czf $OUT/s7f.tgz -C $O .
