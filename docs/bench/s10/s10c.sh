#!/usr/bin/env bash
# Session 10, round C (4 x H200): the paper-size wave-packet scaling bench with 1, 4 and 8 slabs per
# cube (SEISGPU_WP_SLABS; 8 is the default), interleaved twice on one machine; then the whole GPU
# test suite at this commit.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s10c; mkdir -p $W
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
for r in 1 2; do
  for s in 1 4 8; do
    SEISGPU_WP_SLABS=$s timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-s$s-$r > $W/bench-s$s-$r.log 2>&1; echo "slabs $s run $r rc $?"
    grep '^| scale' $W/bench-s$s-$r/scaling.md | grep -v '| 2 |'
    grep -o '"note": "4 gpus[^"]*"' $W/bench-s$s-$r/bench.json | sed 's/"note": //'
  done
done
echo "== tests"
timeout 300 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s10c.tgz -C $W .
