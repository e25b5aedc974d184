"""The `priority-cron` contestant: `cron` (`scripts/live/cron.py`) as a team that knows
the tables' priorities would write it — the same intake, executor and job windows, scheduled by
priority.

    python -m scripts.live.priority_cron --config freshet.yaml --ready FILE [--work DIR]

- a 1 s tick (instead of the shortest period): the landing zone is scanned every second;
- the tables are walked by inherited priority (`scripts/live/tuning.py`, §3.3 `max`), highest
  first, and queued jobs wait in priority queues, not first in first out;
- a derived table is checked the moment one of its sources commits (a finished job wakes the
  walk), not at the next tick;
- two classes of work with their own workers and their own fair-scheduler pool: valuable tables
  (inherited priority ≥ 20) on `tracks − 1` workers in pool `track-0` (weight 10, minShare 1,
  FAIR inside), bulk tables on one worker in pool `track-1` (weight 1, FIFO): at most one bulk
  load at a time, and it gets the cores the valuable jobs leave. (Freshet's executor names a
  job's pool after its track, so the two pools are `track-0` and `track-1`.)
- `spark.sql.files.maxPartitionBytes` = 16 MB, so a burst partition is read in tasks of ~1 s and
  the fair scheduler can hand a core to a valuable job between them.
As in `cron`, a table whose job is queued or running gets no second one, and a base job loads
everything pending for its table.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import queue
import signal
import threading
import time
from pathlib import Path
from typing import Any

from scripts.live import tuning
from scripts.live.cron import base_job, derived_job
from warehouse.config import FreshetConfig, load_config
from warehouse.events import JobFinished, PartitionArrived, StartJob

__all__ = ["TICK", "main", "pools", "settings"]

TICK = 1.0  # seconds between landing-zone scans
VALUABLE_WEIGHT = 10


def pools() -> list[tuning.Pool]:
    return [tuning.Pool("track-0", weight=VALUABLE_WEIGHT, min_share=1, mode="FAIR"),
            tuning.Pool("track-1", weight=1, min_share=0, mode="FIFO")]


def workers(config: FreshetConfig) -> dict[str, int]:
    """Threads per class: the benchmark's concurrency (`scheduler.tracks`) minus one for valuable
    work, one for bulk."""
    return {"valuable": max(1, config.scheduler.tracks - 1), "bulk": 1}


def settings(config: FreshetConfig) -> dict[str, Any]:
    """What this contestant runs with, for the benchmark's JSON."""
    return {"tick_seconds": TICK, "workers": workers(config),
            "pools": {"valuable": tuning.pools_settings(pools())[0], "bulk": tuning.pools_settings(pools())[1]},
            "spark_conf": {"spark.sql.files.maxPartitionBytes": tuning.MAX_PARTITION_BYTES},
            "inherited_priorities": tuning.inherited(config), "valuable_at_or_above": tuning.VALUABLE,
            "derived_checked": "when a source commits, and every tick"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--ready", required=True, help="touch this file once Spark is up")
    ap.add_argument("--work", help="the allocation file goes here")
    args = ap.parse_args(argv)
    config = load_config(args.config)
    allocation = tuning.write_allocation(pools(), args.work)
    conf = {**config.spark.conf, "spark.sql.files.maxPartitionBytes": tuning.MAX_PARTITION_BYTES,
            "spark.scheduler.allocation.file": allocation.as_uri()}
    config = config.model_copy(update={"spark": config.spark.model_copy(update={"conf": conf})})

    from warehouse.lake.executor import Executor
    from warehouse.lake.recovery import delta_log, recover
    from warehouse.lake.session import get_spark
    from warehouse.landing.intake import Intake

    spark = get_spark(config.spark)
    state = recover(config, delta_log(config, spark))
    intake = Intake(config, state)
    executor = Executor(config, spark, state)
    stop, wake = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    ip, valuable = tuning.inherited(config), tuning.is_valuable(config)
    order = sorted(config.tables, key=lambda t: -ip[t.name])  # stable: config order among equals
    pending: dict[str, list[PartitionArrived]] = {t.name: [] for t in config.tables if t.is_base}
    busy: set[str] = set()
    ids, seq = itertools.count(1), itertools.count()
    lock = threading.Lock()
    queues: dict[bool, queue.PriorityQueue[tuple[float, int, StartJob | None]]] = {
        True: queue.PriorityQueue(), False: queue.PriorityQueue()}

    queued: dict[int, float] = {}

    def run(job: StartJob) -> None:
        began = time.time()
        event = executor.execute(job)
        print(json.dumps({"table": job.table, "kind": job.kind, "track": job.track, "ok": isinstance(event, JobFinished),
                          "queued": round(queued.pop(job.job_id, began), 3), "started": round(began, 3),
                          "ended": round(time.time(), 3)}), flush=True)  # the contestant's log: one line per job
        with lock:
            if isinstance(event, JobFinished):
                if job.kind == "base":
                    intake.archive(job)
            elif job.kind == "base":  # failed: its partitions wait for the next walk
                pending[job.table] = sorted([*job.arrivals, *pending[job.table]], key=lambda p: p.end)
            busy.discard(job.table)
        wake.set()  # its dependents may be ready now

    def worker(q: queue.PriorityQueue[tuple[float, int, StartJob | None]]) -> None:
        while True:
            job = q.get()[2]
            if job is None:
                return
            run(job)

    threads = [threading.Thread(target=worker, args=(queues[cls == "valuable"],), name=f"pcron-{cls}-{i}",
                                daemon=True)
               for cls, n in workers(config).items() for i in range(n)]
    for th in threads:
        th.start()
    Path(args.ready).touch()
    next_tick = time.time()
    while not stop.is_set():
        if time.time() >= next_tick:
            arrivals = intake.scan()
            with lock:
                for arrival in arrivals:
                    for t in config.tables:
                        if t.stream == arrival.stream:
                            pending[t.name].append(arrival)
            next_tick = max(next_tick + TICK, time.time())
        with lock:
            for t in order:
                if t.name in busy:
                    continue
                job = base_job(t.name, pending, next(ids)) if t.is_base else derived_job(t, executor, next(ids))
                if job is None:
                    continue
                v = valuable[t.name]
                busy.add(t.name)
                queued[job.job_id] = time.time()
                queues[v].put((-ip[t.name], next(seq), dataclasses.replace(job, track=0 if v else 1)))
        wake.wait(max(0.0, next_tick - time.time()))
        wake.clear()
    for q in queues.values():  # workers finish the job they run; queued ones are dropped
        while not q.empty():
            q.get_nowait()
    for th in threads:
        queues[th.name.startswith("pcron-valuable")].put((float("inf"), next(seq), None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
