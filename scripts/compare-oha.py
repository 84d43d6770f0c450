#!/usr/bin/env python3
"""rxload beside oha (the-benchmarker's generator 2025-02 → 2026-08) on the same servers and
slice plan: runs of `bench-runner --engine native` alternating the driver, then one table of
medians over every slice of each (driver, server, load model) cell.

Each run: this project's rx and io_uring natively (one worker on the server CPUs, the driver
on the load CPUs), one instance each, a connection per request and open loop at one fixed
rate, `--rounds` rounds of 1 s slices, no warm-up (oha has none). Runs alternate rxload, oha,
rxload, … so drift over the minutes hits both drivers alike; the drivers are not paired slice
by slice (one driver a run), so the table holds medians, not paired intervals.

usage: scripts/compare-oha.py --out DIR [--runs 3] [--rounds 6] [--rate 20000] [--conns 64]
                              [--load per-request,open]
Needs a release build (`cargo build --release -p bench-runner`) and oha on PATH
(`cargo install oha --locked`). Writes DIR/run-<driver>-<i>/ (each run's raw.json and
tables), DIR/compare-oha-RATE.txt (the command lines and the table), DIR/machine.txt and prints the table.
"""
import argparse, json, os, shutil, statistics, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--rounds", type=int, default=6)
ap.add_argument("--rate", type=int, default=20000)
ap.add_argument("--conns", type=int, default=64)
ap.add_argument("--load", default="per-request,open", help="bench-runner's --load")
a = ap.parse_args()
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
runner = os.path.join(root, "target/release/bench-runner")
if not os.access(runner, os.X_OK):
    sys.exit(f"compare-oha: {runner} missing: cargo build --release -p bench-runner")
if shutil.which("oha") is None:
    sys.exit("compare-oha: oha is not on PATH: cargo install oha --locked")
os.makedirs(a.out, exist_ok=True)
log = open(os.path.join(a.out, f"compare-oha-{a.rate}.txt"), "w")
with open(os.path.join(a.out, "machine.txt"), "w") as m:
    m.write(subprocess.run(["lscpu"], capture_output=True, text=True).stdout)
    m.write(subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout)
    m.write(subprocess.run(["oha", "--version"], capture_output=True, text=True).stdout)
    vuln = "/sys/devices/system/cpu/vulnerabilities"
    for f in sorted(os.listdir(vuln)) if os.path.isdir(vuln) else []:
        m.write(f"{f}: {open(os.path.join(vuln, f)).read().strip()}\n")

def say(line):
    print(line)
    log.write(line + "\n")
    log.flush()

cells = {}
for i in range(a.runs):
    for driver in ("rxload", "oha"):
        out = os.path.join(a.out, f"run-{a.rate}-{driver}-{i + 1}")
        cmd = [runner, "--engine", "native", "--driver", driver, "--pairing", "alternate", "--instances", "1",
               "--profiles", "relaxed", "--configs", "rx,io_uring", "--conns", str(a.conns), "--load", a.load,
               "--open-at", "0", "--open-slowest", "0", "--open-rate", str(a.rate),
               "--rounds", str(a.rounds), "--slice", "1s", "--slice-warmup", "0s",
               "--seed", str(11 + i), "--out", out]
        say("$ " + " ".join(os.path.relpath(c, root) if c.startswith(root) else c for c in cmd))
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"compare-oha: the run failed:\n{done.stderr[-2000:]}")
        (run_dir,) = [d for d in os.listdir(out) if d[0].isdigit()]
        raw = json.load(open(os.path.join(out, run_dir, "raw.json")))
        for s in raw["slices"]:
            if s.get("error") or not s.get("report"):
                continue
            r = s["report"]
            cpu = s.get("server_cpu_ns")
            cells.setdefault((s["load"], s["server"]["config"], driver), []).append({
                "rps": r["requests_per_s"],
                "p50": r["latency"]["p50_us"],
                "p99": r["latency"]["p99_us"],
                "busy": None if cpu is None else 100 * cpu / 1e9 / s["window_s"],
                "behind": bool((r.get("open_loop") or {}).get("behind")),
            })

med = lambda xs: statistics.median(xs) if xs else float("nan")
say("")
say(f"{a.runs} runs per driver, alternating; {a.rounds} rounds of 1 s slices each; {a.conns} connections; medians over slices")
say("")
say("| load | server | driver | slices | req/s | P50 µs | P99 µs | server busy | behind |")
say("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (load, config, driver), xs in sorted(cells.items()):
    busy = [x["busy"] for x in xs if x["busy"] is not None]
    say(f"| {load} | {config} | {driver} | {len(xs)} | {med([x['rps'] for x in xs]):.0f} | "
        f"{med([x['p50'] for x in xs]):.0f} | {med([x['p99'] for x in xs]):.0f} | "
        f"{med(busy):.0f} % | {sum(x['behind'] for x in xs)} |")
