#!/usr/bin/env bash
# Session 7, round B (4 x H200): repeated same-machine A/B on 928 x 928 x 480 (new default; 5 host box buffers per
# engine; session 6's pipeline), device busy/idle marks; then both paper volumes with the default.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=$OUT/work; mkdir -p $W
echo "commit $(cat bundlez/commit)"
timeout 120 $B/integration wavepacket_gpu_process scale_wavepacket --test-threads=1 --nocapture > $W/tests.log 2>&1; echo "tests rc $?"
grep -E "test result|process pipeline" $W/tests.log
export SEISGPU_SCALE_CASE=928
for r in 1 2 3; do
  for v in new hb5 old; do
    d=ab-$v-$r
    case $v in
      old) cmd="bundlez/ab/seisgpu-0424ab0";;
      new) cmd="$B/seisgpu";;
      hb5) cmd="env SEISGPU_WP_HOST_BOXES=5 $B/seisgpu";;
    esac
    timeout 80 $cmd --device gpu --gpus all bench wavepacket --size paper --out $W/$d > $W/$d.log 2>&1
    echo "$v run $r: $(grep '^| scale' $W/$d/scaling.md | awk -F'|' '{printf "%s dev %s s %s; ", $3, $4, $5}')"
    grep -o '"note": "[124] gpus[^"]*"' $W/$d/bench.json 2>/dev/null | sed 's/"note": //'
  done
done
unset SEISGPU_SCALE_CASE
timeout 150 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench > $W/bench.log 2>&1; echo "bench rc $?"
grep '^| scale' $W/bench/scaling.md
grep -o '"note": "[124] gpus[^"]*"' $W/bench/bench.json | sed 's/"note": //'
tar czf $OUT/s7b.tgz -C $W .
