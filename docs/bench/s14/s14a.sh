#!/usr/bin/env bash
# Session 14, round A (H100): the whole GPU suite at the final code (05548c3's bundle; HEAD differs
# by docs only), the main job (`demo`) on the GPU, then the single-GPU bench of nlbf, srm,
# wavepacket and the device ceilings at paper size (ktm and pstm follow in round B: one call
# may run 10 minutes).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s14a; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"; nvidia-smi -L
timeout 200 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
(cd /tmp && timeout 60 $OLDPWD/$B/seisgpu demo > $W/demo.log 2>&1; echo "demo rc $?"); tail -15 $W/demo.log
for w in ceilings nlbf srm wavepacket; do
  s=$(date +%s); timeout 150 $B/seisgpu --device gpu bench $w --size paper --out $W/bench-$w > $W/bench-$w.log 2>&1
  echo "bench $w rc $? in $(( $(date +%s) - s )) s"
done
cd $OUT && tar czf s14a.tgz s14a && rm -rf s14a
