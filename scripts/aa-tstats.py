#!/usr/bin/env python3
"""Do the identical pairs of runs of duets spread as their intervals say? (issue #33)

For every identical pair-cell (the A/A control under each profile; io_uring against rx under
`no-io-uring`) of each run given: the duets' ln ratio of CPU per request round by round, their
Student's t statistic over the first ROUNDS rounds (default 6, the planned ones: no rounds
added by the target, which stop when the intervals happen to be narrow), and:
  - by load class (closed: keep-alive and a connection per request; open loop), how many are
    apart at 95 % and the SD of the t statistics (t on 5 degrees of freedom: 1.29);
  - the mean difference of the duet's first server minus its second, by load model (an order
    effect would show here);
  - the open-loop pair-cells at 90 %, round by round (F: the pair's first server went first);
  - the run-level spread (an offset fixed for the run that the rounds do not see): the moment
    estimate tau^2 = mean(y^2 - s^2/n) over the A/A control's cells (y: a cell's mean ln ratio),
    by run and by factor (load class, profile, keep-alive level), as the summary estimates it
    per run over all the control's cells (bench-runner's stats::run_level).

Usage: scripts/aa-tstats.py [--rounds N] RUN_DIR... (each with raw.json)
"""
import collections
import json
import math
import statistics as st
import sys

T975 = {2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def cpu_per_request(s):
    if s.get("error") or not s.get("report") or not s["report"]["requests"]:
        return None
    return s["server_cpu_ns"] / s["report"]["requests"]


def pair_cells(run, max_round):
    """(pair, load, conns) -> round -> (ln(A/B), A went first)."""
    raw = json.load(open(run + "/raw.json"))
    duets = collections.defaultdict(list)
    for s in raw["slices"]:
        duets[(s["round"], s["position"], s["load"], s["conns"])].append(s)
    cells = collections.defaultdict(dict)
    for (rnd, _, load, conns), pair in duets.items():
        if len(pair) != 2 or rnd > max_round:
            continue
        by = {(s["server"]["profile"], s["server"]["config"]): s for s in pair}
        for prof in ("default", "no-io-uring", "relaxed"):
            pairs = [((prof, "io_uring-control"), (prof, "io_uring"))]
            if prof == "no-io-uring":
                pairs.append(((prof, "io_uring"), (prof, "rx")))
            for a, b in pairs:
                if a in by and b in by:
                    x, y = cpu_per_request(by[a]), cpu_per_request(by[b])
                    if x and y:
                        cells[(a, load, conns)][rnd] = (math.log(x / y), pair[0] is by[a])
    return cells


def tau(ds):
    """The moment estimate of the run-level SD (in %) from cells' per-round ln ratios."""
    terms = []
    for d in ds:
        if len(d) >= 3:
            terms.append(st.mean(d) ** 2 - st.variance(d) / len(d))
    if not terms:
        return None, 0
    return 100 * math.sqrt(max(0.0, st.mean(terms))), len(terms)


def run_level(cells):
    control = {k: [x for x, _ in v.values()] for k, v in cells.items() if k[1][0][1] == "io_uring-control"}
    factors = {
        "run": lambda run, prof, load, conns: run.rstrip("/").split("/")[-1],
        "load class": lambda run, prof, load, conns: "open" if load.startswith("open") else load,
        "profile": lambda run, prof, load, conns: prof,
        "keep-alive level": lambda run, prof, load, conns: f"c={conns}" if load == "keepalive" else None,
    }
    for name, f in factors.items():
        groups = collections.defaultdict(list)
        for (run, ((prof, _), load, conns)), d in control.items():
            g = f(run, prof, load, conns)
            if g is not None:
                groups[g].append(d)
        parts = []
        for g, ds in sorted(groups.items()):
            t, k = tau(ds)
            parts.append(f"{g} {t:.2f} % ({k})" if t is not None else f"{g} -")
        print(f"run-level SD by {name}: " + "; ".join(parts))


def main(argv):
    max_round = 6
    if argv[:1] == ["--rounds"]:
        max_round, argv = int(argv[1]), argv[2:]
    cells = {(run, k): v for run in argv for k, v in pair_cells(run, max_round).items()}
    print(f"runs: {', '.join(argv)}; rounds <= {max_round}")
    for cls in ("closed", "open"):
        ts, apart = [], 0
        for (_, (_, load, _)), v in cells.items():
            if load.startswith("open") != (cls == "open"):
                continue
            d = [x for x, _ in v.values()]
            if len(d) < 3:
                continue
            t = st.mean(d) / (st.stdev(d) / math.sqrt(len(d)))
            ts.append(t)
            apart += abs(t) > T975[len(d) - 1]
        print(f"{cls:6} loop: {len(ts)} pair-cells, {apart} apart, SD of t {st.pstdev(ts):.2f} (t on 5 df: 1.29)")
    first = collections.defaultdict(list)
    for (_, (_, load, _)), v in cells.items():
        first[load] += [x if f else -x for x, f in v.values()]
    for load, xs in sorted(first.items()):
        print(f"first minus second, {load:16} n {len(xs):3}: {100 * st.mean(xs):+.3f} % (se {100 * st.stdev(xs) / math.sqrt(len(xs)):.3f})")
    run_level(cells)
    for (run, (pair, load, _)), v in sorted(cells.items()):
        if load == "open-90":
            rounds = " ".join(f"{'F' if f else 's'}{100 * x:+.2f}" for _, (x, f) in sorted(v.items()))
            print(f"open-90 {run.rstrip('/').split('/')[-1]} {pair[0]}/{pair[1]}: {rounds}")


if __name__ == "__main__":
    main(sys.argv[1:])
