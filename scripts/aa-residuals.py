#!/usr/bin/env python3
"""Why identical servers come out apart in a full run: the A/A residuals of a run's raw.json
decomposed by the factors a full run has and a calibration study does not (issue: intervals
that hold where they are narrow).

    scripts/aa-residuals.py RUN_DIR            (RUN_DIR/raw.json, or raw.json.gz)

Per slice: x = log(CPU µs per request). Per (profile, load model, level, round) block, the
block mean of every server is subtracted (the machine's drift of that block, shared by all).
What remains is decomposed:

1. Process effects. For each configuration and cell, the mean over rounds of instance #1 minus
   instance #2, its standard error from the rounds, and a heterogeneity test across cells: is a
   process's offset the same everywhere (a layout draw, fixed for the run) or does it change
   from cell to cell (an instance x cell interaction, which pooling sigma^2 over cells hides)?
   The excess variance of the per-cell means over their sampling variance is that interaction.
   With two instances a configuration, a bootstrap over instances sees this offset through two
   draws only.
2. Order: the residual's mean by position within its block (first, middle, last thirds) and
   the correlation of position with the residual.
3. The A/A pair itself: io_uring-control minus io_uring per cell (both instances averaged,
   paired by round), with the standard error from the rounds alone.
4. Steal (runs that recorded it): correlation of the server CPUs' steal with the residual.

Everything printed is computed from the file; nothing is fitted to the comparisons' outcome.
"""

import gzip
import json
import math
import statistics as st
import sys
from collections import defaultdict
from pathlib import Path


def load(run: Path):
    p = run / "raw.json"
    if p.exists():
        return json.loads(p.read_text())
    return json.loads(gzip.decompress((run / "raw.json.gz").read_bytes()))


def main():
    run = Path(sys.argv[1])
    raw = load(run)
    machine = raw["machine"]
    print(f"# A/A residuals of {raw['started_utc']} ({raw['engine']}; {machine['cpu_model']}, {machine.get('cpu_id', 'cpu id not recorded')}; commit {raw.get('commit')})\n")
    ok = [s for s in raw["slices"] if not s.get("error") and s.get("server_cpu_ns") and s.get("report") and s["report"]["requests"] > 0]
    for s in ok:
        s["x"] = math.log(s["server_cpu_ns"] / 1000 / s["report"]["requests"])
        s["cell"] = (s["server"]["profile"], s["load"], s["conns"])
        s["cfg"] = s["server"]["config"]
        s["inst"] = s.get("instance", 0)
    blocks = defaultdict(list)
    for s in ok:
        blocks[s["cell"] + (s["round"],)].append(s)
    for b in blocks.values():
        m = st.mean(s["x"] for s in b)
        positions = sorted(s["position"] for s in b)
        for s in b:
            s["r"] = s["x"] - m
            s["rank"] = positions.index(s["position"]) / max(1, len(positions) - 1)
    print(f"{len(ok)} slices in {len(blocks)} blocks; residual SD {st.pstdev(s['r'] for s in ok) * 100:.2f} % (log CPU per request, block means removed)\n")

    # 1. process effects
    by = defaultdict(lambda: defaultdict(dict))
    for s in ok:
        by[(s["cell"][0], s["cfg"])][s["cell"][1:]].setdefault(s["round"], {})[s["inst"]] = s["x"]
    print("## 1. Process effects: instance #1 minus #2, mean over rounds per cell (%), ± its standard error\n")
    print("| profile | configuration | per cell | fixed part (mean over cells) | interaction SD across cells | chi² / df |")
    print("| --- | --- | --- | --- | --- | --- |")
    interaction = []
    for key in sorted(by):
        means, ses, cells = [], [], []
        for cell, rounds in sorted(by[key].items()):
            d = [r[0] - r[1] for r in rounds.values() if 0 in r and 1 in r]
            if len(d) < 3:
                continue
            means.append(st.mean(d))
            ses.append(st.stdev(d) / math.sqrt(len(d)))
            cells.append(f"{cell[0]}/{cell[1]} {st.mean(d) * 100:+.1f}±{ses[-1] * 100:.1f}")
        if len(means) < 2:
            continue
        w = [1 / se**2 for se in ses]
        fixed = sum(m * wi for m, wi in zip(means, w)) / sum(w)
        chi2 = sum(((m - fixed) / se) ** 2 for m, se in zip(means, ses))
        df = len(means) - 1
        excess = max(0.0, st.variance(means) - st.mean(se**2 for se in ses))
        interaction.append(math.sqrt(excess))
        print(f"| {key[0]} | {key[1]} | {'; '.join(cells)} | {fixed * 100:+.2f} % | {math.sqrt(excess) * 100:.2f} % | {chi2:.1f} / {df} |")
    print(f"\nInteraction SD (instance x cell) over configurations: median {st.median(interaction) * 100:.2f} %, max {max(interaction) * 100:.2f} %.\n")

    # 2. order
    print("## 2. Order within a block\n")
    thirds = defaultdict(list)
    for s in ok:
        thirds[min(2, int(s["rank"] * 3))].append(s["r"])
    for t, name in enumerate(["first third", "middle third", "last third"]):
        v = thirds[t]
        print(f"- {name}: mean residual {st.mean(v) * 100:+.2f} % ± {st.stdev(v) / math.sqrt(len(v)) * 100:.2f} (n={len(v)})")
    xs = [s["rank"] for s in ok]
    ys = [s["r"] for s in ok]
    print(f"- correlation of position with the residual: {st.correlation(xs, ys):+.3f}")
    by_load = defaultdict(list)
    for s in ok:
        by_load[(s["load"], min(2, int(s["rank"] * 3)))].append(s["r"])
    loads = sorted({k[0] for k in by_load})
    for l in loads:
        print(f"- {l}: first / middle / last third " + " / ".join(f"{st.mean(by_load[(l, t)]) * 100:+.2f} %" for t in range(3) if by_load[(l, t)]))
    print()

    # 3. the A/A pair
    print("## 3. The A/A pair (io_uring-control minus io_uring), per cell\n")
    print("| cell | A/A mean (%) | ± SE | apart at 2 SE |")
    print("| --- | --- | --- | --- |")
    cellset = sorted({s["cell"] for s in ok})
    for cell in cellset:
        d = []
        rounds = defaultdict(dict)
        for s in ok:
            if s["cell"] == cell and s["cfg"] in ("io_uring", "io_uring-control"):
                rounds[s["round"]][(s["cfg"], s["inst"])] = s["x"]
        for r in rounds.values():
            if len(r) == 4:
                d.append((r[("io_uring-control", 0)] + r[("io_uring-control", 1)] - r[("io_uring", 0)] - r[("io_uring", 1)]) / 2)
        if len(d) >= 3:
            m, se = st.mean(d), st.stdev(d) / math.sqrt(len(d))
            print(f"| {cell[0]} {cell[1]} c={cell[2]} | {m * 100:+.2f} | {se * 100:.2f} | {'yes' if abs(m) > 2 * se else ''} |")
    print()

    # 4. steal
    stolen = [(s["steal"]["server_ms"], s["r"]) for s in ok if s.get("steal")]
    print("## 4. Steal\n")
    if len(stolen) > 10:
        print(f"- {len(stolen)} slices with steal recorded; server CPU steal per slice median {st.median(v for v, _ in stolen):.1f} ms, max {max(v for v, _ in stolen):.1f} ms; correlation with the residual {st.correlation([v for v, _ in stolen], [r for _, r in stolen]):+.3f}")
    else:
        print("- this run recorded no steal (runs before the field): nothing to say")


if __name__ == "__main__":
    main()
