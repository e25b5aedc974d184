"""Hand-built `SchedulerStats` snapshots for tests of the ops layer (metrics, API, status).

They let the HTTP and Prometheus shells be tested without the engine or Spark.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from warehouse.stats import SchedulerStats, TableStats, TrackPlanStats, TrackStats

__all__ = ["make_stats", "make_table"]


def make_table(name: str, **kw: Any) -> TableStats:
    base: dict[str, Any] = dict(
        name=name, kind="base", state="idle", priority=1.0, inherited_priority=1.0, period=60.0,
        freshness=None, safe_freshness=None, arrived=None, staleness=None, weighted_staleness=0.0,
        backlog=0.0, pending_delta=0.0, pending_partitions=0, running_partitions=0, running_job=None, running_track=None, jobs_released=0,
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
