#!/usr/bin/env bash
# The seed PR's table at its own scale: the native matrix (no Docker: the no-io_uring profile is
# a seccomp filter in each server) at 1, 2, 4, 8 … workers, the driver on cores of its own.
#
#   scripts/scale-run.sh [--dry-run] [--budget-s S] [--workers 1,2,4,8] [--bin DIR] OUT
#
# For each worker count N that fits (N server CPUs and at least N driver CPUs; 2 cores allow
# N = 1): io_uring, rx, legacy and the A/A control under `relaxed` and `no-io-uring`, kept alive
# at 64/256/512 connections and a connection per request at 64, 2 instances each, paired slices
# and intervals as in every run — the runner with `--engine native --server-cpus 0..N-1
# --load-cpus N..` (rxload: one thread per load CPU). Rounds are fitted to the measuring budget
# (--budget-s, default 480 s over all worker counts). Each N writes OUT/workers-N/<timestamp>/;
# then scripts/scale-table.py OUT writes OUT/scale.md (req/s and CPU per request per worker
# count, the fallback's cost at each, scaling efficiency) and OUT/machine.txt.
#
# --bin DIR runs the binaries in DIR (bench-runner and server: static builds carried to a
# machine without a toolchain); by default they are built here (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."

dry_run=""; budget_s=480; workers="1,2,4,8"; bin=""
while [ $# -gt 1 ]; do
  case "$1" in
    --dry-run) dry_run=--dry-run; shift ;;
    --budget-s) budget_s=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "scale-run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: scripts/scale-run.sh [--dry-run] [--budget-s S] [--workers LIST] [--bin DIR] OUT" >&2; exit 2; }
out=$1
if [ "$1" = --dry-run ]; then echo "scale-run.sh: OUT is missing" >&2; exit 2; fi

if [ -z "$bin" ]; then
  cargo build --release --quiet -p bench-runner -p server
  bin=target/release
fi
runner=$bin/bench-runner
[ -x "$runner" ] || { echo "scale-run.sh: no bench-runner in $bin" >&2; exit 1; }
# The native engine spawns this server binary instead of building one (rxload runs inside the
# runner).
export RXBENCH_SERVER_BIN=${RXBENCH_SERVER_BIN:-$(realpath "$bin/server")}

cores=$(nproc)
fits=()
IFS=, read -r -a wanted <<<"$workers"
for n in "${wanted[@]}"; do
  if [ $((2 * n)) -le "$cores" ]; then fits+=("$n"); else echo "scale-run.sh: $n workers need $((2 * n)) CPUs ($n for the driver); this machine has $cores: left out"; fi
done
[ ${#fits[@]} -gt 0 ] || { echo "scale-run.sh: no worker count fits $cores CPUs" >&2; exit 1; }

# A round: 16 residents x 4 (load, level) cells x (200 ms warm-up + 500 ms): ~45 s. Rounds per
# worker count from the budget, at least 2 (two instances x 2 rounds = 4 pairs a cell).
per_n=$((budget_s / ${#fits[@]}))
rounds=$((per_n / 45)); [ "$rounds" -ge 2 ] || rounds=2
mkdir -p "$out"
{
  echo "scale run $(date -u +%Y%m%dT%H%M%SZ), commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') / $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $cores CPUs, kernel $(uname -r)"
  for f in /sys/devices/system/cpu/vulnerabilities/*; do printf '%s: %s\n' "$(basename "$f")" "$(cat "$f")"; done
  echo "worker counts: ${fits[*]}; rounds each: $rounds; budget ${budget_s} s"
} >"$out/machine.txt"
cat "$out/machine.txt"

for n in "${fits[@]}"; do
  server_cpus=$(seq -s, 0 $((n - 1)))
  load_cpus=$(seq -s, "$n" $((cores - 1)))
  echo "== $n worker(s): servers on $server_cpus, driver on $load_cpus"
  "$runner" --engine native $dry_run \
    --profiles relaxed,no-io-uring --configs io_uring,rx,legacy,io_uring-control \
    --conns 64,256,512 --load keepalive,per-request --per-request-conns 64 \
    --rounds "$rounds" --pairing alternate --slice 500ms --slice-warmup 200ms \
    --server-cpus "$server_cpus" --load-cpus "$load_cpus" \
    --out "$out/workers-$n"
done
if [ -z "$dry_run" ] && command -v python3 >/dev/null; then
  python3 scripts/scale-table.py "$out"
fi
