#!/usr/bin/env python3
"""Simulator throughput, in scheduler events per second on one core (§4.1: a paper data point is
1,000,000 events, so ≥ 50,000 events/s means under 20 s per point).

Workloads: Table 2 (30 tables, P=100, α=1, β=0.1, b=0.5, S=3, 4 tracks, Proportional + Max-Benefit,
at its natural utilization and scaled to U=0.9), and 1,000 tables on 16 tracks (U=0.9). Only the
contended run is timed; the ideal run of a `freshet sim run` costs about as much again.

    python scripts/bench_sim.py [--events N] [--profile]
    python scripts/bench_sim.py --against 7792d03 [--rounds R] [--events N]
    python scripts/bench_sim.py --reference [--rounds R] [--events N]

`--against REV` compares this tree with commit REV side by side: REV's files are exported
(`git archive`) to a temporary directory, and each round runs every workload once in a fresh
process of each tree, the order alternating between rounds, so that both see the same load of a
shared machine. It prints the median events per CPU second of each and the median of the paired
ratios, and checks that both trees computed the same run (weighted staleness, jobs).

`--reference` puts this tree's simulator beside a minimal reference simulator of the same model
(scripts/sim_reference.py: one heap, no SimPy, no Scheduler object) on the same workloads, paired
and alternating the same way, each run in a fresh process: the ratio is this simulator's events
per CPU second over the reference's, and "same run" says both computed the same jobs and
weighted staleness.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.revtree import describe_head, export  # noqa: E402
from sim.progress import track  # noqa: E402
from sim.simulator import Simulation, prepare  # noqa: E402
from sim.workload import TableClass, build_workload, config_of, utilization, with_utilization  # noqa: E402

SCHED = {"policy": "max-benefit", "partitioner": "proportional", "k": 10, "allocation": "all",
         "aggressive": True, "inheritance": "max", "chop": 3}
SLOW = {"slowdown": {"factor": 3, "normal": 1000, "slow": 1000}}
TARGET = 50_000


def workloads() -> list[tuple[str, dict]]:
    t2 = build_workload([TableClass(30)], scheduler={"tracks": 4, **SCHED}, sim=SLOW)
    big = build_workload([TableClass(1000)], scheduler={"tracks": 16, **SCHED}, sim=SLOW)
    return [
        ("Table 2 (30 tables, 4 tracks)", t2),
        ("Table 2 at U=0.9", with_utilization(t2, 0.9)),
        ("1,000 tables, 16 tracks, U=0.9", with_utilization(big, 0.9)),
    ]


def bench(data: dict, events: int, seed: int = 1) -> tuple[float, float, float, int]:
    """(events per CPU second, CPU seconds, wall seconds, jobs). CPU time is what one core gives
    the simulator; wall time also counts whatever else the machine is doing."""
    cfg = prepare(config_of(data), seed)
    sim = Simulation(cfg, seed=seed)
    w0, c0 = time.perf_counter(), time.process_time()
    st = sim.run(events=events)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return st.events / cpu, cpu, wall, st.jobs


# One timed run in a fresh interpreter of a tree (this one or REV's): only the simulator API that
# both have (`prepare`, `Simulation.run`, `config_of`). The workload comes in on stdin as JSON.
CHILD = """
import json, sys, time
from sim.simulator import Simulation, prepare
from sim.workload import config_of
job = json.load(sys.stdin)
cfg = prepare(config_of(job["data"]), job["seed"])
sim = Simulation(cfg, seed=job["seed"])
c0 = time.process_time()
st = sim.run(events=job["events"])
cpu = time.process_time() - c0
print(json.dumps({"events": st.events, "cpu": cpu, "jobs": st.jobs, "ws": st.weighted_staleness}))
"""


# The reference simulator (scripts/sim_reference.py) timed the same way, on the same prepared config.
REF_CHILD = """
import json, sys, time
from scripts.sim_reference import run_reference
from sim.simulator import prepare
from sim.workload import config_of
job = json.load(sys.stdin)
cfg = prepare(config_of(job["data"]), job["seed"])
c0 = time.process_time()
st = run_reference(cfg, job["seed"], job["events"])
cpu = time.process_time() - c0
print(json.dumps({"events": st["events"], "cpu": cpu, "jobs": st["jobs"], "ws": st["ws"]}))
"""


def _child(tree: Path, data: dict, events: int, seed: int = 1, code: str = CHILD) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True, text=True,
                         capture_output=True, input=json.dumps({"data": data, "events": events, "seed": seed}))
    return json.loads(out.stdout)


def compare(rev: str, events: int, rounds: int) -> int:
    """This tree against commit `rev`, paired and alternating (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="bench_sim_") as tmp:
        commit = export(rev, Path(tmp))
        base = Path(tmp) / "tree"
        trees = {"base": base, "new": ROOT}
        print(f"base {commit[:10]} against this tree ({describe_head()}); "
              f"{rounds} rounds × {events:,} events; events per CPU second, each run in a fresh process")
        print(f"{'workload':<34} {'base ev/s':>10} {'new ev/s':>10} {'ratio':>6} {'(min-max)':>12} same run")
        ratios_t2 = []
        for name, data in workloads():
            rates: dict[str, list[float]] = {"base": [], "new": []}
            ratios, same = [], True
            for r in range(rounds):
                order = ("base", "new") if r % 2 == 0 else ("new", "base")
                got = {side: _child(trees[side], data, events) for side in order}
                for side in order:
                    rates[side].append(got[side]["events"] / got[side]["cpu"])
                ratios.append(rates["new"][-1] / rates["base"][-1])
                same = same and got["base"]["jobs"] == got["new"]["jobs"] and got["base"]["ws"] == got["new"]["ws"]
            if not ratios_t2:
                ratios_t2 = ratios
            print(f"{name:<34} {statistics.median(rates['base']):>10,.0f} {statistics.median(rates['new']):>10,.0f} "
                  f"{statistics.median(ratios):>5.2f}× {min(ratios):>5.2f}-{max(ratios):<5.2f} "
                  f"{'yes' if same else 'NO'}")
    print(f"\nTable 2: this tree is {statistics.median(ratios_t2):.2f}× {commit[:7]} per CPU second "
          "(median of the paired rounds); 'same run': both trees computed the same weighted staleness and jobs.")
    return 0


def against_reference(events: int, rounds: int) -> int:
    """This tree's simulator against the reference simulator, paired and alternating (module docstring)."""
    print(f"this tree ({describe_head()}) against the reference simulator (scripts/sim_reference.py); "
          f"{rounds} rounds × {events:,} events; events per CPU second, each run in a fresh process")
    print(f"{'workload':<34} {'ref ev/s':>10} {'sim ev/s':>10} {'ratio':>6} {'(min-max)':>12} same run")
    for name, data in workloads():
        rates: dict[str, list[float]] = {"ref": [], "sim": []}
        ratios, same = [], True
        for r in range(rounds):
            order = ("ref", "sim") if r % 2 == 0 else ("sim", "ref")
            got = {side: _child(ROOT, data, events, code=REF_CHILD if side == "ref" else CHILD) for side in order}
            for side in order:
                rates[side].append(got[side]["events"] / got[side]["cpu"])
            ratios.append(rates["sim"][-1] / rates["ref"][-1])
            same = same and got["ref"]["jobs"] == got["sim"]["jobs"] and got["ref"]["ws"] == got["sim"]["ws"]
        print(f"{name:<34} {statistics.median(rates['ref']):>10,.0f} {statistics.median(rates['sim']):>10,.0f} "
              f"{statistics.median(ratios):>5.2f}× {min(ratios):>5.2f}-{max(ratios):<5.2f} {'yes' if same else 'NO'}")
    print("\nratio: the simulator's events per CPU second over the reference's (median of the paired rounds); "
          "'same run': both computed the same jobs and weighted staleness.")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000, help="events per workload (default 200,000)")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the Table 2 run")
    ap.add_argument("--against", metavar="REV", help="compare with commit REV, paired runs in one invocation")
    ap.add_argument("--reference", action="store_true",
                    help="compare with the minimal reference simulator (scripts/sim_reference.py), paired runs")
    ap.add_argument("--rounds", type=int, default=5, help="paired rounds with --against or --reference (default 5)")
    args = ap.parse_args()
    if args.against:
        return compare(args.against, args.events, args.rounds)
    if args.reference:
        return against_reference(args.events, args.rounds)
    print(f"{'workload':<34} {'U':>5} {'events':>9} {'jobs':>8} {'cpu s':>7} {'wall s':>7} {'events/s':>9}")
    rates = []
    for name, data in track(workloads(), "bench_sim", what="{item[0]}", lines=False):  # a bar on a terminal
        u = utilization(config_of(data))
        rate, cpu, wall, jobs = bench(data, args.events)
        rates.append(rate)
        print(f"{name:<34} {u:>5.2f} {args.events:>9,} {jobs:>8,} {cpu:>7.2f} {wall:>7.2f} {rate:>9,.0f}")
    ok = rates[0] >= TARGET
    print("(events/s = events per CPU second of this process: what one core gives the simulator)")
    print(f"\nTable 2: {rates[0]:,.0f} events/s on one core (target ≥ {TARGET:,}: {'met' if ok else 'NOT met'}); "
          f"one paper data point (1,000,000 events) ≈ {1e6 / rates[0]:.0f} s plus its ideal run.")
    if args.profile:
        cfg = prepare(config_of(workloads()[0][1]), 1)
        sim = Simulation(cfg, seed=1)
        prof = cProfile.Profile()
        prof.runcall(sim.run, events=min(args.events, 100_000))
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
