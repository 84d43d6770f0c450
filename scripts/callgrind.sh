#!/usr/bin/env bash
# User-space instructions per request, repeatable on a noisy machine: each server runs under
# `valgrind --tool=callgrind` (cpu0, one worker) while rxload (cpu1) drives it; the counters
# are zeroed after a warm-up and dumped after the measured load, so the dump covers exactly
# the driver's requests (the server is idle between the two). Kernel work is not counted —
# that is the point: servers that make the same syscalls differ only here.
# usage: scripts/callgrind.sh [-c CONNS] [-d SECONDS] [-k] [-b SERVER_BIN] SERVER...
#   SERVER: io_uring | io_uring-single | rx | legacy | floor | uring-floor | nginx | hyper |
#           actix | may-minihttp
#   -k: a connection per request (rxload --disable-keepalive; loopback must be exempt from
#       connection tracking, as rxload checks), instead of keep-alive
#   -b: the `server` binary to measure for io_uring, rx and legacy (default: this checkout's
#       release build) — another commit's build, for a before/after
# Totals only. By function: a line-table build of the server
# (CARGO_PROFILE_RELEASE_DEBUG=line-tables-only), valgrind with `--compress-strings=no`, the
# same zero and dump, then scripts/callgrind-self.py DUMP REQUESTS (callgrind_annotate files a
# mid-run dump all under `clone`).
set -euo pipefail
conns=64; secs=5; mode=(); server_bin=""
while getopts c:d:kb: o; do
  case $o in
    c) conns=$OPTARG ;; d) secs=$OPTARG ;; k) mode=(--disable-keepalive) ;;
    b) server_bin=$(realpath "$OPTARG") ;; *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { sed -n 's/^# \{0,1\}//;2,17p' "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$PWD
cargo build --release -q -p server -p driver --bin server --bin rxload
(cd peers && CARGO_TARGET_DIR=../target/peers cargo build --release -q --workspace)
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
port=3941
echo "| server | connections | requests measured | instructions (Ir) per request |"
echo "| --- | --- | --- | --- |"
for server in "$@"; do
  # The variables go to valgrind's environment: the program it runs must be the server itself
  # (an `env` or a script in between would be what gets measured).
  vars=(APP_PORT=$port APP_WORKERS=1 PORT=$port)
  prog=("${server_bin:-$root/target/release/server}")
  case $server in
    io_uring) vars+=(APP_BACKEND=io_uring) ;;
    io_uring-single) vars+=(APP_BACKEND=io_uring APP_RECV_MULTISHOT=0) ;;
    rx) vars+=(APP_BACKEND=epoll APP_EPOLL_MODE=rx) ;;
    legacy) vars+=(APP_BACKEND=epoll APP_EPOLL_MODE=legacy) ;;
    floor | uring-floor) prog=("$root/target/peers/release/$server") ;;
    hyper | actix | may-minihttp) prog=("$root/target/peers/release/peer-$server") ;;
    nginx)
      mkdir -p "$tmp/nginx"
      sed -e "s/{port}/$port/g" -e "s#{dir}#$tmp/nginx#g" peers/nginx.conf >"$tmp/nginx/nginx.conf"
      prog=(nginx -e stderr -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf") ;;
    *) echo "unknown server: $server" >&2; exit 2 ;;
  esac
  out=$tmp/$server.cg
  env "${vars[@]}" taskset -c 0 valgrind -q --tool=callgrind --callgrind-out-file="$out" "${prog[@]}" \
    >"$tmp/$server.log" 2>&1 &
  pid=$!
  up=
  for _ in $(seq 300); do
    if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then up=1; break; fi
    sleep 0.1
  done
  [ -n "$up" ] || { echo "$server did not start:" >&2; tail -5 "$tmp/$server.log" >&2; exit 1; }
  taskset -c 1 target/release/rxload -t1 -c"$conns" -d1s "${mode[@]}" "http://127.0.0.1:$port/" >/dev/null
  callgrind_control -z "$pid" >/dev/null
  taskset -c 1 target/release/rxload -t1 -c"$conns" -d"${secs}s" "${mode[@]}" --json \
    "http://127.0.0.1:$port/" >"$tmp/$server.json"
  callgrind_control -d "$pid" >/dev/null
  # Under valgrind a thread blocked in io_uring_enter may never see SIGTERM: KILL after 3 s
  # (the dump is already written).
  kill "$pid"
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true; pid=
  dump=$(ls -t "$out".* | head -1) # the -d dump (the final one at exit is $out itself)
  python3 - "$dump" "$tmp/$server.json" "$server" "$conns" <<'PY'
import json, sys
dump, load, server, conns = sys.argv[1:5]
ir = next(int(l.split()[1]) for l in open(dump) if l.startswith(("summary:", "totals:")))
req = json.load(open(load))["requests"]
if req == 0:
    sys.exit(f"{server}: the driver completed no request")
print(f"| {server} | {conns} | {req} | {ir / req:.0f} |")
PY
done
