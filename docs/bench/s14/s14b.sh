#!/usr/bin/env bash
# Session 14, round B (H100): the single-GPU bench of ktm and pstm at paper size at the final
# code (05548c3's bundle), to merge with round A's (`seisgpu bench --merge`).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
[ -d bundlez/bundle ] || tar xzf bundlez/c/bundle.tgz -C bundlez; B=bundlez/bundle; W=$OUT/s14b; mkdir -p $W
echo "commit $(cat bundlez/c/commit)"; nvidia-smi -L
for w in ktm pstm; do
  s=$(date +%s); timeout 280 $B/seisgpu --device gpu bench $w --size paper --out $W/bench-$w > $W/bench-$w.log 2>&1
  echo "bench $w rc $? in $(( $(date +%s) - s )) s"
done
cd $OUT && tar czf s14b.tgz s14b && rm -rf s14b
