"""Maintenance jobs on real Delta tables (Nova, SIGMOD 2011 §2.4, warehouse.upkeep, lake.maintain): OPTIMIZE
reduces the files, VACUUM never goes below Delta's retention, recovery reads the right state
across their commits, and an update job and maintenance of the same table never overlap."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MINUTE, T0, warehouse_dict, write_minutes
from test_delta import expected_base, table_rows

from tests.helpers_ops import job_group, run_until_idle
from warehouse.config import parse_config
from warehouse.events import StartJob
from warehouse.lake import maintain
from warehouse.lake.delta import table_path
from warehouse.lake.executor import Executor
from warehouse.lake.recovery import SparkLog, recover
from warehouse.lake.session import LISTING_TASKS, SESSION_CONF
from warehouse.landing.intake import Intake
from warehouse.scheduler import Scheduler

pytestmark = pytest.mark.spark

COLS = ["id", "k", "v"]


class Timed(Executor):
    """The real executor, recording when each job ran (to check that none overlap per table)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.spans: list[tuple[str, str, float, float]] = []
        self._spans_lock = threading.Lock()

    def execute(self, job: StartJob) -> Any:
        t0 = time.monotonic()
        try:
            return super().execute(job)
        finally:
            with self._spans_lock:
                self.spans.append((job.table, job.kind, t0, time.monotonic()))


def parquet_files(path: str) -> int:
    return sum(1 for _d, _s, files in os.walk(path) for f in files if f.endswith(".parquet")
               and "_delta_log" not in _d)


def test_optimize_compacts_vacuum_respects_retention_and_recovery_reads_across_them(spark, tmp_path: Path) -> None:
    data = warehouse_dict(tmp_path, tracks=2, chop=None)
    data["maintenance"] = {"optimize_every": 2, "vacuum_retain": 0}
    cfg = parse_config(data)
    state = recover(cfg)
    intake = Intake(cfg, state)
    ex = Timed(cfg, spark, state)
    sched = Scheduler(cfg, now=time.time(), recovered=state.recovered)
    path = table_path(cfg, "m_raw")
    for k in range(3):  # three loads of m_raw, one partition each: three commits, three small files
        write_minutes(cfg, "m", k, 1)
        report, _ = run_until_idle(cfg, spark, scheduler=sched, intake=intake, executor=ex)
        assert report.failed == 0
    kinds = [(t, kind) for t, kind, *_ in ex.spans]
    assert kinds.count(("m_raw", "optimize")) == 1  # after the second commit, not before
    history = {r["operation"]: r["operationMetrics"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()}
    assert history["OPTIMIZE"]["numRemovedFiles"] == "2" and history["OPTIMIZE"]["numAddedFiles"] == "1"
    assert maintain.data_files(spark, path) == 2  # 2 compacted into 1, then one more load
    m_raw = next(t for t in sched.stats(time.time()).tables if t.name == "m_raw")
    assert m_raw.upkeep.files == 1 and m_raw.upkeep.commits_since_optimize == 1
    for table in {t for t, *_ in ex.spans}:  # never a table's update beside its maintenance
        spans = sorted((a, b) for t, _k, a, b in ex.spans if t == table)
        assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False)), table

    # recovery across the OPTIMIZE commit (no Freshet txn in it): both log readers agree
    local = recover(cfg).tables["m_raw"]
    assert local.freshness == T0 + 3 * MINUTE and len(local.partitions) == 3
    assert local.commits_since_optimize == 1 and local.last_optimize is not None
    remote = SparkLog(spark).table_state(path, "m_raw")
    assert (remote.freshness, remote.txn_version, set(remote.partitions), remote.commits_since_optimize) == (
        local.freshness, local.txn_version, set(local.partitions), local.commits_since_optimize)

    # VACUUM with Delta's default retention (7 days): vacuum_retain 0 goes no lower, nothing deleted
    on_disk = parquet_files(path)
    vac = StartJob(job_id=900, table="m_raw", track=0, kind="vacuum", start=local.freshness, end=local.freshness,
                   new_freshness=local.freshness, new_safe_freshness=local.freshness)
    ev = ex.execute(vac)
    assert ev.bytes_reclaimed == 0 and parquet_files(path) == on_disk == 4
    # the table's own retention lowered to 1 second: VACUUM deletes the 2 compacted files
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
              "('delta.deletedFileRetentionDuration' = 'interval 1 seconds')")
    time.sleep(1.2)
    with job_group(spark, "test-vacuum") as jobs:
        ev = ex.execute(vac)
    assert ev.bytes_reclaimed > 0 and ev.files == 2 and parquet_files(path) == 2
    # its file listing in the session's tasks, and they are few: not Spark's default 10,000 (53 s
    # for this table on two cores)
    tracker = spark.sparkContext.statusTracker()
    tasks = [tracker.getStageInfo(s).numTasks for j in jobs() for s in tracker.getJobInfo(j).stageIds]
    assert tasks and max(tasks) <= int(SESSION_CONF[LISTING_TASKS]) <= 100, tasks
    assert table_rows(spark, cfg, "m_raw", COLS) == expected_base("m", range(3), COLS)
    after = recover(cfg).tables["m_raw"]
    assert (after.freshness, after.txn_version, after.partitions) == (local.freshness, local.txn_version,
                                                                      local.partitions)
    assert after.last_vacuum is not None and after.last_vacuum >= after.last_optimize
    # a restarted scheduler picks the history up: the vacuum clock runs from the last VACUUM
    s2 = Scheduler(parse_config({**data, "maintenance": {"optimize_every": 2, "vacuum_every": 3600}}),
                   now=time.time(), recovered=recover(cfg).recovered)
    up = next(t for t in s2.stats(time.time()).tables if t.name == "m_raw").upkeep
    assert up.commits_since_optimize == 1 and up.next_vacuum == pytest.approx(after.last_vacuum + 3600)


def test_parse_interval() -> None:
    assert maintain.parse_interval("interval 7 days") == 7 * 86400
    assert maintain.parse_interval("interval 1 hour 30 minutes") == 5400
    assert maintain.parse_interval("INTERVAL 2 seconds") == 2
    assert maintain.parse_interval("7 fortnights") is None
