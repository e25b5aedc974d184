"""OPTIMIZE and VACUUM of a Delta table: the maintenance jobs of `warehouse.upkeep` (Nova, SIGMOD 2011 §2.4).

Plain Delta SQL on the table's path, so it works the same over Spark Connect (docs/warehouse.md §2):

- `OPTIMIZE delta.`<path>`` — bin-packs small files into large ones (compaction). Its commit
  carries no Freshet txn; `lake.recovery` reads the log across it (it moves only the version).
- `VACUUM delta.`<path>`` — deletes the files no version within the retention references
  (garbage collection). Never below Delta's retention safety: the retention used is the larger of
  `vacuum_retain` and the table's `delta.deletedFileRetentionDuration` (Delta's default 7 days),
  and `retentionDurationCheck` is never disabled. Delta's RETAIN takes whole hours, so a
  `vacuum_retain` above the table's retention is rounded up to the next hour; at or below it, no
  RETAIN is given and Delta applies the table's own retention to the millisecond. Files of the
  current version are never deleted; those of an older version a running derived job pinned are
  protected by the Scheduler, which starts no VACUUM of a table while a dependent's job runs.

Figures come from Delta itself: `DESCRIBE DETAIL` (files in the current version) and the
`VACUUM START` commit's `sizeOfDataToDelete` (bytes reclaimed).

`run_maintenance` is the pipeline of such a job: the table must exist; the fence passed
(`lake.commit`: the warehouse lease still held with margin); one OPTIMIZE or VACUUM;
its commits carry no Freshet txn, so the table's next job plans from its log again (as after any
commit Freshet did not make itself).
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.config import TableConfig
from warehouse.events import StartJob
from warehouse.lake.delta import sql_path, table_path
from warehouse.lake.outcome import JobError, JobOutcome
from warehouse.upkeep import OPTIMIZE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.lake.commit import Lake

__all__ = ["DELTA_DEFAULT_RETENTION", "Maintained", "data_files", "optimize", "parse_interval", "run_maintenance",
           "table_retention", "vacuum"]

log = logging.getLogger("freshet.executor")

DELTA_DEFAULT_RETENTION = 7 * 86400.0  # delta.deletedFileRetentionDuration when the table sets none
_UNITS = {"millisecond": 0.001, "second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0, "week": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(millisecond|second|minute|hour|day|week)s?", re.IGNORECASE)


def run_maintenance(lake: Lake, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
    """OPTIMIZE or VACUUM the table of `job` (`job.kind`); what it did, from Delta's figures."""
    path = table_path(lake.config, tc.name)
    if lake.log.version(path) is None:
        raise JobError(f"table {tc.name!r} has no Delta table yet at {path}: nothing to {job.kind}")
    lake.fence()  # its commits carry no Freshet metadata, but write the log all the same
    try:
        if job.kind == OPTIMIZE:
            done = optimize(lake.spark, path)
        else:
            done = vacuum(lake.spark, path, lake.config.maintenance_of(tc).vacuum_retain)
    finally:
        lake.reread(tc.name)
    log.info("job %d (%s, %s): files %s -> %s, %d bytes reclaimed", job.job_id, job.kind, tc.name,
             done.files_before, done.files_after, done.bytes_reclaimed)
    return JobOutcome(job.job_id, tc.name, True, 0, time.monotonic() - t0, note=job.kind,
                      files=done.files_after, bytes_reclaimed=done.bytes_reclaimed)


@dataclass(frozen=True, slots=True)
class Maintained:
    """What a maintenance job did to the table."""

    files_before: int | None
    files_after: int | None
    bytes_reclaimed: int = 0
    retention: float | None = None  # VACUUM: the retention applied, seconds


def parse_interval(text: str) -> float | None:
    """Delta's `interval 7 days` / `interval 1 hour 30 minutes` → seconds; None if unreadable."""
    body = text.strip().lower().removeprefix("interval").strip()
    parts = _PART.findall(body)
    if not parts or _PART.sub("", body).strip():
        return None
    return sum(float(n) * _UNITS[u.lower()] for n, u in parts)


def table_retention(spark: SparkSession, path: str) -> float:
    """The table's `delta.deletedFileRetentionDuration` in seconds (Delta's default 7 days)."""
    for row in spark.sql(f"SHOW TBLPROPERTIES {sql_path(path)}").collect():
        if row["key"] == "delta.deletedFileRetentionDuration":
            parsed = parse_interval(str(row["value"]))
            if parsed is not None:
                return parsed
            log.warning("table %s: cannot read delta.deletedFileRetentionDuration %r; assuming Delta's default",
                        path, row["value"])
    return DELTA_DEFAULT_RETENTION


def data_files(spark: SparkSession, path: str) -> int | None:
    """Data files in the table's current version (`DESCRIBE DETAIL`)."""
    rows = spark.sql(f"DESCRIBE DETAIL {sql_path(path)}").select("numFiles").collect()
    return int(rows[0]["numFiles"]) if rows and rows[0]["numFiles"] is not None else None


def optimize(spark: SparkSession, path: str) -> Maintained:
    """Compact the table's small files (one OPTIMIZE commit, or none when nothing is worth it)."""
    before = data_files(spark, path)
    spark.sql(f"OPTIMIZE {sql_path(path)}").collect()
    return Maintained(before, data_files(spark, path))


def vacuum(spark: SparkSession, path: str, retain: float) -> Maintained:
    """Delete files unreferenced for longer than max(`retain`, the table's retention)."""
    floor = table_retention(spark, path)
    before = data_files(spark, path)
    if retain <= floor:
        if retain < floor:
            log.info("table %s: vacuum_retain %.0fs is below the table's retention %.0fs; Delta's applies",
                     path, retain, floor)
        spark.sql(f"VACUUM {sql_path(path)}").collect()
        used = floor
    else:
        hours = math.ceil(retain / 3600.0)
        spark.sql(f"VACUUM {sql_path(path)} RETAIN {hours} HOURS").collect()
        used = hours * 3600.0
    return Maintained(before, data_files(spark, path), _reclaimed(spark, path), used)


def _reclaimed(spark: SparkSession, path: str) -> int:
    """`sizeOfDataToDelete` of the newest VACUUM START commit (0 when Delta logged none)."""
    rows = spark.sql(f"DESCRIBE HISTORY {sql_path(path)} LIMIT 4").select("operation", "operationMetrics").collect()
    for r in rows:
        if r["operation"] == "VACUUM START":
            size = (r["operationMetrics"] or {}).get("sizeOfDataToDelete")
            return int(size) if size is not None else 0
    return 0
