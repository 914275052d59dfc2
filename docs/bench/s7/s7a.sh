#!/usr/bin/env bash
# Session 7, round A (4 x H200): GPU tests of the changed wave-packet pipeline, the paper-size scaling bench
# (new default: one cube per box, page-locked input copied by DMA), then a same-machine A/B on 928 x 928 x 480.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle
nvidia-smi -L
git_c=$(cat bundlez/commit 2>/dev/null)
echo "== tests"
timeout 240 $B/integration wavepacket scale_ --test-threads=1 --nocapture > $OUT/tests.log 2>&1; echo "tests rc $?"
grep -E "^test |test result|process pipeline|SKIP" $OUT/tests.log | tail -40
echo "== bench (both volumes)"
timeout 150 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $OUT/bench > $OUT/bench.log 2>&1; echo "bench rc $?"
grep '^| scale' $OUT/bench/scaling.md
echo "== A/B 928"
export SEISGPU_SCALE_CASE=928
for r in 1; do
  for v in old new pageable box2; do
    d=ab-$v-$r
    case $v in
      old) cmd="bundlez/ab/seisgpu-0424ab0";;
      new) cmd="$B/seisgpu";;
      pageable) cmd="env SEISGPU_WP_INPUT=pageable $B/seisgpu";;
      box2) cmd="env SEISGPU_WP_BOX_CUBES=2 $B/seisgpu";;
    esac
    timeout 80 $cmd --device gpu --gpus all bench wavepacket --size paper --out $OUT/$d > $OUT/$d.log 2>&1
    echo "$v run $r: $(grep '^| scale' $OUT/$d/scaling.md | awk -F'|' '{printf "%s dev %s s %s; ", $3, $4, $5}')"
    grep -o '"note": "4 gpus[^"]*"' $OUT/$d/*.json 2>/dev/null | head -1
  done
done
