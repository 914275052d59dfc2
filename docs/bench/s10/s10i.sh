#!/usr/bin/env bash
# Session 10, round I (4 x H200, if lent): the paper-size wave-packet scaling bench at the final
# code (6f54cf7), A/B/C interleaved twice on one machine: the default (8 slabs, folded by slab),
# 8 slabs folded by whole box (SEISGPU_WP_FOLD=box), one slab (SEISGPU_WP_SLABS=1, session 9's
# transform); then the whole GPU test suite.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s10i; mkdir -p $W
echo "commit $(cat bundlez/commit)"; nvidia-smi -L
for r in 1 2; do
  for v in "8 slab" "8 box" "1 box"; do
    set -- $v; tag=s$1-$2-$r
    SEISGPU_WP_SLABS=$1 SEISGPU_WP_FOLD=$2 timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-$tag > $W/bench-$tag.log 2>&1; echo "slabs $1, fold by $2, run $r: rc $?"
    grep '^| scale' $W/bench-$tag/scaling.md | grep -v '| 2 |'
    grep -o '"note": "4 gpus[^"]*"' $W/bench-$tag/bench.json | sed 's/"note": //'
  done
done
echo "== tests"
timeout 240 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s10i.tgz -C $W .
