#!/usr/bin/env bash
# Session 10, round H (4 x H200): the paper-size wave-packet scaling bench at the final code, the
# default (8 slabs, folded by slab) three times interleaved with one slab per cube
# (SEISGPU_WP_SLABS=1, session 9's transform) twice on one machine; the whole GPU test suite.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s10h; mkdir -p $W
echo "commit $(cat bundlez/commit)"; nvidia-smi -L
for v in "8 1" "1 1" "8 2" "1 2" "8 3"; do
  set -- $v; tag=s$1-$2
  SEISGPU_WP_SLABS=$1 timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-$tag > $W/bench-$tag.log 2>&1; echo "slabs $1, run $2: rc $?"
  grep '^| scale' $W/bench-$tag/scaling.md
  grep -o '"note": "4 gpus[^"]*"' $W/bench-$tag/bench.json | sed 's/"note": //'
done
echo "== tests"
timeout 300 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s10h.tgz -C $W .
