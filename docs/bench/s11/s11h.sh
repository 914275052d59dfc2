#!/usr/bin/env bash
# Session 11, round H (4 x H200, the final code): the whole GPU suite; the wave-packet scaling
# three times (the host fold's log with it).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s11h; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"
timeout 200 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
for r in 1 2 3; do
  SEISGPU_WP_TRACE=fold timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$r > $W/b-$r.log 2>&1; echo "run $r: rc $?"
  grep '^| scale' $W/b-$r/scaling.md
  grep -o '"note": "4 gpus[^"]*"' $W/b-$r/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$r/*.npy
done
cd $OUT && tar czf s11h.tgz s11h && rm -rf s11h
