#!/usr/bin/env bash
# Session 13, round C: the x1 pass by slabs, B slab after slab (k2, x0) (343fa42). The whole GPU suite; the same outputs bit
# for bit as the code before it (7dd60e8, bundlez/c/old) on 1 and 2 GPUs; the wave-packet scaling
# bench new / old / new, and one traced run (each cube's stage times).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s13c; mkdir -p $W
N=$B/seisgpu; O=bundlez/c/old/seisgpu
echo "commit $(cat bundlez/c/commit)"; nvidia-smi -L
timeout 300 $B/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
T=/tmp/s13cmp; mkdir -p $T
for v in old new; do
  X=$O; [ $v = new ] && X=$N
  timeout 60 $X --device gpu wavepacket forward --input synth:200x200x200 --output $T/fwd-$v.wpk > $W/cmp-$v.log 2>&1; echo "$v forward rc $?"
  timeout 60 $X --device gpu wavepacket denoise --input synth:300x280x260:0.5 --output $T/dn1-$v.npy >> $W/cmp-$v.log 2>&1; echo "$v denoise 1 gpu rc $?"
  timeout 60 $X --device gpu --gpus all wavepacket denoise --input synth:300x280x260:0.5 --output $T/dn2-$v.npy >> $W/cmp-$v.log 2>&1; echo "$v denoise 2 gpus rc $?"
done
for f in fwd-%.wpk dn1-%.npy dn2-%.npy; do
  a=$T/${f/\%/old}; b=$T/${f/\%/new}
  if cmp -s $a $b; then echo "$f: identical ($(stat -c %s $a) bytes)"; else echo "$f: DIFFERENT ($(cmp -l $a $b | wc -l) bytes differ)"; fi
done
cmp -s $T/dn1-new.npy $T/dn2-new.npy && echo "new: 1 and 2 GPUs identical" || echo "new: 1 and 2 GPUs DIFFER"
bench() {
  SEISGPU_WP_TRACE=fold timeout 100 $1 --device gpu --gpus all bench wavepacket --size paper --out $W/b-$2 > $W/b-$2.log 2>&1; echo "run $2: rc $?"
  grep '^| scale' $W/b-$2/scaling.md
  grep -o '"note": "[24] gpus[^"]*"' $W/b-$2/bench.json | sed 's/"note": //; s/cube copied and queued up (each) [0-9.-]* ms, //'
  rm -f $W/b-$2/*.npy
}
bench $N new-1; bench $O old-2; bench $N new-3
SEISGPU_WP_TRACE=1 timeout 100 $N --device gpu --gpus all bench wavepacket --size paper --out $W/t > $W/trace-new.log 2>&1; echo "trace rc $?"
grep "device 0 cube 0:" $W/trace-new.log | head -2
gzip $W/trace-new.log; rm -rf $W/t
cd $OUT && tar czf s13c.tgz s13c && rm -rf s13c
