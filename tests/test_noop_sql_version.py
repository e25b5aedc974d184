"""A no-op retry after an unknown outcome records the SQL version its earlier attempt committed
: the executor's own no-op (lake.outcome.noop_outcome) over the state its recovery
reads from the Delta log (lake.recovery._replay), fed to the engine. No Spark: the log is the
commit JSON the executor writes; the engine is the pure Scheduler."""

from __future__ import annotations

import json

from tests.helpers_engine import config
from warehouse.events import JobFailed, JobFinished, PartitionArrived, StartJob
from warehouse.lake.delta import app_id, ms, next_txn_version
from warehouse.lake.outcome import noop_outcome
from warehouse.lake.recovery import _replay
from warehouse.recompute import VersionMap
from warehouse.scheduler import Scheduler

ROLLUP = "SELECT window(ts, '5 minutes').end AS ts, k, count(*) AS n FROM raw GROUP BY 1, 2"


def _cfg():
    streams = [{"name": "s", "period": 60}]
    tables = [{"name": "raw", "stream": "s", "cost": {"alpha": 1, "beta": 0.01}},
              {"name": "roll", "sources": ["raw"], "granularity": 300, "sql": ROLLUP, "priority": 5,
               "cost": {"alpha": 1, "beta": 0.01}}]
    return config(streams, tables, chop=3)


def _commit(job: StartJob, txn: int | None, version: int) -> tuple[int, list[dict]]:
    """The commit a derived job's attempt writes (lake.derived.run_derived: txn + userMetadata)."""
    meta = {"freshet": 1, "kind": "derived", "job_id": job.job_id, "partitions": {}, "freshness": job.end,
            "safe_freshness": job.new_safe_freshness, "window": [job.start, job.end], "sources": {"raw": 3},
            "sql_version": job.sql_version, "txn": next_txn_version(job.end, txn)}
    return version, [{"txn": {"appId": app_id(job.table), "version": ms(job.end)}},
                     {"commitInfo": {"timestamp": 1000 * version, "operation": "WRITE",
                                     "userMetadata": json.dumps(meta, sort_keys=True)}}]


def _roll_job(s: Scheduler, now: float) -> tuple[StartJob, float]:
    """Load raw until roll's first job starts; that job."""
    jobs: list[StartJob] = []
    for i in range(12):
        now += 60
        jobs += s.handle(PartitionArrived(stream="s", partition_id=f"p{i}", start=i * 60.0, end=(i + 1) * 60.0), now)
        while jobs:
            job = jobs.pop(0)
            if job.table == "roll":
                return job, now
            now += 1
            jobs += s.handle(JobFinished(job_id=job.job_id, duration=1.0), now)
    raise AssertionError("roll never started")


def test_the_noop_outcome_names_the_version_the_log_holds_over_the_window():
    job = StartJob(job_id=7, table="roll", track=0, kind="derived", start=0.0, end=600.0, new_freshness=600.0,
                   new_safe_freshness=600.0, sql_version="v1")
    st = _replay(app_id("roll"), None, None, [_commit(job, None, 0)])
    assert st.freshness == 600.0
    out = noop_outcome(job, 0.01, st, "already committed")
    assert not out.committed and out.sql_version == "v1" and out.event().sql_version == "v1"
    # the window holds two versions (or a gap): none is named, the engine counts it as an old SQL
    mixed = _replay(app_id("roll"), None, None, [_commit(job, None, 0)])
    mixed.versions.set(300.0, 600.0, "v0")
    assert noop_outcome(job, 0.01, mixed, "already committed").sql_version is None
    assert VersionMap([(0.0, 300.0, "a")]).over(0.0, 600.0) is None
    assert VersionMap([(0.0, 900.0, "a")]).over(300.0, 600.0) == "a"


def test_a_noop_retry_after_an_unknown_outcome_records_the_committed_sql_version():
    s = Scheduler(_cfg(), now=0)
    job, now = _roll_job(s, 0.0)
    assert job.kind == "derived" and job.sql_version
    # the attempt commits, then the worker dies before it reports: the daemon reports it failed
    log = [_commit(job, None, 0)]
    now += 1
    s.handle(JobFailed(job_id=job.job_id, reason="outcome unknown"), now)
    retry: list[StartJob] = []
    for t in (now + 60, now + 600, now + 3600):  # past the back-off
        retry += [j for j in s.handle(PartitionArrived(stream="s", partition_id=f"late{t}", start=10_000 + t,
                                                       end=10_060 + t), t) if j.table == "roll"]
        if retry:
            now = t
            break
    assert retry and (retry[0].start, retry[0].end) == (job.start, job.end)
    # the retry re-reads the log (lake.executor: outcome unknown) and finds the window committed
    st = _replay(app_id("roll"), None, None, log)
    out = noop_outcome(retry[0], 0.01, st, "its window ends at or before the committed freshness")
    jobs = s.handle(out.event(), now + 1)
    roll = next(t for t in s.stats(now + 1).tables if t.name == "roll")
    assert roll.windows_old_sql == 0  # before the fix: the 2 windows counted as an old SQL's …
    assert not [j for j in jobs if j.table == "roll" and j.kind == "recompute"]  # … and were rewritten
