#!/usr/bin/env bash
# Session 7, round I (H100): the whole GPU test suite at the final code, and the demo.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"; nvidia-smi -L
timeout 400 bundlez/bundle/run-tests.sh > $OUT/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $OUT/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $OUT/gpu-tests.log)"
timeout 120 bundlez/bundle/seisgpu --device gpu demo --out /tmp/demo > $OUT/demo.log 2>&1; echo "demo rc $?"; tail -5 $OUT/demo.log
