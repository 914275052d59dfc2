#!/usr/bin/env bash
# Session 11, round B (4 x H200, code 0ed4907 + the trace of 23f268e, the CLI alone in bundlez/q): per-cube stage traces (SEISGPU_WP_TRACE) of the wave-packet
# scaling bench, 8 slabs and 1 slab; is nsys there?
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
W=$OUT/s11b; mkdir -p $W
ls /usr/local/cuda/bin | grep -i nsys; ls -d /usr/local/cuda/nsight* /opt/nvidia/nsight* 2>/dev/null; which nsys
nproc; lscpu | grep -i "numa\|socket\|model name"
for s in 8 1; do
  SEISGPU_WP_TRACE=1 SEISGPU_WP_SLABS=$s timeout 120 bundlez/q/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b$s > $W/b$s.log 2>&1; echo "slabs $s rc $?"
  grep '^| scale' $W/b$s/scaling.md
  rm -f $W/b$s/*.npy
done
cd $OUT && tar czf s11b.tgz s11b && rm -rf s11b
