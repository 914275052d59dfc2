#!/usr/bin/env bash
# Session 8, round E (4 x H200): the SRM strong-scaling rows twice more on one machine (round C gave
# 3.62x against 3.74x in session 5 on another), to see the spread.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/s8e; mkdir -p $W
for r in 1 2; do
  timeout 250 bundlez/bench/seisgpu --device gpu --gpus all bench srm --size paper --out $W/srm-$r > $W/srm-$r.log 2>&1; echo "srm $r rc $?"
  grep '^| scale' $W/srm-$r/scaling.md
  grep -o '"note": "4 gpus[^"]*"' $W/srm-$r/bench.json | cut -c1-700
done
tar czf $OUT/s8e.tgz -C $W .
