#!/usr/bin/env bash
# Session 13's next step, for 4 x H200 when one is lent (not run in session 13): the wave-packet
# scaling with the faces on the devices, on the host, the x1 pass by 8 slabs, and the default again
# (the stripped CLI alone, in bundlez/q). Each run: faces (device|host), x1 slabs, run number.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
W=$OUT/s13x4; mkdir -p $W; nvidia-smi -L
for r in device:1:1 host:1:2 device:8:3 device:1:4; do
  IFS=: read -r f k i <<< "$r"
  SEISGPU_WP_TRACE=fold SEISGPU_WP_FACE=$f SEISGPU_WP_X1_SLABS=$k timeout 110 bundlez/q/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$i > $W/b-$i.log 2>&1; echo "faces on $f, x1 slabs $k, run $i: rc $?"
  grep '^| scale' $W/b-$i/scaling.md
  grep -o '"note": "4 gpus[^"]*"' $W/b-$i/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$i/*.npy
done
cd $OUT && tar czf s13x4.tgz s13x4 && rm -rf s13x4
