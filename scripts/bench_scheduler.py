#!/usr/bin/env python3
"""Scheduler decision time per event (median, p99) under a saturated workload, and memory over a
long run. Not a test: it prints figures.

    python scripts/bench_scheduler.py                 # 30/4, 1,000/16, 10,000/64, 100,000/256 + 1M-event memory run
    python scripts/bench_scheduler.py --quick         # fewer events

Workload: base tables on streams with periods 1 min / 5 min / 1 h, priorities 1-100, E(n) = α + β·n
scaled so the offered utilization is --load × tracks (1.0: every track busy), Proportional + Max-Benefit
with Max inheritance and the default chopping (`auto`), or `--chop 3` for the paper's c.
Each job runs for its estimate.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import random
import statistics
import time
import tracemalloc
from array import array

from sim.progress import track
from warehouse.config import parse_config
from warehouse.events import JobFinished, PartitionArrived
from warehouse.scheduler import Scheduler


def workload(n_tables: int, tracks: int, load: float, seed: int = 1, chop: str | float | None = "auto"):
    rng = random.Random(seed)
    periods = [rng.choice([60.0, 300.0, 3600.0]) for _ in range(n_tables)]
    # u_i = (α + β P) / P; pick β so Σ u_i = load · tracks with α = 2 s
    alpha = 2.0
    target = load * tracks
    base_u = sum(alpha / p for p in periods)
    beta = max((target - base_u) / n_tables, 0.001)
    streams = [{"name": f"s{i}", "period": periods[i]} for i in range(n_tables)]
    tables = [
        {"name": f"t{i}", "stream": f"s{i}", "priority": rng.choice([1, 2, 5, 10, 100]),
         "cost": {"alpha": alpha, "beta": beta}}
        for i in range(n_tables)
    ]
    cfg = parse_config({"streams": streams, "tables": tables,
                        "scheduler": {"tracks": tracks, "learn_costs": False, "chop": chop}})
    phases = [rng.uniform(0, p) for p in periods]
    return cfg, periods, phases


def run(n_tables: int, tracks: int, events: int, load: float = 1.0, measure_memory: bool = False,
        chop: str | float | None = "auto") -> dict:
    cfg, periods, phases = workload(n_tables, tracks, load, chop=chop)
    s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    q: list = [(phases[i], 0, i, None) for i in range(n_tables)]
    heapq.heapify(q)
    seq = 1
    counter = [0] * n_tables
    times = array("q", bytes(8 * events))  # preallocated: the memory figure is the scheduler's
    mem: list[tuple[int, int]] = []
    gc.collect()
    if measure_memory:
        tracemalloc.start()
    perf = time.perf_counter_ns
    for n in range(events):
        now, _, i, job = heapq.heappop(q)
        if job is None:
            c = counter[i]
            counter[i] += 1
            ev = PartitionArrived(stream=f"s{i}", partition_id=str(c), start=now - periods[i], end=now)
            heapq.heappush(q, (now + periods[i], seq, i, None))
            seq += 1
        else:
            ev = JobFinished(job_id=job.job_id, duration=job.estimate)
        t0 = perf()
        started = s.handle(ev, now)
        times[n] = perf() - t0
        for j in started:
            heapq.heappush(q, (now + j.estimate, seq, -1, j))
            seq += 1
        if measure_memory and n % (events // 10) == 0:
            gc.collect()
            mem.append((n, tracemalloc.get_traced_memory()[0]))
    if measure_memory:
        gc.collect()
        mem.append((events, tracemalloc.get_traced_memory()[0]))
        tracemalloc.stop()
    times = sorted(times)
    st = s.stats(now)
    return {
        "tables": n_tables,
        "tracks": tracks,
        "events": events,
        "median_us": statistics.median(times) / 1000,
        "p99_us": times[int(len(times) * 0.99)] / 1000,
        "busy_share": sum(t.busy_time for t in st.tracks) / (tracks * now),
        "sim_hours": now / 3600,
        "memory": mem,
        "backlog": sum(t.pending_partitions for t in st.tables),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--memory-events", type=int, default=1_000_000)
    ap.add_argument("--load", type=float, default=1.0, help="offered utilization per track (1.0 = saturated)")
    ap.add_argument("--chop", default="auto", help="chop: auto (default), a number c, or none")
    ap.add_argument("--sizes", help="tables/tracks/events,… e.g. 100000/256/200000 (default: all four)")
    a = ap.parse_args()
    chop = None if a.chop == "none" else a.chop if a.chop == "auto" else float(a.chop)
    sizes = [(30, 4, 200_000), (1_000, 16, 200_000), (10_000, 64, 200_000), (100_000, 256, 200_000)]
    if a.sizes:
        sizes = [tuple(int(x) for x in part.split("/")) for part in a.sizes.split(",")]
    if a.quick:
        sizes = [(n, t, e // 10) for n, t, e in sizes]
    print(f"{'tables':>7} {'tracks':>6} {'events':>8} {'median µs':>10} {'p99 µs':>8} {'busy':>6}")
    for n, t, e in track(sizes, "bench_scheduler", what="{item[0]} tables", lines=False):  # a bar on a terminal
        r = run(n, t, e, a.load, chop=chop)
        print(f"{n:>7} {t:>6} {e:>8} {r['median_us']:>10.1f} {r['p99_us']:>8.1f} {r['busy_share']:>6.1%}", flush=True)
    ev = a.memory_events // (10 if a.quick else 1)
    if ev <= 0:  # --memory-events 0: decision times only
        return
    r = run(30, 4, ev, a.load, measure_memory=True, chop=chop)
    print(f"memory over {ev:,} events (30 tables, 4 tracks), traced bytes held by Python:")
    print("  " + "  ".join(f"{n // 1000}k:{b / 1e6:.2f}MB" for n, b in r["memory"]))
    print(f"  partitions pending at the end: {r['backlog']}")


if __name__ == "__main__":
    main()
