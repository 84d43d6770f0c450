#!/usr/bin/env python3
"""The identical-pair record of full runs (issue #33, goal 1): how often two servers that run
the same code came out apart, and how wide their intervals were.

Identical pairs, per (profile, load model, level, route) cell, on CPU per request:
  the A/A control     `io_uring-control` against `io_uring` under every profile;
  io_uring against rx under `no-io-uring`, where io_uring is denied and both run epoll/rx.

Usage: scripts/aa-record.py RUN_DIR... (each with a summary.json)

Prints one line per run (method, machine, cells, apart, median and widest half-width, by load
class), then the total over the runs given, with the binomial probability of at least that many
apart were each cell's chance 5 %. The cells of one pair share each round's launch, so they are
not independent: where a summary has its calibration (the A/A pairs over all their cells, the
rounds as the unit, and the replicate contrasts), those are counted too, and the pairs are the
unit whose binomial is honest (scripts/pair-offset.py recomputes them from raw.json).
"""
import json
import math
import os
import statistics as st
import sys


def identical(c):
    if c["metric"] != "cpu_per_request" or c["profile"] != c["baseline_profile"]:
        return None
    if c["config"] == "io_uring-control" and c["baseline"] == "io_uring":
        return "A/A control"
    if c["profile"] == "no-io-uring" and {c["config"], c["baseline"]} == {"io_uring", "rx"}:
        return "io_uring~rx (no-io-uring)"
    return None


def load_class(load):
    return "open" if str(load).startswith("open") else str(load)


def binom_tail(k, n, p=0.05):
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def main(dirs):
    total, apart_total = 0, 0
    by_unit = {"pairs": [0, 0], "replicates": [0, 0]}
    for d in dirs:
        s = json.load(open(os.path.join(d, "summary.json")))
        st_ = s["settings"]
        method = f"{st_.get('pairing', 'alternate')}, relaunch {st_.get('relaunch', 'once')}, {st_.get('instances', 1)} instance(s), {st_['rounds']} rounds"
        m = s["machine"]
        machine = m.get("cpu_id") or m["cpu_model"]
        cells = [(identical(c), c) for c in s["comparisons"]]
        cells = [(k, c) for k, c in cells if k]
        apart = [c for _, c in cells if c["significant"]]
        print(f"{os.path.basename(d.rstrip('/'))}: {machine}; {method}")
        by = {}
        for k, c in cells:
            half = (c["ci95_high"] - c["ci95_low"]) / 2 * 100
            by.setdefault(load_class(c["load"]), []).append(half)
        for cls, halves in sorted(by.items()):
            print(f"  {cls:12} {len(halves):3} cells, half-width median ±{st.median(halves):.2f} %, widest ±{max(halves):.2f} %")
        for c in apart:
            print(f"  apart: {identical(c)} {c['profile']} {c['load']} c={c['conns']}: "
                  f"{(c['ratio_median'] - 1) * 100:+.1f} % [{(c['ci95_low'] - 1) * 100:+.1f}, {(c['ci95_high'] - 1) * 100:+.1f}]")
        print(f"  identical pair-cells {len(cells)}, apart {len(apart)}")
        total += len(cells)
        apart_total += len(apart)
        cal = s.get("calibration")
        if cal:
            pt, rt = cal["pair_tally"], cal["replicates"]
            print(f"  A/A pairs (rounds as the unit) {pt['made']}, apart {pt['apart']}; replicate contrasts {rt['made']}, apart {rt['apart']}")
            for k, t in [("pairs", pt), ("replicates", rt)]:
                by_unit[k][0] += t["made"]
                by_unit[k][1] += t["apart"]
    if total:
        print(f"all cells: {apart_total} of {total} apart ({apart_total / total * 100:.1f} %); "
              f"P(>= {apart_total} | 5 %) = {binom_tail(apart_total, total):.3f} (cells of a pair are not independent)")
    for k, (made, apart) in by_unit.items():
        if made:
            print(f"all {k}: {apart} of {made} apart; P(>= {apart} | 5 %) = {binom_tail(apart, made):.3f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
