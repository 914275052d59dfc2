#!/usr/bin/env bash
# Session 11, round G (4 x H200, code 70783de): every box in before each fold pass; the whole GPU
# suite; the wave-packet scaling (fold pool of 16, write-combined box buffers) twice, with cached
# box buffers, with a fold pool of 32; the host fold's log of each.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s11g; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"
timeout 200 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
for v in "16 wc 1" "16 cached 1" "32 wc 1" "16 wc 2"; do
  set -- $v; tag=t$1-$2-$3
  SEISGPU_WP_TRACE=fold SEISGPU_WP_FOLD_THREADS=$1 SEISGPU_WP_PINNED=$2 timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$tag > $W/b-$tag.log 2>&1; echo "fold threads $1, $2, run $3: rc $?"
  grep '^| scale' $W/b-$tag/scaling.md | grep '| 4 |'
  grep -o '"note": "4 gpus[^"]*"' $W/b-$tag/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$tag/*.npy
done
cd $OUT && tar czf s11g.tgz s11g && rm -rf s11g
