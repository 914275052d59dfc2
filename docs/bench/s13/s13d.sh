#!/usr/bin/env bash
# Session 13, round D (0e66519: the x1 pass's slabs their own count, SEISGPU_WP_X1_SLABS, default
# 1). The whole GPU suite; the same outputs bit for bit as 7dd60e8 (bundlez/c/old) with x1 slabs
# 1 (default) and 8, on 1 and 2 GPUs; the wave-packet scaling bench: default, 7dd60e8, x1 slabs 8.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s13d; mkdir -p $W
N=$B/seisgpu; O=bundlez/c/old/seisgpu
echo "commit $(cat bundlez/c/commit)"; nvidia-smi -L
timeout 300 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
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
bench() {
  SEISGPU_WP_X1_SLABS=$3 SEISGPU_WP_TRACE=fold timeout 100 $1 --device gpu --gpus all bench wavepacket --size paper --out $W/b-$2 > $W/b-$2.log 2>&1; echo "run $2: rc $?"
  grep '^| scale' $W/b-$2/scaling.md
  grep -o '"note": "[24] gpus[^"]*"' $W/b-$2/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$2/*.npy
}
bench $N new-1 1; bench $O old-2 1; bench $N x1s8-3 8
cd $OUT && tar czf s13d.tgz s13d && rm -rf s13d
