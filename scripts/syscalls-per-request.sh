#!/usr/bin/env bash
# Syscalls per request for every backend, two ways: strace -c -f -p on the server during a
# wrk run, and the server's own counters (SIGTERM line) from a run without strace.
# Server pinned to cpu0 (APP_WORKERS=1), wrk -t1 on cpu1. Needs wrk and strace.
# usage: scripts/syscalls-per-request.sh [CONNS] [SECONDS]
set -euo pipefail
conns=${1:-64}; secs=${2:-5}
cd "$(dirname "$0")/.."
cargo build --release -p server -q
bin=target/release/server
port=3917
url="http://127.0.0.1:$port/"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

run() { # name env... ; prints one table row
  local name=$1; shift
  for pass in strace counters; do
    env APP_PORT=$port APP_WORKERS=1 "$@" taskset -c 0 $bin >"$tmp/out" 2>"$tmp/err" &
    local pid=$!
    for _ in $(seq 50); do grep -q listening "$tmp/err" 2>/dev/null && break; sleep 0.1; done
    taskset -c 1 wrk -t1 -c"$conns" -d1s "$url" >/dev/null   # warm-up, not counted
    if [ $pass = strace ]; then
      strace -c -f -p $pid -o "$tmp/strace" & local st=$!; sleep 0.5
    fi
    local before; before=$(ss -Htn state established "( sport = :$port )" | wc -l)
    taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" "$url" >"$tmp/wrk.$pass"
    if [ $pass = strace ]; then kill -INT $st; wait $st || true; fi
    kill -TERM $pid; wait $pid || true
    local reqs; reqs=$(awk '/requests in/ {print $1}' "$tmp/wrk.$pass")
    if [ $pass = strace ]; then
      awk -v r="$reqs" -v name="$name" '
        $NF=="epoll_ctl"{ctl=$4} $NF=="total"{tot=$4}
        END{printf "| %s | strace | %d | %.3f | %.3f |\n", name, r, ctl/r, tot/r}' "$tmp/strace"
    else
      python3 - "$tmp/out" "$reqs" "$name" "$tmp/wrk.$pass" <<'PY'
import json,sys
j=json.loads(open(sys.argv[1]).read()); w=j["workers"][0]; s=w["syscalls"]
r=w["requests"]; ctl=s["epoll_ctl_add"]+s["epoll_ctl_mod"]+s["epoll_ctl_del"]
rps=[l.split()[1] for l in open(sys.argv[4]) if l.startswith("Requests/sec")][0]
print(f"| {sys.argv[3]} | counters | {r} | {ctl/r:.3f} | {w['syscalls_total']/r:.3f} | req/s {rps}")
PY
    fi
  done
}

echo "| config | source | requests | epoll_ctl/req | syscalls/req |"
echo "| --- | --- | --- | --- | --- |"
run io_uring APP_BACKEND=io_uring
run epoll/rx APP_BACKEND=epoll APP_EPOLL_MODE=rx
run epoll/oneshot APP_BACKEND=epoll APP_EPOLL_MODE=oneshot
run epoll/legacy APP_BACKEND=epoll APP_EPOLL_MODE=legacy
