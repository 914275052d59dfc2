#!/usr/bin/env bash
# Session 12, round D (2 x H200): wavepacket_gpu_process_pipeline with the faces on the host, then
# on the devices, each with the stall watchdog (SEISGPU_WP_TRACE) and a debugger's stacks if hung.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for face in host device; do
  SEISGPU_WP_FACE=$face SEISGPU_WP_TRACE=fold timeout 55 bundlez/q/integration --test-threads=1 --nocapture wavepacket_gpu_process_pipeline > $OUT/$face.log 2>&1 &
  tp=$!
  for i in $(seq 1 44); do sleep 1; kill -0 $tp 2>/dev/null || break; done
  if kill -0 $tp 2>/dev/null; then
    pid=$(pgrep -f "bundlez/q/integration" | tail -1)
    timeout 40 /usr/local/cuda/bin/cuda-gdb -batch -p $pid -ex "set pagination off" -ex "thread apply all bt 12" > $OUT/$face-stacks.log 2>&1
  fi
  wait $tp; echo "faces on $face: rc $?"
  grep -E "watchdog|stall|failed|panicked|test result" $OUT/$face.log | head -24
done
gzip $OUT/*.log
