#!/usr/bin/env python3
"""How much of a `beyond` ratio is the seeds: the default against the best paper line at
a few points, over many seeds instead of the experiment's two.

`freshet sim experiment beyond` judges each point by the mean of seeds 1 and 2. Under sustained
overload a run's relative lateness varies by up to 2x from seed to seed (the backlog's history
depends on every drawn duration), so a two-seed ratio moves by several percent with no change to
the scheduler. This prints, per point: the best paper line and the default by their mean over
`--seeds` seeds, the ratio of those means, the two-seed ratio the experiment sees (seeds 1-2) and
the spread of that two-seed ratio over disjoint seed pairs (1-2, 3-4, ...). `--chop C` adds
Max-Benefit global with a fixed c = C (§3.4) as an extra line, to see whether any fixed c beats both.

    python scripts/beyond_seeds.py --points fig7:1.1,fig6:1.1 --seeds 12 [--events 40000] [--chop 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.experiments import BEYOND, DEFAULT_LABEL, PAPER_LINES, Line, run_experiment  # noqa: E402


def _point(arg: str) -> tuple[str, float]:
    name, _, x = arg.partition(":")
    names = [w.name for w in BEYOND.workloads]
    if name not in names or not x:
        raise argparse.ArgumentTypeError(f"{arg!r}: expected WORKLOAD:U with WORKLOAD one of {', '.join(names)}")
    return name, float(x)


def spread(name: str, x: float, *, seeds: int, events: int, chops: tuple[float, ...] = ()) -> dict:
    """The default against the best paper line at one point over seeds 1..`seeds` (≥ 2)."""
    extra = tuple(Line(f"MB global, c={c:g}", {"policy": "max-benefit", "partitioner": "global", "chop": c})
                  for c in chops)
    paper = [ln.label for ln in PAPER_LINES]
    wl = next(w for w in BEYOND.workloads if w.name == name)
    exp = dataclasses.replace(BEYOND, workloads=(wl,), lines=(*PAPER_LINES, *extra, Line(DEFAULT_LABEL, {})))
    res = run_experiment(exp, events=events, seeds=seeds, workers=1, xs=(x,))
    by: dict[str, list[float]] = {}
    for r in res.rows:
        by.setdefault(r["line"], []).append(r["relative_lateness"])  # rows are in seed order

    def mean(label: str, s: slice = slice(None)) -> float:
        v = by[label][s]
        return sum(v) / len(v)

    best = min(paper, key=mean)
    pairs = [mean(DEFAULT_LABEL, slice(i, i + 2)) / min(mean(lb, slice(i, i + 2)) for lb in paper)
             for i in range(0, seeds - 1, 2)]
    per_seed = [a / min(by[lb][i] for lb in paper) for i, a in enumerate(by[DEFAULT_LABEL])]
    avg = sum(per_seed) / len(per_seed)
    return {
        "best": best, "best_mean": mean(best), "default_mean": mean(DEFAULT_LABEL),
        "ratio": mean(DEFAULT_LABEL) / mean(best), "pairs": pairs,
        "per_seed_sd": math.sqrt(sum((r - avg) ** 2 for r in per_seed) / (len(per_seed) - 1)),
        "extra": {ln.label: mean(ln.label) / mean(best) for ln in extra},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", required=True, type=lambda s: [_point(p) for p in s.split(",")],
                    help="comma-separated WORKLOAD:U, e.g. fig7:1.1,fig6:1.1")
    ap.add_argument("--seeds", type=int, default=12, help="seeds 1..K (default 12; the experiment uses 2)")
    ap.add_argument("--events", type=int, default=BEYOND.events, help="events per point (default: the experiment's)")
    ap.add_argument("--chop", type=float, action="append", default=[], metavar="C",
                    help="also run Max-Benefit global with fixed c = C (repeatable)")
    args = ap.parse_args(argv)
    if args.seeds < 2:
        ap.error("--seeds must be at least 2")
    t0 = time.perf_counter()
    for name, x in args.points:
        r = spread(name, x, seeds=args.seeds, events=args.events, chops=tuple(args.chop))
        print(f"{name} U={x:g}: best paper line over {args.seeds} seeds {r['best']} {r['best_mean']:.3f}, default "
              f"{r['default_mean']:.3f}: ratio {r['ratio']:.3f}; seeds 1-2 (the experiment's) {r['pairs'][0]:.3f}; "
              f"two-seed ratios over disjoint pairs {min(r['pairs']):.3f}-{max(r['pairs']):.3f}; "
              f"per-seed ratio s.d. {r['per_seed_sd']:.3f}", flush=True)
        for label, q in r["extra"].items():
            print(f"    {label}: {q:.3f} of the best paper line", flush=True)
    print(f"({args.events} events per run, one process, {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
