#!/usr/bin/env bash
# Session 10, round D (2 x H200): the whole GPU test suite with the slabbed transform and the
# ordered fold by slabs; the paper-size wave-packet scaling bench (1 and 2 GPUs) with 1 and 8 slabs.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s10d; mkdir -p $W
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
for s in 1 8; do
  SEISGPU_WP_SLABS=$s timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-s$s > $W/bench-s$s.log 2>&1; echo "slabs $s rc $?"
  grep '^| scale' $W/bench-s$s/scaling.md
  grep -o '"note": "2 gpus[^"]*"' $W/bench-s$s/bench.json | sed 's/"note": //'
done
echo "== tests"
timeout 420 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s10d.tgz -C $W .
