#!/usr/bin/env bash
# Session 9, round D (4 x H200), the final code: `nlbf enhance` on GPU ranks (the search split,
# the picks gathered, each rank enhancing its block of traces from the traces their neighbours
# are) against one GPU, byte for byte; the whole GPU test suite.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf mpi.tgz && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
W=/tmp/s9d; O=$W/mpi; mkdir -p $O
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
same() { command cmp -s "$2" "$3" && echo "SAME $1" || echo "DIFFER $1"; }
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; grep "traces read\|enhancing\|^error\|^enhanced" $O/last.log; echo "rc $rc"; return $rc; }
$BIN synth cross-spread -o $O/cs.sgy > /dev/null 2>&1
N=(nlbf enhance --input $O/cs.sgy --preset crossspread-3d)
run $BIN --device gpu "${N[@]}" --out $O/e1
for g in 2 4; do
  run "${M[@]}" -np $g $BIN --device gpu "${N[@]}" --out $O/e$g
  for v in enhanced input A E S positions; do same "nlbf enhance $v: $g GPU ranks vs 1 GPU" $O/e1/$v.npy $O/e$g/$v.npy; done
done
python3 -c "
import numpy as np
a, b = np.load('$O/e1/input.npy'), np.load('$O/e1/enhanced.npy')
print('enhanced vs input: rms ratio %.3f, finite %s' % (np.sqrt((b**2).mean() / (a**2).mean()), np.isfinite(b).all()))"
ls -a $O $O/e2 $O/e4 | grep tmp || echo "no temporary file left"
) > $W/mpi.log 2>&1
grep -v "^+ \|^rc 0" $W/mpi.log
echo "== tests"
timeout 330 bundlez/bundle/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
grep -h "enhancement_parts\|gpu_rank_parts\|gpu_enhancement" $W/gpu-tests.log | head
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s9d.tgz -C $W --exclude='*.npy' --exclude='*.sgy' --exclude='*.wpk' .
