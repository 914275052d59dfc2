#!/usr/bin/env bash
# Session 9, round E (4 x H200), the final code: `nlbf enhance --gpus 4` (the enhancement's traces
# split over the GPUs) against one GPU, byte for byte; the whole GPU test suite.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
W=/tmp/s9e; O=$W/out; mkdir -p $O
BIN=bundlez/bundle/seisgpu
$BIN synth cross-spread -o $O/cs.sgy > /dev/null 2>&1
N=(nlbf enhance --input $O/cs.sgy --preset crossspread-3d)
$BIN --device gpu "${N[@]}" --out $O/e1 2>&1 | tail -1
for g in 2 4; do
  $BIN --device gpu --gpus $g "${N[@]}" --out $O/e$g 2>&1 | tail -1
  for v in enhanced input A E S; do command cmp -s $O/e1/$v.npy $O/e$g/$v.npy && echo "SAME $v: --gpus $g vs 1 GPU" || echo "DIFFER $v: --gpus $g"; done
done
echo "== tests"
timeout 330 bundlez/bundle/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
grep -h "enhancement_parts\|gpu_enhancement" $W/gpu-tests.log | head
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s9e.tgz -C $W --exclude='*.npy' --exclude='*.sgy' .
