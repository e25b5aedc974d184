"""What the live benchmark's contestants are set beside (scripts/bench_live.py): the zero-latency
bound of a trace, and the digital twin's prediction for the `freshet` run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scripts.live import measure
from scripts.live.trace import Trace

__all__ = ["bound", "twin"]


def bound(trace: Trace) -> dict[str, Any]:
    """The staleness no scheduler avoids: every partition committed the instant it arrives, every
    derived window the instant its sources cover it (floored to its granularity); measured over
    the window like a contestant. A contestant's weighted staleness minus this is what its
    scheduling and its Spark jobs add."""
    from warehouse.freshness import floor_to, trailing_edge

    prios, targets = trace.spec.priorities(), trace.spec.targets()
    table_of = {s.name: s.table for s in trace.spec.streams}
    ends: dict[str, list[float]] = {s.table: [] for s in trace.spec.streams}
    for part in trace.parts:
        ends[table_of[part.stream]].append(part.end)
    logs = {t: [measure.Commit(version=i, time=e, max_event=e) for i, e in enumerate(sorted(v))]
            for t, v in ends.items()}
    instants = sorted({c.time for log in logs.values() for c in log})
    for d in trace.spec.derived:
        log, last = [], -math.inf
        for i, tau in enumerate(instants):
            edge = trailing_edge(max((c.max_event for c in logs[s] if c.time <= tau), default=None)
                                 for s in d.sources)
            if edge is None:
                continue
            f = floor_to(edge, d.granularity) if d.granularity else edge
            if f > last:
                log.append(measure.Commit(version=i, time=tau, max_event=f))
                last = f
        logs[d.name] = log
    w, t1 = trace.warmup, trace.duration
    figures = {t: measure.staleness(logs[t], w, t1, targets[t], f0=0.0) for t in prios}
    return {"weighted_staleness": round(measure.weighted(figures, prios, w, t1), 2),
            "mean_staleness": {t: round(f.area / (t1 - w), 2) for t, f in figures.items()}}


def twin(entry: dict[str, Any], trace: Trace, out: Path) -> dict[str, Any]:
    """The digital twin: the `freshet` run's own trace (arrivals and measured job
    durations, written by the daemon) replayed by the simulator (`freshet sim run --trace`, here
    in-process so that it stops at the same instant), its predicted weighted staleness beside the
    one measured from the Delta logs, both over the whole replay [t0, t0 + duration]; and the same
    replay with one track per table (`ideal_config`: no job ever waits for a track) at the same
    measured durations — what no order of these jobs could beat on this machine."""
    from sim.simulator import ideal_config, simulate
    from sim.trace import read_trace
    from warehouse.config import load_config

    d = out / entry["name"]
    t0 = entry["start"]
    try:
        config, replayed = load_config(d / "freshet.yaml"), read_trace(d / "freshet.trace")
        res = simulate(config, trace=replayed, until=t0 + trace.duration).to_json()
        alone = simulate(ideal_config(config), trace=replayed, until=t0 + trace.duration).to_json()
    except Exception as err:  # noqa: BLE001 — reported in the JSON, the benchmark goes on
        return {"error": f"{type(err).__name__}: {err}"}
    prios, targets = trace.spec.priorities(), trace.spec.targets()
    figs = {}
    for table in prios:
        path = Path(entry["root"]) / table
        log = measure.commits(path) if (path / "_delta_log").is_dir() else []
        figs[table] = measure.staleness(log, t0, t0 + trace.duration, targets[table])
    measured = measure.weighted(figs, prios, t0, t0 + trace.duration)
    predicted = float(res["average_weighted_staleness"])
    return {"predicted_weighted_staleness": round(predicted, 2), "measured_weighted_staleness": round(measured, 2),
            "predicted_one_track_per_table": round(float(alone["average_weighted_staleness"]), 2),
            "error": None, "relative_error": round(predicted / measured - 1.0, 4) if measured else None,
            "sim_horizon_seconds": res.get("horizon"), "measured_window_seconds": trace.duration,
            "per_table": {t: {"predicted_mean_staleness": round(v["staleness"], 2),
                              "measured_mean_staleness": round(figs[t].area / trace.duration, 2)}
                          for t, v in res.get("per_table", {}).items() if t in figs and v.get("staleness") is not None}}
