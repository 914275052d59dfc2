#!/usr/bin/env bash
# Session 8, round F (4 x H200): the final code on GPU ranks (srm reading its shots' SEG-Y traces,
# wave-packet forward writing and inverse reading the ranks' shares) and the whole GPU test suite.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf mpi.tgz && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"
W=/tmp/s8f; O=$W/mpi; mkdir -p $O
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; grep "traces read\|^error" $O/last.log; tail -1 $O/last.log; echo "rc $rc"; return $rc; }
cmp() { python3 scripts/compare-npy.py "$@"; }
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
  run $BIN --device gpu --gpus $g "${S[@]}" -o $O/srm-g$g.npy
  run "${M[@]}" -np $g $BIN --device gpu "${S[@]}" -o $O/srm-mpi$g.npy
  cmp "srm SEG-Y: $g ranks vs 1 GPU" $O/srm-1.npy $O/srm-mpi$g.npy 1e-6
  cmp "srm SEG-Y: $g ranks vs --gpus $g" $O/srm-g$g.npy $O/srm-mpi$g.npy exact
done
I=(--input synth:200x150x300 --cube 64 --overlap 16)
run $BIN --device gpu wavepacket forward "${I[@]}" --output $O/one.wpk
for g in 2 4; do
  run "${M[@]}" -np $g $BIN --device gpu wavepacket forward "${I[@]}" --output $O/mpi$g.wpk
  command cmp -s $O/one.wpk $O/mpi$g.wpk && echo "forward: $g ranks' file identical to one GPU's" || echo "forward: $g ranks' file DIFFERS"
  run "${M[@]}" -np $g $BIN --device gpu wavepacket inverse --input $O/one.wpk --output $O/inv$g.npy
done
run $BIN --device gpu wavepacket inverse --input $O/one.wpk --output $O/inv1.npy
for g in 2 4; do cmp "inverse: $g ranks vs 1 GPU" $O/inv1.npy $O/inv$g.npy exact; done
run "${M[@]}" -np 4 $BIN --device gpu wavepacket denoise "${I[@]}" --output $O/den4.npy
run $BIN --device gpu wavepacket denoise "${I[@]}" --output $O/den1.npy
cmp "denoise: 4 ranks vs 1 GPU" $O/den1.npy $O/den4.npy exact
ls -a $O | grep tmp || echo "no temporary file left"
) > $W/mpi.log 2>&1
grep -v "^+ \|^rc 0\|^seisgpu: done\|wrote\|image in\|^{" $W/mpi.log
timeout 420 bundlez/bundle/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s8f.tgz -C $W --exclude='*.npy' --exclude='*.sgy' --exclude='*.wpk' .
