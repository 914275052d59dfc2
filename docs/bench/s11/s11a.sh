#!/usr/bin/env bash
# Session 11, round A (4 x H200, code bfec2e2 = HEAD 0ed4907 less comments): the wave-packet
# scaling A/B/C at the paper size on 4 GPUs (8 slabs folded by slab / by box, 1 slab by box =
# session 9), twice each; then nlbf enhance on 4 GPU ranks against one GPU, byte for byte.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd bundlez && tar xzf mpi.tgz && tar xzf bundle.tgz && cd ..
echo "commit $(cat bundlez/commit)"; nvidia-smi -L
NG=$(nvidia-smi -L | wc -l)
B=bundlez/bundle; W=$OUT/s11a; mkdir -p $W
for r in 1 2; do
  for v in "8 slab" "8 box" "1 box"; do
    set -- $v; tag=s$1-$2-$r
    SEISGPU_WP_SLABS=$1 SEISGPU_WP_FOLD=$2 timeout 100 $B/seisgpu --device gpu --gpus all bench wavepacket --size paper --out $W/bench-$tag > $W/bench-$tag.log 2>&1; echo "slabs $1, fold by $2, run $r: rc $?"
    grep '^| scale' $W/bench-$tag/scaling.md
    grep -o '"note": "[124] gpus[^"]*"' $W/bench-$tag/bench.json | sed 's/"note": //'
    rm -f $W/bench-$tag/*.npy
  done
done
O=/tmp/mpi; mkdir -p $O
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
same() { command cmp -s "$2" "$3" && echo "SAME $1" || echo "DIFFER $1"; }
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; grep "traces read\|enhancing\|^error\|^enhanced" $O/last.log; echo "rc $rc"; return $rc; }
$BIN synth cross-spread -o $O/cs.sgy > /dev/null 2>&1
N=(nlbf enhance --input $O/cs.sgy --preset crossspread-3d)
run $BIN --device gpu "${N[@]}" --out $O/e1
for g in 4; do
  run "${M[@]}" -np $g $BIN --device gpu "${N[@]}" --out $O/e$g
  for v in enhanced input A E S positions; do same "nlbf enhance $v: $g GPU ranks vs 1 GPU" $O/e1/$v.npy $O/e$g/$v.npy; done
done
ls -a $O $O/e4 | grep tmp || echo "no temporary file left"
) > $W/mpi.log 2>&1
grep -v "^+ \|^rc 0" $W/mpi.log
