#!/usr/bin/env python3
"""How far is the best paper configuration from the lower bound (sim.bound)? The job sets of
`beyond` (Table 2 and those of Figs. 4-11) and of `unseen`, `unseen-long` and `unseen-phases` (or
any of `--only`: `unseen-new` and `unseen-more` too), under
the paper lines only (Max-Benefit with Global or Proportional k ∈ {1, 10}, each with c = 3 or
without), a few points each: per workload and U, the best line's relative lateness, the bound's
(both over the same ideal run) and their ratio, as a Markdown table.

    python scripts/bound_gap.py [--xs 0.8,1.0] [--events 4000] [--seeds 1] [--workers 2] [--only unseen,...]

`--events` applies to `beyond`'s job sets; the unseen families keep their own (their slow
periods and phases last hours).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.args import names_of  # noqa: E402
from sim import unseen  # noqa: E402
from sim.cli import positive_float  # noqa: E402
from sim.experiments import BEYOND, PAPER_LINES, run_experiment  # noqa: E402

EXPERIMENTS = {e.name: e for e in (BEYOND, *unseen.EXPERIMENTS.values())}
DEFAULT = ("beyond", "unseen", "unseen-long", "unseen-phases")


def utilizations(text: str) -> tuple[float, ...]:
    """`--xs` (argparse type): comma-separated utilizations, each a number > 0."""
    return tuple(positive_float(x) for x in text.split(","))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--xs", type=utilizations, default="0.8,1.0", help="utilizations (default: 0.8,1.0)")
    ap.add_argument("--events", type=int, default=4000, help="events per point of beyond's job sets")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", type=names_of(tuple(EXPERIMENTS)), default=list(DEFAULT),
                    help=f"comma-separated, of {', '.join(EXPERIMENTS)} (default: {','.join(DEFAULT)})")
    a = ap.parse_args()
    xs, exps = a.xs, [EXPERIMENTS[n] for n in a.only]
    print("| experiment | workload | U | best paper line | its relative lateness | bound | best / bound |")
    print("|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for exp in exps:
        e = dataclasses.replace(exp, lines=PAPER_LINES, verdict=None)
        res = run_experiment(e, events=a.events if exp is BEYOND else None, seeds=a.seeds, workers=a.workers,
                             xs=xs)
        for wl in e.workload_names():
            curves = {label: dict(pts) for label, pts in res.curves(wl).items()}
            bound = dict(res.bounds(wl)).get("lower bound", {})
            for x in xs:
                best = min(curves, key=lambda lb: curves[lb].get(x, float("inf")))
                rl, b = curves[best][x], bound.get(x)
                ratio = f"{rl / b:.2f}" if b else "—"
                print(f"| {exp.name} | {wl} | {x:g} | {best} | {rl:.3g} | {b:.3g} | {ratio} |" if b else
                      f"| {exp.name} | {wl} | {x:g} | {best} | {rl:.3g} | — | — |", flush=True)
    beyond = f"; beyond at {a.events} events per point" if BEYOND in exps else ""
    print(f"\n({time.perf_counter() - t0:.0f} s; {a.seeds} seed(s){beyond})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
