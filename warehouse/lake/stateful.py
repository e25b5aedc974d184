"""A stateful table's update jobs: one increment folded into keyed state by one Delta MERGE
(*Programming Bulk-Incremental Dataflows* §3, "right outer" grouping — only the keys in the
increment are touched; docs/warehouse.md §9).

Read top to bottom, `run_fold` (an update job) and `fold_late` (a late fold) are the pipeline:

1. **plan** from what the state's log records: the window `(F, TE]` and its txn version —
   ms(TE), or one above the recorded version where a late fold or a rebuild's swap took it (a
   stale replay computes one at or below the recorded, which Delta skips); a late fold keeps F;
2. **pin and read** each source at one Delta version, restricted to the window (`lake.read`: from
   the files its log names where it can, like a derived job), and from each base source the late
   rows: those committed after the version the last job read (`TableState.read`) with event time
   at or below F, from Delta's change data feed — unless the source's log proves those commits
   hold none (`_on_time`: each only appends files whose statistics put every row above F);
3. **compute** the increment: the table's SQL over them (`increment`);
4. **commit**: `MERGE INTO state USING increment ON key` — a matched key combines each column with
   its fold, a new key is inserted; the first job writes the increment as the state — carrying
   Delta's idempotent-DML pair as session confs (`spark.databricks.delta.write.txnAppId =
   freshet/<table>`, `…txnVersion`, delta-io/delta#1555), the pair every Freshet commit carries,
   so a replayed job whose increment is already folded commits nothing; its `userMetadata`
   records the window, the versions read and the late rows (`lake.commit.finish` keeps it, and
   reads the keys it inserted and updated from the commit's metrics, `DeltaLog.commit_metrics`).

`last` and `first` keep, per folded column, the event time of the value held (`_freshet_<col>_at`),
and take the increment's value only when its ordering column (`order`, else `time_column`) is
later (earlier): so they, like the associative folds, give the same state whatever order the
increments come in. A rebuild folds a new state beside the live one and swaps it in
(lake.rebuild).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warehouse.config import FreshetConfig, TableConfig
from warehouse.events import StartJob
from warehouse.lake.commit import Lake, finish
from warehouse.lake.delta import (
    app_id,
    append_idempotent,
    commit_message,
    next_txn_version,
    table_path,
    time_column,
    utc,
)
from warehouse.lake.outcome import JobError, JobOutcome
from warehouse.lake.read import pin_sources, read_source
from warehouse.lake.session import job_session
from warehouse.sqltext import bind_window, sql_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


__all__ = ["CHANGE_FEED", "TXN_CONFS", "Increment", "at_column", "change_feed", "enable_change_feed", "fold_late",
           "increment", "merge", "merge_sql", "order_column", "run_fold", "state_rows"]

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
TXN_CONFS = (TXN_APP_ID, TXN_VERSION, USER_METADATA)
_INCREMENT_VIEW = "_freshet_increment"


def run_fold(lake: Lake, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
    """Fold the increment of `(F, job.end]` into the state (the module docstring)."""
    # 1. plan: the window after what is folded
    st = lake.table_state(tc.name)
    start = job.start if st.freshness is None else max(job.start, st.freshness)
    end = job.end
    if end <= start:
        return lake.noop(job, t0, st, f"its window ends at or before the committed freshness {st.freshness}")
    txn = next_txn_version(end, st.txn_version)
    path = table_path(lake.config, tc.name)
    before = lake.log.version(path)  # None: the first job, which creates the state
    meta: dict[str, Any] = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": end,
                            "safe_freshness": min(job.new_safe_freshness, end), "window": [start, end],
                            "sql_version": sql_version(tc.increment)}
    with job_session(lake.spark) as session:
        if before is None:
            lake.fence()  # an ALTER TABLE of the sources may write their logs
            enable_change_feed(session, lake.config, tc)
        # 2. pin and read, late rows too; 3. compute
        inc = increment(lake, session, tc, start, end, since=st.read)
        meta["sources"] = meta["read"] = inc.versions
        if inc.late_from is not None:  # late rows folded in as part of this increment (docs/warehouse.md §9)
            meta["late_since"], meta["late_from"] = dict(st.read), inc.late_from
        # 4. commit
        meta = lake.sign(meta)  # the fence, then the writer (lake.commit)
        if before is None:  # the first job: the state is the increment
            append_idempotent(state_rows(tc, inc.rows), path, table=tc.name, txn_version=txn, metadata=meta,
                              partition_by=None)
        else:
            merge(session, tc, path, inc.rows, txn, meta)
    return finish(lake, job, t0, st, path, txn, meta, before=before,
                  done=lambda now: now.freshness is not None and now.freshness >= end,
                  replayed="the MERGE: this increment is already folded",
                  missing=f"the log does not hold the window up to {end}")


def fold_late(lake: Lake, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
    """Fold the late rows alone — those committed to base sources after the versions the last job
    read, with event time ≤ F — when a late load came and no update job is due (the Scheduler
    releases it like a derived table's recompute). One MERGE as `(freshet/<table>, recorded + 1)`;
    F does not move. A no-op when a job since folded them."""
    # 1. plan: F stays; the txn one above the recorded
    st = lake.table_state(tc.name)
    path = table_path(lake.config, tc.name)
    if st.freshness is None or lake.log.version(path) is None:
        return lake.noop(job, t0, st, "nothing is folded yet: the first job reads every row")
    freshness = st.freshness
    txn = next_txn_version(freshness, st.txn_version)
    meta: dict[str, Any] = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": freshness,
                            "safe_freshness": st.safe_freshness if st.safe_freshness is not None else freshness,
                            "late_since": dict(st.read), "reasons": list(job.reasons), "late": list(job.late)}
    with job_session(lake.spark) as session:
        # 2. pin and read the late rows alone (an empty window); 3. compute
        inc = increment(lake, session, tc, freshness, freshness, since=st.read)
        if inc.late_from is None:
            return lake.noop(job, t0, st, "no late rows left to fold: a job since folded them")
        meta["sources"] = meta["read"] = inc.versions
        meta["late_from"] = inc.late_from
        # 4. commit
        meta = lake.sign(meta)
        merge(session, tc, path, inc.rows, txn, meta)
    versions = inc.versions
    return finish(lake, job, t0, st, path, txn, meta,
                  done=lambda now: all(now.read.get(s, -1) >= v for s, v in versions.items()),
                  replayed="the MERGE: these late rows are already folded",
                  missing=f"the log has not read its sources up to {versions}")


@dataclass(frozen=True, slots=True)
class Increment:
    """The increment of one job: its rows, the version of each source read, and the earliest
    event time of the late rows among them (None: none)."""

    rows: DataFrame
    versions: dict[str, int]
    late_from: float | None


def increment(lake: Lake, session: SparkSession, tc: TableConfig, start: float, end: float, *,
              since: dict[str, int], pinned: dict[str, int] | None = None) -> Increment:
    """The increment SQL over its sources' rows in `(start, end]`, each source pinned at its
    current Delta version `v` — and over the late rows of each base source: those committed after
    the version the last job read (`since`) up to `v` with event time ≤ `start`, which no job has
    folded yet (a row is folded by the first job whose window and version both cover it); the
    change data feed is read for them only where the log does not prove there are none (`_on_time`).
    A rebuild chunk reads each source at the version its rebuild `pinned`, without late rows."""
    from pyspark.sql import functions as F

    versions = pin_sources(lake.config, lake.log, tc, pinned)
    earliest: float | None = None
    for src, v in versions.items():
        scfg = lake.config.table(src)
        df = read_source(lake.config, session, lake.files, src, v, start, end)  # the log's files, else Delta
        last_read = since.get(src)
        path, tcol = table_path(lake.config, src), time_column(lake.config, scfg)
        if (pinned is None and scfg.is_base and last_read is not None and last_read < v
                and not _on_time(lake, path, tcol, last_read, v, start)):
            late = _late(session, path, tcol, last_read, v, start)
            first = late.agg(F.min(tcol)).first()[0]
            if first is not None:
                df = df.unionByName(late)
                t = first.timestamp()
                earliest = t if earliest is None else min(earliest, t)
        df.createOrReplaceTempView(src)
    assert tc.increment is not None
    lo = start if earliest is None else min(start, earliest - 1e-6)  # the late rows inside the bound window
    inc = session.sql(bind_window(tc.increment, lo, end))
    need = [*tc.key, *tc.fold, *dict.fromkeys(order_column(tc, c) for c, f in tc.fold.items() if f in ("last", "first"))]
    missing = [c for c in need if c not in inc.columns]
    if missing:
        raise JobError(f"the increment of stateful table {tc.name!r} does not output {', '.join(missing)} "
                       f"(it outputs {', '.join(inc.columns)})")
    return Increment(inc, versions, earliest)


def _on_time(lake: Lake, path: str, tcol: str, since: int, version: int, upto: float) -> bool:
    """The base source's log proves the versions `(since, version]` hold no row with event time
    ≤ `upto` — each only appends files whose statistics say so (`LiveFiles.appends_above`, a local
    log only) — so its change data feed need not be read: `_late` would find no row."""
    return lake.files is not None and lake.files.appends_above(path, since, version, tcol, utc(upto).timestamp())


def _late(session: SparkSession, path: str, tcol: str, since: int, version: int, upto: float) -> DataFrame:
    """A base source's rows committed in the versions `(since, version]` with event time ≤ `upto`:
    the late rows no earlier job of the stateful table has read (Delta's change data feed; a base
    table is append-only, so its changes are inserts, and OPTIMIZE changes no data)."""
    from pyspark.sql import functions as F

    cdf = (session.read.format("delta").option("readChangeFeed", "true").option("startingVersion", since + 1)
           .option("endingVersion", version).load(path))
    return (cdf.where((F.col("_change_type") == "insert") & (F.col(tcol) <= F.lit(utc(upto))))
            .drop("_change_type", "_commit_version", "_commit_timestamp"))


def merge(session: SparkSession, tc: TableConfig, path: str, inc: DataFrame, txn: int, meta: dict[str, Any],
          app: str | None = None) -> None:
    """`MERGE INTO` the state at `path` the increment `inc`, as one commit carrying the txn pair
    `(freshet/<app>, txn)` (`app`: the table's name by default) and `meta` (Delta's idempotent
    DML, session confs set and unset)."""
    inc.createOrReplaceTempView(_INCREMENT_VIEW)
    confs = {TXN_APP_ID: app_id(app or tc.name), TXN_VERSION: str(txn), USER_METADATA: commit_message(meta, txn)}
    for k, v in confs.items():
        session.conf.set(k, v)
    try:
        session.sql(merge_sql(tc, "delta." + _q(path), _INCREMENT_VIEW)).collect()
    finally:
        for k in confs:
            session.conf.unset(k)


def at_column(col: str) -> str:
    """The state column holding the event time of a `last`/`first` column's value."""
    return f"_freshet_{col}_at"


def order_column(tc: TableConfig, col: str) -> str:
    """The increment column a `last`/`first` column `col` compares: its own (`order`) or the
    table's `time_column` (default ts)."""
    return tc.order.get(col, tc.time_column or "ts")


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _fold(col: str, fold: str, tcol: str) -> list[str]:
    """The MERGE assignments folding the increment `s` into the state `t` for one column."""
    c, at = _q(col), _q(at_column(col))
    if fold in ("sum", "count"):  # a count of the increment adds to the count so far
        return [f"{c} = coalesce(t.{c} + s.{c}, t.{c}, s.{c})"]
    if fold in ("min", "max"):  # least/greatest skip NULLs
        return [f"{c} = {'least' if fold == 'min' else 'greatest'}(t.{c}, s.{c})"]
    newer = f"s.{_q(tcol)} >= t.{at}" if fold == "last" else f"s.{_q(tcol)} < t.{at}"
    pick = "greatest" if fold == "last" else "least"
    return [f"{c} = CASE WHEN t.{at} IS NULL OR {newer} THEN s.{c} ELSE t.{c} END",
            f"{at} = {pick}(t.{at}, s.{_q(tcol)})"]


def merge_sql(tc: TableConfig, target: str, source: str) -> str:
    """`MERGE INTO target USING source ON key`: matched keys folded, new keys inserted."""
    on = " AND ".join(f"t.{_q(k)} <=> s.{_q(k)}" for k in tc.key)  # a NULL key is a key too
    sets = [a for col, fold in tc.fold.items() for a in _fold(col, fold, order_column(tc, col))]
    cols = [*tc.key, *tc.fold]
    vals = [f"s.{_q(c)}" for c in cols]
    for col, fold in tc.fold.items():
        if fold in ("last", "first"):
            cols.append(at_column(col))
            vals.append(f"s.{_q(order_column(tc, col))}")
    return (f"MERGE INTO {target} AS t USING {source} AS s ON {on} "
            f"WHEN MATCHED THEN UPDATE SET {', '.join(sets)} "
            f"WHEN NOT MATCHED THEN INSERT ({', '.join(_q(c) for c in cols)}) VALUES ({', '.join(vals)})")


def state_rows(tc: TableConfig, inc: DataFrame) -> DataFrame:
    """The increment as state rows (the first job): key, folded columns, and the time of each
    `last`/`first` value."""
    from pyspark.sql import functions as F

    cols = [F.col(_q(c)) for c in (*tc.key, *tc.fold)]
    cols += [F.col(_q(order_column(tc, c))).alias(at_column(c)) for c, f in tc.fold.items() if f in ("last", "first")]
    return inc.select(*cols)


CHANGE_FEED = "delta.enableChangeDataFeed"


def change_feed(config: FreshetConfig, base: TableConfig) -> dict[str, str] | None:
    """The table property a base table that feeds a stateful table is created with: Delta's change
    data feed, from which the stateful job reads the late rows (`_late`)."""
    feeds = any(t.is_stateful and base.name in t.sources for t in config.tables)
    return {CHANGE_FEED: "true"} if feeds else None


def enable_change_feed(session: SparkSession, config: FreshetConfig, tc: TableConfig) -> None:
    """Before the first job reads them: turn on the change data feed of base sources created
    without it (before the stateful table was configured). Their next load may then fail once
    on the metadata change (DELTA_METADATA_CHANGED) and is retried after its back-off."""
    for src in tc.sources:
        if not config.table(src).is_base:
            continue
        path = f"delta.{_q(table_path(config, src))}"
        props = session.sql(f"DESCRIBE DETAIL {path}").select("properties").first()[0] or {}
        if str(props.get(CHANGE_FEED, "")).lower() != "true":
            session.sql(f"ALTER TABLE {path} SET TBLPROPERTIES ({CHANGE_FEED} = true)")
