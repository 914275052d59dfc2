#!/usr/bin/env bash
# Builds everything the GPU machine needs into one folder that runs there without Rust:
#   bundle/seisgpu            the release CLI
#   bundle/integration        the integration-test binary (all GPU tests)
#   bundle/host-unit          host's unit tests
#   bundle/lab-unit           the benchmark crate's unit tests
#   bundle/run-tests.sh       runs them all, printing every skip and failure
#   bundle/kernels.ptx        the embedded PTX (for ptxas / inspection)
#   bundle/kernels-sm90.ptx   the embedded sm_90 module (thread-block-cluster kernels `sm90_*`)
# Usage: scripts/gpu-bundle.sh [out-dir]   (default: bundle/, git-ignored; name it in `carry`)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bundle}
rm -rf "$out"
mkdir -p "$out"
# The commit goes into the bench reports (`seisgpu bench` prints it with the device and date).
export SEISGPU_COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo -dirty)"
cargo build --release --bin seisgpu
cp target/release/seisgpu "$out/"
# Test executables: cargo prints them as JSON artifacts with "profile.test" = true.
cargo test --release --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys, shutil
out = sys.argv[1]
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    name = m["target"]["name"]
    pkg = m["package_id"]
    if name == "integration": dst = "integration"
    elif "seisgpu-host" in pkg and m["target"]["kind"] == ["lib"]: dst = "host-unit"
    elif "seisgpu-lab" in pkg and m["target"]["kind"] == ["lib"]: dst = "lab-unit"
    elif "gpu-kernels" in pkg: dst = "kernels-unit"
    else: continue
    shutil.copy(m["executable"], f"{out}/{dst}")
    print("bundled " + dst)
' "$out"
cp target/ptx/seisgpu-kernels.ptx "$out/kernels.ptx"
cp target/ptx/seisgpu-kernels-sm90.ptx "$out/kernels-sm90.ptx"
strip "$out"/seisgpu "$out"/integration "$out"/host-unit "$out"/lab-unit "$out"/kernels-unit 2>/dev/null || true
cat > "$out/run-tests.sh" <<'EOS'
#!/usr/bin/env bash
# Runs the bundled tests on a GPU machine. Extra arguments go to the test harness (e.g. a filter).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
rc=0
for t in integration host-unit lab-unit kernels-unit; do
  [ -x "./$t" ] || continue
  echo "== $t"
  "./$t" --test-threads=1 "$@" || rc=1
done
exit $rc
EOS
chmod +x "$out/run-tests.sh"
du -sh "$out"/*
