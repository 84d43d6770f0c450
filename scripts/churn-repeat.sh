#!/usr/bin/env bash
# Runs the churn test binary (app/tests/churn.rs) N times in a row (default 200) and counts the
# runs that failed: a flaky test is a defect, so this is the check that none is (issue #49).
# Every failing run's log is kept under $OUT (default target/churn-repeat/), and any trail a
# server printed when a timer had to close a connection (APP_TRAIL) is shown at the end.
#
#   scripts/churn-repeat.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200}
out=${OUT:-target/churn-repeat}
rm -rf "$out" && mkdir -p "$out"
bin=$(cargo test --release -p server --test churn --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("executable") and m.get("target", {}).get("name") == "churn":
        print(m["executable"])')
[ -x "$bin" ] || { echo "churn test binary not built"; exit 1; }
echo "$(uname -r); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs) model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "connection tracking: $( [ -e /proc/sys/net/netfilter/nf_conntrack_max ] && echo loaded || echo not loaded)"
failed=0
for i in $(seq "$runs"); do
  if ! "$bin" > "$out/run-$i.log" 2>&1; then
    failed=$((failed + 1))
    echo "run $i failed: $(grep -h '^test .* FAILED' "$out/run-$i.log" | tr '\n' ' ')"
  else
    rm "$out/run-$i.log"
  fi
done
echo "churn binary: $((runs - failed)) of $runs runs passed"
grep -h 'timer closed a connection' "$out"/*.log 2>/dev/null | sed 's/.*server: /  /' || true
[ "$failed" -eq 0 ]
