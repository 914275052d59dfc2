#!/usr/bin/env bash
# Session 10, round E (4 x H200 if lent, else 2): the paper-size wave-packet scaling bench with 1
# and 8 slabs per cube (SEISGPU_WP_SLABS; 8 is the default), interleaved twice on one machine; the
# wave-packet GPU tests on all the machine's GPUs.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s10e; mkdir -p $W
echo "commit $(cat bundlez/commit)"; nvidia-smi -L
for r in 1 2; do
  for s in 1 8; do
    SEISGPU_WP_SLABS=$s timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-s$s-$r > $W/bench-s$s-$r.log 2>&1; echo "slabs $s run $r rc $?"
    grep '^| scale' $W/bench-s$s-$r/scaling.md | grep -v '| 2 |'
    grep -o '"note": "[24] gpus[^"]*"' $W/bench-s$s-$r/bench.json | sed 's/"note": //'
  done
done
(cd $B && timeout 200 ./integration wavepacket --test-threads=1 > $W/gpu-tests-wavepacket.log 2>&1; echo "integration rc $?"
 timeout 100 ./host-unit wavepacket --test-threads=1 >> $W/gpu-tests-wavepacket.log 2>&1; echo "host-unit rc $?")
grep -E "test result|FAILED|panicked" $W/gpu-tests-wavepacket.log | head
tar czf $OUT/s10e.tgz -C $W .
