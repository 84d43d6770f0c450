#!/usr/bin/env python3
"""Issue #33's method study: runs of the same matrix, one method each, side by side.

    scripts/method-study.py RUN_DIR... > README.md

For each run (its summary.json): how it launched its servers (`relaunch`), the identical pairs
of every cell on CPU per request — the A/A control (io_uring-control against io_uring, each
profile) and io_uring against rx under no-io-uring (both run epoll rx there) — their
half-widths and whether each came out apart, and how long the run measured. Then the same per
method over all its runs. Reads only what the runs wrote.
"""
import json
import math
import statistics
import sys
from pathlib import Path


def identical_pairs(summary):
    """(label, comparison) for every identical pair on CPU per request."""
    for c in summary["comparisons"]:
        if c["metric"] != "cpu_per_request" or c["profile"] != c["baseline_profile"]:
            continue
        pair = (c["config"], c["baseline"])
        if pair == ("io_uring-control", "io_uring"):
            yield f"A/A {c['profile']}", c
        elif pair == ("io_uring", "rx") and c["profile"] == "no-io-uring":
            yield "io_uring/rx no-io-uring", c


def half(c):
    return (c["ci95_high"] - c["ci95_low"]) / 2 / c["ratio_median"]


def per_round(raw, label):
    """A relaunched run's identical pair, round by round: the difference of the two
    configurations' mean log CPU per request (%), which its interval is Student's t over."""
    kind, profile = label.split(" ", 1) if label.startswith("A/A") else ("io_uring/rx", "no-io-uring")
    a, b = ("io_uring-control", "io_uring") if kind == "A/A" else ("io_uring", "rx")
    levels = {}
    for s in raw["slices"]:
        r = s.get("report")
        if s.get("error") or not r or not r["requests"] or not s.get("server_cpu_ns"):
            continue
        if s["server"]["profile"] != profile or s["server"]["config"] not in (a, b):
            continue
        key = (s["server"]["config"], s["conns"], s["round"])
        levels.setdefault(key, []).append(math.log(s["server_cpu_ns"] / 1e3 / r["requests"]))
    out = {}
    for (config, conns, rnd), v in levels.items():
        if config != a or (b, conns, rnd) not in levels:
            continue
        w = levels[(b, conns, rnd)]
        out.setdefault(conns, {})[rnd] = (sum(v) / len(v) - sum(w) / len(w)) * 100
    return out


def measured_minutes(raw):
    at = [s["at_s"] + s["window_s"] for s in raw["slices"]]
    first = min(s["at_s"] for s in raw["slices"])
    return (max(at) - first) / 60


def main(dirs):
    by_method = {}
    print("# Method study: servers resident for the run against launched afresh every round\n")
    for d in map(Path, dirs):
        s = json.loads((d / "summary.json").read_text())
        raw = json.loads((d / "raw.json").read_text())
        method = s["settings"].get("relaunch", "once")
        m = s["machine"]
        cpu = f"{m.get('cpu_model', '?')} ({m.get('cpu_id') or 'cpu id not recorded'})"
        rows = list(identical_pairs(s))
        apart = sum(c["significant"] for _, c in rows)
        print(f"## {d.name}: relaunch {method}\n")
        print(f"{s['settings']['rounds']} rounds of {s['settings'].get('instances', 1)} instances, "
              f"{len(raw['slices'])} slices, {measured_minutes(raw):.1f} min from the first slice to the last; {cpu}\n")
        print("| pair | load | conns | ratio | 95 % interval | ± | apart |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for label, c in sorted(rows, key=lambda r: (r[0], r[1]["load"], r[1]["conns"])):
            print(f"| {label} | {c['load']} | {c['conns']} | {c['ratio_median']:.4f} | "
                  f"[{c['ci95_low']:.4f}, {c['ci95_high']:.4f}] | {half(c) * 100:.2f} % | "
                  f"{'yes' if c['significant'] else ''} |")
        print(f"\napart: {apart} of {len(rows)}\n")
        if method == "round":
            print("Round by round (relaunched: the rounds are the replicates), the difference in %:\n")
            for label in sorted({label for label, _ in rows}):
                for conns, d in sorted(per_round(raw, label).items()):
                    shown = " ".join(f"{d[r]:+.1f}" for r in sorted(d))
                    print(f"- {label} c={conns}: {shown}")
            print()
        agg = by_method.setdefault(method, {"halves": [], "apart": 0, "n": 0, "minutes": []})
        agg["halves"] += [half(c) for _, c in rows]
        agg["apart"] += apart
        agg["n"] += len(rows)
        agg["minutes"].append(measured_minutes(raw))
    print("## Per method, over its runs\n")
    print("| relaunch | runs | identical pair-cells | apart | median ± | widest ± | minutes a run |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for method, a in sorted(by_method.items()):
        print(f"| {method} | {len(a['minutes'])} | {a['n']} | {a['apart']} | "
              f"{statistics.median(a['halves']) * 100:.2f} % | {max(a['halves']) * 100:.2f} % | "
              f"{statistics.mean(a['minutes']):.1f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
