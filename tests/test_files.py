"""A source's live files at a pinned version, from its Delta log (warehouse/lake/files.py), against
Delta's own read of the same version: the same files, the same rows; and what it saves a derived
job (its Spark jobs, counted with Spark's status tracker)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import MINUTE, T0, make_config, write_minutes

from tests.helpers_ops import job_group
from warehouse.events import StartJob
from warehouse.lake.delta import read_delta, table_path, utc, window_filter
from warehouse.lake.executor import Executor
from warehouse.lake.files import LiveFiles
from warehouse.landing.intake import Intake

pytestmark = pytest.mark.spark


def _job(job_id: int, table: str, kind: str, i: int, arrivals: tuple[Any, ...] = ()) -> StartJob:
    start, end = T0 + i * MINUTE, T0 + (i + 1) * MINUTE
    return StartJob(job_id=job_id, table=table, track=0, kind=kind, start=start, end=end,
                    new_freshness=end, new_safe_freshness=end, arrivals=arrivals)


def _load(ex: Executor, arrivals: list[Any], minutes: range, job_id: int = 0,
          tables: tuple[tuple[str, str], ...] = (("m", "m_raw"), ("a", "a_raw"))) -> int:
    for i in minutes:
        for stream, table in tables:
            job_id += 1
            mine = tuple(a for a in arrivals if a.stream == stream and a.partition_id == f"{stream}-{i:04d}")
            assert ex.run(_job(job_id, table, "base", i, mine)).committed
    return job_id


def _delta_files(spark: Any, path: str, version: int) -> set[str]:
    """The files Spark's Delta reader reads at `version`."""
    return {os.path.realpath(f.removeprefix("file://").removeprefix("file:"))
            for f in read_delta(spark, path, version).inputFiles()}


def _delta_rs_files(path: str, version: int) -> set[str]:
    """The files delta-rs (another reader of the same log) reads at `version`."""
    from deltalake import DeltaTable

    return {os.path.realpath(f.removeprefix("file://")) for f in DeltaTable(path, version=version).file_uris()}


def _rows(df: Any) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_the_live_files_are_deltas_files_at_every_version_and_read_the_same_rows(spark, tmp_path: Path) -> None:
    """Twelve appends (a checkpoint at version 10), an OPTIMIZE that removes them all: at each
    version the files named are the files delta-rs reads (and Spark's Delta, at the first, the
    checkpoint's and the last), from a warm cache brought forward commit by commit and from a cold
    one replayed from the checkpoint; a window read gives Delta's rows in Delta's column order (the
    partition column included)."""
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 12)
    ex = Executor(cfg, spark)
    _load(ex, Intake(cfg).scan(), range(12), tables=(("m", "m_raw"),))  # (m_raw alone is read here)
    path = table_path(cfg, "m_raw")
    spark.sql(f"OPTIMIZE delta.`{path}`").collect()
    latest = ex.log.version(path)
    assert latest == 12 and any(n.endswith(".checkpoint.parquet") for n in os.listdir(Path(path) / "_delta_log"))
    warm = LiveFiles()
    for v in range(latest + 1):
        snap = warm.snapshot(path, v, "ts")
        assert snap is not None
        named = {os.path.realpath(os.path.join(path, f)) for f in snap.files}
        assert named == _delta_rs_files(path, v), v
        if v in (0, 10, latest):
            assert named == _delta_files(spark, path, v), v
    cold = LiveFiles()
    assert cold.snapshot(path, latest, "ts").files == warm.snapshot(path, latest, "ts").files
    assert cold.replays == 1  # from the checkpoint at 10, then commits 11 and 12
    assert cold.snapshot(path, 3, "ts") is not None and cold.replays == 2  # an older version: replayed
    tc = cfg.table("m_raw")
    lo, hi = T0 + 3 * MINUTE, T0 + 5 * MINUTE
    for v in (7, latest):
        mine = warm.read(spark, path, v, "ts", lo, hi)
        theirs = read_delta(spark, path, v)
        assert mine is not None and mine.columns == theirs.columns
        assert _rows(window_filter(mine, tc, "ts", lo, hi)) == _rows(window_filter(theirs, tc, "ts", lo, hi))
    # the statistics keep a read to the files of the window (before the OPTIMIZE: one a minute)
    assert len(warm.snapshot(path, 7, "ts").overlapping(lo, hi)) == 2


def test_a_log_it_cannot_read_alone_is_read_through_delta(spark, tmp_path: Path) -> None:
    """A commit missing from the log, deletion vectors (a reader feature), column mapping: None,
    and the derived job reads those sources through Delta — with the same rows."""
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 3)
    write_minutes(cfg, "a", 0, 3)
    ex = Executor(cfg, spark)
    _load(ex, Intake(cfg).scan(), range(3))
    path = table_path(cfg, "m_raw")
    assert LiveFiles().snapshot(path, 2, "ts") is not None
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    assert LiveFiles().snapshot(path, 3, "ts") is None
    apath = table_path(cfg, "a_raw")
    spark.sql(f"ALTER TABLE delta.`{apath}` SET TBLPROPERTIES ('delta.minReaderVersion' = '2', "
              "'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name')")
    assert LiveFiles().snapshot(apath, 3, "ts") is None
    lost = tmp_path / "lost"
    lost.mkdir()
    os.rename(Path(path) / "_delta_log" / f"{1:020d}.json", lost / "1.json")
    assert LiveFiles().snapshot(path, 2, "ts") is None  # no checkpoint, and a gap at version 1
    os.rename(lost / "1.json", Path(path) / "_delta_log" / f"{1:020d}.json")
    out = ex.run(_job(100, "a_m", "derived", 2))
    assert out.committed
    rows = read_delta(spark, table_path(cfg, "a_m"), None).where(f"ts > '{utc(T0 + 2 * MINUTE).isoformat()}'")
    assert out.rows == rows.count() > 0 and rows.where("m_rows > 0").count() > 0


def test_a_band_join_update_runs_no_delta_scan(spark, tmp_path: Path) -> None:
    """The band join's sources are read from the files their logs name: the update is the query's
    own Spark jobs and the write (a broadcast, the aggregate's shuffle, the write: 3), not a Delta
    scan of each source besides (5 at 98e438b, the snapshots warm); the rows are the same as with
    the sources read through Delta."""
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 5)
    write_minutes(cfg, "a", 0, 5)
    ex = Executor(cfg, spark)
    job_id = _load(ex, Intake(cfg).scan(), range(5))
    assert ex.warmer.idle(60)
    counts = []
    for i in (1, 2, 3):
        job_id += 1
        with job_group(spark, f"files-{job_id}") as jobs:
            assert ex.run(_job(job_id, "a_m", "derived", i)).committed
        assert ex.warmer.idle(60)
        counts.append(len(jobs()))
    assert max(counts[1:]) <= 3, counts  # the first job creates the table: one job more
    mine = _rows(read_delta(spark, table_path(cfg, "a_m"), None).drop("date"))
    delta_cfg = make_config(tmp_path / "delta")
    write_minutes(delta_cfg, "m", 0, 5)
    write_minutes(delta_cfg, "a", 0, 5)
    through = Executor(delta_cfg, spark)
    through.files = None  # every source read through Delta
    job_id = _load(through, Intake(delta_cfg).scan(), range(5), job_id)
    for i in (1, 2, 3):
        job_id += 1
        assert through.run(dataclasses.replace(_job(job_id, "a_m", "derived", i))).committed
    assert mine == _rows(read_delta(spark, table_path(delta_cfg, "a_m"), None).drop("date")) and mine
