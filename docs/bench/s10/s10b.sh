#!/usr/bin/env bash
# Session 10, round B (2 x H200, one used): what the slabs cost per cube. The per-stage profile of a
# 256^3 cube's forward and inverse (`bench wavepacket --size paper`, the GPU stage rows) with one
# slab (SEISGPU_WP_SLABS=1) and the default 8; the slab test's printed comparison.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf bundle.tgz && cd ..
B=bundlez/bundle; W=/tmp/s10b; mkdir -p $W
echo "commit $(cat bundlez/commit)"; nvidia-smi -L | head -1
(cd $B && timeout 60 ./integration wavepacket_gpu_slabs --nocapture --test-threads=1 2>&1 | grep -E "slabs|test result")
for s in 1 8; do
  SEISGPU_WP_SLABS=$s timeout 250 $B/seisgpu --device gpu bench wavepacket --size paper --out $W/bench-s$s > $W/bench-s$s.log 2>&1; echo "slabs $s rc $?"
  python3 - $W/bench-s$s/bench.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d['rows']:
    if '@256' in r['workload'] and r['variant'] == 'gpu-separable':
        print('  %-34s %-22s %8.3f ms' % (r['workload'], r['scope'], r['stats']['median_ms']))
    elif 'fragments' in r['workload'] or 'cubes' in r['workload']:
        print('  %-34s %-14s %-22s %8.3f ms' % (r['workload'], r['variant'], r['scope'], r['stats']['median_ms']))
PY
done
tar czf $OUT/s10b.tgz -C $W .
