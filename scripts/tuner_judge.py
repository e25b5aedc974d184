#!/usr/bin/env python3
"""How well the tuner's replay judges one candidate setting, on a point of the `unseen`
experiments. The default runs statically (no tuner); at every `--every` hours of simulated time:

- **model** — what the tuner predicts: sim.autotune.replay of its window (the last hour; longer
  when it holds fewer than 50 jobs) from the state at the window's start, for the candidate and for
  the default, mean over the tuner's 3 seeds; the candidate's weighted staleness / the default's;
- **truth** — the same window, start state and arrivals, but the workload's true costs, slowdowns
  and bursts (durations drawn, never measured ones), mean over `--truth-seeds` seeds: what a replay
  with a perfect cost model would predict;
- **switch, next 1.5 h** and **switch, to the end** — the run itself switched to the candidate at
  that instant (Reconfigure, as sim.selftune switches) against not switching, same seed: what
  the switch is worth over the next window and run-out, and over the rest of the run.

    python scripts/tuner_judge.py --point shifts:1.0 --setting '{"policy": "edf-p", "partitioner":
        "proportional", "k": 1, "allocation": "basic", "aggressive": true}' [--seeds 4] [--hours 12]

Prints one JSON line per (seed, time) and a summary. One process at nice 10; a few seconds per seed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.autotune import Rules, Window, current_setting, replay, score, window_of, with_settings  # noqa: E402
from sim.experiments import DEFAULT_LABEL, Line  # noqa: E402
from sim.selftune import SEEDS, _Recorder  # noqa: E402
from sim.simulator import Simulation, horizon_for, prepare  # noqa: E402
from sim.tune import label  # noqa: E402
from sim.unseen import EXPERIMENTS  # noqa: E402
from sim.workload import config_of  # noqa: E402
from warehouse.config import FreshetConfig  # noqa: E402
from warehouse.events import Reconfigure  # noqa: E402


def truth(config: FreshetConfig, window: Window, settings: dict[str, Any], seed: int, rules: Rules) -> float:
    """`replay`'s figure with the workload's true cost model instead of the fitted one."""
    cfg = prepare(with_settings(config, settings), seed)
    sim = Simulation(cfg, seed=seed, trace=window.trace, use_measured=False)
    sim.origin = 0.0  # slow periods on the run's clock, not the window's
    return score(sim, window, rules.runout, rules.runout_max)


def switched(config: FreshetConfig, seed: int, at: float, settings: dict[str, Any] | None, until: float) -> float:
    """Weighted staleness over (at, until] of the static run, switched to `settings` at `at`."""
    sim = Simulation(config, seed=seed)
    before = sim.run(until=at).weighted_staleness
    if settings is not None:
        sim._handle(Reconfigure(config=prepare(with_settings(config, settings), seed)), sim.env.now, count=False)
    return sim.run(until=until).weighted_staleness - before


def judge(name: str, u: float, seed: int, setting: dict[str, Any], every: float, hours: float,
          truth_seeds: int) -> list[dict[str, Any]]:
    exp = next(e for e in EXPERIMENTS.values() if any(w.name == name for w in e.workloads))
    wl = next(w for w in exp.workloads if w.name == name)
    data = exp.config(Line(DEFAULT_LABEL, {}), u, wl)
    data["scheduler"] = {**data["scheduler"], "autotune": "off"}
    cfg = prepare(config_of(data), seed)
    until = hours * 3600.0 if hours else horizon_for(cfg, exp.events)
    rules = Rules.of(cfg, SEEDS)
    span = cfg.scheduler.autotune_window
    mine = current_setting(cfg)
    cand = {**mine, **setting}
    sim = Simulation(cfg, seed=seed)
    rec = _Recorder(2 * rules.stretch * span, None)
    sim.writer = rec  # type: ignore[assignment]  # a TraceWriter's interface
    out = []
    t = every * 3600.0
    while t < until:
        sim.run(until=t)
        w = window_of(rec.trace(t), cfg, span, end=t, min_jobs=rules.min_jobs, stretch=rules.stretch)
        model = [sum(replay(cfg, w, s, sd, rules.runout, rules.runout_max) for sd in range(1, SEEDS + 1))
                 for s in (cand, mine)]  # sums over the same seeds: their ratio is that of the means
        true = [sum(truth(cfg, w, s, sd, rules) for sd in range(1, truth_seeds + 1)) for s in (cand, mine)]
        soon = min(t + (1.0 + rules.runout) * span, until)
        out.append({"workload": name, "U": u, "seed": seed, "hour": t / 3600.0, "jobs": w.jobs,
                    "setting": label(cand), "model": model[0] / model[1], "truth": true[0] / true[1],
                    "switch_next": switched(cfg, seed, t, cand, soon) / switched(cfg, seed, t, None, soon),
                    "switch_to_end": switched(cfg, seed, t, cand, until) / switched(cfg, seed, t, None, until)})
        t += every * 3600.0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--point", required=True, help="WORKLOAD:U")
    ap.add_argument("--setting", required=True, help="JSON: the scheduler fields the candidate changes")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--truth-seeds", type=int, default=6)
    ap.add_argument("--every", type=float, default=1.0, help="hours between judgements")
    ap.add_argument("--hours", type=float, default=0.0, help="simulated hours (default: the experiment's events)")
    a = ap.parse_args(argv)
    os.nice(10) if os.nice(0) < 10 else None
    name, _, x = a.point.partition(":")
    rows = []
    for seed in range(1, a.seeds + 1):
        for r in judge(name, float(x), seed, json.loads(a.setting), a.every, a.hours, a.truth_seeds):
            print(json.dumps(r), flush=True)
            rows.append(r)
    n = len(rows)
    err = sum(abs(math.log(r["model"] / r["truth"])) for r in rows) / n
    geo = {k: math.exp(sum(math.log(r[k]) for r in rows) / n) for k in ("model", "truth", "switch_next",
                                                                        "switch_to_end")}
    print(f"# {a.point} {rows[0]['setting']}: {n} judgements; geometric means: model {geo['model']:.3f}, truth "
          f"{geo['truth']:.3f}, switch over the next window {geo['switch_next']:.3f}, to the end "
          f"{geo['switch_to_end']:.3f}; ≤ 0.9: model {sum(r['model'] <= 0.9 for r in rows)}, truth "
          f"{sum(r['truth'] <= 0.9 for r in rows)}, next window {sum(r['switch_next'] <= 0.9 for r in rows)}, "
          f"to the end {sum(r['switch_to_end'] <= 0.9 for r in rows)}; mean |ln(model / truth)| {err:.3f}",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
