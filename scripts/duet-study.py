#!/usr/bin/env python3
"""How a pair of servers is best measured on this host: a study of the noise's time scale.

Natively, two servers on CPU 0, `rxload -t1` on CPU 1, keep-alive. Per trial, in a shuffled
order, four ways of measuring server A against server B:

  seq         A for 1 s, then B for 1 s (the runner's alternating slices, adjacent);
  fast        A and B alternated A,B,B,A,B,A,A,B in 125 ms runs (0.5 s each in all);
  duet        A and B driven at once for 1 s by two rxload processes (Bulej et al. 2020);
  duet-fresh  as duet, on a fresh pair of servers launched for the trial (launch as a level).

The figure per trial is ln(CPU per request of A / CPU per request of B), CPU from the
servers' threads' schedstat (ns) read around the load. Usage:

  scripts/duet-study.py OUT.json TRIALS A_BACKEND B_BACKEND [CONNS]

Prints one line per trial and, per mode, the mean, the SD of the per-trial log ratio and
Student's t 95 % half-width (over trials), and the SD of A's level (the host's noise).
"""
import glob, json, math, os, random, statistics as st, subprocess, sys, time

BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release")
MODES = ["seq", "fast", "duet", "duet-fresh"]
T975 = {9: 2.262, 19: 2.093, 29: 2.045, 39: 2.023, 59: 2.001}


def cpu_ns(pid):
    return sum(int(open(f).read().split()[0]) for f in glob.glob(f"/proc/{pid}/task/*/schedstat"))


def start(port, backend):
    env = dict(os.environ, APP_PORT=str(port), APP_WORKERS="1", APP_BACKEND=backend)
    p = subprocess.Popen(["taskset", "-c", "0", f"{BIN}/server"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if subprocess.run(["taskset", "-c", "1", f"{BIN}/rxload", "-t1", "-c1", "-d10ms", "--json",
                           f"http://127.0.0.1:{port}/"], capture_output=True).returncode == 0:
            return p
        time.sleep(0.02)
    raise SystemExit(f"server on {port} did not answer")


def load_cmd(port, dur, conns):
    return ["taskset", "-c", "1", f"{BIN}/rxload", "-t1", f"-c{conns}", f"-d{dur}", "--json",
            f"http://127.0.0.1:{port}/"]


def requests(out):
    return json.loads(out)["requests"]


def main():
    out_path, trials, ba, bb = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    conns = int(sys.argv[5]) if len(sys.argv) > 5 else 64
    A, B = 3101, 3102
    servers = {A: start(A, ba), B: start(B, bb)}
    rows = []
    for t in range(trials):
        modes = MODES[:]
        random.shuffle(modes)
        for m in modes:
            fresh = None
            if m == "duet-fresh":
                fresh = {A + 10: start(A + 10, ba), B + 10: start(B + 10, bb)}
            procs = fresh or servers
            a, b = sorted(procs)
            pid = {p: procs[p].pid for p in procs}
            c0 = {p: cpu_ns(pid[p]) for p in procs}
            req = {a: 0, b: 0}
            if m == "seq":
                for p in ([a, b] if t % 2 == 0 else [b, a]):
                    req[p] += requests(subprocess.run(load_cmd(p, "1s", conns), capture_output=True, text=True).stdout)
            elif m == "fast":
                for p in ([a, b, b, a, b, a, a, b] if t % 2 == 0 else [b, a, a, b, a, b, b, a]):
                    req[p] += requests(subprocess.run(load_cmd(p, "125ms", conns), capture_output=True, text=True).stdout)
            else:
                ps = {p: subprocess.Popen(load_cmd(p, "1s", conns), stdout=subprocess.PIPE, text=True) for p in (a, b)}
                for p, pr in ps.items():
                    req[p] = requests(pr.communicate()[0])
            c1 = {p: cpu_ns(pid[p]) for p in procs}
            cpr = {p: (c1[p] - c0[p]) / req[p] for p in (a, b)}
            if fresh:
                for p in fresh.values():
                    p.terminate()
                    p.wait()
            rows.append(dict(trial=t, mode=m, a_ns=cpr[a], b_ns=cpr[b], a_req=req[a], b_req=req[b],
                             log_ratio=math.log(cpr[a] / cpr[b])))
            print(json.dumps(rows[-1]), flush=True)
    for p in servers.values():
        p.terminate()
    summary = {}
    for m in MODES:
        lr = [r["log_ratio"] for r in rows if r["mode"] == m]
        lvl = [math.log(r["a_ns"]) for r in rows if r["mode"] == m]
        n = len(lr)
        sd = st.stdev(lr)
        half = T975.get(n - 1, 1.96) * sd / math.sqrt(n)
        mean = st.mean(lr)
        summary[m] = dict(n=n, ratio=math.exp(mean), low=math.exp(mean - half), high=math.exp(mean + half),
                          sd_log_ratio=sd, sd_level=st.stdev(lvl), a_us_median=st.median(r["a_ns"] for r in rows if r["mode"] == m) / 1000)
        s = summary[m]
        print(f"{m:10} n={n} A/B {100*(s['ratio']-1):+.1f} % [{100*(s['low']-1):+.1f}, {100*(s['high']-1):+.1f}]"
              f"  SD of a trial's ratio {100*sd:.2f} %  SD of A's level {100*s['sd_level']:.2f} %  A {s['a_us_median']:.2f} µs")
    json.dump(dict(argv=sys.argv[1:], rows=rows, summary=summary), open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
