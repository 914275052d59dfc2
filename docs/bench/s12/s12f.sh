#!/usr/bin/env bash
# Session 12, round F (2 x H200): wavepacket_gpu_process_pipeline up to 4 times at 3d37c68 (the
# whole suite hung there once at 7c8a481); on a hang, the watchdog's lines and every thread's stack.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for i in 1 2 3 4; do
  SEISGPU_WP_TRACE=fold timeout 60 bundlez/q/integration --test-threads=1 --nocapture wavepacket_gpu_process_pipeline > $OUT/run$i.log 2>&1 &
  tp=$!
  for s in $(seq 1 45); do sleep 1; kill -0 $tp 2>/dev/null || break; done
  if kill -0 $tp 2>/dev/null; then
    pid=$(pgrep -f "bundlez/q/integration" | tail -1)
    timeout 40 /usr/local/cuda/bin/cuda-gdb -batch -p $pid -ex "set pagination off" -ex "thread apply all bt 14" > $OUT/stacks$i.log 2>&1
    wait $tp; echo "run $i: HUNG"
    grep -E "watchdog|failed at" $OUT/run$i.log | tail -12
    break
  fi
  wait $tp; echo "run $i: rc $? $(grep 'test result' $OUT/run$i.log)"
done
grep -v "^trace: cube\|^trace: fold" $OUT/run*.log > $OUT/runs.txt; rm -f $OUT/run*.log; gzip $OUT/*
