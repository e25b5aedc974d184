"""`freshet sim tune`: run one workload (or a trace the daemon wrote) under candidate scheduler
settings in parallel and rank them by predicted weighted staleness Σ p_i ∫ S_i dτ (§2.3).

Every candidate sees the same arrivals, seed and horizon (common random numbers), so the ranking
compares algorithms, not luck; one ideal run (§4.1) gives each its relative lateness. In the
simulator more tracks never hurt (it models no contention between tracks), so the track count is
only varied when asked (`--tracks 4,6,8`).
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from sim.simulator import Simulation, horizon_for, ideal_config, prepare
from sim.trace import read_trace
from warehouse.config import FreshetConfig, parse_config

__all__ = ["POLICIES", "SETTINGS", "TIE", "Candidate", "TuneResult", "candidates", "label", "tune"]

SETTINGS = ("policy", "partitioner", "k", "allocation", "aggressive", "chop", "tracks")


@dataclass(frozen=True)
class Candidate:
    """One setting of the scheduler section, and what the simulator predicts for it."""

    settings: dict[str, Any]
    weighted_staleness: float
    relative_lateness: float
    jobs: int

    def label(self) -> str:
        return label(self.settings)


def label(s: dict[str, Any]) -> str:
    """A setting as a reader names it: `max-benefit, global, chop none, 4 tracks`."""
    part = s["partitioner"]
    if part == "proportional":
        part += f" k={s['k']:g} {s['allocation']}{' aggr.' if s['aggressive'] else ''}"
    elif part == "edf-partitioned":
        part += " aggr." if s["aggressive"] else ""
    chop = {None: "none"}.get(s["chop"], s["chop"])
    return f"{s['policy']}, {part}, chop {chop}, {s['tracks']} tracks"


# the policies of the grid: the paper's Max-Benefit and EDF-P, Freshet's default, and `amortized` (beyond
# the paper, policies.basic). Left out (docs/experiments.md): `rollout` (warehouse.rollout) simulates ahead
# at every decision, and one replay under it costs what hundreds of the others do; with `whittle` the tuner
# never chose it where it wins and lost on `batch`; `aoi-quadratic` was in the grid until `amortized` took
# its place (§ The amortized rule): with it the tuner lost 8% on `batch` at U = 1.0
POLICIES = ("auto", "max-benefit", "edf-p", "amortized")


def candidates(cfg: FreshetConfig, tracks: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """The grid: policy × partitioner (with k, allocation, aggressive where they matter) × chop × tracks."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = [{"partitioner": "auto"}, {"partitioner": "global"}]
    parts += [{"partitioner": "edf-partitioned", "aggressive": a} for a in (True, False)]
    parts += [{"partitioner": "proportional", "k": k, "allocation": al, "aggressive": a}
              for k in (1.0, 10.0) for al in ("all", "basic") for a in (True, False)]
    sc = cfg.scheduler
    for n, policy, part, chop in itertools.product(tracks or [sc.tracks], POLICIES, parts,
                                                   ("auto", 3.0, None)):
        s = {"policy": policy, "k": sc.k, "allocation": sc.allocation, "aggressive": sc.aggressive, **part,
             "chop": chop, "tracks": n}
        out.append(s)
    return out


TIE = 1.01  # the config as written within this factor of the best is kept: one seed over one horizon


@dataclass
class TuneResult:
    ranked: list[Candidate]
    configured: Candidate | None
    horizon: float
    seconds: float

    def written(self) -> tuple[float, bool]:
        """The config as written over the best (weighted staleness), and whether to keep it: within TIE."""
        best, mine = self.ranked[0].weighted_staleness, self.configured
        if mine is None:
            return math.inf, False
        ratio = mine.weighted_staleness / best if best > 0 else (1.0 if mine.weighted_staleness == 0 else math.inf)
        return ratio, ratio <= TIE


def _point(task: dict[str, Any]) -> dict[str, Any]:
    """Worker: one run (or the ideal) over the shared horizon."""
    cfg = prepare(parse_config(task["config"], source="<tune>"), task["seed"])
    trace = read_trace(task["trace"]) if task["trace"] else None
    if task["ideal"]:
        cfg = ideal_config(cfg)
    sim = Simulation(cfg, seed=task["seed"], trace=trace, use_measured=not task["ideal"])
    st = sim.run(until=task["until"])
    return {"i": task["i"], "weighted_staleness": st.weighted_staleness, "jobs": st.jobs}


def tune(
    cfg: FreshetConfig,
    *,
    trace_path: str | None = None,
    events: int = 20_000,
    seed: int = 1,
    tracks: Sequence[int] | None = None,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> TuneResult:
    """Simulate every candidate; rank by weighted staleness (lowest first)."""
    t0 = time.perf_counter()
    if trace_path:
        trace = read_trace(trace_path)
        until = trace.last_time
    else:
        until = horizon_for(cfg, events)
    base = cfg.model_dump(mode="json", by_alias=True)
    grid = candidates(cfg, tracks)
    configured = {k: base["scheduler"][k] for k in SETTINGS}
    if configured not in grid:
        grid.append(configured)
    tasks = [{"i": -1, "config": base, "seed": seed, "until": until, "trace": trace_path, "ideal": True}]
    for i, s in enumerate(grid):
        tasks.append({"i": i, "config": {**base, "scheduler": {**base["scheduler"], **s}}, "seed": seed,
                      "until": until, "trace": trace_path, "ideal": False})
    results: dict[int, dict[str, Any]] = {}
    workers = max(1, workers or os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(_point, t) for t in tasks]
        for n, fut in enumerate(as_completed(futs), 1):
            r = fut.result()
            results[r["i"]] = r
            if progress is not None and (n % 10 == 0 or n == len(tasks)):
                progress(f"[{n}/{len(tasks)}] runs: the candidates and one ideal run "
                         f"({time.perf_counter() - t0:.0f}s)")
    ideal = results[-1]["weighted_staleness"] or 1.0
    ranked = [Candidate(s, results[i]["weighted_staleness"], results[i]["weighted_staleness"] / ideal,
                        results[i]["jobs"]) for i, s in enumerate(grid)]
    ranked.sort(key=lambda c: (c.weighted_staleness, grid.index(c.settings)))
    mine = next(c for c in ranked if c.settings == configured)
    return TuneResult(ranked, mine, until - (trace.origin if trace_path else 0.0), time.perf_counter() - t0)
