#!/usr/bin/env python3
"""Scheduler decision time per event (median, p99) under a saturated workload, and memory over a
long run. Not a test: it prints figures.

    python scripts/bench_scheduler.py                 # 30/4, 1,000/16, 10,000/64, 100,000/256 + 1M-event memory run
    python scripts/bench_scheduler.py --quick         # fewer events
    python scripts/bench_scheduler.py --against 7792d03 --sizes 10000/64/50000,100000/256/50000
    python scripts/bench_scheduler.py --rollout --sizes 30/4/20000,1000/16/20000 --memory-events 0
    python scripts/bench_scheduler.py --rollout --against f9b9920 --rounds 1 --sizes 1000/16/3000 \
        --rollout-settings '{"budget_events": 300}'

`--against REV` runs the same workloads on REV's engine (its files exported by `git archive`) and on
this tree's, each run in a fresh process, the order alternating between rounds so that both see the
same load of a shared machine; it prints both trees' median and p99 and their paired ratios (with
`--rollout`, each size under the default policy and under rollout, with rollout's rounds).

Workload: base tables on streams with periods 1 min / 5 min / 1 h, priorities 1-100, E(n) = α + β·n
scaled so the offered utilization is --load × tracks (1.0: every track busy), Proportional + Max-Benefit
with Max inheritance and the default chopping (`auto`), or `--chop 3` for the paper's c.
Each job runs for its estimate. `--rollout` runs each size a second time, in the same invocation,
under `policy: rollout` with its default settings (warehouse.rollout), and prints its rounds.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from array import array
from pathlib import Path

from warehouse.config import parse_config
from warehouse.events import JobFinished, PartitionArrived
from warehouse.scheduler import Scheduler


def workload(n_tables: int, tracks: int, load: float, seed: int = 1, chop: str | float | None = "auto",
             policy: str = "auto", rollout: dict | None = None):
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
                        "scheduler": {"tracks": tracks, "learn_costs": False, "chop": chop,
                                      **({"policy": policy} if policy != "auto" else {}),
                                      **({"rollout": rollout} if rollout else {})}})
    phases = [rng.uniform(0, p) for p in periods]
    return cfg, periods, phases


def run(n_tables: int, tracks: int, events: int, load: float = 1.0, measure_memory: bool = False,
        chop: str | float | None = "auto", policy: str = "auto", rollout: dict | None = None) -> dict:
    cfg, periods, phases = workload(n_tables, tracks, load, chop=chop, policy=policy, rollout=rollout)
    s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    q: list = [(phases[i], 0, i, None) for i in range(n_tables)]
    heapq.heapify(q)
    seq = 1
    counter = [0] * n_tables
    times = array("q", bytes(8 * events))  # preallocated: the memory figure is the scheduler's
    cpu = array("q", bytes(8 * events))  # the same calls' CPU time (this thread's): a loaded machine's waits left out
    mem: list[tuple[int, int]] = []
    gc.collect()
    if measure_memory:
        tracemalloc.start()
    perf, thread = time.perf_counter_ns, time.thread_time_ns
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
        c0, t0 = thread(), perf()
        started = s.handle(ev, now)
        times[n] = perf() - t0
        cpu[n] = thread() - c0
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
    times, cpu = sorted(times), sorted(cpu)
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
        "max_us": times[-1] / 1000,
        "cpu_median_us": statistics.median(cpu) / 1000,
        "cpu_p99_us": cpu[int(len(cpu) * 0.99)] / 1000,
        "rollout": st.rollout,
    }


def compare(rev: str, sizes: list[tuple[int, ...]], rounds: int, load: float, chop: str,
            policies: tuple[str, ...] = ("auto",), rollout: dict | None = None) -> None:
    """This tree's engine against commit `rev`'s, paired and alternating (see the module docstring);
    each size under each of `policies` (rollout: with `rollout`'s settings)."""
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    from scripts.revtree import describe_head, export

    with tempfile.TemporaryDirectory(prefix="bench_scheduler_") as tmp:
        commit = export(rev, Path(tmp))
        trees = {"base": Path(tmp) / "tree", "new": root}
        print(f"base {commit[:10]} against this tree ({describe_head()}); {rounds} rounds, each run in a fresh process")
        print(f"{'tables':>7} {'tracks':>6} {'events':>8} {'policy':>8} {'base median/p99 µs':>19} {'new median/p99 µs':>18} "
              f"{'new/base median':>15} {'p99':>6}  {'CPU median/p99 µs base | new':>30}  rollout rounds base | new")
        for n, t, e in sizes:
            for policy in policies:
                got: dict[str, list[dict]] = {"base": [], "new": []}
                for r in range(rounds):
                    for side in (("base", "new") if r % 2 == 0 else ("new", "base")):
                        cmd = [sys.executable, __file__, "--child", f"{n}/{t}/{e}", "--load", str(load), "--chop", chop,
                               "--child-policy", policy]
                        if rollout:
                            cmd += ["--rollout-settings", json.dumps(rollout)]
                        out = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(trees[side])},
                                             check=True, text=True, capture_output=True).stdout
                        got[side].append(json.loads(out))
                med = {k: statistics.median(x["median_us"] for x in v) for k, v in got.items()}
                p99 = {k: statistics.median(x["p99_us"] for x in v) for k, v in got.items()}
                cpu = {k: statistics.median(x["cpu_p99_us"] for x in v) for k, v in got.items()}
                cmed = {k: statistics.median(x["cpu_median_us"] for x in v) for k, v in got.items()}
                rm = statistics.median(b["median_us"] / a["median_us"] for a, b in zip(got["base"], got["new"], strict=True))
                rp = statistics.median(b["p99_us"] / a["p99_us"] for a, b in zip(got["base"], got["new"], strict=True))
                ro = {k: "; ".join("/".join(str(x) for x in r["rollout"]) for r in v if r["rollout"]) for k, v in got.items()}
                print(f"{n:>7} {t:>6} {e:>8} {policy:>8} {med['base']:>9.1f} / {p99['base']:<7.1f} "
                      f"{med['new']:>8.1f} / {p99['new']:<7.1f} {rm:>14.2f}× {rp:>5.2f}×  "
                      f"{cmed['base']:>6.1f} / {cpu['base']:<8.1f} | {cmed['new']:>6.1f} / {cpu['new']:<8.1f}  "
                      f"{ro['base'] or '-'} | {ro['new'] or '-'}", flush=True)
    print("(median of the rounds' figures; ratios are the median of the paired rounds, < 1 = this tree faster;"
          " rollout rounds: weighed/overrides/fallbacks per round)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--memory-events", type=int, default=1_000_000)
    ap.add_argument("--load", type=float, default=1.0, help="offered utilization per track (1.0 = saturated)")
    ap.add_argument("--chop", default="auto", help="chop: auto (default), a number c, or none")
    ap.add_argument("--sizes", help="tables/tracks/events,… e.g. 100000/256/200000 (default: all four)")
    ap.add_argument("--against", metavar="REV", help="compare with commit REV's engine, paired runs in one invocation")
    ap.add_argument("--rounds", type=int, default=3, help="paired rounds with --against (default 3)")
    ap.add_argument("--rollout", action="store_true", help="each size also under policy: rollout, side by side")
    ap.add_argument("--rollout-settings", type=json.loads, default=None, metavar="JSON",
                    help='with --rollout: scheduler.rollout settings, e.g. \'{"budget_events": 60}\'')
    ap.add_argument("--child", help=argparse.SUPPRESS)  # one run, its figures as JSON (--against)
    ap.add_argument("--child-policy", default="auto", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        n, t, e = (int(x) for x in a.child.split("/"))
        r = run(n, t, e, a.load, chop=None if a.chop == "none" else a.chop if a.chop == "auto" else float(a.chop),
                policy=a.child_policy, rollout=a.rollout_settings if a.child_policy == "rollout" else None)
        ro = r["rollout"]
        print(json.dumps({**{k: r[k] for k in ("median_us", "p99_us", "cpu_median_us", "cpu_p99_us", "busy_share")},
                          "rollout": [ro.decisions, ro.overrides, ro.fallbacks] if ro is not None else None}))
        return
    chop = None if a.chop == "none" else a.chop if a.chop == "auto" else float(a.chop)
    sizes = [(30, 4, 200_000), (1_000, 16, 200_000), (10_000, 64, 200_000), (100_000, 256, 200_000)]
    if a.sizes:
        sizes = [tuple(int(x) for x in part.split("/")) for part in a.sizes.split(",")]
    if a.quick:
        sizes = [(n, t, e // 10) for n, t, e in sizes]
    if a.against:
        compare(a.against, sizes, a.rounds, a.load, a.chop, ("auto", "rollout") if a.rollout else ("auto",),
                a.rollout_settings)
        return
    from sim.progress import track
    if a.rollout:
        print(f"rollout settings: {a.rollout_settings or 'the defaults'}")
    print(f"{'tables':>7} {'tracks':>6} {'events':>8} {'policy':>8} {'median µs':>10} {'p99 µs':>8} {'max µs':>9} "
          f"{'CPU median/p99 µs':>18} {'busy':>6}  rollout rounds")
    for n, t, e in track(sizes, "bench_scheduler", what="{item[0]} tables", lines=False):  # a bar on a terminal
        for policy in ("auto", "rollout") if a.rollout else ("auto",):
            r = run(n, t, e, a.load, chop=chop, policy=policy, rollout=a.rollout_settings)
            ro = r["rollout"]
            rounds = (f"  weighed {ro.decisions}, overrides {ro.overrides}, fallbacks {ro.fallbacks}"
                      if ro is not None else "")
            print(f"{n:>7} {t:>6} {e:>8} {policy:>8} {r['median_us']:>10.1f} {r['p99_us']:>8.1f} {r['max_us']:>9.0f} "
                  f"{r['cpu_median_us']:>8.1f} / {r['cpu_p99_us']:<8.1f} {r['busy_share']:>6.1%}{rounds}", flush=True)
    ev = a.memory_events // (10 if a.quick else 1)
    if ev <= 0:  # --memory-events 0: decision times only
        return
    r = run(30, 4, ev, a.load, measure_memory=True, chop=chop)
    print(f"memory over {ev:,} events (30 tables, 4 tracks), traced bytes held by Python:")
    print("  " + "  ".join(f"{n // 1000}k:{b / 1e6:.2f}MB" for n, b in r["memory"]))
    print(f"  partitions pending at the end: {r['backlog']}")


if __name__ == "__main__":
    main()
