#!/usr/bin/env bash
# Session 10, round G (4 x H200 if lent, else 2), after the batched slab folds (2d33173): the paper-size wave-packet scaling bench, A/B/C
# interleaved twice on one machine: one slab per cube (SEISGPU_WP_SLABS=1, the transform as in
# session 9), 8 slabs with each box folded once it is all down (SEISGPU_WP_FOLD=box), and 8 slabs
# folded slab by slab (the default); then the wave-packet GPU tests.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s10g; mkdir -p $W
echo "commit $(cat bundlez/commit)"; nvidia-smi -L
for r in 1 2; do
  for v in "1 box" "8 box" "8 slab"; do
    set -- $v; tag=s$1-$2-$r
    SEISGPU_WP_SLABS=$1 SEISGPU_WP_FOLD=$2 timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-$tag > $W/bench-$tag.log 2>&1; echo "slabs $1, fold by $2, run $r: rc $?"
    grep '^| scale' $W/bench-$tag/scaling.md | grep -v '| 2 |'
    grep -o '"note": "[24] gpus[^"]*"' $W/bench-$tag/bench.json | sed 's/"note": //'
  done
done
(cd $B && timeout 200 ./integration wavepacket --test-threads=1 > $W/gpu-tests-wavepacket.log 2>&1; echo "integration rc $?"
 timeout 100 ./host-unit wavepacket --test-threads=1 >> $W/gpu-tests-wavepacket.log 2>&1; echo "host-unit rc $?")
grep -E "test result|FAILED|panicked" $W/gpu-tests-wavepacket.log | head
tar czf $OUT/s10g.tgz -C $W .
