#!/usr/bin/env bash
# Session 11, round F (4 x H200, code 278c6e7, the CLI alone in bundlez/q): the fold on its own
# 16-thread pool, empty slabs skipped; the host fold's log (SEISGPU_WP_TRACE=fold) of the 480^3
# runs; twice, and once on the global pool.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
W=$OUT/s11f; mkdir -p $W
for v in "16 1" "0 1" "16 2"; do
  set -- $v; tag=t$1-$2
  SEISGPU_WP_TRACE=fold SEISGPU_WP_FOLD_THREADS=$1 timeout 100 bundlez/q/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$tag > $W/b-$tag.log 2>&1; echo "fold threads $1 run $2: rc $?"
  grep '^| scale' $W/b-$tag/scaling.md | grep '| 4 |'
  grep -o '"note": "4 gpus[^"]*"' $W/b-$tag/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$tag/*.npy
done
cd $OUT && tar czf s11f.tgz s11f && rm -rf s11f
