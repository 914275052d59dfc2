#!/usr/bin/env bash
# Session 11, round D (4 x H200, code 23f268e): the host fold's box buffers write-combined (the
# default) against cached page-locked memory (SEISGPU_WP_PINNED=cached), 8 slabs folded by slab,
# twice each, alternating.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s11d; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"
for v in "wc 1" "cached 1" "wc 2" "cached 2"; do
  set -- $v; tag=$1-$2
  SEISGPU_WP_PINNED=$1 timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$tag > $W/b-$tag.log 2>&1; echo "pinned $1 run $2: rc $?"
  grep '^| scale' $W/b-$tag/scaling.md | grep -v '| 2 |'
  grep -o '"note": "[14] gpu[^"]*"' $W/b-$tag/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$tag/*.npy
done
cd $OUT && tar czf s11d.tgz s11d && rm -rf s11d
