#!/usr/bin/env bash
# Session 14, round F (2 x H200): the whole GPU suite at a252918 (the streamed PSTM migration,
# its host steps in parallel) on two GPUs; the strong-scaling bench of pstm, new / old (05548c3) /
# new. (New: the scaling workload runs the CLI's tuning, GpuTuning::fastest; old: the default.)
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p bundlez/new bundlez/old
tar xzf bundlez/n/bundle.tgz -C bundlez/new; tar xzf bundlez/c/bundle.tgz -C bundlez/old
N=bundlez/new/bundle; O=bundlez/old/bundle; W=$OUT/s14f; mkdir -p $W
echo "new $(cat bundlez/n/commit), old $(cat bundlez/c/commit)"; nvidia-smi -L
timeout 240 $N/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
grep -E "streamed_migration|scale_pstm" $W/gpu-tests.log | head
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
for v in new old new; do
  X=$N/seisgpu; [ $v = old ] && X=$O/seisgpu
  timeout 150 $X --device gpu --gpus all bench pstm --size paper --out $W/scale-$v > $W/scale-$v.log 2>&1; echo "scale $v rc $?"
  grep '^| scale' $W/scale-$v/scaling.md; grep -o '"note": "[12] gpus\?;[^"]*"' $W/scale-$v/bench.json
  mv $W/scale-$v $W/scale-$v-$RANDOM
done
cd $OUT && tar czf s14f.tgz s14f && rm -rf s14f
