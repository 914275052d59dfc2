#!/usr/bin/env bash
# Session 7, round H (4 x H200): wavepacket forward and inverse across MPI ranks on GPUs, against one process.
cd bundlez && tar xzf mpi.tgz && cd ..
echo "commit $(cat bundlez/commit)"
source bundlez/mpi/env.sh
B=bundlez/mpi/seisgpu; O=/tmp/s7h; mkdir -p $O
M=(mpirun --allow-run-as-root --oversubscribe)
I=(--input synth:70x45x90 --cube 32 --overlap 8)
run() { echo "+ $*"; "$@" > $O/last.log 2>&1; rc=$?; tail -2 $O/last.log; echo "rc $rc"; }
run $B --device gpu wavepacket forward "${I[@]}" --output $O/one.wpk
run $B --device gpu --gpus 2 wavepacket forward "${I[@]}" --output $O/g2.wpk
run "${M[@]}" -np 2 $B --device gpu wavepacket forward "${I[@]}" --output $O/mpi2.wpk
run "${M[@]}" -np 4 $B --device gpu wavepacket forward "${I[@]}" --output $O/mpi4.wpk
for f in g2 mpi2 mpi4; do cmp -s $O/one.wpk $O/$f.wpk && echo "$f.wpk identical to one.wpk" || echo "$f.wpk DIFFERS"; done
run $B --device gpu wavepacket inverse --input $O/one.wpk --output $O/one.npy
run "${M[@]}" -np 2 $B --device gpu wavepacket inverse --input $O/one.wpk --output $O/mpi2.npy
run "${M[@]}" -np 4 $B --device gpu wavepacket inverse --input $O/one.wpk --output $O/mpi4.npy
for f in mpi2 mpi4; do cmp -s $O/one.npy $O/$f.npy && echo "$f.npy identical to one.npy" || echo "$f.npy DIFFERS"; done
run $B --device cpu wavepacket inverse --input $O/one.wpk --output $O/cpu.npy
cp $O/one.npy $O/cpu.npy $OUT/
