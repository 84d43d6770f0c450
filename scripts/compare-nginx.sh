#!/usr/bin/env bash
# req/s of `server` (epoll/rx, io_uring) beside nginx (1 worker, `return 200`), interleaved
# rounds, server on cpu0 and wrk -t1 on cpu1. Prints per-round rows with the server's CPU use
# (utime+stime over the run) and the median per configuration. Needs wrk and nginx.
# usage: scripts/compare-nginx.sh [ROUNDS] [SECONDS] [CONNS]
set -euo pipefail
rounds=${1:-3}; secs=${2:-5}; conns=${3:-64}
cd "$(dirname "$0")/.."
cargo build --release -p server -q
tmp=$(mktemp -d); trap 'rm -rf "$tmp"; pkill -f "nginx -c $tmp" || true' EXIT
port=3918
cat >"$tmp/nginx.conf" <<NG
worker_processes 1; daemon off; pid $tmp/nginx.pid; error_log $tmp/error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 100000000;
  server { listen 127.0.0.1:$port reuseport; location / { return 200; } } }
NG
ticks() { awk '{print $14+$15}' /proc/"$1"/stat; }
start() {
  case $1 in
    nginx) taskset -c 0 nginx -c "$tmp/nginx.conf" -p "$tmp" 2>/dev/null & ;;
    rx) APP_PORT=$port APP_WORKERS=1 APP_BACKEND=epoll taskset -c 0 target/release/server 2>/dev/null >/dev/null & ;;
    io_uring) APP_PORT=$port APP_WORKERS=1 APP_BACKEND=io_uring taskset -c 0 target/release/server 2>/dev/null >/dev/null & ;;
  esac
  sleep 0.5
}
pid_of() { if [ "$1" = nginx ]; then pgrep -f "nginx: worker" | head -1; else pgrep -f target/release/server | head -1; fi; }
stop() { if [ "$1" = nginx ]; then pkill -f "nginx -c $tmp" || true; else pkill -TERM -f target/release/server || true; fi; sleep 0.5; }
echo "round config req/s server_cpu% req_per_server_cpu_second"
for r in $(seq "$rounds"); do
  configs=(nginx rx io_uring); shift_by=$(( (r-1) % 3 ))
  configs=("${configs[@]:$shift_by}" "${configs[@]:0:$shift_by}")
  for c in "${configs[@]}"; do
    start "$c"; pid=$(pid_of "$c")
    taskset -c 1 wrk -t1 -c"$conns" -d1s "http://127.0.0.1:$port/" >/dev/null
    t0=$(ticks "$pid"); s0=$(date +%s.%N)
    rps=$(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" "http://127.0.0.1:$port/" | awk '/Requests\/sec/ {print $2}')
    t1=$(ticks "$pid"); s1=$(date +%s.%N)
    cpu=$(echo "($t1 - $t0) / ($s1 - $s0)" | bc -l)
    eff=$(echo "$rps * 100 / $cpu" | bc -l)
    printf "%s %s %.0f %.0f %.0f\n" "$r" "$c" "$rps" "$cpu" "$eff" | tee -a "$tmp/rows"
    stop "$c"
  done
done
median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo "medians: config req/s req_per_server_cpu_second"
for c in nginx rx io_uring; do
  printf "  %-9s %s %s\n" "$c" "$(awk -v c=$c '$2==c {print $3}' "$tmp/rows" | median)" \
    "$(awk -v c=$c '$2==c {print $5}' "$tmp/rows" | median)"
done
