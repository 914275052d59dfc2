#!/usr/bin/env bash
# Session 13, round A: the whole GPU suite at HEAD, then the host's tail fold probe
# (`fold_speed_480_tail`: the last x0 row's shared samples at 480^3 with the faces on the devices).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s13a; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"; nvidia-smi -L; nproc
timeout 420 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
timeout 60 $B/host-unit --ignored --nocapture fold_speed_480_tail > $W/fold-tail-probe.log 2>&1; echo "probe rc $?"
grep -E "shared|pool" $W/fold-tail-probe.log
cd $OUT && tar czf s13a.tgz s13a && rm -rf s13a
