#!/usr/bin/env python3
"""A minimal reference simulator of the same model (§4.1 of "Scalable Scheduling of Updates in
Streaming Data Warehouses"), to put the simulator's speed beside: one heap of events and a few
lists, no SimPy, no Scheduler object, no event objects — only what the bench workloads need.

The model, as `sim.simulator` runs it through the Scheduler: base tables, each fed by its own
stream that pushes a partition every P_i from a random phase (§4.1); a table's released job loads
its pending partitions up to c·P_i past its freshness, at least one (update chopping, §3.4);
released jobs wait in one heap keyed by Max-Benefit, −p_i·ΔF_i/E_i(n), ties in release order
(§3.1); a job takes the first free track of the one Proportional cluster (§3.2.3 steps b-c:
tracks 1..N−1, then track 0); its time is uniform in [b·E(n), (1+b)·E(n)], times S if it starts
in a slow period; the weighted staleness Σ p_i ∫ S_i dτ is integrated exactly (§2.3). The random
streams and the tie-breaks (event time, then the order events were scheduled, as SimPy's) are the
simulator's, so the run is the same: the same jobs and the same weighted staleness, to the bit
(`scripts/bench_sim.py --reference` checks it).

Only that model: it refuses a workload with derived tables, a stream read by several tables, more
than one Proportional cluster, another policy or partitioner, `chop` not a number, jitter, delays,
late data, bursts, shared cores, maintenance, cost learning or a bulk limit.

    python scripts/sim_reference.py [--events N] [--tables 30] [--tracks 4]
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
import time
from bisect import bisect_right
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from policies.bulk import bulk_limit  # noqa: E402
from warehouse.config import FreshetConfig  # noqa: E402

__all__ = ["run_reference"]

IDLE, QUEUED, RUNNING = 0, 1, 2
ARRIVAL, END = 0, 1


def _refuse(cfg: FreshetConfig) -> tuple[float, list[float]]:
    """(c, the period of each table) of a workload this reference models; ValueError naming what it does not."""
    sc, sim = cfg.scheduler, cfg.sim
    why = []
    if any(not t.stream or t.sources for t in cfg.tables):
        why.append("derived tables")
    readers = [t.stream for t in cfg.tables]
    if len(set(readers)) != len(readers):
        why.append("a stream read by several tables")
    if sc.ordering not in ("max-benefit",) or sc.policy != "max-benefit":
        why.append(f"policy {sc.policy}")
    if sc.partitioner != "proportional":
        why.append(f"partitioner {sc.partitioner}")
    if not isinstance(sc.chop, float | int) or isinstance(sc.chop, bool):
        why.append(f"chop {sc.chop}")
    if sim.jitter or sim.delay or (sim.late and sim.late_after) or sim.bursts or sim.cores is not None:
        why.append("jitter, delay, late data, bursts or shared cores")
    if sc.learn_costs:
        why.append("cost learning (the simulator's runs estimate with the true E(n): sim.simulator.prepare)")
    if sc.allocation != "all":
        why.append(f"allocation {sc.allocation}")
    if bulk_limit(sc.bulk_limit, cfg.spark.master, cfg.spark.cores) is not None:
        why.append("a bulk limit")
    if any(cfg.maintenance_of(t).active for t in cfg.tables):
        why.append("maintenance")
    streams = {s.name: s.period for s in cfg.streams}
    periods = [streams[t.stream] for t in cfg.tables if t.stream]
    if len(set(periods)) > 1:
        why.append("more than one period (one Proportional cluster only)")
    if why:
        raise ValueError("the reference simulator does not model: " + ", ".join(why))
    return float(sc.chop), periods  # type: ignore[arg-type]


def run_reference(cfg: FreshetConfig, seed: int, events: int) -> dict[str, Any]:
    """Run `cfg` (as `sim.simulator.prepare` leaves it) for `events` events (arrivals and job
    ends); {"events", "jobs", "ws": Σ p_i ∫ S_i dτ at the horizon, "horizon"}."""
    c, period = _refuse(cfg)
    n_tables, tracks = len(cfg.tables), cfg.scheduler.tracks
    origin = 0.0
    names = [t.name for t in cfg.tables]
    prio = [float(t.priority) for t in cfg.tables]
    alpha = [cfg.cost_prior(t).alpha for t in cfg.tables]
    beta = [cfg.cost_prior(t).beta for t in cfg.tables]
    b = cfg.sim.b
    sd = cfg.sim.slowdown
    slow = sd.factor if (sd.slow > 0 and sd.factor != 1.0) else 1.0
    cycle, normal = sd.normal + sd.slow, sd.normal
    draw = [random.Random(f"{seed}/duration/{n}").random for n in names]
    phase = [random.Random(f"{seed}/arrivals/{t.stream}").uniform(0.0, period[i]) for i, t in enumerate(cfg.tables)]
    # each table: freshness F, its staleness integral (area up to `since`), pending partition ends
    # (contiguous: the first starts at `low`), job state, queue place (release seq, heap version)
    fresh = [origin] * n_tables
    area = [0.0] * n_tables
    since = [origin] * n_tables
    ends: list[list[float]] = [[] for _ in range(n_tables)]
    low = [origin] * n_tables
    state = [IDLE] * n_tables
    qseq = [0] * n_tables
    version = [0] * n_tables
    arrivals = [0] * n_tables  # partitions generated so far
    heap: list[tuple[float, int, int, int]] = []  # (−p·ΔF/E, release seq, version, table)
    queued = 0
    seq = 0
    prefer = [*range(1, tracks), 0]  # the one cluster's tracks: interior 1..N−1, then the boundary 0
    idle = set(range(tracks))
    running: list[tuple[int, float, float] | None] = [None] * tracks  # (table, new F, duration)
    # SimPy's queue: (time, event id, kind, table or track); each stream's first arrival after its start
    timeline: list[tuple[float, int, int, int]] = []
    eid = n_tables  # (each stream's start event at the origin took one, in the config's stream order)
    of_stream = {t.stream: i for i, t in enumerate(cfg.tables)}
    for i in (of_stream[s.name] for s in cfg.streams if s.name in of_stream):
        first = origin + phase[i]
        timeline.append((origin + (first - origin), eid, ARRIVAL, i))
        eid += 1
    heapq.heapify(timeline)

    def key(i: int) -> float:
        """−p·ΔF/E(n) of table i's next job (§3.1, §3.4)."""
        f, e = fresh[i], ends[i]
        count = bisect_right(e, f + c * period[i])
        end = e[(count if count > 1 else 1) - 1]
        lo = low[i]
        start = lo if lo < f else f
        new_f = end if end > f else f
        n = end - start
        cost = alpha[i] + beta[i] * (0.0 if n < 0.0 else n)
        df = new_f - f
        return -(prio[i] * df / cost if cost > 0 else float("inf") if prio[i] * df > 0 else 0.0)

    def push(i: int) -> None:
        version[i] += 1
        heapq.heappush(heap, (key(i), qseq[i], version[i], i))
        if len(heap) > 2 * queued + 16:  # stale entries out: the heap stays shallow
            heap[:] = [e for e in heap if version[e[3]] == e[2] and state[e[3]] == QUEUED]
            heapq.heapify(heap)

    def work(i: int) -> None:
        """Table i may have a job to release (§3.1) or re-key."""
        nonlocal seq, queued
        if state[i] == RUNNING or not ends[i]:
            return
        if state[i] == IDLE:
            seq += 1
            qseq[i] = seq
            state[i] = QUEUED
            queued += 1
        push(i)

    def dispatch(now: float) -> None:
        """Released jobs, best first, onto the free tracks (§3.2)."""
        nonlocal queued, eid
        while idle and heap:
            _, _, v, i = heap[0]
            heapq.heappop(heap)
            if v != version[i] or state[i] != QUEUED:
                continue
            track = next(r for r in prefer if r in idle)
            f, e = fresh[i], ends[i]
            count = bisect_right(e, f + c * period[i])
            count = count if count > 1 else 1
            end = e[count - 1]
            lo = low[i]
            start = lo if lo < f else f
            new_f = end if end > f else f
            n = end - start
            low[i] = end
            del e[:count]
            state[i] = RUNNING
            version[i] += 1
            queued -= 1
            idle.discard(track)
            duration = (alpha[i] + beta[i] * n) * (b + draw[i]())
            if slow != 1.0 and (now - origin) % cycle >= normal:
                duration *= slow
            running[track] = (i, new_f, duration)
            heapq.heappush(timeline, (now + duration, eid, END, track))
            eid += 1

    handled = jobs = 0
    busy = 0.0
    now = origin
    while handled < events and timeline:
        now, _, kind, x = heapq.heappop(timeline)
        handled += 1
        if kind == ARRIVAL:
            i = x
            k = arrivals[i]
            e = ends[i]
            end = origin + phase[i] + k * period[i]  # partition k covers (its predecessor's end, end]
            seq += 1
            e.append(end)
            arrivals[i] = k + 1
            if not (state[i] == QUEUED and len(e) > 1 and end > fresh[i] + c * period[i]):
                work(i)  # (beyond the chop bound of its pending job: that job and its key are unchanged)
            if idle and queued:
                dispatch(now)
            nxt = origin + phase[i] + (k + 1) * period[i]  # the stream's next arrival, after the jobs started
            heapq.heappush(timeline, (now + (nxt - now), eid, ARRIVAL, i))
            eid += 1
        else:
            i, new_f, duration = running[x]  # type: ignore[misc]
            running[x] = None
            idle.add(x)
            busy += duration
            jobs += 1
            state[i] = IDLE
            f = fresh[i]
            if new_f > f:  # the staleness meter (§2.3): the trapezoid up to now at the old F
                s = since[i]
                if now > s:
                    area[i] += (now - s) * ((s - f) + (now - f)) / 2.0
                fresh[i] = new_f
                since[i] = s if s > now else now
            work(i)
            if idle and queued:
                dispatch(now)
    ws = sum(prio[i] * (area[i] if now <= since[i] else
                        area[i] + (now - since[i]) * ((since[i] - fresh[i]) + (now - fresh[i])) / 2.0)
             for i in range(n_tables))
    return {"events": handled, "jobs": jobs, "ws": ws, "horizon": now, "busy": busy}


def main() -> int:
    from sim.simulator import prepare
    from sim.workload import TableClass, build_workload, config_of

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--tables", type=int, default=30)
    ap.add_argument("--tracks", type=int, default=4)
    a = ap.parse_args()
    data = build_workload([TableClass(a.tables)], scheduler={"tracks": a.tracks, "policy": "max-benefit",
                                                             "partitioner": "proportional", "chop": 3},
                          sim={"slowdown": {"factor": 3, "normal": 1000, "slow": 1000}})
    cfg = prepare(config_of(data), 1)
    c0 = time.process_time()
    out = run_reference(cfg, 1, a.events)
    cpu = time.process_time() - c0
    print(json.dumps({**out, "cpu": cpu, "events_per_cpu_second": out["events"] / cpu}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
