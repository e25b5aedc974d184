#!/usr/bin/env python3
"""Where the tuner's screen spends its replays, on one point of the `unseen` experiments (the
default line, so its tuner runs): the tuned `freshet sim run` of the point, with every replay of
the screen (the first seed under the bar: sim.autotune.score with `above`) run to its end while
recording where the bar would have stopped it. A bounded replay looks at CHECKS − 1 checkpoints,
k/CHECKS of the way through the window and its run-out (k = 1 … CHECKS − 1; CHECKS is the end),
and stops at the first where its weighted staleness so far plus the floor under the rest is past
the bar. What each replay hands the screen (its figure and its trail) is what `score` returns,
so the run and its decisions are the tuned run's own. It prints:

- **stops** — at which checkpoint the bar stopped each replay (median, quartiles), how many ran
  to the end, and how many came through the bar (their whole figure at or below it: candidates
  for the finalists) and beat the margin (at most 1 − margin of the setting in force's);
- **spread** — each replay's whole figure over the setting in force's, by band;
- **floor** — the floor under the rest (sim.autotune.staleness_floor, the same for every
  setting) as a share of the replay's own staleness from that checkpoint to the end, median at a
  few checkpoints, and how often it was above that (`floor_above`: never, if it is a floor);
- **rule** — what stopping a replay at the first checkpoint k ≥ K where its staleness so far is
  at least R times the setting in force's would save (the checkpoints run, as a share of those the
  bar runs), and how many replays that came through the bar (`lost`) or beat the margin
  (`lost_margin`) it would have stopped; and the most a replay that came through was behind the
  setting in force's staleness so far at a checkpoint k ≥ 4 (`through_behind`).

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
from scripts.tuner_cost import parse_point, point  # noqa: E402
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
            if trail is not None:  # (sim.autotune.evaluate asks a trail, without a bar, of the
                # setting in force's first-seed replay alone): an evaluation's screen begins
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
    """The checkpoint (1-based) the bar stopped replay `r` at; None: it ran to the end."""
    bar = r["above"] * (1.0 + 1e-9)
    return next((i + 1 for i, (s, rest) in enumerate(zip(r["trail"], r["floor"], strict=True)) if s + rest > bar), None)


def report(evaluations: list[dict[str, Any]], margin: float = 0.2) -> dict[str, Any]:
    """The figures the module docstring lists, from the recorded screens (`margin`: the tuner's)."""
    pairs = [(e, r) for e in evaluations for r in e["replays"]]
    stops = [stop(r) for _, r in pairs]
    run = [autotune.CHECKS if s is None else s for s in stops]
    through = [r["total"] <= r["above"] * (1.0 + 1e-9) for _, r in pairs]  # at or below the bar
    ratios = [r["total"] / e["total"] if e["total"] > 0 else (1.0 if r["total"] == 0 else math.inf) for e, r in pairs]
    beat = [x <= 1.0 - margin for x in ratios]
    edges = [-math.inf, *BANDS, math.inf]
    spread = {(f"<={hi:g}" if lo == -math.inf else f">{lo:g}" if hi == math.inf else f"{lo:g}-{hi:g}"):
              sum(lo < x <= hi for x in ratios) for lo, hi in zip(edges, edges[1:], strict=False)}
    floor = {}
    for k in AT:
        shares = [r["floor"][k - 1] / rest for _, r in pairs if (rest := r["total"] - r["trail"][k - 1]) > 0]
        floor[k] = round(statistics.median(shares), 3) if shares else None
    above = sum(f > (r["total"] - s) * (1.0 + 1e-9) + 1e-6 for _, r in pairs
                for s, f in zip(r["trail"], r["floor"], strict=True))
    behind = [r["trail"][k] / e["current"][k] for (e, r), ok in zip(pairs, through, strict=True) if ok
              for k in range(3, len(e["current"])) if e["current"][k] > 0]
    rules = []
    for k0, ratio in RULES:
        ran = lost = lost_margin = 0
        for (e, r), n, ok, won in zip(pairs, run, through, beat, strict=True):
            cur = e["current"]
            hit = next((k + 1 for k in range(k0 - 1, len(cur)) if cur[k] > 0 and r["trail"][k] >= ratio * cur[k]), None)
            m = n if hit is None else min(n, hit)
            lost += ok and m < n
            lost_margin += won and m < n
            ran += m
        rules.append({"k": k0, "ratio": ratio, "checkpoints": round(ran / sum(run), 3) if run else None, "lost": lost,
                      "lost_margin": lost_margin})
    stopped = sorted(s for s in stops if s is not None)
    return {"replays": len(pairs), "ran_to_end": stops.count(None), "through": sum(through), "beat_margin": sum(beat),
            "stopped_at": {"median": statistics.median(stopped) if stopped else None,
                           "quartiles": statistics.quantiles(stopped, n=4) if len(stopped) > 1 else stopped},
            "checkpoints_run": round(sum(run) / (autotune.CHECKS * len(run)), 3) if run else None,
            "spread": spread, "floor_share": floor, "floor_above": above,
            "through_behind": round(max(behind), 3) if behind else None, "rules": rules}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--point", type=parse_point, default="batch:1.2",
                    help="WORKLOAD:U of the unseen experiments (default batch:1.2)")
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    name, u = a.point
    label = f"{name}:{u:g}"
    cfg = parse_config(point(name, u), source=label)
    screens = Screens()
    autotune.score = screens.score  # (evaluate calls the module's score)
    try:
        result = simulate(cfg, seed=a.seed, events=a.events, tuner=attach).to_json()
    finally:
        autotune.score = SCORE
    out = {"point": label, "events": a.events, "seed": a.seed, "relative_lateness": result["relative_lateness"],
           "autotune": {k: result["autotune"][k] for k in ("evaluations", "results", "screens", "simulations")},
           **report(screens.evaluations, cfg.scheduler.autotune_margin)}
    print(json.dumps(out))
    print(f"\n{label}, {a.events} events, seed {a.seed}, at {describe_head()}: {out['replays']} screen replays; "
          f"{out['through']} came through the bar, {out['beat_margin']} beat the margin, {out['ran_to_end']} ran to "
          f"the end; the bar stopped the others at checkpoint {out['stopped_at']['median']} of {autotune.CHECKS} "
          f"(median); {out['checkpoints_run']:.0%} of all checkpoints run")
    print("figure / the setting in force's: " + ", ".join(f"{b} {n}" for b, n in out["spread"].items()))
    print("floor / the rest, median: " + ", ".join(f"checkpoint {k} {v}" for k, v in out["floor_share"].items())
          + f"; above the rest {out['floor_above']} times")
    if out["through_behind"] is not None:
        print(f"a replay that came through was at most {out['through_behind']}x the setting in force's staleness so "
              "far at a checkpoint k >= 4")
    for r in out["rules"]:
        print(f"stop at k >= {r['k']:2d} once {r['ratio']:.2f}x the setting in force: "
              f"{r['checkpoints']:.2f} of the bar's checkpoints, {r['lost']} through the bar lost "
              f"({r['lost_margin']} beating the margin)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
