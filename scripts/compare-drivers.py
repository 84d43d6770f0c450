#!/usr/bin/env python3
"""rxload beside wrk, against one server pinned to cpu0, each driver on cpu1.

Interleaved rounds (order rotated) at each connection count. Per run: req/s, requests per
driver CPU-second (the driver's user+sys time from the kernel's child rusage, the same way for
both), requests per driver core-second (cpu1's busy time from /proc/stat: user, system and the
softirq time that the kernel does not charge to any process — with IRQ time accounting,
loopback's receive processing lands there), the server process's CPU (/proc/PID/stat) and how
busy the server's core was (cpu0, /proc/stat, same fields). Prints a markdown table of
medians. Needs wrk and nginx (Debian) and a release build of rxload and server.

usage: scripts/compare-drivers.py [--rounds 3] [--seconds 5] [--conns 64,256,512] [--server nginx|rx|io_uring]
                                  [--extra single,nobatch,goose]

--extra adds rxload variants as further drivers, to show what each choice is worth:
  single   one receive SQE per response (--recv single) instead of the multishot receive
  nobatch  a wake-up per completion (--batch-wait-us 0) instead of batched waits
  goose    rxload's goose engine (--engine goose: one reqwest client per connection), the
           realism cross-check; needs rxload built with the driver's default features
           (`cargo build --release -p driver`)
"""
import argparse, os, resource, statistics, subprocess, sys, tempfile, time, json

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--seconds", type=int, default=5)
ap.add_argument("--conns", default="64,256,512")
ap.add_argument("--server", default="nginx", choices=["nginx", "rx", "io_uring"])
ap.add_argument("--extra", default="")
a = ap.parse_args()
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
port = 3921
url = f"http://127.0.0.1:{port}/"
tmp = tempfile.mkdtemp()

def start_server():
    if a.server == "nginx":
        conf = os.path.join(tmp, "nginx.conf")
        open(conf, "w").write(f"""worker_processes 1; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;
events {{ worker_connections 8192; }}
http {{ access_log off; keepalive_requests 100000000;
  server {{ listen 127.0.0.1:{port} reuseport backlog=4096; location / {{ return 200; }} }} }}""")
        p = subprocess.Popen(["taskset", "-c", "0", "nginx", "-c", conf, "-p", tmp], stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        worker = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
        return p, int(worker[0])
    env = dict(os.environ, APP_PORT=str(port), APP_WORKERS="1",
               APP_BACKEND="epoll" if a.server == "rx" else "io_uring")
    p = subprocess.Popen(["taskset", "-c", "0", f"{root}/target/release/server"], env=env,
                         stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    return p, p.pid

def ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])

def core_busy(cpu):
    """Busy jiffies of one core: everything but idle and iowait."""
    for line in open("/proc/stat"):
        f = line.split()
        if f[0] == f"cpu{cpu}":
            v = [int(x) for x in f[1:8]]
            return sum(v) - v[3] - v[4]

def run(driver, conns):
    rxload = [f"{root}/target/release/rxload", "-t1", f"-c{conns}", f"-d{a.seconds}s", url]
    cmd = {"wrk": ["wrk", "-t1", f"-c{conns}", f"-d{a.seconds}s", url],
           "rxload": rxload,
           "rxload-single": rxload[:1] + ["--recv", "single"] + rxload[1:],
           "rxload-nobatch": rxload[:1] + ["--batch-wait-us", "0"] + rxload[1:],
           "rxload-goose": rxload[:1] + ["--engine", "goose"] + rxload[1:]}[driver]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0, s0, c0, d0 = ticks(server_pid), time.time(), core_busy(0), core_busy(1)
    out = subprocess.run(["taskset", "-c", "1"] + cmd, capture_output=True, text=True).stdout
    t1, s1, c1, d1 = ticks(server_pid), time.time(), core_busy(0), core_busy(1)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    reqs = int([l.split()[0] for l in out.splitlines() if "requests in" in l][0])
    rps = float([l.split()[1] for l in out.splitlines() if l.startswith("Requests/sec")][0])
    hz = os.sysconf("SC_CLK_TCK")
    return {"rps": rps, "per_cpu_s": reqs / cpu, "per_core_s": reqs / ((d1 - d0) / hz),
            "server_cpu": 100 * (t1 - t0) / hz / (s1 - s0),
            "server_core": 100 * (c1 - c0) / hz / (s1 - s0)}

DRIVERS = ["wrk", "rxload"] + [f"rxload-{x}" for x in a.extra.split(",") if x]
for d in DRIVERS[2:]:
    if d not in ("rxload-single", "rxload-nobatch", "rxload-goose"):
        sys.exit(f"compare-drivers: unknown --extra {d[7:]!r} (single, nobatch, goose)")
server, server_pid = start_server()
rows = {}
try:
    for conns in [int(c) for c in a.conns.split(",")]:
        for r in range(a.rounds):
            drivers = DRIVERS
            order = drivers[r % len(drivers):] + drivers[:r % len(drivers)]
            for d in order:
                res = run(d, conns)
                rows.setdefault((conns, d), []).append(res)
                print(f"round {r+1} c={conns} {d}: {res['rps']:.0f} req/s, {res['per_cpu_s']:.0f} req/driver-cpu-s, "
                      f"{res['per_core_s']:.0f} req/driver-core-s, server {res['server_cpu']:.0f}% (core {res['server_core']:.0f}%)", file=sys.stderr)
finally:
    server.terminate(); server.wait()
med = lambda xs: statistics.median(xs)
print(f"server: {a.server} on cpu0; drivers -t1 on cpu1; {a.rounds} interleaved rounds of {a.seconds}s; medians\n")
print("| conns | driver | req/s | req/driver-CPU-s | vs wrk | req/driver-core-s | vs wrk | server process CPU | server core busy |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for conns in [int(c) for c in a.conns.split(",")]:
    wr = med([r["per_cpu_s"] for r in rows[(conns, "wrk")]])
    wc = med([r["per_core_s"] for r in rows[(conns, "wrk")]])
    for d in DRIVERS:
        x = rows[(conns, d)]
        xr, xc = med([r["per_cpu_s"] for r in x]), med([r["per_core_s"] for r in x])
        print(f"| {conns} | {d} | {med([r['rps'] for r in x]):.0f} | {xr:.0f} | {xr/wr:.2f}x | {xc:.0f} | {xc/wc:.2f}x | "
              f"{med([r['server_cpu'] for r in x]):.0f}% | {med([r['server_core'] for r in x]):.0f}% |")
