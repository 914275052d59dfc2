#!/usr/bin/env bash
# Session 13, round E (4506be4: the x0 pass's buffer is A again where the x1 pass is whole). The
# wave-packet GPU tests; the same outputs bit for bit as 7dd60e8 (bundlez/c/old) with x1 slabs 1
# (default) and 8, on 1 and 2 GPUs; the wave-packet scaling bench once (default).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s13e; mkdir -p $W
N=$B/seisgpu; O=bundlez/c/old/seisgpu
echo "commit $(cat bundlez/c/commit)"; nvidia-smi -L
timeout 200 $B/run-tests.sh wavepacket > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
T=/tmp/s13cmp; mkdir -p $T
for v in old new x1s8; do
  X=$N; [ $v = old ] && X=$O; k=1; [ $v = x1s8 ] && k=8
  export SEISGPU_WP_X1_SLABS=$k
  timeout 60 $X --device gpu wavepacket forward --input synth:200x200x200 --output $T/fwd-$v.wpk > $W/cmp-$v.log 2>&1; echo "$v forward rc $?"
  timeout 60 $X --device gpu wavepacket denoise --input synth:300x280x260:0.5 --output $T/dn1-$v.npy >> $W/cmp-$v.log 2>&1; echo "$v denoise 1 gpu rc $?"
  timeout 60 $X --device gpu --gpus all wavepacket denoise --input synth:300x280x260:0.5 --output $T/dn2-$v.npy >> $W/cmp-$v.log 2>&1; echo "$v denoise 2 gpus rc $?"
done
unset SEISGPU_WP_X1_SLABS
for f in fwd-%.wpk dn1-%.npy dn2-%.npy; do
  for v in new x1s8; do
    a=$T/${f/\%/old}; b=$T/${f/\%/$v}
    if cmp -s $a $b; then echo "$f $v: identical to old ($(stat -c %s $a) bytes)"; else echo "$f $v: DIFFERENT ($(cmp -l $a $b | wc -l) bytes differ)"; fi
  done
done
SEISGPU_WP_TRACE=fold timeout 100 $N --device gpu --gpus all bench wavepacket --size paper --out $W/b-new-1 > $W/b-new-1.log 2>&1; echo "bench rc $?"
grep '^| scale' $W/b-new-1/scaling.md; rm -f $W/b-new-1/*.npy
cd $OUT && tar czf s13e.tgz s13e && rm -rf s13e
