"""The `cron` contestant: what a team without a scheduler runs — every shortest period, refresh
every table whose sources have new data, in config order, on a pool of 4 workers.

    python -m scripts.live.cron --config freshet.yaml --ready FILE [--work DIR]

It uses Freshet's own landing-zone intake and append code (`warehouse.landing.intake.Intake`,
`warehouse.lake.executor.Executor`: the same reads, the same idempotent Delta appends, the same
derived SQL over windows), so the only difference to `freshet` is the scheduling:

- every tick (the shortest stream period), scan the landing zone;
- walk the tables in config order; a table whose previous refresh is still queued or running is
  skipped; a base table with new partitions gets one job loading all of them; a derived table
  whose sources' committed freshness (its trailing edge, floored to its granularity) is past its
  own gets one job for that window;
- jobs go to a FIFO pool of `scheduler.tracks` (4) threads.
"""

from __future__ import annotations

import argparse
import itertools
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.config import FreshetConfig, TableConfig, load_config
from warehouse.events import JobFinished, PartitionArrived, StartJob
from warehouse.freshness import floor_to, safe_freshness, trailing_edge

if TYPE_CHECKING:
    from warehouse.lake.executor import Executor

__all__ = ["base_job", "derived_job", "main", "settings"]


def settings(config: FreshetConfig) -> dict[str, Any]:
    """What this contestant runs with, for the benchmark's JSON."""
    return {"tick_seconds": min(s.period for s in config.streams), "order": "config order",
            "workers": config.scheduler.tracks, "pool": "track-0 (every job; FIFO inside)", "spark_conf": {}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--ready", required=True, help="touch this file once Spark is up")
    ap.add_argument("--work", help="unused (the other peers keep checkpoints there)")
    args = ap.parse_args(argv)
    config = load_config(args.config)

    from warehouse.lake.executor import Executor
    from warehouse.lake.recovery import delta_log, recover
    from warehouse.lake.session import get_spark
    from warehouse.landing.intake import Intake

    spark = get_spark(config.spark)
    state = recover(config, delta_log(config, spark))
    intake = Intake(config, state)
    executor = Executor(config, spark, state)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tick = min(s.period for s in config.streams)
    pending: dict[str, list[PartitionArrived]] = {t.name: [] for t in config.tables if t.is_base}
    busy: dict[str, Future[object]] = {}
    ids = itertools.count(1)
    lock = threading.Lock()

    def run(job: StartJob) -> None:
        event = executor.execute(job)
        with lock:
            if isinstance(event, JobFinished):
                if job.kind == "base":
                    intake.archive(job)
            elif job.kind == "base":  # failed: its partitions wait for the next tick
                pending[job.table] = sorted([*job.arrivals, *pending[job.table]], key=lambda p: p.end)
            busy.pop(job.table, None)

    Path(args.ready).touch()
    with ThreadPoolExecutor(max_workers=config.scheduler.tracks, thread_name_prefix="cron") as pool:
        next_tick = time.time()
        while not stop.is_set():
            for arrival in intake.scan():
                for t in config.tables:
                    if t.stream == arrival.stream:
                        pending[t.name].append(arrival)
            for t in config.tables:  # config order
                with lock:
                    if t.name in busy:
                        continue
                    job = base_job(t.name, pending, next(ids)) if t.is_base else derived_job(
                        t, executor, next(ids))
                    if job is None:
                        continue
                    busy[t.name] = pool.submit(run, job)
            next_tick += tick
            stop.wait(max(0.0, next_tick - time.time()))
        pool.shutdown(wait=False, cancel_futures=True)
    return 0


def base_job(table: str, pending: dict[str, list[PartitionArrived]], job_id: int) -> StartJob | None:
    arrivals = sorted(pending[table], key=lambda p: (p.end, p.start))
    if not arrivals:
        return None
    pending[table] = []
    end = max(p.end for p in arrivals)
    return StartJob(job_id=job_id, table=table, track=0, kind="base", start=min(p.start for p in arrivals),
                    end=end, new_freshness=end, new_safe_freshness=safe_freshness(end, 0.0),
                    arrivals=tuple(arrivals))


def derived_job(t: TableConfig, executor: Executor, job_id: int) -> StartJob | None:
    srcs = [executor.table_state(s) for s in t.sources]
    edge = trailing_edge(s.safe_freshness for s in srcs)
    if edge is None:
        return None
    end = floor_to(edge, t.granularity)
    own = executor.table_state(t.name)
    start = own.freshness if own.freshness is not None else min(s.origin for s in srcs if s.origin is not None)
    if end <= start:
        return None
    return StartJob(job_id=job_id, table=t.name, track=0, kind="stateful" if t.is_stateful else "derived",
                    start=start, end=end,
                    new_freshness=end, new_safe_freshness=end, sources=tuple(t.sources))


if __name__ == "__main__":
    raise SystemExit(main())
