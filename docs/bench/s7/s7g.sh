#!/usr/bin/env bash
# Session 7, round G (4 x H200): the KTM GPU tests with the fixed zero-time test.
cd bundlez && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"
LD_LIBRARY_PATH=/usr/local/cuda/lib64 timeout 200 bundlez/bundle/integration ktm --test-threads=1 > $OUT/ktm-tests.log 2>&1; echo "ktm tests rc $?"
grep -E "test result|FAILED|panicked|zero_time" $OUT/ktm-tests.log | head
