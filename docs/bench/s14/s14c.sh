#!/usr/bin/env bash
# Session 14, round C (H100): the streamed PSTM migration (da724b8). The whole GPU suite; the
# single-GPU bench of pstm at paper size (end-to-end rows against round B's 05548c3); the
# strong-scaling bench's 1-GPU pstm row, new then old (05548c3) then new.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p bundlez/new bundlez/old
tar xzf bundlez/n/bundle.tgz -C bundlez/new; tar xzf bundlez/c/bundle.tgz -C bundlez/old
N=bundlez/new/bundle; O=bundlez/old/bundle; W=$OUT/s14c; mkdir -p $W
echo "new $(cat bundlez/n/commit), old $(cat bundlez/c/commit)"; nvidia-smi -L
timeout 200 $N/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
grep -E "streamed_migration|gpu_matches_cpu|many_batches" $W/gpu-tests.log | head
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
s=$(date +%s); timeout 280 $N/seisgpu --device gpu bench pstm --size paper --out $W/bench-pstm > $W/bench-pstm.log 2>&1
echo "bench pstm rc $? in $(( $(date +%s) - s )) s"; grep -E "end-to-end|lean2 static8-dsr" $W/bench-pstm.log
for v in new old new; do
  X=$N; [ $v = old ] && X=$O
  timeout 90 $X --device gpu --gpus all bench pstm --size paper --out $W/scale-$v > $W/scale-$v.log 2>&1; echo "scale $v rc $?"
  grep '^| scale' $W/scale-$v/scaling.md; grep -o '"note": "1 gpu[^"]*"' $W/scale-$v/bench.json
  mv $W/scale-$v $W/scale-$v-$RANDOM
done
cd $OUT && tar czf s14c.tgz s14c && rm -rf s14c
