#!/usr/bin/env bash
# Session 10, round A (4 x H200): the wave-packet GPU tests with the slabbed x2 pass, then the
# paper-size wave-packet scaling bench A/B on one machine: one slab per cube (SEISGPU_WP_SLABS=1,
# the transform as before) against the default 8, interleaved twice.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s10a; mkdir -p $W
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
(cd $B && timeout 200 ./integration wavepacket --test-threads=1 > $W/gpu-tests-wavepacket.log 2>&1; echo "integration rc $?"
 timeout 100 ./host-unit wavepacket --test-threads=1 >> $W/gpu-tests-wavepacket.log 2>&1; echo "host-unit rc $?")
grep -E "test result|FAILED|panicked" $W/gpu-tests-wavepacket.log | head
grep -E "slabs:" $W/gpu-tests-wavepacket.log
for r in 1 2; do
  for s in 1 8; do
    SEISGPU_WP_SLABS=$s timeout 110 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-s$s-$r > $W/bench-s$s-$r.log 2>&1; echo "slabs $s run $r rc $?"
    grep '^| scale' $W/bench-s$s-$r/scaling.md
    grep -o '"note": "[124] gpus[^"]*"' $W/bench-s$s-$r/bench.json | sed 's/"note": //'
  done
done
tar czf $OUT/s10a.tgz -C $W .
