#!/usr/bin/env python3
"""What the best tuner choosing among `freshet sim tune`'s settings could do: two oracle
bounds per point of the `unseen` experiments, as ratios to the best paper line (as `beyond_ratios`).

- **static oracle** — every setting of the tuner's grid (`sim.tune.candidates`, 90 settings) run
  statically over the whole run, the same seeds, horizon and ideal runs as the experiment; the one
  with the lowest mean relative lateness over the seeds. It is chosen on the seeds it is scored on,
  so it flatters the oracle: a bound, not a setting one could pick in advance.
- **phase oracle** — for a workload whose phases are known in advance (its `sim.slowdown` and
  `sim.bursts`: which are on), a run that switches, exactly at each phase boundary (no lag, no
  cool-down), to the setting assigned to the phase it enters, through the Scheduler's Reconfigure
  event (as sim.selftune switches). The assignment (phase → setting) is searched by coordinate
  descent over the whole grid from the static oracle's setting: per phase, every setting with the
  others fixed, until a round changes nothing. A local search over switchers that switch at the
  boundaries only: what it finds is reachable, a better assignment or a switch off the boundary
  may exist.

    python scripts/tuner_oracle.py [--points phases:1.0,batch:1.2] [--seeds 4] [--low] [--out oracle.json]

`--low` adds the U = 0.8 points. The current tuner's ratio is read from docs/figures/<experiment>.csv.
Runs one process at nice 10 (each run is a fraction of a second).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.autotune import with_settings  # noqa: E402
from sim.experiments import PAPER_LINES, Experiment, Line, Workload, beyond_ratios, load_csv  # noqa: E402
from sim.simulator import Simulation, horizon_for, ideal_config, prepare  # noqa: E402
from sim.tune import candidates, label  # noqa: E402
from sim.unseen import EXPERIMENTS  # noqa: E402
from sim.workload import config_of  # noqa: E402
from warehouse.config import FreshetConfig  # noqa: E402
from warehouse.events import Reconfigure  # noqa: E402

FIGURES = Path(__file__).resolve().parent.parent / "docs" / "figures"
STATIC = {"autotune": "off"}  # every oracle run is static between its switches: no tuner of its own
Phase = tuple[bool, ...]


# ---- phases and switching ------------------------------------------------------------------------
def _cycles(cfg: FreshetConfig) -> list[tuple[str, float, float, float]]:
    """(name, normal, cycle, offset) of each on/off cycle the config's sim section knows in advance:
    the slowdown (slow after `normal`, sim.simulator) and each burst (sim.bursts)."""
    out = []
    sd = cfg.sim.slowdown
    if sd.slow > 0 and sd.factor != 1.0:
        out.append(("slow", sd.normal, sd.normal + sd.slow, 0.0))
    for bu in cfg.sim.bursts:
        name = bu.tables[0] if len(bu.tables) == 1 else f"{bu.tables[0]} ({len(bu.tables)} tables)"
        out.append((f"burst {name}", bu.normal, bu.normal + bu.slow, bu.offset))
    return out


def phase_at(cfg: FreshetConfig, t: float) -> Phase:
    """Which of the config's cycles are on (slow, or in a burst) at time t."""
    return tuple((t - off) % cyc >= normal for _, normal, cyc, off in _cycles(cfg))


def phase_name(cfg: FreshetConfig, ph: Phase) -> str:
    on = [name for (name, *_), b in zip(_cycles(cfg), ph, strict=True) if b]
    return " + ".join(on) or "normal"


def phases(cfg: FreshetConfig, until: float) -> list[tuple[float, Phase]]:
    """The run's phases up to `until`: (start, phase), consecutive ones different; the first at 0."""
    cuts = {0.0}
    for _, normal, cyc, off in _cycles(cfg):
        for edge in (off % cyc, (off + normal) % cyc):
            t = edge
            while t < until:
                cuts.add(t)
                t += cyc
    out: list[tuple[float, Phase]] = []
    for t in sorted(cuts):
        ph = phase_at(cfg, t)
        if not out or out[-1][1] != ph:
            out.append((t, ph))
    return out


def switch_at(sim: Simulation, base: FreshetConfig, plan: list[tuple[float, dict[str, Any]]]) -> None:
    """At each (time, settings) of `plan` (time > 0), reconfigure `sim`'s Scheduler to `base` with
    those scheduler settings, through the simulation's one door (as sim.selftune switches)."""
    for t, s in plan:
        cfg = prepare(with_settings(base, s), sim.seed)

        def fire(_ev: Any, cfg: FreshetConfig = cfg) -> None:
            sim._handle(Reconfigure(config=cfg), sim.env.now, count=False)

        sim.env.timeout(t - sim.env.now).callbacks.append(fire)


def run(data: dict[str, Any], seed: int, until: float, plan: list[tuple[float, dict[str, Any]]]) -> float:
    """Weighted staleness of one run: plan[0]'s settings from 0, then a switch at each later entry
    whose settings differ from the one before."""
    base = config_of({**data, "scheduler": {**data["scheduler"], **STATIC}})
    cfg = prepare(with_settings(base, plan[0][1]), seed)
    sim = Simulation(cfg, seed=seed)
    later = [(t, s) for (t, s), (_, prev) in zip(plan[1:], plan, strict=False) if s != prev]
    switch_at(sim, base, later)
    return sim.run(until=until).weighted_staleness


# ---- one point -----------------------------------------------------------------------------------
class Point:
    """One (experiment, workload, U): its configs, horizon and ideal runs per seed; memoised runs."""

    def __init__(self, exp: Experiment, wl: Workload, x: float, seeds: range) -> None:
        self.exp, self.wl, self.x, self.seeds = exp, wl, x, seeds
        self.data = exp.config(Line("oracle", STATIC), x, wl)
        self.cfg = config_of(self.data)
        self.until = horizon_for(self.cfg, exp.events)
        self.ideal = {s: Simulation(ideal_config(prepare(self.cfg, s)), seed=s).run(until=self.until)
                      .weighted_staleness for s in self.seeds}
        self.grid = candidates(self.cfg)
        self.phases = phases(self.cfg, self.until)
        self.memo: dict[str, float] = {}
        self.runs = 0

    def lateness(self, assign: dict[Phase, int] | int) -> float:
        """Mean relative lateness over the seeds of grid settings: one (static), or one per phase."""
        if isinstance(assign, int):
            assign = {ph: assign for _, ph in self.phases}
        key = json.dumps(sorted((str(k), v) for k, v in assign.items()))
        if key not in self.memo:
            plan = [(t, self.grid[assign[ph]]) for t, ph in self.phases]
            self.memo[key] = sum(run(self.data, s, self.until, plan) / self.ideal[s] for s in self.seeds) / len(self.seeds)
            self.runs += len(self.seeds)
        return self.memo[key]

    def paper(self) -> dict[str, float]:
        """Each paper line's mean relative lateness, configured as the experiment configures it."""
        out = {}
        for ln in PAPER_LINES:
            data = self.exp.config(Line(ln.label, {**ln.scheduler, **STATIC}), self.x, self.wl)
            out[ln.label] = sum(run(data, s, self.until, [(0.0, {})]) / self.ideal[s] for s in self.seeds) / len(self.seeds)
        return out

    def phase_oracle(self, start: int, rounds: int = 3) -> tuple[dict[Phase, int], float]:
        """Coordinate descent over per-phase assignments from the static setting `start`."""
        kinds = list(dict.fromkeys(ph for _, ph in self.phases))
        assign = {ph: start for ph in kinds}
        best = self.lateness(assign)
        for _ in range(rounds):
            moved = False
            for ph in kinds:
                for i in range(len(self.grid)):
                    trial = {**assign, ph: i}
                    v = self.lateness(trial)
                    if v < best - 1e-12:
                        assign, best, moved = trial, v, True
            if not moved:
                break
        return assign, best


def tuner_ratios() -> dict[tuple[str, float], float]:
    """The current tuner's ratio per (workload, U), from the experiments' published CSVs."""
    out = {}
    for exp in EXPERIMENTS.values():
        path = FIGURES / f"{exp.name}.csv"
        if path.exists():
            for wl, row in beyond_ratios(load_csv(exp, path).all_curves()).items():
                out.update({(wl, x): r for x, (r, _) in row.items()})
    return out


def measure(exp: Experiment, wl: Workload, x: float, seeds: int, holdout: int, say: Any) -> dict[str, Any]:
    t0 = time.process_time()
    p = Point(exp, wl, x, range(1, seeds + 1))
    paper = p.paper()
    best_paper = min(paper, key=paper.__getitem__)
    static = sorted(range(len(p.grid)), key=p.lateness)
    top = static[0]
    say(f"  {wl.name} U={x:g}: best paper {best_paper} {paper[best_paper]:.3f}, static oracle "
        f"{label(p.grid[top])} {p.lateness(top):.3f} ({time.process_time() - t0:.0f}s)")
    res: dict[str, Any] = {
        "experiment": exp.name, "workload": wl.name, "U": x, "events": exp.events, "seeds": seeds,
        "paper": paper, "best_paper": best_paper, "best_paper_lateness": paper[best_paper],
        "default_static": p.lateness(next(i for i, s in enumerate(p.grid)
                                          if all(s[k] == "auto" for k in ("policy", "partitioner", "chop")))),
        "static_top": [{"setting": label(p.grid[i]), "lateness": p.lateness(i)} for i in static[:5]],
        "static_oracle": label(p.grid[top]), "static_lateness": p.lateness(top),
        "static_ratio": p.lateness(top) / paper[best_paper],
    }
    if len(p.phases) > 1:
        assign, v = p.phase_oracle(top)
        res.update({"phase_lateness": v, "phase_ratio": v / paper[best_paper],
                    "phase_settings": {phase_name(p.cfg, ph): label(p.grid[i]) for ph, i in assign.items()},
                    "phase_count": len(p.phases)})
        say(f"  {wl.name} U={x:g}: phase oracle {v:.3f} ({res['phase_ratio']:.3f}) {res['phase_settings']}")
    if holdout:  # the oracles' choices scored on seeds they were not chosen on
        q = Point(exp, wl, x, range(seeds + 1, seeds + holdout + 1))
        qp = q.paper()
        qbest = min(qp.values())
        res["holdout"] = {"seeds": [q.seeds.start, q.seeds.stop - 1], "best_paper_lateness": qbest,
                          "static_ratio": q.lateness(top) / qbest}
        if "phase_ratio" in res:
            res["holdout"]["phase_ratio"] = q.lateness(assign) / qbest
        say(f"  {wl.name} U={x:g}: on seeds {seeds + 1}-{seeds + holdout}: {res['holdout']}")
    res["runs"], res["cpu_seconds"] = p.runs, time.process_time() - t0
    return res


def _table(rows: list[dict[str, Any]]) -> str:
    held = any("holdout" in r for r in rows)
    head = ("| workload | U | best paper line | static oracle | ratio | phase oracle | ratio | per phase | "
            + ("held out: static, phase | " if held else "") + "tuner (docs) |\n|---|---|---|---|---|---|---|---|"
            + ("---|" if held else "") + "---|")
    body = []
    for r in rows:
        ph = r.get("phase_ratio")
        per = "; ".join(f"{k}: {v}" for k, v in r.get("phase_settings", {}).items())
        tuner = r.get("tuner_ratio")
        ho = r.get("holdout", {})
        line = (f"| {r['workload']} | {r['U']:g} | {r['best_paper']} {r['best_paper_lateness']:.3f} | "
                f"{r['static_oracle']} {r['static_lateness']:.3f} | {r['static_ratio']:.3f} | "
                + (f"{r['phase_lateness']:.3f} | {ph:.3f} | {per} | " if ph is not None else "– | – | – | "))
        if held:
            line += (f"{ho['static_ratio']:.3f}, " + (f"{ho['phase_ratio']:.3f}" if "phase_ratio" in ho else "–")
                     + " | ") if ho else "– | "
        body.append(line + (f"{tuner:.3f} |" if tuner is not None else "– |"))
    return "\n".join([head, *body])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", default="", help="WORKLOAD:U,... (default: every point with U ≥ 1.0)")
    ap.add_argument("--low", action="store_true", help="also the U < 1.0 points")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--holdout", type=int, default=0, help="score the oracles' choices on this many further seeds")
    ap.add_argument("--out", type=Path, help="write every figure as JSON here")
    a = ap.parse_args(argv)
    os.nice(10)
    every = [(e, w, x) for e in EXPERIMENTS.values() for w in e.workloads for x in e.xs]
    if a.points:
        want = {(n, float(x)) for n, _, x in (p.partition(":") for p in a.points.split(","))}
        unknown = want - {(w.name, x) for _, w, x in every}
        if unknown:
            ap.error(f"no such point(s): {sorted(unknown)}; points are {sorted({(w.name, x) for _, w, x in every})}")
        todo = [(e, w, x) for e, w, x in every if (w.name, x) in want]
    else:
        todo = [(e, w, x) for e, w, x in every if x >= 1.0 or a.low]
    tuned = tuner_ratios()
    t0 = time.perf_counter()
    rows = []
    for i, (e, w, x) in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}] {e.name} {w.name} U={x:g} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
        r = measure(e, w, x, a.seeds, a.holdout, lambda m: print(m, file=sys.stderr, flush=True))
        r["tuner_ratio"] = tuned.get((w.name, x))
        rows.append(r)
        if a.out:
            a.out.write_text(json.dumps({"rows": rows, "seconds": time.perf_counter() - t0}, indent=1))
    print(_table(rows))
    high = [r for r in rows if r["U"] >= 1.0]
    reach = [r for r in high if min(r["static_ratio"], r.get("phase_ratio", math.inf)) <= 0.9]
    print(f"\n≤ 0.9 reachable by an oracle at {len(reach)} of {len(high)} points with U ≥ 1.0 "
          f"(static: {sum(r['static_ratio'] <= 0.9 for r in high)}); {time.perf_counter() - t0:.0f} s wall time.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
