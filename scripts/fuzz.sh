#!/usr/bin/env bash
# Fuzzes the SEG-Y / SU reader for a bounded time (default 60 s): seeds the corpus from the
# test fixtures, then runs the cargo-fuzz target. Exits 0 with a reason when cargo-fuzz (or the
# nightly toolchain it needs) is not available, so CI can call it unconditionally.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN="${1:-60}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz); skipping the fuzz run"
    exit 0
fi
export SEISGPU_SKIP_PTX=1
cargo test --release -p seisgpu-host --lib write_fuzz_seed_corpus -- --ignored --quiet
# -rss_limit_mb bounds memory, -max_len keeps inputs near the fixtures' size, -timeout flags hangs.
cargo fuzz run segy_reader fuzz/corpus/segy_reader -- -max_total_time="$SECONDS_TO_RUN" -max_len=20000 -timeout=10 -rss_limit_mb=2048
