#!/usr/bin/env bash
# Session 14, round J (H100): the review's mend (Coefs::len, one formula for the coefficients' length):
# the pstm GPU tests and the pstm bench's static8 rows (lean2), end to end with marks.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p bundlez/new; tar xzf bundlez/n/bundle.tgz -C bundlez/new; N=bundlez/new/bundle; W=$OUT/s14j; mkdir -p $W
echo "commit $(cat bundlez/n/commit)"; nvidia-smi -L
timeout 120 $N/integration pstm --test-threads 4 > $W/gpu-tests-pstm.log 2>&1; echo "pstm tests rc $?"
timeout 60 $N/host-unit pstm >> $W/gpu-tests-pstm.log 2>&1; echo "pstm unit tests rc $?"
grep -E "test result|FAILED|panicked|SKIPPED" $W/gpu-tests-pstm.log | head
timeout 200 $N/seisgpu --device gpu pstm bench --size paper --modes static8-dsr,static8-vti --variants lean2 --json $W/pstm.json > $W/pstm.log 2>&1
echo "pstm bench rc $?"; grep -E "end-to-end" $W/pstm.log | head -2; grep -o 'streamed by batch[^"]*' $W/pstm.json
cd $OUT && tar czf s14j.tgz s14j && rm -rf s14j
