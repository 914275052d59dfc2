#!/usr/bin/env bash
# Session 8, round C (4 x H200): strong scaling of every pipeline at paper size, at the final code.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/s8c; mkdir -p $W
nvidia-smi -L
timeout 500 bundlez/bench/seisgpu --device gpu --gpus all bench all --size paper --out $W/scaling > $W/scaling.log 2>&1; echo "bench rc $?"
cat $W/scaling/scaling.md 2>/dev/null || tail -20 $W/scaling.log
grep -o '"workload": "[^"]*"\|"note": "[124] gpus[^"]*"' $W/scaling/bench.json | sed 's/"note": //' | paste - - 2>/dev/null | cut -c1-400
tar czf $OUT/s8c.tgz -C $W .
