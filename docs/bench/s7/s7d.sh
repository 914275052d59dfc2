#!/usr/bin/env bash
# Session 7, round D (4 x H200): the paper-size wave-packet scaling bench twice at the final code, then the
# whole GPU test suite (integration, host unit, kernels unit).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s7work; mkdir -p $W
echo "commit $(cat bundlez/commit)"
for r in 1 2; do
  timeout 120 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-$r > $W/bench-$r.log 2>&1; echo "bench $r rc $?"
  grep '^| scale' $W/bench-$r/scaling.md
  grep -o '"note": "[124] gpus[^"]*"' $W/bench-$r/bench.json | sed 's/"note": //'
done
timeout 390 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
grep -c SKIPPED $W/gpu-tests.log
tar czf $OUT/s7d.tgz -C $W .
