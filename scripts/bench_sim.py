#!/usr/bin/env python3
"""Simulator throughput, in scheduler events per second on one core (§4.1: a paper data point is
1,000,000 events, so ≥ 50,000 events/s means under 20 s per point).

Workloads: Table 2 (30 tables, P=100, α=1, β=0.1, b=0.5, S=3, 4 tracks, Proportional + Max-Benefit,
at its natural utilization and scaled to U=0.9), and 1,000 tables on 16 tracks (U=0.9). Only the
contended run is timed; the ideal run of a `freshet sim run` costs about as much again.

    python scripts/bench_sim.py [--events N] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.progress import track  # noqa: E402
from sim.simulator import Simulation, prepare  # noqa: E402
from sim.workload import TableClass, build_workload, config_of, utilization, with_utilization  # noqa: E402

SCHED = {"policy": "max-benefit", "partitioner": "proportional", "k": 10, "allocation": "all",
         "aggressive": True, "inheritance": "max", "chop": 3}
SLOW = {"slowdown": {"factor": 3, "normal": 1000, "slow": 1000}}


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000, help="events per workload (default 200,000)")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the Table 2 run")
    args = ap.parse_args()
    print(f"{'workload':<34} {'U':>5} {'events':>9} {'jobs':>8} {'cpu s':>7} {'wall s':>7} {'events/s':>9}")
    rates = []
    for name, data in track(workloads(), "bench_sim", what="{item[0]}", lines=False):  # a bar on a terminal
        u = utilization(config_of(data))
        rate, cpu, wall, jobs = bench(data, args.events)
        rates.append(rate)
        print(f"{name:<34} {u:>5.2f} {args.events:>9,} {jobs:>8,} {cpu:>7.2f} {wall:>7.2f} {rate:>9,.0f}")
    target = 50_000
    ok = rates[0] >= target
    print("(events/s = events per CPU second of this process: what one core gives the simulator)")
    print(f"\nTable 2: {rates[0]:,.0f} events/s on one core (target ≥ {target:,}: {'met' if ok else 'NOT met'}); "
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
