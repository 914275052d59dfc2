#!/usr/bin/env bash
# Session 13, round F (05548c3: the adjoint passes' lines derived, slabs_in): the wave-packet GPU
# tests, and the forward coefficients with the x1 pass whole and by 8 slabs against 7dd60e8's.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s13f; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"; nvidia-smi -L
timeout 100 $B/run-tests.sh wavepacket > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log
T=/tmp/s13cmp; mkdir -p $T
bundlez/c/old/seisgpu --device gpu wavepacket forward --input synth:200x200x200 --output $T/old.wpk > /dev/null 2>&1
for k in 1 8; do
  SEISGPU_WP_X1_SLABS=$k timeout 30 $B/seisgpu --device gpu --gpus all wavepacket denoise --input synth:300x280x260:0.5 --output $T/dn-$k.npy > /dev/null 2>&1
  SEISGPU_WP_X1_SLABS=$k timeout 30 $B/seisgpu --device gpu wavepacket forward --input synth:200x200x200 --output $T/new-$k.wpk > /dev/null 2>&1
  cmp -s $T/old.wpk $T/new-$k.wpk && echo "forward, x1 slabs $k: identical to 7dd60e8" || echo "forward, x1 slabs $k: DIFFERENT"
done
cmp -s $T/dn-1.npy $T/dn-8.npy && echo "denoise 2 gpus: x1 slabs 1 and 8 identical" || echo "denoise: DIFFER"
cd $OUT && tar czf s13f.tgz s13f && rm -rf s13f
