"""What the live benchmark's contestants are set beside (scripts/bench_live.py): the zero-latency
bound of a trace, and the digital twin's prediction for the `freshet` run — made before the run
from the job costs an earlier run measured (`predict`), and after it from the run's own trace
(`twin`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scripts.live import measure
from scripts.live.trace import Trace

__all__ = ["bound", "kind_costs", "predict", "twin"]


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


def _kind(spec_: Any, table: str) -> str:
    """A table's kind for its job costs: `base-burst`, `base-calm`, `rollup`, `join` or `stateful`."""
    for s in spec_.streams:
        if s.table == table:
            return "base-burst" if s.bursts else "base-calm"
    return next(d.shape for d in spec_.derived if d.name == table)


def kind_costs(costs: Path, spec_: Any) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float]]]:
    """(α, β) per table fitted to the jobs of an earlier Freshet run (its `freshet.trace`, with
    `freshet.yaml` beside it: the cost model of §2.4, from the config's priors), and per kind of
    table the median of its tables': what a table of that kind not in the earlier run is given."""
    import statistics

    from sim.trace import read_trace
    from warehouse.config import load_config

    config = load_config(costs.with_name("freshet.yaml"))
    priors = {t.name: (config.cost_prior(t).alpha, config.cost_prior(t).beta) for t in config.tables}
    fitted = read_trace(costs).fitted_costs(priors)
    by_kind: dict[str, list[tuple[float, float]]] = {}
    for t, ab in fitted.items():
        by_kind.setdefault(_kind(spec_, t), []).append(ab)
    return fitted, {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in by_kind.items()}


def predict(trace: Trace, costs: Path, *, cores: int | None = None, variant: dict[str, str] | None = None) -> dict[str, Any]:
    """The twin before the run: the simulator, given the trace's arrivals and the job costs an
    earlier run measured (`kind_costs`), predicts Freshet's weighted staleness over the whole
    replay (as `twin` measures it). The costs were measured with four tracks sharing the
    machine's cores, so they hold that slowdown already: `cores` (sim.cores) is None by default —
    with 2 the slowdown was counted twice and the prediction was 41–43 % too stale at 60 tables."""
    import statistics

    from sim.simulator import simulate
    from sim.trace import Arrival
    from sim.trace import Trace as SimTrace
    from warehouse.config import parse_config

    spec_ = trace.spec
    fitted, by_kind = kind_costs(costs, spec_)
    data = spec_.freshet_config("/tmp/unused", "/tmp/unused", **(variant or {}))
    if cores is not None:
        data["sim"] = {"cores": cores}
    missing = sorted({_kind(spec_, t["name"]) for t in data["tables"]} - set(by_kind))
    if missing:  # a kind the earlier run had none of (a stateful table, say) takes every table's medians,
        # as a daemon's table whose kind has no settled model does (warehouse.cost.Peers)
        every = list(fitted.values())
        if not every:
            return {"error": f"no job in {costs}"}
        medians = (statistics.median(a for a, _ in every), statistics.median(b for _, b in every))
        by_kind = {**by_kind, **dict.fromkeys(missing, medians)}
    for t in data["tables"]:
        a, b = fitted.get(t["name"]) or by_kind[_kind(spec_, t["name"])]
        t["cost"] = {"alpha": a, "beta": b}
    arrivals: dict[str, list[Arrival]] = {}
    for p in trace.parts:
        arrivals.setdefault(p.stream, []).append(Arrival(p.end, p.stream, f"{p.stream}-{p.pid}", p.start, p.end, p.rows))
    res = simulate(parse_config(data), trace=SimTrace(arrivals, {}, []), until=trace.duration).to_json()
    return {"predicted_weighted_staleness": round(float(res["average_weighted_staleness"]), 2),
            "costs_from": str(costs), "costs_by_kind": {k: [round(a, 4), round(b, 6)] for k, (a, b) in by_kind.items()},
            "tables_with_own_costs": len(fitted), "kinds_from_every_table": missing, "cores": cores}
