#!/usr/bin/env bash
# Session 12, round I (2 x H200), at bbe6d75: every failure of a box coming down gives its buffer back:
# wavepacket_gpu_process_pipeline 3 times, then every wave-packet
# integration test.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for i in 1 2 3; do
  SEISGPU_WP_TRACE=fold timeout 45 bundlez/q/integration --test-threads=1 --nocapture wavepacket_gpu_process_pipeline > $OUT/run$i.log 2>&1
  echo "run $i: rc $? $(grep 'test result' $OUT/run$i.log)"; grep -E "watchdog" $OUT/run$i.log | tail -3
done
timeout 100 bundlez/q/integration --test-threads=1 wavepacket > $OUT/wavepacket-tests.log 2>&1; echo "wavepacket tests rc $?"
grep -E "test result|FAILED|panicked" $OUT/wavepacket-tests.log
grep -v "^trace: cube\|^trace: fold" $OUT/run*.log > $OUT/runs.txt; rm -f $OUT/run*.log; gzip $OUT/*
