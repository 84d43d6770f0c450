#!/usr/bin/env bash
# Where a request's CPU goes: `perf record -e cpu-clock` (no hardware counters here) of one
# server pinned to cpu0 (APP_WORKERS=1) under rxload on cpu1, then the samples grouped by
# phase (kernel TCP receive and send, the syscall or io_uring machinery, the wait, the
# reactor, HTTP parsing and responding, allocation) and the top symbols. One configuration
# per run, alternated by the caller for a comparison (the numbers are shares of one
# server's samples, not rates, so they travel between runs better than req/s does).
# usage: scripts/profile.sh io_uring|rx|legacy [CONNS] [SECONDS]
set -euo pipefail
config=${1:?usage: scripts/profile.sh io_uring|rx|legacy [CONNS] [SECONDS]}
conns=${2:-256}; secs=${3:-8}
cd "$(dirname "$0")/.."
case $config in
  io_uring) env=(APP_BACKEND=io_uring) ;;
  rx) env=(APP_BACKEND=epoll APP_EPOLL_MODE=rx) ;;
  legacy) env=(APP_BACKEND=epoll APP_EPOLL_MODE=legacy) ;;
  *) echo "unknown configuration: $config" >&2; exit 2 ;;
esac
cargo build --release -q -p server -p driver --bin server --bin rxload
tmp=$(mktemp -d); trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=3931
env APP_PORT=$port APP_WORKERS=1 "${env[@]}" taskset -c 0 target/release/server 2>"$tmp/err" >/dev/null &
pid=$!
for _ in $(seq 50); do grep -q listening "$tmp/err" 2>/dev/null && break; sleep 0.1; done
taskset -c 1 target/release/rxload -t1 -c"$conns" -d1s "http://127.0.0.1:$port/" >/dev/null
perf record -q -e cpu-clock -F 4999 -g -p "$pid" -o "$tmp/perf.data" -- sleep "$secs" 2>/dev/null &
rec=$!
taskset -c 1 target/release/rxload -t1 -c"$conns" -d"${secs}s" --json "http://127.0.0.1:$port/" >"$tmp/load.json"
wait $rec || true
perf report -i "$tmp/perf.data" --no-children --sort sym --stdio -q -g none 2>/dev/null \
  | awk 'NF >= 2 && $1 ~ /%$/ {print}' >"$tmp/syms"
python3 - "$tmp/syms" "$tmp/load.json" "$config" "$conns" <<'PY'
import json, re, sys
syms, load, config, conns = sys.argv[1:5]
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
print(f"## {config}, {conns} connections: {rep['requests_per_s']:.0f} req/s during the profile\n")
print("| phase | share of the server's samples |\n| --- | --- |")
for name, _, _ in phases:
    print(f"| {name} | {totals[name]:.1f} % |")
print("\ntop symbols:\n")
for pct, kernel, sym in sorted(rows, reverse=True)[:15]:
    print(f"- {pct:.1f} % {'[k]' if kernel else '[u]'} {sym}")
PY
