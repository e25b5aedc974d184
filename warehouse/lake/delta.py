"""Delta Lake reads and idempotent writes with Spark (docs/warehouse.md §5).

Every Freshet commit carries Delta's idempotent-write pair (`txnAppId = freshet/<table>`,
`txnVersion` = the new freshness in epoch milliseconds, or one above the last version when
freshness does not move) and a `userMetadata` JSON naming what it loaded; `lake.recovery` reads
them back.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import TYPE_CHECKING, Any

from warehouse.config import FreshetConfig, TableConfig
from warehouse.errors import WarehouseError
from warehouse.paths import is_local, local_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

__all__ = [
    "DERIVED_TIME_COLUMN",
    "app_id",
    "append_idempotent",
    "commit_message",
    "overwrite_idempotent",
    "is_local_root",
    "ms",
    "next_txn_version",
    "partition_column",
    "range_predicate",
    "read_delta",
    "spark_schema_ddl",
    "sql_path",
    "table_path",
    "time_column",
    "utc",
    "window_filter",
    "with_partition_column",
]

DERIVED_TIME_COLUMN = "ts"


def ms(t: float) -> int:
    """Epoch seconds → the epoch milliseconds used as txnVersion."""
    return int(round(t * 1000.0))


def utc(t: float) -> dt.datetime:
    """Epoch seconds → an aware UTC datetime (pyspark converts aware datetimes exactly)."""
    return dt.datetime.fromtimestamp(t, dt.UTC)


def app_id(table: str) -> str:
    return f"freshet/{table}"


def is_local_root(root: str) -> bool:
    """A plain path or `file:`: the daemon can read the Delta logs itself, without Spark
    (`warehouse.paths`, the one resolver)."""
    return is_local(root)


def sql_path(path: str) -> str:
    """The table at `path` as Spark SQL names it: delta.`<path>`, backticks doubled."""
    return "delta.`" + path.replace("`", "``") + "`"


def table_path(config: FreshetConfig, table: str) -> str:
    """`<warehouse.root>/<table>`: an absolute local path, or the URI (`s3a://bucket/wh/<table>`).

    With `spark.remote` the path is resolved here and used by the Spark Connect server: the
    server must see the same paths (docs/warehouse.md §2, shared storage).
    """
    root = config.warehouse.root
    local = local_path(root)
    if local is None:
        if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://[^\s`]+$", root):
            raise WarehouseError(f"warehouse.root {root!r} is not a path or a URI Spark can read")
        return root.rstrip("/") + "/" + table
    return str(local / table)


def time_column(config: FreshetConfig, table: TableConfig) -> str:
    """The event-time column: the stream's `time_column` for base tables, `ts` for derived."""
    return config.stream(table.stream).time_column if table.stream else DERIVED_TIME_COLUMN


def partition_column(table: TableConfig) -> str:
    """The Delta partition column derived from the time column (`date` or `hour`)."""
    return table.partition_by


def next_txn_version(new_freshness: float, last: int | None) -> int:
    """The new freshness in ms, or one above `last` when freshness does not move (§4.4)."""
    v = ms(new_freshness)
    return v if last is None or v > last else last + 1


# ---- writing --------------------------------------------------------------------------------------
def commit_message(metadata: dict[str, Any], txn_version: int) -> str:
    """A Freshet commit's `userMetadata` JSON (with `txn`), as `lake.recovery` reads it back."""
    return json.dumps({"freshet": 1, **metadata, "txn": txn_version}, sort_keys=True)


def _writer(df: DataFrame, mode: str, *, table: str, txn_version: int, metadata: dict[str, Any],
            partition_by: str | None) -> DataFrameWriter:
    """A Delta write in `mode` carrying the txn pair `(freshet/<table>, txn_version)` and the
    commit's `userMetadata` (with `txn`): the one place a Freshet commit is shaped. No
    `partition_by`: an unpartitioned table (a stateful table's keyed state)."""
    w = df.write.format("delta").mode(mode)
    if partition_by is not None:
        w = w.partitionBy(partition_by)
    return (
        w.option("txnAppId", app_id(table))
        .option("txnVersion", str(txn_version))
        .option("userMetadata", commit_message(metadata, txn_version))
    )


def append_idempotent(
    df: DataFrame,
    path: str,
    *,
    table: str,
    txn_version: int,
    metadata: dict[str, Any],
    partition_by: str | None,
    merge_schema: bool = False,
    properties: dict[str, str] | None = None,
) -> None:
    """Append `df` to the Delta table at `path` as `(freshet/<table>, txn_version)`.

    Delta skips the write (a no-op, not an error) when `txn_version` is not above the version
    already recorded for the app id — so a replayed job appends nothing. The `userMetadata` JSON
    also carries `txn` (the version), so the commit can be found in `DESCRIBE HISTORY` when the
    log is read through Spark (lake.recovery.SparkLog).
    """
    w = _writer(df, "append", table=table, txn_version=txn_version, metadata=metadata, partition_by=partition_by)
    if merge_schema:  # an additive schema change of a derived SQL (a new column): Delta schema evolution
        w = w.option("mergeSchema", "true")
    for key, value in (properties or {}).items():  # table properties, set when the write creates the table
        w = w.option(key, value)
    w.save(path)


def overwrite_idempotent(
    df: DataFrame,
    path: str,
    *,
    table: str,
    txn_version: int,
    metadata: dict[str, Any],
    partition_by: str | None,
    replace_where: str | None = None,
    overwrite_schema: bool = False,
    merge_schema: bool = False,
) -> None:
    """Overwrite the rows matching `replace_where` (a recompute of a range, docs/warehouse.md §4)
    — or the whole table when it is None (a full refresh) — with `df`, as one commit carrying the
    same txn pair and `userMetadata` as `append_idempotent`. Delta checks that every written row
    matches `replace_where`. `overwrite_schema` (a rebuild) replaces the table's schema;
    `merge_schema` adds new columns (Delta schema evolution)."""
    w = _writer(df, "overwrite", table=table, txn_version=txn_version, metadata=metadata, partition_by=partition_by)
    if replace_where is not None:
        w = w.option("replaceWhere", replace_where)
    if overwrite_schema:
        w = w.option("overwriteSchema", "true")
    if merge_schema:
        w = w.option("mergeSchema", "true")
    w.save(path)


def range_predicate(table: TableConfig, tcol: str, lo: float, hi: float) -> str:
    """SQL for rows with `tcol` in `(lo, hi]`, pruned by the partition column too (a replaceWhere)."""
    from warehouse.sqltext import timestamp_literal

    lo_t, hi_t = utc(lo), utc(hi)
    if table.partition_by == "hour":
        part = f"hour >= '{lo_t.strftime('%Y-%m-%d-%H')}' AND hour <= '{hi_t.strftime('%Y-%m-%d-%H')}'"
    else:
        part = f"date >= DATE'{lo_t.date().isoformat()}' AND date <= DATE'{hi_t.date().isoformat()}'"
    return f"{part} AND `{tcol}` > {timestamp_literal(lo)} AND `{tcol}` <= {timestamp_literal(hi)}"


def with_partition_column(df: DataFrame, table: TableConfig, tcol: str, fallback: float) -> DataFrame:
    """Add `date` (UTC date) or `hour` (`yyyy-MM-dd-HH`) from `tcol` (or from `fallback`)."""
    from pyspark.sql import functions as F

    src = F.col(tcol) if tcol in df.columns else F.lit(utc(fallback))
    if table.partition_by == "hour":
        return df.withColumn("hour", F.date_format(src, "yyyy-MM-dd-HH"))
    return df.withColumn("date", F.to_date(src))


def window_filter(df: DataFrame, table: TableConfig, tcol: str, lo: float, hi: float) -> DataFrame:
    """Rows with `tcol` in `(lo, hi]`, pruned by the partition column as well (docs/warehouse.md §2)."""
    from pyspark.sql import functions as F

    lo_t, hi_t = utc(lo), utc(hi)
    if table.partition_by == "hour":
        pcol = F.col("hour")
        plo, phi = F.lit(lo_t.strftime("%Y-%m-%d-%H")), F.lit(hi_t.strftime("%Y-%m-%d-%H"))
    else:
        pcol = F.col("date")
        plo, phi = F.lit(lo_t.date()), F.lit(hi_t.date())
    if table.partition_by in df.columns:
        df = df.where((pcol >= plo) & (pcol <= phi))
    return df.where((F.col(tcol) > F.lit(lo_t)) & (F.col(tcol) <= F.lit(hi_t)))


def spark_schema_ddl(schema: dict[str, str]) -> str:
    """A stream's declared schema as a Spark DDL string (`ts TIMESTAMP, router STRING`)."""
    return ", ".join(f"`{c}` {t}" for c, t in schema.items())


def read_delta(spark: SparkSession, path: str, version: int | None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)
