#!/usr/bin/env python3
"""What the server's loop turns do under keep-alive load, natively (issue #49's counters).

    scripts/turns.py [--conns 64,256,512] [--seconds 4] [--rounds 3] [--bin DIR]

The server (one worker) on CPU 0, `rxload -t1` on CPU 1, kept alive; for each round, each
connection count and each backend (io_uring, epoll rx) in a shuffled order: a fresh server,
1 s of load before a SIGUSR1 snapshot, `--seconds` of load to a second snapshot, the two
diffed. Per slice: req/s, the server's busy share of its CPU (schedstat), and from the
counters line's `turns`: waits per second, completions (or events) and SQEs per wait, the wall
time of a wait, the idle share (wall time not on the CPU), and buffer-ring empties. Prints one
line per slice, then per backend and connection count the medians, and io_uring / rx req/s
per round with its median. Measures nothing else beside it: run it on a quiet machine.
"""
import argparse, glob, json, os, random, socket, statistics as st, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = {"io_uring": {"APP_BACKEND": "io_uring"},
            "rx": {"APP_BACKEND": "epoll", "APP_EPOLL_MODE": "rx"}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ns(pid):
    return sum(int(open(f).read().split()[0]) for f in glob.glob(f"/proc/{pid}/task/*/schedstat"))


def snapshot(server, seq):
    server.send_signal(10)  # SIGUSR1
    while True:
        line = server.stdout.readline()
        if not line:
            sys.exit("server exited before its counters line")
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("event") == "snapshot" and doc.get("seq") == seq:
            return doc["workers"][0]


def slice_(bin_dir, backend, conns, seconds):
    port = free_port()
    env = dict(os.environ, APP_PORT=str(port), APP_WORKERS="1", APP_BIND="127.0.0.1", **BACKENDS[backend])
    server = subprocess.Popen(["taskset", "-c", "0", f"{bin_dir}/server"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server.stderr.readline()  # the listening line: it serves from here on
        load = subprocess.Popen(["taskset", "-c", "1", f"{bin_dir}/rxload", "-t1", f"-c{conns}",
                                 "-d", f"{seconds + 1.5}s", "--json", f"http://127.0.0.1:{port}/"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        time.sleep(1.0)
        a, ca, ta = snapshot(server, 1), cpu_ns(server.pid), time.monotonic()
        time.sleep(seconds)
        b, cb, tb = snapshot(server, 2), cpu_ns(server.pid), time.monotonic()
        load.communicate()
    finally:
        server.terminate()
        server.communicate()
    wall = tb - ta
    turns = {k: b["turns"][k] - a["turns"][k] for k in b["turns"]}
    waits = max(turns["waits"], 1)
    return {
        "backend": backend, "conns": conns,
        "req_s": (b["requests"] - a["requests"]) / wall,
        "busy": (cb - ca) / 1e9 / wall,
        "waits_s": turns["waits"] / wall,
        "reaped_per_wait": turns["reaped"] / waits,
        "submitted_per_wait": turns["submitted"] / waits,
        "wait_us": turns["wait_ns"] / waits / 1e3,
        "buffers_empty": turns["buffers_empty"],
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conns", default="64,256,512")
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--bin", default=os.path.join(HERE, "..", "target", "release"))
    args = p.parse_args()
    conns = [int(c) for c in args.conns.split(",")]
    cpu = open("/proc/cpuinfo").read()
    field = lambda k: next(l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith(k))
    print(f"# {field('model name')}, family {field('cpu family')} model {field('model')}; "
          f"Linux {os.uname().release}; scripts/turns.py --conns {args.conns} "
          f"--seconds {args.seconds} --rounds {args.rounds}")
    fmt = "{round} {backend:>8} c={conns:<4} {req_s:9.0f} req/s  busy {busy:5.1%}  " \
          "{waits_s:7.0f} waits/s  {reaped_per_wait:5.2f} reaped/wait  " \
          "{submitted_per_wait:5.2f} SQEs/wait  {wait_us:6.1f} µs/wait  empties {buffers_empty}"
    rows = []
    for r in range(args.rounds):
        order = [(b, c) for c in conns for b in BACKENDS]
        random.shuffle(order)
        for backend, c in order:
            row = slice_(args.bin, backend, c, args.seconds)
            row["round"] = r
            rows.append(row)
            print(fmt.format(**row), flush=True)
    print("# medians over rounds")
    for c in conns:
        for backend in BACKENDS:
            sel = [x for x in rows if x["backend"] == backend and x["conns"] == c]
            med = {k: st.median(x[k] for x in sel) for k in sel[0] if isinstance(sel[0][k], float)}
            med.update(backend=backend, conns=c, round="-",
                       buffers_empty=sum(x["buffers_empty"] for x in sel))
            print(fmt.format(**med))
        ratios = sorted(
            next(x for x in rows if x["round"] == r and x["conns"] == c and x["backend"] == "io_uring")["req_s"]
            / next(x for x in rows if x["round"] == r and x["conns"] == c and x["backend"] == "rx")["req_s"]
            for r in range(args.rounds))
        print(f"# c={c}: io_uring / rx req/s by round {[round(x, 3) for x in ratios]}, median {st.median(ratios):.3f}")


if __name__ == "__main__":
    main()
