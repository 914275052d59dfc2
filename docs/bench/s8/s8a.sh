#!/usr/bin/env bash
# Session 8, round A (4 x H200): the paper-size wave-packet scaling bench twice (the job alone timed,
# 7 repeats under 0.2 s), the wave-packet applications across MPI ranks on GPUs against one GPU, and
# the wave-packet GPU tests.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf bundle.tgz && tar xzf mpi.tgz && cd ..
B=bundlez/bundle; W=/tmp/s8a; mkdir -p $W
echo "commit $(cat bundlez/commit)"
for r in 1 2; do
  timeout 150 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-$r > $W/bench-$r.log 2>&1; echo "bench $r rc $?"
  grep '^| scale' $W/bench-$r/scaling.md
  grep -o '"note": "[124] gpus[^"]*"' $W/bench-$r/bench.json | sed 's/"note": //'
  grep -o '"min_ms": [0-9.]*\|"max_ms": [0-9.]*\|"repeats": [0-9]*' $W/bench-$r/bench.json | paste -sd' ' | fold -w 400
done
(
source bundlez/mpi/env.sh
M=bundlez/mpi/seisgpu; O=$W/mpi; mkdir -p $O
MR=(mpirun --allow-run-as-root --oversubscribe)
I=(--input synth:200x150x300:0.5 --cube 64 --overlap 16)
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; tail -2 $O/last.log; echo "rc $rc"; }
for app in "denoise" "compress --cr 0.05" "interpolate --method pocs --iterations 4"; do
  n=${app%% *}
  run $M --device gpu wavepacket $app "${I[@]}" --output $O/$n-one.npy
  run "${MR[@]}" -np 2 $M --device gpu wavepacket $app "${I[@]}" --output $O/$n-mpi2.npy
  run "${MR[@]}" -np 4 $M --device gpu wavepacket $app "${I[@]}" --output $O/$n-mpi4.npy
  run $M --device cpu wavepacket $app "${I[@]}" --output $O/$n-cpu.npy
  for f in mpi2 mpi4; do cmp -s $O/$n-one.npy $O/$n-$f.npy && echo "$n-$f.npy identical to $n-one.npy" || echo "$n-$f.npy DIFFERS from $n-one.npy"; done
done
python3 - $O <<'PY' || true
import sys, numpy as np
o = sys.argv[1]
for n in ["denoise", "compress", "interpolate"]:
    a = np.load(f"{o}/{n}-one.npy").astype(np.float64)
    for f in ["mpi2", "mpi4", "cpu"]:
        b = np.load(f"{o}/{n}-{f}.npy").astype(np.float64)
        print(n, f, "vs one GPU: rel L2 %.2e" % (np.linalg.norm(a - b) / np.linalg.norm(a)), "finite", np.isfinite(b).all())
PY
) > $W/mpi.log 2>&1
cat $W/mpi.log
timeout 200 $B/integration wavepacket --test-threads=1 > $W/gpu-tests-wavepacket.log 2>&1; echo "wavepacket tests rc $?"
grep -E "test result|FAILED|panicked" $W/gpu-tests-wavepacket.log | head
tar czf $OUT/s8a.tgz -C $W --exclude='*.npy' .
