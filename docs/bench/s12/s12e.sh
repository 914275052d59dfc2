#!/usr/bin/env bash
# Session 12, round E: the whole GPU suite at the fixed face counter, then the wave-packet scaling
# with the faces on the devices, twice, and on the host (SEISGPU_WP_FACE=host), with the fold log.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s12e; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"; nvidia-smi -L
timeout 300 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
bench() {
  SEISGPU_WP_TRACE=fold SEISGPU_WP_FACE=$1 timeout 90 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/b-$2 > $W/b-$2.log 2>&1; echo "faces on $1, run $2: rc $?"
  grep '^| scale' $W/b-$2/scaling.md
  grep -o '"note": "[24] gpus[^"]*"' $W/b-$2/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$2/*.npy
}
for r in ${RUNS:-device:1}; do bench ${r%%:*} ${r##*:}; done
cd $OUT && tar czf s12e.tgz s12e && rm -rf s12e
