#!/usr/bin/env bash
# Session 9, round F (4 x H200): strong scaling of every pipeline at paper size, at the final code.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
W=/tmp/s9f; mkdir -p $W
timeout 530 bundlez/bundle/seisgpu --device gpu --gpus all bench all --size paper --out $W/scaling > $W/scaling.log 2>&1; echo "bench rc $?"
grep '^| scale' $W/scaling/scaling.md 2>/dev/null || tail -20 $W/scaling.log
tar czf $OUT/s9f.tgz -C $W .
