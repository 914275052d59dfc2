#!/usr/bin/env bash
# Session 11, round C (4 x H200): the download fix (a slab's fold no longer waits for the previous
# slab's download): wave-packet scaling 8 slabs x2 and 1 slab, then the wave-packet GPU tests.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s11c; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"
for v in "8 1" "1 1" "8 2"; do
  set -- $v; tag=s$1-$2
  SEISGPU_WP_SLABS=$1 timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$tag > $W/b-$tag.log 2>&1; echo "slabs $1 run $2: rc $?"
  grep '^| scale' $W/b-$tag/scaling.md | grep -v '| 2 |'
  grep -o '"note": "4 gpus[^"]*"' $W/b-$tag/bench.json | sed 's/"note": //'
  rm -f $W/b-$tag/*.npy
done
timeout 200 $B/run-tests.sh wavepacket > $W/tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked|SKIPPED|slabs" $W/tests.log | head -20
cd $OUT && tar czf s11c.tgz s11c && rm -rf s11c
