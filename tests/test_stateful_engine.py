"""A stateful table in the engine (issue 21): released and chopped like a derived table, its
cost in the increment, never a window rewrite — a late partition, a backfill or a changed
increment start no recompute job. The engine alone (no Spark)."""

from __future__ import annotations

from tests.helpers_engine import config
from warehouse.events import Backfill, JobFinished, PartitionArrived, Reconfigure, StartJob
from warehouse.scheduler import Scheduler

INC = ("SELECT k, count(*) AS n, max(ts) AS ts FROM raw WHERE ts > :window_start AND ts <= :window_end "
       "GROUP BY k")


def _cfg(inc: str = INC) -> object:
    streams = [{"name": "s", "period": 60}]
    tables = [{"name": "raw", "stream": "s", "cost": {"alpha": 1, "beta": 0.01}},
              {"name": "state", "kind": "stateful", "sources": ["raw"], "key": ["k"], "increment": inc,
               "fold": {"n": "sum", "ts": "max"}, "priority": 5, "cost": {"alpha": 1, "beta": 0.01}},
              {"name": "roll", "sources": ["raw"], "granularity": 300, "cost": {"alpha": 1, "beta": 0.01},
               "sql": "SELECT window(ts, '5 minutes').end AS ts, count(*) AS n FROM raw GROUP BY 1"}]
    return config(streams, tables, chop=3)


def _run(s: Scheduler, jobs: list[StartJob], now: float, log: list[StartJob]) -> float:
    while jobs:
        job = jobs.pop(0)
        log.append(job)
        now += 1
        jobs += s.handle(JobFinished(job_id=job.job_id, duration=1), now)
    return now


def _arrive(s: Scheduler, i: int, now: float) -> list[StartJob]:
    return s.handle(PartitionArrived(stream="s", partition_id=f"p{i}", start=i * 60.0, end=(i + 1) * 60.0), now)


def test_stateful_jobs_fold_consecutive_windows_and_never_recompute():
    s = Scheduler(_cfg(), now=0)
    log: list[StartJob] = []
    now = 0.0
    for i in [*range(0, 7), *range(8, 20)]:  # minute 7 held back, then late
        now = _run(s, _arrive(s, i, now), now, log)
    mine = [j for j in log if j.table == "state"]
    assert mine and all(j.kind != "recompute" for j in mine)
    assert [(j.start, j.end) for j in mine] == list(zip([0.0] + [j.end for j in mine[:-1]], [j.end for j in mine],
                                                        strict=True))  # consecutive windows, each folded once
    assert mine[-1].end == 1200
    log.clear()
    now = _run(s, _arrive(s, 7, now), now, log)  # late: the derived roll-up is recomputed, the state is not
    assert [j.table for j in log if j.kind == "recompute"] == ["roll"]
    assert not [j for j in log if j.table == "state"]
    assert not [j for j in s.handle(Backfill(table="state", start=0, end=600, reason="ops"), now)
                if j.table == "state"]  # nothing to rewrite: the state holds folds, not windows
    jobs = s.handle(Reconfigure(config=_cfg(INC.replace("count(*)", "count(k)"))), now)  # a changed increment
    assert not [j for j in jobs if j.table == "state"]
    stats = next(t for t in s.stats(now).tables if t.name == "state")
    assert stats.recompute_pending == 0 and stats.refresh_mode == "incremental" and stats.freshness == 1200
