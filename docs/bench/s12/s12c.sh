#!/usr/bin/env bash
# Session 12, round C (2 x H200): where wavepacket_gpu_process_pipeline hangs (k = 4 cubes per box,
# 2 GPUs): the test in the background, then every thread's stack from a debugger.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SEISGPU_WP_TRACE=fold timeout 80 bundlez/q/integration --test-threads=1 --nocapture wavepacket_gpu_process_pipeline > $OUT/hang.log 2>&1 &
sleep 45
pid=$(pgrep -f "bundlez/q/integration" | grep -v "^$$" | tail -1); echo "pid $pid"
G=$(command -v gdb || echo /usr/local/cuda/bin/cuda-gdb); echo "debugger $G"
timeout 60 $G -batch -p $pid -ex "set pagination off" -ex "thread apply all bt 30" > $OUT/stacks.log 2>&1; echo "gdb rc $?"
grep -c "^Thread" $OUT/stacks.log
wait; echo "test done"
grep -n "stall" $OUT/hang.log | head -20
gzip $OUT/hang.log $OUT/stacks.log
