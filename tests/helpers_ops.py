"""Drivers for tests and benchmarks, not for production:

* hand-built `SchedulerStats` snapshots for tests of the ops layer (metrics, API, status), so
  the HTTP and Prometheus shells are tested without the engine or Spark;
* `run_until_idle`: the landing zone loaded through the Scheduler and the real executor until
  nothing is left to do — a driver of the engine for Spark tests and `scripts/bench_delta.py`
  (the daemon's scheduler loop, `ops.loop`, is the one in production);
* `job_group`: a block's Spark jobs in a job group of their own, to count them afterwards.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from warehouse.config import FreshetConfig
from warehouse.events import JobFailed, JobFinished, StartJob, Tick
from warehouse.stats import SchedulerStats, TableStats, TrackPlanStats, TrackStats

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.lake.executor import Executor
    from warehouse.landing.intake import Intake

__all__ = ["RunReport", "job_group", "make_stats", "make_table", "run_until_idle"]


def make_table(name: str, **kw: Any) -> TableStats:
    base: dict[str, Any] = dict(
        name=name, kind="base", state="idle", priority=1.0, inherited_priority=1.0, period=60.0,
        freshness=None, safe_freshness=None, arrived=None, staleness=None, weighted_staleness=0.0,
        backlog=0.0, pending_delta=0.0, pending_partitions=0, running_partitions=0, running_job=None, running_track=None, jobs_released=0, jobs_overdue=0,
        jobs_completed=0, jobs_failed=0, consecutive_failures=0, delta_f_total=0.0, alpha=1.0, beta=0.1,
        last_result=None, target_staleness=None, time_within_target=0.0, observed_time=0.0, home_tracks=(0,),
    )
    base.update(kw)
    return TableStats(**base)


def make_stats(now: float, tables: list[TableStats], tracks: int = 2, **kw: Any) -> SchedulerStats:
    running = {t.running_track: t for t in tables if t.running_track is not None}
    trs = tuple(
        TrackStats(track=i, running_job=running[i].running_job if i in running else None,
                   running_table=running[i].name if i in running else None, busy_time=10.0 * i,
                   clusters=(0,), free=i == tracks - 1)
        for i in range(tracks))
    plan = TrackPlanStats(partitioner="proportional", tracks=tracks,
                          clusters=(tuple(t.name for t in tables),), home_tracks=(tuple(range(tracks)),),
                          free_tracks=(tracks - 1,), utilization=0.5, feasible=True)
    base: dict[str, Any] = dict(
        now=now, tables=tuple(tables), tracks=trs, plan=plan,
        weighted_staleness=sum(t.weighted_staleness for t in tables),
        jobs_released=sum(t.jobs_released for t in tables), jobs_completed=sum(t.jobs_completed for t in tables),
        jobs_failed=sum(t.jobs_failed for t in tables),
        pending_jobs=sum(1 for t in tables if t.state in ("pending", "backoff")),
        running_jobs=sum(1 for t in tables if t.running_job is not None), events=7,
    )
    base.update(kw)
    return SchedulerStats(**base)


def at(stats: SchedulerStats, now: float) -> SchedulerStats:
    """The same snapshot stamped at another instant (for scrape-time tests)."""
    return replace(stats, now=now)


@dataclass(slots=True)
class RunReport:
    """What `run_until_idle` did."""

    jobs: int = 0
    failed: int = 0
    rows: int = 0
    wall: float = 0.0
    events: list[Any] | None = None


def run_until_idle(
    config: FreshetConfig,
    spark: SparkSession,
    *,
    retry_failed: bool = False,
    timeout: float | None = None,
    scheduler: Any = None,
    intake: Intake | None = None,
    executor: Executor | None = None,
    on_event: Any = None,
) -> tuple[RunReport, Any]:
    """Load everything in the landing zone through the Scheduler with one thread per track.

    A small shell for tests and benchmarks (the daemon, `ops.loop`, is the real one): recover from the Delta logs, scan the landing
    zone, then feed the Scheduler's StartJobs to `tracks` worker threads and their outcomes back
    (a finished base job's partitions are archived by the intake),
    until nothing is running or released. With `retry_failed`, back-offs are waited out too (until
    `timeout`). Returns the report and the Scheduler (for its learned α, β).
    """
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from warehouse.lake.executor import Executor
    from warehouse.lake.recovery import delta_log, recover
    from warehouse.landing.intake import Intake
    from warehouse.scheduler import Scheduler

    t0 = time.time()
    if intake is None or executor is None or scheduler is None:
        state = recover(config, delta_log(config, spark))
        intake = intake or Intake(config, state)
        executor = executor or Executor(config, spark, state)
        scheduler = scheduler or Scheduler(config, now=time.time(), recovered=state.recovered,
                                           first_job=state.next_job_id)
    report = RunReport()
    todo: list[StartJob] = []
    for arrival in intake.scan():
        todo += scheduler.handle(arrival, time.time())
    running: dict[Future[Any], StartJob] = {}
    with ThreadPoolExecutor(max_workers=config.scheduler.tracks, thread_name_prefix="track") as pool:
        while True:
            for job in todo:
                running[pool.submit(executor.execute, job)] = job
            todo = []
            if not running:
                wake = scheduler.next_wakeup()
                if not retry_failed or wake is None or (timeout is not None and time.time() - t0 > timeout):
                    break
                time.sleep(max(0.0, wake - time.time()))
                todo += scheduler.handle(Tick(), time.time())
                continue
            done, _ = wait(list(running), timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in done:
                job = running.pop(fut)
                event = fut.result()
                if isinstance(event, JobFinished):
                    intake.archive(job)
                report.jobs += 1
                if isinstance(event, JobFailed):
                    report.failed += 1
                else:
                    report.rows += event.rows
                if on_event is not None:
                    on_event(event)
                todo += scheduler.handle(event, time.time())
    report.wall = time.time() - t0
    return report, scheduler


@contextlib.contextmanager
def job_group(spark: SparkSession, name: str) -> Iterator[Callable[[], list[int]]]:
    """The block's Spark jobs (this thread's) in job group `name`; yields what gives their ids,
    to call after the block (after a snapshot warm-up it leaves behind, when that must count)."""
    sc = spark.sparkContext
    sc.setJobGroup(name, name)
    try:
        yield lambda: list(sc.statusTracker().getJobIdsForGroup(name))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
