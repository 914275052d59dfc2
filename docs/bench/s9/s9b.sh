#!/usr/bin/env bash
# Session 9, round B (4 x H200): SRM strong scaling twice after the host-side trims; wave-packet
# ranks reading their rows' traces of a SEG-Y cube (GPU ranks against one GPU, byte for byte);
# the whole GPU test suite at the final code.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf mpi.tgz && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
W=/tmp/s9b; O=$W/mpi; mkdir -p $O
for r in 1 2; do
  timeout 200 bundlez/bundle/seisgpu --device gpu --gpus all bench srm --size paper --out $W/srm-$r > $W/srm-$r.log 2>&1; echo "srm $r rc $?"
  grep '^| scale' $W/srm-$r/scaling.md
  grep -o '"note": "[14] gpus*[^"]*"' $W/srm-$r/bench.json | cut -c1-1200
done
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
same() { command cmp -s "$2" "$3" && echo "SAME $1" || echo "DIFFER $1"; }
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; grep "^error\|cells\|^{" $O/last.log; echo "rc $rc"; return $rc; }
$BIN synth cube -o $O/cube.sgy > /dev/null 2>&1
python3 - $O/cube.sgy $O/holes.sgy <<'PY'
import random, struct, sys
b = open(sys.argv[1], "rb").read()
tb = 240 + 4 * struct.unpack(">H", b[3220:3222])[0]
tr = [b[o:o + tb] for o in range(3600, len(b), tb)]
random.Random(4).shuffle(tr)
open(sys.argv[2], "wb").write(b[:3600] + b"".join(tr[:len(tr) * 7 // 10]))
PY
for app in "denoise --input $O/cube.sgy" "interpolate --method pocs --iterations 3 --input $O/holes.sgy"; do
  name=${app%% *}
  run $BIN --device gpu wavepacket $app --cube 64 --overlap 16 --output $O/$name-1.npy
  for g in 2 4; do
    run "${M[@]}" -np $g $BIN --device gpu wavepacket $app --cube 64 --overlap 16 --output $O/$name-$g.npy
    same "wavepacket $name (SEG-Y cube, rows' traces read): $g GPU ranks vs 1 GPU" $O/$name-1.npy $O/$name-$g.npy
  done
done
) > $W/mpi.log 2>&1
grep -v "^+ \|^rc 0" $W/mpi.log
echo "== tests"
timeout 330 bundlez/bundle/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
grep -h "scale_srm\|srm::" $W/gpu-tests.log | grep -v "^running" | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s9b.tgz -C $W --exclude='*.npy' --exclude='*.sgy' --exclude='*.wpk' .
