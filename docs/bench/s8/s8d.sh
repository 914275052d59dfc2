#!/usr/bin/env bash
# Session 8, round D (H100): the Kirchhoff paper-size bench again, after 772ebc6 (the spreading weight
# is 0 where its argument is not a normal number) changed the kernels' comparison.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
W=/tmp/s8d; mkdir -p $W
nvidia-smi -L
timeout 420 bundlez/bench/seisgpu --device gpu bench ktm --size paper --out $W/ktm > $W/ktm.log 2>&1; echo "bench rc $?"
grep '^| ktm' $W/ktm/bench.md | cut -d'|' -f2-9
tar czf $OUT/s8d.tgz -C $W .
