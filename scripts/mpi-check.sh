#!/usr/bin/env bash
# MPI check (CI): `mpirun -np 2` of every pipeline that splits across ranks (ktm migrate, pstm
# migrate, srm, nlbf estimate and enhance, wavepacket forward, inverse, denoise, compress, interpolate), on the CPU backend and small synthetic
# input, against single-process runs:
# - against the single-device run: relative L2 < 1e-6 (the regrouped f32 sums round differently);
# - against the single-process `--gpus 2` split (one device per rank: rank r runs the block of work
#   items that device r runs, into one image, and rank 0 adds the two images in rank order, as the
#   single process adds its two device images in device order): bit-exact for ktm and pstm; srm's
#   CPU reference sums frequencies in thread order, so 1e-6;
# - nlbf: the volumes identical to the single-device run's files (from the built-in gather, and from
#   SEG-Y with each rank reading only its apertures' traces); a bad trace named by rank and trace;
# - wavepacket: the coefficient file identical; the inverse's, denoise's, compress's and POCS
#   interpolation's volume files identical (each rank holds and writes its rows; every sample is
#   summed over the cubes in cube order, as in one process).
# Then three failures, each of which must make the job exit non-zero, say which rank (and trace or
# work item) failed, and leave no output file: a SEG-Y trace only rank 1 reads is corrupt, a
# work item of rank 1 fails while migrating (SEISGPU_TEST_FAIL_ITEM, a test hook), and rank 1
# fails to write its block of the image (SEISGPU_TEST_FAIL_WRITE_RANK: the file written before
# stays as it was, no temporary file is left). Images (.npy) are written by every rank, each its
# block of the rank-summed image.
# Needs a seisgpu built with `--features mpi,fault-injection` (the test hooks exist only with the
# second; $SEISGPU, default target/release/seisgpu), mpirun (Open MPI) and python3 with numpy. Prints PASS/FAIL per check; exits non-zero on any FAIL.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${SEISGPU:-target/release/seisgpu}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# Containers often forbid the cross-process memory copies Open MPI's shared-memory transport tries.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
fail=0
step() { echo "-- $*"; }
run() { "$@" >"$OUT/log" 2>&1 || { echo "FAIL: $* (exit $?)"; cat "$OUT/log"; fail=1; return 1; }; }
cmp() { python3 scripts/compare-npy.py "$@" || fail=1; }
same() { if command cmp -s "$2" "$3"; then echo "PASS $1: identical file"; else echo "FAIL $1: the files differ"; fail=1; fi; }
MPIRUN3=(mpirun --allow-run-as-root --oversubscribe -np 3)
# srm_ranks TAG LABEL WHAT SRM-ARGS...: `srm SRM-ARGS` of the 2D line (5 shots of 96 traces) on one
# process and on 2 ranks gives the same image, and rank 1 read only its 3 shots' 288 of the 480
# traces (WHAT: what the input calls them). The middle shot's frequency groups are split between
# the ranks.
srm_ranks() {
  local tag=$1 label=$2 what=$3
  shift 3
  run "$BIN" --device cpu srm "$@" -o "$OUT/srm-$tag-1.npy"
  run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 srm "$@" -o "$OUT/srm-$tag-mpi.npy" && {
    cmp "$label: 2 ranks vs single device" "$OUT/srm-$tag-1.npy" "$OUT/srm-$tag-mpi.npy" 1e-6
    if grep -q "rank 1: 288 of 480 traces read (shots 2..5)" "$OUT/log"; then echo "PASS $label: rank 1 read its 3 shots' 288 of the 480 $what"
    else echo "FAIL $label: rank 1 did not read only its shots' $what:"; cat "$OUT/log"; fail=1; fi
  }
}
# corrupt IN OUT TRACE: a copy of a big-endian IBM SEG-Y file whose trace TRACE holds, at sample 7,
# an IBM value beyond the f32 range.
corrupt() {
  python3 - "$1" "$2" "$3" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
ns = struct.unpack(">H", b[3220:3222])[0]
off = 3600 + int(sys.argv[3]) * (240 + 4 * ns) + 240 + 4 * 7
b[off:off + 4] = b"\x7f\xff\xff\xff"
open(sys.argv[2], "wb").write(b)
PY
}

if ! ldd "$BIN" | grep -q libmpi; then
  echo "FAIL: $BIN is not built with --features mpi"; exit 1
fi

step "ktm migrate: SEG-Y input, each rank reads its share"
run "$BIN" synth diffractor -o "$OUT/diff.sgy" --ns 400
K=(ktm migrate --input "$OUT/diff.sgy" --nx 41 --ny 1 --ntau 150)
run "$BIN" --device cpu "${K[@]}" -o "$OUT/ktm-1.npy"
run "$BIN" --device cpu --gpus 2 "${K[@]}" -o "$OUT/ktm-g2.npy"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${K[@]}" -o "$OUT/ktm-mpi.npy" && {
  cmp "ktm: 2 ranks vs single device" "$OUT/ktm-1.npy" "$OUT/ktm-mpi.npy" 1e-6
  cmp "ktm: 2 ranks vs --gpus 2" "$OUT/ktm-g2.npy" "$OUT/ktm-mpi.npy" exact
}
# The image as SEG-Y: each rank encodes its block of image traces (headers and samples) into the file.
run "$BIN" --device cpu --gpus 2 "${K[@]}" -o "$OUT/ktm-g2.sgy"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${K[@]}" -o "$OUT/ktm-mpi.sgy" && {
  same "ktm SEG-Y image: 2 ranks (each writes its traces) vs --gpus 2" "$OUT/ktm-g2.sgy" "$OUT/ktm-mpi.sgy"
}

step "pstm migrate: built-in survey"
P=(pstm migrate --traces 600 --nx 24 --ny 24 --nz 300)
run "$BIN" --device cpu "${P[@]}" -o "$OUT/pstm-1.npy"
run "$BIN" --device cpu --gpus 2 "${P[@]}" -o "$OUT/pstm-g2.npy"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${P[@]}" -o "$OUT/pstm-mpi.npy" && {
  cmp "pstm: 2 ranks vs single device" "$OUT/pstm-1.npy" "$OUT/pstm-mpi.npy" 1e-6
  cmp "pstm: 2 ranks vs --gpus 2" "$OUT/pstm-g2.npy" "$OUT/pstm-mpi.npy" exact
}

# The image as SEG-Y: each rank encodes its block of image traces (padding dropped) into the file.
run "$BIN" --device cpu --gpus 2 "${P[@]}" -o "$OUT/pstm-g2.sgy"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${P[@]}" -o "$OUT/pstm-mpi.sgy" && {
  same "pstm SEG-Y image: 2 ranks (each writes its traces) vs --gpus 2" "$OUT/pstm-g2.sgy" "$OUT/pstm-mpi.sgy"
}
# Formats the ranks cannot write in blocks are refused before the work, naming the path.
if "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${P[@]}" -o "$OUT/pstm-mpi.su" >"$OUT/log" 2>&1; then
  echo "FAIL pstm SU under MPI: the job exited 0"; fail=1
elif ! grep -q "pstm-mpi.su: under MPI" "$OUT/log" || [ -e "$OUT/pstm-mpi.su" ]; then
  echo "FAIL pstm SU under MPI: no clear refusal, or a file was written:"; cat "$OUT/log"; fail=1
else
  echo "PASS pstm SU under MPI refused: $(grep -m1 '^error' "$OUT/log")"
fi

step "pstm migrate: SEG-Y input (the diffractor line), each rank reads its share"
P2=(pstm migrate --input "$OUT/diff.sgy" --nx 61 --ny 1 --dx 25 --nz 150 --dtau 0.008 --aperture 1000)
run "$BIN" --device cpu --gpus 2 "${P2[@]}" -o "$OUT/pstm-sgy-g2.npy"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${P2[@]}" -o "$OUT/pstm-sgy-mpi.npy" && {
  cmp "pstm SEG-Y: 2 ranks vs --gpus 2" "$OUT/pstm-sgy-g2.npy" "$OUT/pstm-sgy-mpi.npy" exact
  python3 -c "
import numpy as np, sys
a = np.abs(np.load('$OUT/pstm-sgy-mpi.npy')[:, 0, 0, :]); x, t = np.unravel_index(a.argmax(), a.shape)
ok = (x * 25, t * 0.008) == (750, 0.8)
print(('PASS' if ok else 'FAIL') + ' pstm SEG-Y: the diffractor focuses at x %d m, tau %.3f s (750 m, 0.8 s)' % (x * 25, t * 0.008))
sys.exit(0 if ok else 1)" || fail=1
}

step "srm: built-in point scatterer, (shot, frequency group) items"
S=(srm --synthetic scatterer --fmax 20 --nz 30 --table-rows 48 --planes 8)
run "$BIN" --device cpu "${S[@]}" -o "$OUT/srm-1.npy"
run "$BIN" --device cpu --gpus 2 "${S[@]}" -o "$OUT/srm-g2.npy"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${S[@]}" -o "$OUT/srm-mpi.npy" && {
  cmp "srm: 2 ranks vs single device" "$OUT/srm-1.npy" "$OUT/srm-mpi.npy" 1e-6
  cmp "srm: 2 ranks vs --gpus 2" "$OUT/srm-g2.npy" "$OUT/srm-mpi.npy" 1e-6
}

step "srm: SEG-Y shot gathers (5 shots of a 2D line), each rank reads every header and its shots' traces"
run "$BIN" synth line2d -o "$OUT/line.sgy" --ns 500
# The line starts at x = 0, where a trace's coordinates would all be zero (read as missing): move it by 1000 m.
python3 - "$OUT/line.sgy" "$OUT/line-moved.sgy" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
ns = struct.unpack(">H", b[3220:3222])[0]
for o in range(3600, len(b), 240 + 4 * ns):
    sc = struct.unpack(">h", b[o + 70:o + 72])[0]
    add = int(round(1000 * abs(sc))) if sc < 0 else int(round(1000 / (sc or 1)))
    sx, sy, gx, gy = struct.unpack(">iiii", b[o + 72:o + 88])
    b[o + 72:o + 88] = struct.pack(">iiii", sx + add, sy, gx + add, gy)
open(sys.argv[2], "wb").write(b)
PY
python3 -c "import numpy as np; np.save('$OUT/v.npy', np.full((40, 100), 2000.0, np.float32))"
srm_ranks sgy "srm SEG-Y" traces --traces "$OUT/line-moved.sgy" --velocity "$OUT/v.npy" --x0 1000 --dx 25 --dz 10 --fmax 20 --nz 40 \
  --table-rows 48 --planes 8

step "srm: the same line as .npy traces and geometry, each rank reads its shots' rows"
run "$BIN" synth line2d -o "$OUT/line2.sgy" --ns 500 --npy "$OUT/line.npy"
python3 - "$OUT/line2.sgy" "$OUT/geometry.npy" <<'PY'
import struct, sys, numpy as np
b = open(sys.argv[1], "rb").read()
ns = struct.unpack(">H", b[3220:3222])[0]
g = []
for o in range(3600, len(b), 240 + 4 * ns):
    sc = struct.unpack(">h", b[o + 70:o + 72])[0]
    f = 1 / abs(sc) if sc < 0 else (sc or 1)
    sx, sy, gx, gy = struct.unpack(">iiii", b[o + 72:o + 88])
    g.append([sx * f + 1000, sy * f, gx * f + 1000, gy * f])
np.save(sys.argv[2], np.array(g, np.float32))
PY
srm_ranks npy "srm .npy" rows --traces "$OUT/line.npy" --geometry "$OUT/geometry.npy" --dt 4 --velocity "$OUT/v.npy" --x0 1000 --dx 25 \
  --dz 10 --fmax 20 --nz 40 --table-rows 48 --planes 8

step "nlbf estimate: parameter traces split, each rank reads the traces its apertures hold and writes its block"
N=(nlbf estimate --synthetic demo)
run "$BIN" --device cpu "${N[@]}" --out "$OUT/nlbf-1"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${N[@]}" --out "$OUT/nlbf-mpi" && {
  for v in A D S; do
    same "nlbf $v: 2 ranks vs single device" "$OUT/nlbf-1/$v.npy" "$OUT/nlbf-mpi/$v.npy"
  done
}
# A cross-spread as SEG-Y: every rank reads the headers, then only its apertures' traces.
run "$BIN" synth cross-spread -o "$OUT/cs.sgy" --ns 101
N=(nlbf estimate --input "$OUT/cs.sgy" --preset crossspread-3d --a -1e-3:1e-4:1e-3 --b -1e-3:1e-4:1e-3)
run "$BIN" --device cpu "${N[@]}" --out "$OUT/nlbf-cs-1"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${N[@]}" --out "$OUT/nlbf-cs-mpi" && {
  grep -h "input traces read" "$OUT/log"
  for v in A B C D E S positions; do
    same "nlbf $v (SEG-Y, ranks read their apertures' traces): 2 ranks vs single device" "$OUT/nlbf-cs-1/$v.npy" "$OUT/nlbf-cs-mpi/$v.npy"
  done
}
# The enhancement too: the search split as above, then each rank enhances its block of traces
# from the traces their neighbours are.
N[1]=enhance
run "$BIN" --device cpu "${N[@]}" --out "$OUT/nlbf-en-1"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${N[@]}" --out "$OUT/nlbf-en-mpi" && {
  for v in enhanced input S; do
    same "nlbf enhance $v (SEG-Y): 2 ranks vs single device" "$OUT/nlbf-en-1/$v.npy" "$OUT/nlbf-en-mpi/$v.npy"
  done
}
N[1]=estimate
corrupt "$OUT/cs.sgy" "$OUT/cs-bad.sgy" 3000
N[3]="$OUT/cs-bad.sgy"
if "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${N[@]}" --out "$OUT/nlbf-bad" >"$OUT/log" 2>&1; then
  echo "FAIL nlbf bad trace: the job exited 0"; fail=1
elif ! grep -q "rank 1: .*trace 3000 sample 7 is not finite" "$OUT/log" || [ -e "$OUT/nlbf-bad/S.npy" ]; then
  echo "FAIL nlbf bad trace: not named by rank and trace, or a file was written:"; cat "$OUT/log"; fail=1
else
  echo "PASS nlbf bad trace: $(grep -m1 '^error' "$OUT/log")"
fi

step "wavepacket forward and inverse: cubes split, coefficients gathered and cubes added in cube order"
W=(--input synth:70x45x90 --cube 32 --overlap 8)
run "$BIN" --device cpu wavepacket forward "${W[@]}" --output "$OUT/wp-1.wpk"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 wavepacket forward "${W[@]}" --output "$OUT/wp-mpi.wpk" && {
  if command cmp -s "$OUT/wp-1.wpk" "$OUT/wp-mpi.wpk"; then echo "PASS wavepacket forward: 2 ranks vs single process: identical file"
  else echo "FAIL wavepacket forward: 2 ranks vs single process: the coefficient files differ"; fail=1; fi
}
run "$BIN" --device cpu wavepacket inverse --input "$OUT/wp-1.wpk" --output "$OUT/wp-1.npy"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 wavepacket inverse --input "$OUT/wp-1.wpk" --output "$OUT/wp-mpi.npy" && {
  same "wavepacket inverse: 2 ranks (each writes its rows) vs single process" "$OUT/wp-1.npy" "$OUT/wp-mpi.npy"
}

step "wavepacket forward from a .npy volume: each rank reads the rows its cubes need"
python3 -c "import numpy as np; v = np.random.default_rng(3).standard_normal((70, 45, 90)).astype(np.float32); np.save('$OUT/vol.npy', v); v[60, 3, 7] = np.nan; np.save('$OUT/vol-bad.npy', v)"
V=(wavepacket forward --input "$OUT/vol.npy" --cube 32 --overlap 8)
run "$BIN" --device cpu "${V[@]}" --output "$OUT/vol-1.wpk"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${V[@]}" --output "$OUT/vol-mpi.wpk" && {
  if command cmp -s "$OUT/vol-1.wpk" "$OUT/vol-mpi.wpk"; then echo "PASS wavepacket forward (.npy rows): 2 ranks vs single process: identical file"
  else echo "FAIL wavepacket forward (.npy rows): the coefficient files differ"; fail=1; fi
}
if "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 wavepacket forward --input "$OUT/vol-bad.npy" --cube 32 --overlap 8 \
    --output "$OUT/vol-bad.wpk" >"$OUT/log" 2>&1; then
  echo "FAIL wavepacket bad sample: the job exited 0"; fail=1
elif ! grep -q "rank 1: wave-packet forward: sample 7 of trace (60, 3) is not finite" "$OUT/log" || [ -e "$OUT/vol-bad.wpk" ]; then
  echo "FAIL wavepacket bad sample: not named by rank and trace, or a file was written:"; cat "$OUT/log"; fail=1
else
  echo "PASS wavepacket bad sample: $(grep -m1 '^error' "$OUT/log")"
fi

step "wavepacket denoise, compress, interpolate: each rank holds its slab of rows, statistics combined over the ranks, each writes its rows"
D=(--input synth:70x45x90:0.5 --cube 32 --overlap 8)
# 30 % of the traces dead (a fixed draw), for the interpolation.
python3 -c "import numpy as np; np.save('$OUT/live.npy', (np.random.default_rng(7).random((70, 45)) > 0.3).astype(np.uint8))"
for app in "denoise" "compress --cr 0.05" "interpolate --method pocs --iterations 3 --mask $OUT/live.npy"; do
  name=${app%% *}
  run "$BIN" --device cpu wavepacket $app "${D[@]}" --output "$OUT/wp-$name-1.npy"
  run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 wavepacket $app "${D[@]}" --output "$OUT/wp-$name-mpi.npy" && {
    same "wavepacket $name: 2 ranks vs single process" "$OUT/wp-$name-1.npy" "$OUT/wp-$name-mpi.npy"
  }
done
# A .npy volume with a quarter of its traces dead and no mask: 3 ranks read their rows, find their
# rows' dead traces and gather the mask.
python3 -c "import numpy as np; v = np.load('$OUT/vol.npy'); v[np.random.default_rng(5).random((70, 45)) < 0.25] = 0; np.save('$OUT/holes.npy', v)"
I=(wavepacket interpolate --method pocs --iterations 2 --input "$OUT/holes.npy" --cube 32 --overlap 8)
run "$BIN" --device cpu "${I[@]}" --output "$OUT/holes-1.npy"
run "${MPIRUN3[@]}" "$BIN" --device cpu --threads 1 "${I[@]}" --output "$OUT/holes-mpi.npy" && {
  same "wavepacket interpolate (.npy rows, mask from the data): 3 ranks vs single process" "$OUT/holes-1.npy" "$OUT/holes-mpi.npy"
}
# A SEG-Y cube with its traces shuffled and 37 of them gone: every rank reads the headers, then
# only its rows' traces; the missing cells are the dead traces to fill.
run "$BIN" synth cube -o "$OUT/cube.sgy" --ns 90
python3 - "$OUT/cube.sgy" "$OUT/cube-holes.sgy" <<'PY'
import random, struct, sys
b = open(sys.argv[1], "rb").read()
tb = 240 + 4 * struct.unpack(">H", b[3220:3222])[0]
tr = [b[o:o + tb] for o in range(3600, len(b), tb)]
random.Random(4).shuffle(tr)
open(sys.argv[2], "wb").write(b[:3600] + b"".join(tr[:-37]))
PY
I=(wavepacket interpolate --method pocs --iterations 2 --input "$OUT/cube-holes.sgy" --cube 32 --overlap 8)
run "$BIN" --device cpu "${I[@]}" --output "$OUT/cube-1.npy"
run "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${I[@]}" --output "$OUT/cube-mpi.npy" && {
  same "wavepacket interpolate (SEG-Y cube, ranks read their rows' traces): 2 ranks vs single process" "$OUT/cube-1.npy" "$OUT/cube-mpi.npy"
}

step "a failing rank: trace 1000 (rank 1's share) holds an IBM value beyond the f32 range"
corrupt "$OUT/diff.sgy" "$OUT/bad.sgy" 1000
if "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 ktm migrate --input "$OUT/bad.sgy" --nx 41 --ny 1 -o "$OUT/bad.npy" \
    >"$OUT/log" 2>&1; then
  echo "FAIL failing rank: the job exited 0"; fail=1
elif ! grep -q "rank 1: reading traces .*trace 1000 sample 7" "$OUT/log"; then
  echo "FAIL failing rank: the message does not name rank 1 and trace 1000:"; cat "$OUT/log"; fail=1
elif [ -e "$OUT/bad.npy" ]; then
  echo "FAIL failing rank: an output file was written"; fail=1
else
  echo "PASS failing rank: $(grep -m1 '^error' "$OUT/log")"
fi

step "a failing work item: item 13 (rank 1's) fails while migrating"
if "${MPIRUN[@]}" -x SEISGPU_TEST_FAIL_ITEM=13 "$BIN" --device cpu --threads 1 "${K[@]}" -o "$OUT/bad2.npy" >"$OUT/log" 2>&1; then
  echo "FAIL failing item: the job exited 0 (a build without --features fault-injection?)"; fail=1
elif ! grep -q "while migrating: rank 1: work item 13 on local device 0: injected failure" "$OUT/log"; then
  echo "FAIL failing item: the message does not name rank 1 and work item 13:"; cat "$OUT/log"; fail=1
elif [ -e "$OUT/bad2.npy" ]; then
  echo "FAIL failing item: an output file was written"; fail=1
else
  echo "PASS failing item: $(grep -m1 '^error' "$OUT/log")"
fi

step "a failing share write: rank 1 cannot write its block of the image; the old file stays, no temporary file"
cp "$OUT/ktm-1.npy" "$OUT/keep.npy"
if "${MPIRUN[@]}" -x SEISGPU_TEST_FAIL_WRITE_RANK=1 "$BIN" --device cpu --threads 1 "${K[@]}" -o "$OUT/keep.npy" >"$OUT/log" 2>&1; then
  echo "FAIL failing write: the job exited 0 (a build without --features fault-injection?)"; fail=1
elif ! grep -q "rank 1: injected write failure" "$OUT/log"; then
  echo "FAIL failing write: the message does not name rank 1:"; cat "$OUT/log"; fail=1
elif ! command cmp -s "$OUT/keep.npy" "$OUT/ktm-1.npy"; then
  echo "FAIL failing write: the existing output was changed"; fail=1
elif ls -a "$OUT" | grep -q '^\.keep\.npy\.tmp'; then
  echo "FAIL failing write: a temporary file was left: $(ls -a "$OUT" | grep tmp)"; fail=1
else
  echo "PASS failing write: $(grep -m1 '^error' "$OUT/log")"
fi

step "an output folder that does not exist: the job fails naming the file"
if "${MPIRUN[@]}" "$BIN" --device cpu --threads 1 "${K[@]}" -o "$OUT/missing/image.npy" >"$OUT/log" 2>&1; then
  echo "FAIL missing folder: the job exited 0"; fail=1
elif ! grep -q "rank 0: $OUT/missing/image.npy: folder $OUT/missing does not exist" "$OUT/log"; then
  echo "FAIL missing folder: the message does not name the file:"; cat "$OUT/log"; fail=1
else
  echo "PASS missing folder: $(grep -m1 '^error' "$OUT/log")"
fi

if [ "$fail" -ne 0 ]; then
  echo "MPI check: FAILED"; exit 1
fi
echo "MPI check: all PASS"
