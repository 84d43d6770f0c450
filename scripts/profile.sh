#!/usr/bin/env bash
# Where a request's CPU goes: `perf record -e cpu-clock` (no hardware counters here) of one
# server pinned to cpu0 (APP_WORKERS=1) under rxload on cpu1, then the samples grouped by
# phase (kernel TCP receive and send, the syscall or io_uring machinery, the wait, the
# reactor, HTTP parsing and responding, allocation) and the top symbols. One configuration
# per run, alternated by the caller for a comparison (the numbers are shares of one
# server's samples, not rates, so they travel between runs better than req/s does).
# Each phase is also given in µs a request: its share times the server's CPU time over the
# profile (its utime + stime from /proc, tick-sampled: 10 ms steps) over the requests rxload
# counted in it, so that two configurations' phases compare as costs, not only as shares.
# usage: scripts/profile.sh [-k] [-o DIR] io_uring|blocked|rx|legacy|floor|uring-floor [CONNS] [SECONDS]
#   blocked: the io_uring server under the no-io-uring filter (sandbox's deny-io-uring, as
#       Docker >= 25 would): it falls back to epoll/rx, and every syscall passes the filter
#   -k: a connection per request (rxload --disable-keepalive; loopback must be exempt from
#       connection tracking, as rxload checks), instead of keep-alive
#   floor, uring-floor: the peers' floors (target/peers, built here), the limit of each mechanism
#   -o DIR: keep the evidence there: the phase table (CONFIG[-k]-CONNS.md), perf's symbol
#       report it was grouped from (.syms) and the driver's report (.json)
set -euo pipefail
mode=(); tag=""; keep=""
while getopts ko: o; do
  case $o in k) mode=(--disable-keepalive); tag="-k" ;; o) keep=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
config=${1:?usage: scripts/profile.sh [-k] [-o DIR] io_uring|blocked|rx|legacy|floor|uring-floor [CONNS] [SECONDS]}
conns=${2:-256}; secs=${3:-8}
cd "$(dirname "$0")/.."
prog=target/release/server; wrap=()
case $config in
  io_uring) env=(APP_BACKEND=io_uring) ;;
  blocked) env=(APP_BACKEND=auto); wrap=(target/release/deny-io-uring --) ;;
  rx) env=(APP_BACKEND=epoll APP_EPOLL_MODE=rx) ;;
  legacy) env=(APP_BACKEND=epoll APP_EPOLL_MODE=legacy) ;;
  floor | uring-floor) env=(); prog=target/peers/release/$config ;;
  *) echo "unknown configuration: $config" >&2; exit 2 ;;
esac
cargo build --release -q -p server -p driver -p sandbox --bin server --bin rxload --bin deny-io-uring
(cd peers && CARGO_TARGET_DIR=../target/peers cargo build --release -q --workspace)
tmp=$(mktemp -d); trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=3931
env APP_PORT=$port PORT=$port APP_WORKERS=1 "${env[@]}" taskset -c 0 "${wrap[@]}" "$prog" 2>"$tmp/err" >/dev/null &
pid=$!
for _ in $(seq 50); do grep -q listening "$tmp/err" 2>/dev/null && break; sleep 0.1; done
taskset -c 1 target/release/rxload -t1 -c"$conns" -d1s "${mode[@]}" "http://127.0.0.1:$port/" >/dev/null
# The server's CPU ticks (utime + stime, /proc/PID/stat fields 14 and 15) around the profile.
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
t0=$(ticks)
perf record -q -e cpu-clock -F 4999 -g -p "$pid" -o "$tmp/perf.data" -- sleep "$secs" 2>/dev/null &
rec=$!
taskset -c 1 target/release/rxload -t1 -c"$conns" -d"${secs}s" "${mode[@]}" --json "http://127.0.0.1:$port/" >"$tmp/load.json"
wait $rec || true
cpu_s=$(echo "$(ticks) $t0 $(getconf CLK_TCK)" | awk '{print ($1 - $2) / $3}')
head -1 "$tmp/err" >"$tmp/backend"
perf report -i "$tmp/perf.data" --no-children --sort sym --stdio -q -g none 2>/dev/null \
  | awk 'NF >= 2 && $1 ~ /%$/ {print}' >"$tmp/syms"
# How many samples the shares are of (their precision). Not a CPU time: in this guest perf's
# timer delivers well under its 4999 a second to a busy task; the runner measures CPU.
samples=$(perf report -i "$tmp/perf.data" --stdio -q --sort pid --show-nr-samples -g none 2>/dev/null \
  | awk 'NF >= 2 {n += $(NF - 1)} END {print n + 0}')
python3 - "$tmp/syms" "$tmp/load.json" "$config" "$conns" "$tag" "$samples" "$cpu_s" "$tmp/backend" <<'PY' | tee "$tmp/table.md"
import json, re, sys
syms, load, config, conns, tag, samples, cpu_s, backend = sys.argv[1:9]
rows = []
for line in open(syms):
    m = re.match(r"\s*([\d.]+)%\s+\[([k.])\]\s+(.*)", line)
    if m:
        rows.append((float(m.group(1)), m.group(2) == "k", m.group(3).strip()))
phases = [
    # On loopback the sender's own softirq runs the receive path, so send and receive are
    # one phase here.
    ("kernel: TCP/IP (send, loopback delivery, receive)", True,
     r"tcp|ip_|ipv4|inet|skb|__dev|dev_|netif|napi|net_rx|loopback|sock_|sk_|__sys_send|__sys_recv|__x64_sys_send|__x64_sys_recv|raw_local_deliver|validate_xmit|eth_type|__netdev|rps_|kfree|kmem_cache|__alloc|kmalloc|page_frag|copy_to_user|copy_from_user|_copy_|__check_object|check_heap|memcg|refill_stock|mod_memcg|__sk"),
    ("kernel: netfilter (iptables/conntrack: Docker's rules see every packet)", True,
     r"nf_|ipt_|iptable|conntrack|xt_|hash_conntrack"),
    ("kernel: locks and interrupt masking", True, r"_raw_spin|spin_lock|irqrestore|irqsave|local_bh|__local_bh|preempt"),
    ("kernel: epoll", True, r"ep_|epoll|__fget|fput|fdget"),
    ("kernel: io_uring", True, r"io_|__io_"),
    ("kernel: seccomp filter (the block's BPF on every syscall)", True, r"seccomp|bpf_prog|bpf_dispatcher|__bpf"),
    ("kernel: syscall entry and exit", True, r"entry_SYSCALL|do_syscall|syscall_exit|syscall_return|exit_to_user|x64_sys_call|srso|retbleed|__entry_text|__x64_sys"),
    ("kernel: scheduler and wait", True, r"schedule|finish_task|__switch|pick_next|dequeue|enqueue|try_to_wake|psi_|update_curr|hrtimer|cpuidle|do_idle|native_safe_halt|__wake_up|autoremove|default_wake"),
    ("kernel: other", True, r"."),
    ("user: HTTP (parse, respond)", False, r"httparse|http::|respond|Head::read|process|itoa|route"),
    ("user: reactor and worker", False, r"reactor::|server::worker|Worker|Epoll|Uring|on_|poll|arm|dispatch|io_uring::"),
    ("user: allocation and copies", False, r"malloc|free|realloc|memcpy|memmove|memset|alloc::|RawVec|__libc|cfree"),
    ("user: other", False, r"."),
]
totals = {name: 0.0 for name, _, _ in phases}
for pct, kernel, sym in rows:
    for name, k, pattern in phases:
        if k == kernel and re.search(pattern, sym):
            totals[name] += pct
            break
rep = json.load(open(load))
model = "a connection per request" if tag else "kept alive"
us = float(cpu_s) * 1e6 / max(rep["requests"], 1)
print(f"## {config}, {conns} connections, {model}: {rep['requests_per_s']:.0f} req/s during the profile, {samples} samples, {us:.2f} µs of server CPU a request\n")
print(f"The server said: `{open(backend).read().strip()}`\n")
print("| phase | share of the server's samples | µs a request |\n| --- | --- | --- |")
for name, _, _ in phases:
    print(f"| {name} | {totals[name]:.1f} % | {totals[name] * us / 100:.2f} |")
print("\ntop symbols:\n")
for pct, kernel, sym in sorted(rows, reverse=True)[:15]:
    print(f"- {pct:.1f} % {'[k]' if kernel else '[u]'} {sym}")
PY
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  name="$keep/$config$tag-$conns"
  cp "$tmp/table.md" "$name.md"; cp "$tmp/syms" "$name.syms"; cp "$tmp/load.json" "$name.json"
fi
