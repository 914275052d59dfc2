#!/usr/bin/env bash
# Session 14, round H (H100): the single-GPU bench of pstm at paper size at the final code
# (bd1a59e, the code of a252918: streamed migration, host steps in parallel), for the table
# (round B: 05548c3), and
# the pstm GPU tests on the H100.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p bundlez/new; tar xzf bundlez/n/bundle.tgz -C bundlez/new; N=bundlez/new/bundle; W=$OUT/s14h; mkdir -p $W
echo "commit $(cat bundlez/n/commit)"; nvidia-smi -L
timeout 120 $N/integration pstm --test-threads 4 > $W/gpu-tests-pstm.log 2>&1; echo "pstm tests rc $?"
grep -E "test result|FAILED|panicked|SKIPPED" $W/gpu-tests-pstm.log | head
s=$(date +%s); timeout 280 $N/seisgpu --device gpu bench pstm --size paper --out $W/bench-pstm > $W/bench-pstm.log 2>&1
echo "bench pstm rc $? in $(( $(date +%s) - s )) s"; grep -E "end-to-end|lean2 static8" $W/bench-pstm.log
grep -o 'streamed by batch[^"|]*' $W/bench-pstm/bench.json
cd $OUT && tar czf s14h.tgz s14h && rm -rf s14h
