"""The first step of a job's pipeline: its inputs, each at one pinned version (docs/warehouse.md §4).

- A base job (§2.1 of *Scalable Scheduling of Updates in Streaming Data Warehouses*) reads its
  partitions' files with the stream's declared schema (`read_partitions`).
- A derived or stateful job (§2.2) pins each source at one Delta version (`pin_sources`: its
  latest when the job starts, or the versions a rebuild pinned) and reads it restricted to the
  job's window by time and partition column (`read_source`) — from the files the source's log
  names at that version when it can (`lake.files`), else through Delta (`versionAsOf`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.config import FreshetConfig, TableConfig
from warehouse.lake.delta import read_delta, spark_schema_ddl, table_path, time_column, window_filter
from warehouse.lake.outcome import JobError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from warehouse.lake.files import LiveFiles
    from warehouse.lake.recovery import DeltaLog

__all__ = ["pin_sources", "read_partitions", "read_source"]


def read_partitions(config: FreshetConfig, session: SparkSession, stream_name: str, files: list[str]) -> DataFrame:
    """The rows of a stream's partition files, read with its declared schema and format."""
    stream = config.stream(stream_name)
    ddl = spark_schema_ddl(stream.schema_)
    reader = session.read
    if ddl:
        reader = reader.schema(ddl)
    if not files:
        if not ddl:
            raise JobError(f"stream {stream_name!r} declares no schema: cannot load an empty partition")
        return session.createDataFrame([], ddl)
    if stream.format == "parquet":
        return reader.parquet(*files)
    if stream.format == "csv":
        return reader.option("header", "true").csv(list(files))
    return reader.json(list(files))


def pin_sources(config: FreshetConfig, log: DeltaLog, tc: TableConfig,
                pinned: dict[str, int] | None = None) -> dict[str, int]:
    """Source → the Delta version `tc`'s job reads: its latest now, or the one `pinned` names."""
    versions: dict[str, int] = {}
    for src in tc.sources:
        path = table_path(config, src)
        version = log.version(path) if pinned is None else pinned.get(src)
        if version is None:
            raise JobError(f"source table {src!r} of {tc.name!r} has no Delta table yet at {path}")
        versions[src] = version
    return versions


def read_source(config: FreshetConfig, session: SparkSession, files: LiveFiles | None, src: str, version: int,
                lo: float, hi: float) -> DataFrame:
    """The rows of source `src` at Delta `version` with event time in `(lo, hi]`: from the files
    its log names (`files`), or through Delta where those cannot say."""
    scfg = config.table(src)
    path = table_path(config, src)
    tcol = time_column(config, scfg)
    df = files.read(session, path, version, tcol, lo, hi) if files is not None else None
    return window_filter(read_delta(session, path, version) if df is None else df, scfg, tcol, lo, hi)
