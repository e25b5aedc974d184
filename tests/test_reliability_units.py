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


def test_a_job_failure_reason_carries_the_java_root_cause():
    """What a full disk raised under a real daemon (a Py4JJavaError's text, shortened): the reason
    is one line with the innermost `Caused by:`; the same from the stack trace classic PySpark
    keeps beside a converted exception; nothing added when there is no chain or the first line says it."""
    from warehouse.lake.outcome import failure_reason

    text = ("An error occurred while calling o123.save.\n"
            ": org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
            "file:/srv/wh/m_raw. SQLSTATE: 58030\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$."
            "taskFailedWhileWritingRowsError(QueryExecutionErrors.scala:774)\n"
            "Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device\n"
            "\tat org.apache.hadoop.fs.RawLocalFileSystem$LocalFSFileOutputStream.write(RawLocalFileSystem.java:357)\n"
            "Caused by: java.io.IOException: No space left on device\n"
            "\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)\n\t... 42 more\n")

    class Py4JJavaError(Exception):
        pass

    reason = failure_reason(Py4JJavaError(text))
    assert reason == ("Py4JJavaError: : org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while "
                      "writing rows to file:/srv/wh/m_raw. SQLSTATE: 58030 (cause: java.io.IOException: No space "
                      "left on device)")

    class Captured(Exception):  # pyspark's CapturedException: the message, and the JVM trace beside it
        _stackTrace = text

    assert failure_reason(Captured("[TASK_WRITE_FAILED] Task failed")).endswith(
        "(cause: java.io.IOException: No space left on device)")
    assert failure_reason(ValueError("bad")) == "ValueError: bad"
    long = failure_reason(Py4JJavaError(": " + "x" * 2000 + "\nCaused by: java.io.IOException: No space left on device"))
    assert len(long) == 500 and long.endswith("(cause: java.io.IOException: No space left on device)")
