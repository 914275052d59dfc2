#!/usr/bin/env bash
# Session 12, round H (4 x H200 if lent): the wave-packet scaling with the faces on the devices,
# on the host, and on the devices again (the CLI alone, in bundlez/q).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
W=$OUT/s12h; mkdir -p $W; nvidia-smi -L
for r in device:1 host:2 device:3; do
  f=${r%%:*}; i=${r##*:}
  SEISGPU_WP_TRACE=fold SEISGPU_WP_FACE=$f timeout 100 bundlez/q/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$i > $W/b-$i.log 2>&1; echo "faces on $f, run $i: rc $?"
  grep '^| scale' $W/b-$i/scaling.md
  grep -o '"note": "4 gpus[^"]*"' $W/b-$i/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$i/*.npy
done
cd $OUT && tar czf s12h.tgz s12h && rm -rf s12h
