#!/usr/bin/env bash
# Session 8, round H (4 x H200): wavepacket forward from a .npy volume on GPU ranks, each reading only its
# cubes' rows (-np 2, 4 against one GPU), and a bad sample named by its place in the volume.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
cd bundlez && tar xzf mpi.tgz && cd ..
echo "commit $(cat bundlez/commit)"
W=/tmp/s8h; O=$W/mpi; mkdir -p $O
(
source bundlez/mpi/env.sh
BIN=bundlez/mpi/seisgpu
M=(mpirun --allow-run-as-root --oversubscribe)
python3 -c "import numpy as np; v = np.random.default_rng(3).standard_normal((200, 150, 300)).astype(np.float32); np.save('$O/vol.npy', v); v[190, 3, 7] = np.nan; np.save('$O/bad.npy', v)"
V=(wavepacket forward --input $O/vol.npy --cube 64 --overlap 16)
$BIN --device gpu "${V[@]}" --output $O/one.wpk 2>&1 | tail -1
for g in 2 4; do
  "${M[@]}" -np $g $BIN --device gpu "${V[@]}" --output $O/mpi$g.wpk 2>&1 | tail -1
  command cmp -s $O/one.wpk $O/mpi$g.wpk && echo "forward from .npy rows: $g GPU ranks' file identical to one GPU's" || echo "forward: $g ranks DIFFER"
done
"${M[@]}" -np 4 $BIN --device gpu wavepacket forward --input $O/bad.npy --cube 64 --overlap 16 --output $O/bad.wpk 2>&1 | grep "^error"
ls $O/bad.wpk 2>/dev/null || echo "no output file"
) > $W/mpi.log 2>&1
cat $W/mpi.log
tar czf $OUT/s8h.tgz -C $W --exclude='*.npy' --exclude='*.wpk' .
