#!/usr/bin/env bash
# Session 11, round E (4 x H200, code 8b7e65f): the host fold on this host (the ignored probe:
# passes, pools, write-combined vs cached page-locked), then the scaling bench with a fold pool of
# its own and with cached box buffers.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s11e; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"
$B/host-unit fold_speed --ignored --nocapture 2>&1 | grep -E "covered|passes|test result" | tee $W/fold-speed.log
for v in "0 wc" "16 wc" "16 cached" "8 cached"; do
  set -- $v; tag=t$1-$2
  SEISGPU_WP_FOLD_THREADS=$1 SEISGPU_WP_PINNED=$2 timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$tag > $W/b-$tag.log 2>&1; echo "fold threads $1, $2: rc $?"
  grep '^| scale' $W/b-$tag/scaling.md | grep '| 4 |'
  grep -o '"note": "4 gpus[^"]*"' $W/b-$tag/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$tag/*.npy
done
cd $OUT && tar czf s11e.tgz s11e && rm -rf s11e
