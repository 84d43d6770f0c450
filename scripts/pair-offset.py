#!/usr/bin/env python3
"""Is there an offset between identical servers that stays fixed for a whole run (issue #47)?

For every duet run given (a raw.json or raw.json.gz), on CPU per request:

  pairs      each profile's A/A pair (`io_uring-control` against `io_uring`), with the round as
             the unit: per round, the mean over the pair's cells of ln(control / io_uring); then
             Student's t over the rounds. The pair's cells share each round's launch, so they are
             not independent replicates of the pair's offset; the rounds are.
  cells      every A/A cell on its own, Student's t over its rounds (the rounds' own interval,
             no run-level term).
  replicates every cross-profile comparison made twice, once with `io_uring` and once with
             `io_uring-control` (e.g. no-io-uring against relaxed): the difference of the two
             ln ratios per round should be 0; Student's t over the rounds.

Prints, per run, each pair's offset with its t and p, and how many pairs, cells and replicate
contrasts came out apart at 95 %; then the totals with the binomial chance of at least that many
were each one's chance 5 %.

Usage: scripts/pair-offset.py RAW... (needs scipy)
"""
import collections
import gzip
import json
import math
import statistics as st
import sys

from scipy import stats as ss

A, B = "io_uring", "io_uring-control"


def load(path):
    return json.load(gzip.open(path) if path.endswith(".gz") else open(path))


def cpu_per_request(s):
    """The runner's own figure: the server's CPU over the window over the driver's requests."""
    r = s.get("report") or {}
    if s.get("error") or not s.get("server_cpu_ns") or not r.get("requests"):
        return None
    return s["server_cpu_ns"] / r["requests"]


def t_test(xs):
    n = len(xs)
    if n < 3:
        return None
    m, se = st.mean(xs), st.stdev(xs) / math.sqrt(n)
    t = m / se if se > 0 else math.inf
    return m, se, t, 2 * ss.t.sf(abs(t), n - 1)


def duets(raw):
    """(round, load, conns, route) -> {(profile, config): {(profile, config) partner: value}}."""
    out = collections.defaultdict(lambda: collections.defaultdict(dict))
    for s in raw["slices"]:
        if not s.get("duet"):
            continue
        v, w = cpu_per_request(s), None
        me = (s["server"]["profile"], s["server"]["config"])
        other = (s["duet"]["server"]["profile"], s["duet"]["server"]["config"])
        if v is not None:
            out[(s["round"], str(s["load"]), s["conns"], s["route"])][(me, other)] = v
    return out


def ratios(raw, first, second):
    """cell -> round -> ln(first / second) over the duets of the two servers."""
    by = collections.defaultdict(dict)
    for (rnd, load, conns, route), d in duets(raw).items():
        x, y = d.get((first, second)), d.get((second, first))
        if x and y:
            by[(load, conns, route)][rnd] = math.log(x / y)
    return by


def binom_tail(k, n, p=0.05):
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def main(paths):
    totals = collections.Counter()
    for path in paths:
        raw = load(path)
        m = raw["machine"]
        profiles = sorted({s["server"]["profile"] for s in raw["slices"]})
        print(f"{path}: {m.get('cpu_id') or m.get('cpu_model')}; commit {str(raw.get('commit'))[:7]}")
        for p in profiles:
            cells = ratios(raw, (p, B), (p, A))
            if not cells:
                continue
            rounds = sorted(set.intersection(*(set(v) for v in cells.values())))
            per_round = [st.mean(v[r] for v in cells.values()) for r in rounds]
            res = t_test(per_round)
            if res:
                mean, se, t, pv = res
                totals["pairs"] += 1
                totals["pairs apart"] += pv < 0.05
                print(f"  pair {p:12} {len(cells)} cells, {len(rounds)} rounds: {mean * 100:+.2f} % (se {se * 100:.2f}), t {t:+.2f}, p {pv:.3f}")
            for by_round in cells.values():
                res = t_test(list(by_round.values()))
                if res:
                    totals["cells"] += 1
                    totals["cells apart"] += res[3] < 0.05
        for p, q in [(p, q) for p in profiles for q in profiles if p < q]:
            one, two = ratios(raw, (p, A), (q, A)), ratios(raw, (p, B), (q, B))
            for cell in one.keys() & two.keys():
                common = one[cell].keys() & two[cell].keys()
                res = t_test([one[cell][r] - two[cell][r] for r in sorted(common)])
                if res:
                    totals["replicates"] += 1
                    totals["replicates apart"] += res[3] < 0.05
    print()
    for unit in ["pairs", "cells", "replicates"]:
        n, k = totals[unit], totals[f"{unit} apart"]
        if n:
            print(f"{unit}: apart {k} of {n} ({k / n * 100:.1f} %; P(>= {k} | 5 %) = {binom_tail(k, n):.2f})")


if __name__ == "__main__":
    main(sys.argv[1:])
