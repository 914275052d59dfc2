#!/usr/bin/env bash
# Session 8, round B (4 x H200): MPI ranks on GPUs with the ranks writing their blocks of the image
# (ktm, pstm with SEG-Y input, srm; -np 2 and 4 against one GPU and --gpus N in one process), a failing
# share write on GPU ranks, then the whole GPU test suite.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf mpi.tgz && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"
W=/tmp/s8b; O=$W/mpi; mkdir -p $O
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; tail -2 $O/last.log; echo "rc $rc"; return $rc; }
cmp() { python3 scripts/compare-npy.py "$@"; }
$BIN synth diffractor -o $O/diff.sgy --ns 400 > /dev/null 2>&1
K=(ktm migrate --input $O/diff.sgy --nx 41 --ny 1 --ntau 150)
P=(pstm migrate --input $O/diff.sgy --nx 61 --ny 1 --dx 25 --nz 150 --dtau 0.008 --aperture 1000)
S=(srm --synthetic scatterer --fmax 20 --nz 30 --table-rows 48 --planes 8)
for name in K P S; do
  eval "A=(\"\${$name[@]}\")"; n=${A[0]}
  run $BIN --device gpu "${A[@]}" -o $O/$n-1.npy
  for g in 2 4; do
    run $BIN --device gpu --gpus $g "${A[@]}" -o $O/$n-g$g.npy
    run "${M[@]}" -np $g $BIN --device gpu "${A[@]}" -o $O/$n-mpi$g.npy
    cmp "$n: $g ranks vs 1 GPU" $O/$n-1.npy $O/$n-mpi$g.npy 1e-6
    cmp "$n: $g ranks vs --gpus $g" $O/$n-g$g.npy $O/$n-mpi$g.npy exact
  done
done
python3 -c "
import numpy as np
a = np.abs(np.load('$O/pstm-mpi4.npy')[:, 0, 0, :]); x, t = np.unravel_index(a.argmax(), a.shape)
print('pstm SEG-Y on 4 GPU ranks: peak at x %d m, tau %.3f s (diffractor at 750 m, 0.8 s)' % (x * 25, t * 0.008))"
run $BIN --device gpu ktm migrate --input $O/diff.sgy --nx 41 --ny 1 --ntau 150 -o $O/k1.sgy
run "${M[@]}" -np 2 $BIN --device gpu ktm migrate --input $O/diff.sgy --nx 41 --ny 1 --ntau 150 -o $O/km.sgy
run $BIN --device gpu --gpus 2 ktm migrate --input $O/diff.sgy --nx 41 --ny 1 --ntau 150 -o $O/kg2.sgy
command cmp -s $O/kg2.sgy $O/km.sgy && echo "ktm SEG-Y image: 2 ranks identical to --gpus 2" || echo "ktm SEG-Y image: 2 ranks DIFFER from --gpus 2"
echo "== failing share write (rank 1) on GPU ranks"
cp $O/ktm-1.npy $O/keep.npy
run "${M[@]}" -np 2 -x SEISGPU_TEST_FAIL_WRITE_RANK=1 $BIN --device gpu "${K[@]}" -o $O/keep.npy
grep -m1 "^error" $O/last.log
command cmp -s $O/keep.npy $O/ktm-1.npy && echo "old file unchanged" || echo "old file CHANGED"
ls -a $O | grep tmp || echo "no temporary file left"
) > $W/mpi.log 2>&1
cat $W/mpi.log | grep -v "^+ \|^rc 0\|^seisgpu\|wrote\|ranks migrated\|traces used\|contributions\|image in" 
timeout 420 bundlez/bundle/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s8b.tgz -C $W --exclude='*.npy' --exclude='*.sgy' .
