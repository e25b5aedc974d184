#!/usr/bin/env python3
"""Where the tuner's screen spends its replays, on one point of the `unseen` experiments (the
default line, so its tuner runs): the tuned `freshet sim run` of the point, with every replay of
the screen (the first seed, under the bar: sim.autotune.score with `above`) run on to its end
beside the bar, so each one's weighted staleness so far at the CHECKS − 1 checkpoints and its
whole figure are known. What each replay returns, and hands the screen as its trail, is what
`score` returns: the run and its decisions are the tuned run's own. It prints:

- **stops** — how many screen replays came through the bar (exact figures, ≤ the bar) and, for
  the others, at which checkpoint (of CHECKS) the bar stopped them;
- **spread** — each replay's whole figure over the setting in force's, by band;
- **floor** — the floor under the rest (sim.autotune.staleness_floor, the same for every
  setting) as a share of what the rest of each replay turned out to be, median at a few
  checkpoints, and how often it was above the rest (`floor_above`: never, if it is a floor);
- **rule** — what stopping a replay at the first checkpoint k ≥ K where its staleness so far is
  at least R times the setting in force's would save (checkpoints run, as a share of the bar's)
  and how many replays that came through the bar it would have stopped (`lost`).

    python scripts/tuner_screen.py --point batch:1.2 [--events 4000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sim.autotune as autotune  # noqa: E402
from scripts.revtree import describe_head  # noqa: E402
from scripts.tuner_cost import point  # noqa: E402
from sim.selftune import attach  # noqa: E402
from sim.simulator import simulate  # noqa: E402
from warehouse.config import parse_config  # noqa: E402

SCORE = autotune.score
AT = (1, 8, 16, 20, 23)  # checkpoints the floor's share is shown at
BANDS = (0.8, 0.85, 0.95, 1.05, 1.15)  # a replay's figure over the setting in force's, cut here
RULES = [(k, r) for k in (4, 8, 12) for r in (1.0, 1.05, 1.1, 1.2, 1.3)]


class Screens:
    """Every evaluation's replays: the setting in force's trail, and each screened candidate's."""

    def __init__(self) -> None:
        self.evaluations: list[dict[str, Any]] = []

    def score(self, sim: Any, window: Any, runout: float = 0.5, runout_max: float = math.inf,
              above: float = math.inf, floor: Any = None, trail: list[float] | None = None) -> float:
        """sim.autotune.score, with a screen's replay run on to its end and recorded."""
        if above == math.inf:
            v = SCORE(sim, window, runout, runout_max, above, floor, trail)
            if trail is not None:  # the setting in force, first seed: an evaluation's screen begins
                self.evaluations.append({"current": list(trail), "total": v, "replays": []})
            return v
        full: list[float] = []
        total = SCORE(sim, window, runout, runout_max, math.inf, None, full)
        if floor is None:
            floor = autotune.staleness_floor(sim.cfg, window, *autotune.checkpoints(window, runout, runout_max))
        self.evaluations[-1]["replays"].append({"trail": full, "total": total, "above": above, "floor": list(floor)})
        bar = above * (1.0 + 1e-9)  # as score's
        for i, (s, rest) in enumerate(zip(full, floor, strict=True)):
            if s + rest > bar:
                if trail is not None:
                    trail.extend(full[:i + 1])
                return s + rest
        if trail is not None:
            trail.extend(full)
        return total


def stop(r: dict[str, Any]) -> int | None:
    """The checkpoint (1-based) the bar stopped replay `r` at; None: it came through."""
    bar = r["above"] * (1.0 + 1e-9)
    return next((i + 1 for i, (s, rest) in enumerate(zip(r["trail"], r["floor"], strict=True)) if s + rest > bar), None)


def report(evaluations: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures the module docstring lists, from the recorded screens."""
    pairs = [(e, r) for e in evaluations for r in e["replays"]]
    stops = [stop(r) for _, r in pairs]
    through = sum(s is None for s in stops)
    run = [autotune.CHECKS if s is None else s for s in stops]
    ratios = [r["total"] / e["total"] for e, r in pairs if e["total"] > 0]
    edges = [0.0, *BANDS, math.inf]
    spread = {f"{lo:g}-{hi:g}": sum(lo < x <= hi for x in ratios) for lo, hi in zip(edges, edges[1:], strict=False)}
    floor = {}
    for k in AT:
        shares = [r["floor"][k - 1] / rest for _, r in pairs if (rest := r["total"] - r["trail"][k - 1]) > 0]
        floor[k] = round(statistics.median(shares), 3) if shares else None
    above = sum(f > (r["total"] - s) * (1.0 + 1e-9) + 1e-6 for _, r in pairs
                for s, f in zip(r["trail"], r["floor"], strict=True))
    rules = []
    for k0, ratio in RULES:
        ran = lost = 0
        for (e, r), s, n in zip(pairs, stops, run, strict=True):
            cur = e["current"]
            hit = next((k + 1 for k in range(k0 - 1, len(cur)) if cur[k] > 0 and r["trail"][k] >= ratio * cur[k]), None)
            m = n if hit is None else min(n, hit)
            lost += s is None and m < n
            ran += m
        rules.append({"k": k0, "ratio": ratio, "checkpoints": round(ran / sum(run), 3) if run else None, "lost": lost})
    half = sorted(s for s in stops if s is not None)
    return {"replays": len(pairs), "through": through,
            "stopped_at": {"median": statistics.median(half) if half else None,
                           "quartiles": statistics.quantiles(half, n=4) if len(half) > 1 else half},
            "checkpoints_run": round(sum(run) / (autotune.CHECKS * len(run)), 3) if run else None,
            "spread": spread, "floor_share": floor, "floor_above": above, "rules": rules}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--point", default="batch:1.2", help="WORKLOAD:U of the unseen experiments (default batch:1.2)")
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    name, _, u = a.point.partition(":")
    cfg = parse_config(point(name, float(u)), source=a.point)
    screens = Screens()
    autotune.score = screens.score  # (evaluate calls the module's score)
    try:
        result = simulate(cfg, seed=a.seed, events=a.events, tuner=attach).to_json()
    finally:
        autotune.score = SCORE
    out = {"point": a.point, "events": a.events, "seed": a.seed, "relative_lateness": result["relative_lateness"],
           "autotune": {k: result["autotune"][k] for k in ("evaluations", "results", "screens", "simulations")},
           **report(screens.evaluations)}
    print(json.dumps(out))
    print(f"\n{a.point}, {a.events} events, seed {a.seed}, at {describe_head()}: {out['replays']} screen replays, "
          f"{out['through']} through the bar, the rest stopped at checkpoint {out['stopped_at']['median']} of "
          f"{autotune.CHECKS} (median); {out['checkpoints_run']:.0%} of all checkpoints run")
    print("figure / the setting in force's: " + ", ".join(f"{b} {n}" for b, n in out["spread"].items()))
    print("floor / the rest, median: " + ", ".join(f"checkpoint {k} {v}" for k, v in out["floor_share"].items())
          + f"; above the rest {out['floor_above']} times")
    for r in out["rules"]:
        print(f"stop at k >= {r['k']:2d} once {r['ratio']:.2f}x the setting in force: "
              f"{r['checkpoints']:.2f} of the checkpoints, {r['lost']} lost")
    return 0


if __name__ == "__main__":
    sys.exit(main())
