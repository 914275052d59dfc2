#!/usr/bin/env bash
# Session 9, round A (4 x H200): NLBF ranks reading their apertures' traces and writing their blocks,
# wave-packet ranks holding and writing their slabs, on GPU ranks against one GPU (files byte for
# byte); SRM strong scaling with the finer shot-setup marks; the whole GPU test suite.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf mpi.tgz && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"; nvidia-smi -L
W=/tmp/s9a; O=$W/mpi; mkdir -p $O
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
same() { command cmp -s "$2" "$3" && echo "SAME $1" || echo "DIFFER $1"; }
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; grep "traces read\|^error\|search:\|^{" $O/last.log; echo "rc $rc"; return $rc; }
# NLBF: the paper's cross-spread search on a synthetic cross-spread written as SEG-Y.
$BIN synth cross-spread -o $O/cs.sgy > /dev/null 2>&1
N=(nlbf estimate --input $O/cs.sgy --preset crossspread-3d)
run $BIN --device gpu "${N[@]}" --out $O/n1
for g in 2 4; do
  run "${M[@]}" -np $g $BIN --device gpu "${N[@]}" --out $O/n$g
  for v in A B C D E S positions; do same "nlbf $v: $g GPU ranks vs 1 GPU" $O/n1/$v.npy $O/n$g/$v.npy; done
done
# Wave packets: 200 x 150 x 300 noisy volume, 64^3 cubes (36 cubes).
I=(--input synth:200x150x300:0.5 --cube 64 --overlap 16)
python3 -c "import numpy as np; np.save('$O/live.npy', (np.random.default_rng(7).random((200, 150)) > 0.3).astype(np.uint8))"
run $BIN --device gpu wavepacket forward "${I[@]}" --output $O/f.wpk
for app in "denoise" "compress --cr 0.05" "interpolate --method pocs --iterations 3 --mask $O/live.npy"; do
  name=${app%% *}
  run $BIN --device gpu wavepacket $app "${I[@]}" --output $O/$name-1.npy
  for g in 2 4; do
    run "${M[@]}" -np $g $BIN --device gpu wavepacket $app "${I[@]}" --output $O/$name-$g.npy
    same "wavepacket $name: $g GPU ranks vs 1 GPU" $O/$name-1.npy $O/$name-$g.npy
  done
done
run $BIN --device gpu wavepacket inverse --input $O/f.wpk --output $O/inv-1.npy
for g in 2 4; do
  run "${M[@]}" -np $g $BIN --device gpu wavepacket inverse --input $O/f.wpk --output $O/inv-$g.npy
  same "wavepacket inverse: $g GPU ranks vs 1 GPU" $O/inv-1.npy $O/inv-$g.npy
done
python3 -c "import numpy as np; v = np.random.default_rng(3).standard_normal((200, 150, 300)).astype(np.float32); v[np.random.default_rng(5).random((200, 150)) < 0.25] = 0; np.save('$O/holes.npy', v)"
H=(wavepacket interpolate --method pocs --iterations 2 --input $O/holes.npy --cube 64 --overlap 16)
run $BIN --device gpu "${H[@]}" --output $O/holes-1.npy
run "${M[@]}" -np 3 $BIN --device gpu "${H[@]}" --output $O/holes-3.npy
same "wavepacket interpolate (.npy rows, mask from the data): 3 GPU ranks vs 1 GPU" $O/holes-1.npy $O/holes-3.npy
ls -a $O $O/n2 $O/n4 | grep tmp || echo "no temporary file left"
) > $W/mpi.log 2>&1
grep -v "^+ \|^rc 0" $W/mpi.log
echo "== srm scaling"
timeout 200 bundlez/bundle/seisgpu --device gpu --gpus all bench srm --size paper --out $W/srm > $W/srm.log 2>&1; echo "srm rc $?"
grep '^| scale' $W/srm/scaling.md
grep -o '"note": "[124] gpus*[^"]*"' $W/srm/bench.json | cut -c1-1200
echo "== tests"
timeout 330 bundlez/bundle/run-tests.sh > $W/gpu-tests.log 2>&1; echo "tests rc $?"
grep -E "^== |test result|FAILED|panicked" $W/gpu-tests.log | head -20
grep -A3 "gpu_rank_parts" $W/gpu-tests.log | head -5
echo "SKIPPED lines: $(grep -c SKIPPED $W/gpu-tests.log)"
tar czf $OUT/s9a.tgz -C $W --exclude='*.npy' --exclude='*.sgy' --exclude='*.wpk' .
