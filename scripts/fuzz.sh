#!/usr/bin/env bash
# Builds the fuzz target (fuzz/) with the stable toolchain — libFuzzer's coverage
# instrumentation (sancov) is a stable codegen pass; only cargo-fuzz's sanitizers need nightly,
# and the code under test has no unsafe — replays every seed, then fuzzes for a bounded time.
#
#   scripts/fuzz.sh [SECONDS]     (default 20; 0 replays the seeds only)
#
# A crash stops it non-zero, printing the input and the invariant it broke; the input is
# saved as fuzz/artifacts/http_stream/crash-… (out of git), and
# `fuzz/target/<host triple>/release/http_stream FILE` replays it. docs/reliability.md, "Fuzzing".
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${1:-20}
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
# --target keeps the instrumentation out of build scripts (they would not link without libFuzzer).
target=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --quiet --bin http_stream --target "$target"
bin=target/$target/release/http_stream
mkdir -p artifacts/http_stream corpus/http_stream
# Replay: every seed once (libFuzzer runs the files it is given and exits).
"$bin" -artifact_prefix=artifacts/http_stream/ seeds/http_stream/*
if [ "$seconds" -gt 0 ]; then
  "$bin" -artifact_prefix=artifacts/http_stream/ -max_total_time="$seconds" -print_final_stats=1 \
    corpus/http_stream seeds/http_stream
fi
