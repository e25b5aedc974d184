"""The pieces behind the injected-fault behaviour, without Spark: `Intake.recheck` finds the
partitions of a failed job that can no longer be loaded as accepted, and the Scheduler drops
exactly those (`JobFailed.bad_partitions`) and keeps the rest pending."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import T0, make_config, write_minutes

from warehouse.events import JobFailed, JobFinished, StartJob, Tick
from warehouse.landing.intake import Intake
from warehouse.scheduler import Scheduler

NOW = T0 + 86400


def first_base_job(tmp: Path, minutes: int = 3) -> tuple[Intake, Scheduler, StartJob]:
    """The second m_raw job: `minutes` partitions that arrived while the first one ran."""
    cfg = make_config(tmp, chop=None)
    write_minutes(cfg, "m", 0, minutes + 1)
    intake = Intake(cfg, clock=lambda: NOW)
    sched = Scheduler(cfg, now=NOW)
    jobs: list[StartJob] = []
    for ev in intake.scan():
        jobs += sched.handle(ev, NOW)
    [first] = [j for j in jobs if j.table == "m_raw"]
    [job] = [j for j in sched.handle(JobFinished(job_id=first.job_id, duration=1.0), NOW) if j.table == "m_raw"]
    assert len(job.arrivals) == minutes
    return intake, sched, job


def test_recheck_finds_a_deleted_a_corrupted_and_a_rewritten_file(tmp_path: Path) -> None:
    intake, _, job = first_base_job(tmp_path, minutes=4)
    landing = tmp_path / "landing" / "m"
    p0, p1, p2, p3 = (a.partition_id for a in job.arrivals)
    assert intake.recheck(job) == {}  # all intact: a failure of Spark, not of the data
    (landing / p0 / "part-0.parquet").unlink()
    with (landing / p1 / "part-0.parquet").open("r+b") as fh:
        fh.seek(-4, os.SEEK_END)
        fh.write(b"XXXX")
    # p2 rewritten with other values: a valid Parquet file, same rows and window, other bytes
    f = landing / p2 / "part-0.parquet"
    t = pq.read_table(f)
    pq.write_table(t.set_column(t.schema.get_field_index("v"), "v", pa.array([9.0] * t.num_rows)), f)
    bad = intake.recheck(job)
    assert set(bad) == {p0, p1, p2}, bad
    assert "file missing" in bad[p0]
    assert "wrong format" in bad[p1]
    assert "fingerprint changed" in bad[p2]
    assert all(r.startswith("unloadable after acceptance:") for r in bad.values())


def test_the_scheduler_drops_the_bad_partitions_and_retries_the_rest(tmp_path: Path) -> None:
    _, sched, job = first_base_job(tmp_path)
    bad = job.arrivals[1].partition_id
    assert sched.handle(JobFailed(job_id=job.job_id, reason="boom", bad_partitions=(bad,)), NOW) == []
    wake = sched.next_wakeup()
    assert wake is not None
    retry = [j for j in sched.handle(Tick(), wake) if j.table == "m_raw"]
    assert [a.partition_id for a in retry[0].arrivals] == [job.arrivals[0].partition_id, job.arrivals[2].partition_id]


def test_a_plain_failure_keeps_every_partition(tmp_path: Path) -> None:
    _, sched, job = first_base_job(tmp_path)
    sched.handle(JobFailed(job_id=job.job_id, reason="Spark went away"), NOW)
    retry = [j for j in sched.handle(Tick(), sched.next_wakeup()) if j.table == "m_raw"]
    assert [a.partition_id for a in retry[0].arrivals] == [a.partition_id for a in job.arrivals]
