"""Delta Lake tables as the source of truth (DESIGN.md §4.4): idempotent appends and recovery.

Every Freshet commit carries Delta's idempotent-write pair (`txnAppId = freshet/<table>`,
`txnVersion` = the new freshness in epoch milliseconds, or one above the last version when
freshness does not move) and a `userMetadata` JSON naming what it loaded. Recovery replays a
table's `_delta_log/` — checkpoint and JSON commits, read directly with no Spark session — and
returns its freshness F, safe freshness F' (§2.2), last txn version and loaded partition ids.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.config import FreshetConfig, TableConfig
from warehouse.errors import WarehouseError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DERIVED_TIME_COLUMN",
    "RecoveryState",
    "TableState",
    "append_idempotent",
    "app_id",
    "delta_version",
    "ms",
    "next_txn_version",
    "partition_column",
    "read_table_state",
    "recover",
    "table_path",
    "time_column",
    "utc",
]

DERIVED_TIME_COLUMN = "ts"
log_ = logging.getLogger("freshet.delta")
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d+\.\d+)?\.parquet$")


def ms(t: float) -> int:
    """Epoch seconds → the epoch milliseconds used as txnVersion."""
    return int(round(t * 1000.0))


def utc(t: float) -> dt.datetime:
    """Epoch seconds → an aware UTC datetime (pyspark converts aware datetimes exactly)."""
    return dt.datetime.fromtimestamp(t, dt.UTC)


def app_id(table: str) -> str:
    return f"freshet/{table}"


def table_path(config: FreshetConfig, table: str) -> str:
    """`<warehouse.root>/<table>` as an absolute local path."""
    root = config.warehouse.root
    if "://" in root and not root.startswith("file://"):
        raise WarehouseError(f"warehouse.root {root!r}: only local paths (or file://) are supported")
    return str(Path(root.removeprefix("file://")).expanduser().resolve() / table)


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


@dataclass(slots=True)
class TableState:
    """What a table's Delta log says is committed."""

    freshness: float | None = None
    safe_freshness: float | None = None
    txn_version: int | None = None
    delta_version: int | None = None
    partitions: dict[str, str] = field(default_factory=dict)  # id → fingerprint
    commits: int = 0  # Freshet commits seen in the retained JSON log
    origin: float | None = None  # the start of the first load's window
    windows: dict[str, tuple[float, float]] = field(default_factory=dict)  # id → (start, end), base tables

    def copy(self) -> TableState:
        return TableState(self.freshness, self.safe_freshness, self.txn_version, self.delta_version,
                          dict(self.partitions), self.commits, self.origin, dict(self.windows))


@dataclass(slots=True)
class RecoveryState:
    """Every table's committed state, read back on start."""

    tables: dict[str, TableState]
    loaded: dict[str, dict[str, str]]  # stream → {partition id → fingerprint}

    @property
    def recovered(self) -> dict[str, Any]:
        """`warehouse.scheduler.Recovered` per table that has ever been loaded."""
        from warehouse.scheduler import Recovered

        return {
            name: Recovered(freshness=s.freshness, safe_freshness=s.safe_freshness, origin=s.origin)
            for name, s in self.tables.items()
            if s.freshness is not None
        }


# ---- reading the log ------------------------------------------------------------------------------
def delta_version(path: str) -> int | None:
    """The latest committed Delta version of the table at `path` (None: no table)."""
    log = Path(path) / "_delta_log"
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return None
    versions = [int(m.group(1)) for n in names if (m := _COMMIT.match(n))]
    if not versions:
        cps = [int(m.group(1)) for n in names if (m := _CHECKPOINT.match(n))]
        return max(cps) if cps else None
    return max(versions)


def _checkpoint_txn(log: Path, names: list[str], app: str) -> tuple[int | None, int | None]:
    """(checkpoint version, txn version of `app` in it) from the latest checkpoint."""
    cps: dict[int, list[str]] = {}
    for n in names:
        if m := _CHECKPOINT.match(n):
            cps.setdefault(int(m.group(1)), []).append(n)
    if not cps:
        return None, None
    import pyarrow.parquet as pq

    for version in sorted(cps, reverse=True):
        best: int | None = None
        try:
            for n in cps[version]:
                tbl = pq.read_table(log / n, columns=["txn"])
                for txn in tbl.column("txn").to_pylist():
                    if txn and txn.get("appId") == app and txn.get("version") is not None:
                        best = txn["version"] if best is None else max(best, txn["version"])
        except (OSError, ValueError, KeyError) as err:  # a torn checkpoint: use an older one
            log_.warning("skipping unreadable checkpoint %s of %s: %s", version, log, err)
            continue
        return version, best
    return None, None


def read_table_state(path: str, table: str) -> TableState:
    """Replay `<path>/_delta_log` for Freshet's commits to `table` (§4.4)."""
    log = Path(path) / "_delta_log"
    state = TableState()
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return state
    app = app_id(table)
    commits = sorted((int(m.group(1)), n) for n in names if (m := _COMMIT.match(n)))
    cp_version, cp_txn = _checkpoint_txn(log, names, app)
    state.txn_version = cp_txn
    best_meta: dict[str, Any] | None = None
    best_txn: int | None = None
    for version, name in commits:
        txn_v: int | None = None
        meta: dict[str, Any] | None = None
        try:
            lines = (log / name).read_text().splitlines()
        except FileNotFoundError:  # cleaned up between listing and reading
            continue
        for line in lines:
            # one action per line; only these two matter (skip parsing add/remove with stats)
            if not line.startswith(('{"txn"', '{"commitInfo"')):
                continue
            action = json.loads(line)
            if "txn" in action and action["txn"].get("appId") == app:
                txn_v = int(action["txn"]["version"])
            elif "commitInfo" in action:
                um = action["commitInfo"].get("userMetadata")
                if um:
                    try:
                        parsed = json.loads(um)
                    except ValueError:
                        parsed = None
                    if isinstance(parsed, dict) and parsed.get("freshet"):
                        meta = parsed
        if txn_v is not None:
            state.txn_version = txn_v if state.txn_version is None else max(state.txn_version, txn_v)
            if best_txn is None or txn_v >= best_txn:
                best_txn, best_meta = txn_v, meta
        if meta is not None:
            state.commits += 1
            state.partitions.update(meta.get("partitions") or {})
            windows = meta.get("windows")  # commits before windows were recorded have none: skipped
            if isinstance(windows, dict):
                state.windows.update({pid: (float(w[0]), float(w[1])) for pid, w in windows.items()
                                      if isinstance(w, list) and len(w) == 2})
            window = meta.get("window")
            if isinstance(window, list) and window and window[0] is not None:
                w0 = float(window[0])
                state.origin = w0 if state.origin is None else min(state.origin, w0)
        state.delta_version = version
    if state.delta_version is None:
        state.delta_version = cp_version
    if best_meta is not None and best_txn == state.txn_version:
        state.freshness = float(best_meta["freshness"])
        sf = best_meta.get("safe_freshness")
        state.safe_freshness = None if sf is None else float(sf)
    elif state.txn_version is not None:
        # The commit holding the metadata was cleaned up: the txn version *is* F in ms (±1 per
        # late load), and F' falls back to F − lateness in the Scheduler.
        state.freshness = state.txn_version / 1000.0
    return state


def recover(config: FreshetConfig) -> RecoveryState:
    """Every table's freshness, safe freshness, txn version and loaded ids, from Delta logs alone."""
    tables: dict[str, TableState] = {}
    loaded: dict[str, dict[str, str]] = {s.name: {} for s in config.streams}
    for t in config.tables:
        st = read_table_state(table_path(config, t.name), t.name)
        tables[t.name] = st
        if t.stream:
            loaded.setdefault(t.stream, {}).update(st.partitions)
    return RecoveryState(tables=tables, loaded=loaded)


# ---- writing --------------------------------------------------------------------------------------
def append_idempotent(
    df: DataFrame,
    path: str,
    *,
    table: str,
    txn_version: int,
    metadata: dict[str, Any],
    partition_by: str,
) -> None:
    """Append `df` to the Delta table at `path` as `(freshet/<table>, txn_version)`.

    Delta skips the write (a no-op, not an error) when `txn_version` is not above the version
    already recorded for the app id — so a replayed job appends nothing.
    """
    (
        df.write.format("delta")
        .mode("append")
        .partitionBy(partition_by)
        .option("txnAppId", app_id(table))
        .option("txnVersion", str(txn_version))
        .option("userMetadata", json.dumps({"freshet": 1, **metadata}, sort_keys=True))
        .save(path)
    )


def commit_metrics(path: str, table: str, txn_version: int) -> tuple[int | None, int | None]:
    """(Delta version, rows written) of the commit that recorded `txn_version`, if it exists."""
    log = Path(path) / "_delta_log"
    app = app_id(table)
    latest = delta_version(path)
    if latest is None:
        return None, None
    for version in range(latest, max(-1, latest - 20), -1):
        f = log / f"{version:020d}.json"
        if not f.exists():
            continue
        hit, rows = False, None
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            a = json.loads(line)
            if "txn" in a and a["txn"].get("appId") == app and int(a["txn"]["version"]) == txn_version:
                hit = True
            elif "commitInfo" in a:
                n = (a["commitInfo"].get("operationMetrics") or {}).get("numOutputRows")
                rows = None if n is None else int(n)
        if hit:
            return version, rows
    return None, None


def with_partition_column(df: DataFrame, table: TableConfig, tcol: str, fallback: float) -> DataFrame:
    """Add `date` (UTC date) or `hour` (`yyyy-MM-dd-HH`) from `tcol` (or from `fallback`)."""
    from pyspark.sql import functions as F

    src = F.col(tcol) if tcol in df.columns else F.lit(utc(fallback))
    if table.partition_by == "hour":
        return df.withColumn("hour", F.date_format(src, "yyyy-MM-dd-HH"))
    return df.withColumn("date", F.to_date(src))


def window_filter(df: DataFrame, table: TableConfig, tcol: str, lo: float, hi: float) -> DataFrame:
    """Rows with `tcol` in `(lo, hi]`, pruned by the partition column as well (DESIGN.md §5)."""
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
