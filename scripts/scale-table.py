#!/usr/bin/env python3
"""The scale table of a scripts/scale-run.sh folder: OUT/workers-N/<run>/summary.json for each
worker count N → OUT/scale.md.

Per worker count, kept alive at each connection level and a connection per request: req/s
(median of saturated slices) and CPU µs per request of io_uring, rx and legacy under `relaxed`;
the fallback's cost (the io_uring server under `no-io-uring` against `relaxed`, paired CPU per
request with its interval); rx against legacy; and scaling efficiency, req/s at N workers over
N times one worker's (only where the one-worker run is in the folder). Every row says whether
the servers were saturated (a scale figure whose server had idle CPU measured the driver).

    scripts/scale-table.py OUT
"""

import json
import sys
from pathlib import Path


def runs(out: Path):
    """(workers, summary) for each workers-N folder, by N."""
    found = []
    for d in sorted(out.glob("workers-*")):
        n = int(d.name.split("-", 1)[1])
        summaries = sorted(p for p in d.glob("*/summary.json") if p.parent.name != "latest")
        if summaries:
            found.append((n, json.loads(summaries[-1].read_text())))
    return sorted(found, key=lambda x: x[0])


def row(s, profile, config, load, conns):
    for r in s["rows"]:
        if (r["profile"], r["config"], r["load"], r["conns"]) == (profile, config, load, conns):
            return r
    return None


def comparison(s, config, profile, baseline, base_profile, load, conns, metric="cpu_per_request"):
    for c in s["comparisons"]:
        if (c["config"], c["profile"], c["baseline"], c["baseline_profile"], c["load"], c["conns"], c["metric"]) == (
            config, profile, baseline, base_profile, load, conns, metric
        ):
            return c
    return None


def change(c):
    if c is None:
        return "–"
    pct = lambda r: f"{(r - 1) * 100:+.1f}".replace("-", "−")
    if c["significant"]:
        return f"{pct(c['ratio_median'])} % [{pct(c['ci95_low'])}, {pct(c['ci95_high'])}]"
    return f"≈ [{pct(c['ci95_low'])}, {pct(c['ci95_high'])}]"


def rate(x):
    return f"{x / 1000:.0f}k" if x >= 100_000 else f"{x / 1000:.1f}k"


def main():
    out = Path(sys.argv[1])
    found = runs(out)
    if not found:
        sys.exit(f"scale-table.py: no workers-N/<run>/summary.json under {out}")
    one = dict(found).get(1)
    lines = ["# Scale: the native matrix at several worker counts", ""]
    machine = out / "machine.txt"
    if machine.exists():
        lines += ["```", machine.read_text().strip(), "```", ""]
    cells = [("keepalive", c) for c in (64, 256, 512)] + [("per-request", 64)]
    lines += [
        "| workers | load | conns | io_uring req/s · µs/req | rx req/s · µs/req | legacy req/s · µs/req "
        "| the block on io_uring (CPU/req) | rx vs legacy (CPU/req) | efficiency io_uring / rx | servers saturated |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, s in found:
        for load, conns in cells:
            rs = {c: row(s, "relaxed", c, load, conns) for c in ("io_uring", "rx", "legacy")}
            if not all(rs.values()):
                continue
            fig = lambda r: f"{rate(r['rps_median'])} · {r['cpu_us_per_request']:.2f}"
            eff = "–"
            if one is not None and n > 1:
                parts = []
                for c in ("io_uring", "rx"):
                    base = row(one, "relaxed", c, load, conns)
                    parts.append(f"{rs[c]['rps_median'] / (n * base['rps_median']):.2f}" if base else "–")
                eff = " / ".join(parts)
            saturated = all((r.get("server_cpu") or 0) >= 90 for r in rs.values())
            busy = ", ".join(f"{c} {r.get('server_cpu') or 0:.0f} %" for c, r in rs.items())
            lines.append(
                f"| {n} | {load} | {conns} | {fig(rs['io_uring'])} | {fig(rs['rx'])} | {fig(rs['legacy'])} "
                f"| {change(comparison(s, 'io_uring', 'no-io-uring', 'io_uring', 'relaxed', load, conns))} "
                f"| {change(comparison(s, 'rx', 'relaxed', 'legacy', 'relaxed', load, conns))} "
                f"| {eff} | {'yes' if saturated else 'no: ' + busy} |"
            )
    (out / "scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
