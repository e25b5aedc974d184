#!/usr/bin/env python3
"""The default with its tuner under variants of the tuner's rules, on points of the
`unseen` experiments: what a longer replay window, another margin, cool-down or cadence does, as
ratios to the best paper line of docs/figures/tuner-oracle.json (same workloads, horizons, seeds
and ideal runs as the experiments; the best paper line there is the mean over seeds 1-4).

    python scripts/tuner_window.py --points dag:1.0,shifts:1.2 --variant long \\
        --set autotune_window=86400 --set autotune_every=3600 [--seeds 4]
    python scripts/tuner_window.py --points shifts:1.0 --hours 48 --paper   # a longer run

`--hours` runs each point that many simulated hours instead of the experiment's events; `--paper`
runs the paper lines (sim.experiments.PAPER_LINES) beside the default, statically, on the same
seeds and horizon, and divides by the best of them (without it, by the oracle file's, which holds
the experiments' horizons only).

`--set` changes the config's `scheduler.autotune_*` fields, `--rule` the other fields of
sim.autotune.Rules. Runs two worker processes at nice 10; prints one JSON line per run and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.autotune import Rules  # noqa: E402
from sim.experiments import DEFAULT_LABEL, PAPER_LINES, Line  # noqa: E402
from sim.selftune import SEEDS, SimTuner  # noqa: E402
from sim.simulator import Simulation, horizon_for, ideal_config, prepare  # noqa: E402
from sim.unseen import EXPERIMENTS  # noqa: E402
from sim.workload import config_of  # noqa: E402

ORACLE = Path(__file__).resolve().parent.parent / "docs" / "figures" / "tuner-oracle.json"


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def one(task: dict[str, Any]) -> dict[str, Any]:
    """One tuned run of the default and its ideal run (or a paper line's static run: task["line"])."""
    os.nice(10) if os.nice(0) < 10 else None
    exp = EXPERIMENTS[task["experiment"]]
    wl = next(w for w in exp.workloads if w.name == task["workload"])
    line = next((ln for ln in PAPER_LINES if ln.label == task.get("line")), Line(DEFAULT_LABEL, {}))
    data = exp.config(line, task["U"], wl)
    data["scheduler"] = {**data["scheduler"], **task["set"]}
    cfg = config_of(data)
    until = task["hours"] * 3600.0 if task["hours"] else horizon_for(cfg, task["events"] or exp.events)
    seed = task["seed"]
    ideal = Simulation(ideal_config(prepare(cfg, seed)), seed=seed).run(until=until).weighted_staleness
    if line.label != DEFAULT_LABEL:  # a paper line: static, no tuner
        ws = Simulation(prepare(cfg, seed), seed=seed).run(until=until).weighted_staleness
        return {**{k: task[k] for k in ("variant", "workload", "U", "seed")}, "line": line.label,
                "lateness": ws / ideal, "horizon": until}
    pcfg = prepare(cfg, seed)
    rules = Rules.of(pcfg, SEEDS, **task["rule"])
    sim = Simulation(pcfg, seed=seed)
    tuner = SimTuner(sim, pcfg, rules)
    t0 = time.process_time()
    ws = sim.run(until=until).weighted_staleness
    summ = tuner.summary()
    return {**{k: task[k] for k in ("variant", "workload", "U", "seed")}, "lateness": ws / ideal,
            "switches": [(s["time"], s["to"]) for s in summ["switches"]], "results": summ["results"],
            "evaluations": summ["simulated"], "tuner_cpu": tuner.cpu_seconds,
            "tuner_cpu_max": max(tuner.cpu, default=0.0), "cpu": time.process_time() - t0, "horizon": until}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", required=True, help="WORKLOAD:U,...")
    ap.add_argument("--variant", default="variant", help="a name for the output")
    ap.add_argument("--set", action="append", default=[], help="scheduler field=value")
    ap.add_argument("--rule", action="append", default=[], help="sim.autotune.Rules field=value")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--events", type=int, default=0, help="events per point (default: the experiment's)")
    ap.add_argument("--hours", type=float, default=0.0, help="simulated hours per point (instead of --events)")
    ap.add_argument("--paper", action="store_true", help="run the paper lines too; ratios to the best of them")
    a = ap.parse_args(argv)
    if a.hours and not a.paper:
        ap.error("--hours needs --paper: the oracle file holds the best paper lines at the experiments' horizons only")
    sets = {k: _value(v) for k, _, v in (s.partition("=") for s in a.set)}
    rule = {k: _value(v) for k, _, v in (s.partition("=") for s in a.rule)}
    where = {w.name: e.name for e in EXPERIMENTS.values() for w in e.workloads}
    best = {(r["workload"], r["U"]): (r["best_paper"], r["best_paper_lateness"])
            for r in json.loads(ORACLE.read_text())["rows"]}
    points = [(n, float(x)) for n, _, x in (p.partition(":") for p in a.points.split(","))]
    lines = [None, *(ln.label for ln in PAPER_LINES)] if a.paper else [None]
    tasks = [{"experiment": where[n], "workload": n, "U": x, "seed": s, "set": sets, "rule": rule, "line": ln,
              "variant": a.variant, "events": a.events, "hours": a.hours}
             for n, x in points for s in range(1, a.seeds + 1) for ln in lines]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=a.workers) as pool:
        rows = []
        for r in pool.map(one, tasks):
            print(json.dumps(r), flush=True)
            rows.append(r)
    for n, x in points:
        rs = [r for r in rows if (r["workload"], r["U"]) == (n, x) and "line" not in r]
        mean = sum(r["lateness"] for r in rs) / len(rs)
        if a.paper:  # the best paper line at this horizon: lowest mean relative lateness over the seeds
            means = {ln.label: [r["lateness"] for r in rows if (r["workload"], r["U"]) == (n, x)
                                and r.get("line") == ln.label] for ln in PAPER_LINES}
            name, paper = min(((k, sum(v) / len(v)) for k, v in means.items()), key=lambda kv: kv[1])
        else:
            name, paper = best[(n, x)]
        ev = sum(r["evaluations"] for r in rs)
        print(f"# {a.variant} {n} U={x:g}: {mean:.3f} / {paper:.3f} ({name}) = {mean / paper:.3f}; switches "
              f"{[len(r['switches']) for r in rs]}; {sum(r['tuner_cpu'] for r in rs) / max(ev, 1):.2f} CPU-s per "
              f"evaluation (max {max(r['tuner_cpu_max'] for r in rs):.1f}), {ev} evaluations", flush=True)
    print(f"# {time.perf_counter() - t0:.0f} s wall", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
