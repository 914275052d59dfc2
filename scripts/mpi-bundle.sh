#!/usr/bin/env bash
# Packs a `--features mpi` seisgpu with this machine's Open MPI run time (mpirun, its plugins, help
# files and every shared library they need but glibc's and the CUDA driver's) into one folder, for
# GPU machines without Open MPI (MPI ranks on GPUs). There:
#   OUT/env.sh                 sets OPAL_PREFIX, PATH and LD_LIBRARY_PATH (source it)
#   mpirun --allow-run-as-root -np 2 OUT/seisgpu --device gpu ...
# Usage: scripts/mpi-bundle.sh [out-dir]  (default: bundle-mpi/, git-ignored; build the binary first:
# `cargo build --release --features mpi --bin seisgpu`). Open MPI 4.x from the Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bundle-mpi}
bin=target/release/seisgpu
ldd "$bin" | grep -q libmpi || { echo "$bin is not built with --features mpi" >&2; exit 1; }
libdir=$(ompi_info --path libdir --parsable | sed 's/.*://')
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed 's/.*://')
pkgdatadir=$(ompi_info --path pkgdatadir --parsable | sed 's/.*://')
prefix=$(ompi_info --path prefix --parsable | sed 's/.*://')
rm -rf "$out"
root="$out/ompi"
mkdir -p "$root$prefix/bin" "$root$libdir" "$root$pkgdatadir" "$out/libs"
cp "$bin" "$out/seisgpu"
strip "$out/seisgpu" 2>/dev/null || true
# Relocatable through OPAL_PREFIX: the same tree under the new prefix.
cp -L "$(command -v orterun)" "$root$prefix/bin/mpirun"
cp -L "$(command -v orted)" "$root$prefix/bin/orted"
cp -rL "$pkglibdir" "$root$libdir/"
cp -rL "$pkgdatadir/." "$root$pkgdatadir/"
# PMIx (Open MPI's launch interface) with its own plugins, where the packages put it apart.
pmix=$(dirname "$(dirname "$(readlink -f "$(ldconfig -p | awk '/libpmix.so.2 /{print $NF; exit}')")")")
if [ -d "$pmix/lib/pmix" ]; then
  mkdir -p "$root$pmix" && cp -rL "$pmix/." "$root$pmix/"
  echo "$pmix" > "$out/pmix-prefix"
fi
# The shared libraries of the binary, mpirun, orted and the plugins (plugins whose libraries this
# machine lacks are skipped by Open MPI at run time, as they would be here).
for f in "$out/seisgpu" "$root$prefix/bin/"* "$root$pkglibdir"/*.so $(find "$root" -path '*pmix*' -name '*.so*'); do
  ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda)\.so' | while read -r lib; do
  cp -L "$lib" "$out/libs/"
done
cat > "$out/env.sh" <<'EOS'
# Source this: Open MPI from this folder.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX="$here/ompi/usr"
export PATH="$OPAL_PREFIX/bin:$PATH"
export LD_LIBRARY_PATH="$here/libs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
[ -f "$here/pmix-prefix" ] && export PMIX_INSTALL_PREFIX="$here/ompi$(cat "$here/pmix-prefix")"
# Containers often forbid the cross-process copies of the shared-memory transport; no ssh for one host.
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
EOS
du -sh "$out"
