#!/usr/bin/env bash
# Issue #33's method study: the same matrix measured with servers resident for the run
# (`--relaunch once`) and launched afresh every round (`--relaunch round`), interleaved in
# one sitting (once, round, once, round…), then compared by scripts/method-study.py.
#
#   scripts/method-study.sh [PAIRS] [-- extra bench-runner flags]
#
# The matrix holds three identical pairs a cell: the A/A control under each profile, and
# io_uring against rx under no-io-uring (both run epoll rx there). Each run goes to
# results/method-{once,round}-<UTC>/ and the comparison to results/method-<UTC>.md.
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-2}
shift || true
[ "${1:-}" = "--" ] && shift
runner=./target/release/bench-runner
cargo build --release -q -p bench-runner
stamp=$(date -u +%Y%m%dT%H%M%SZ)
dirs=()
build=()
for i in $(seq "$pairs"); do
  for method in once round; do
    out=$(mktemp -d)
    "$runner" --profiles no-io-uring,relaxed --configs rx,io_uring,io_uring-control \
      --load keepalive --rounds 8 --relaunch "$method" --pairing alternate --out "$out" \
      "${build[@]+"${build[@]}"}" "$@" >/dev/null
    build=(--no-build)
    run=$(readlink -f "$out/latest")
    mv "$run" "results/method-$method-$(basename "$run")"
    rm -rf "$out"
    dirs+=("results/method-$method-$(basename "$run")")
  done
done
scripts/method-study.py "${dirs[@]}" > "results/method-$stamp.md"
echo "results/method-$stamp.md"
