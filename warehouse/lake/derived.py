"""A derived table's update and recompute jobs (§2.2 of *Scalable Scheduling of Updates in
Streaming Data Warehouses*; docs/warehouse.md §4, §8).

Both are one pipeline, read top to bottom in `run_derived` and `run_recompute`:

1. **plan** the window from what the table's log records: an update computes `(F, TE]` — or, a
   full refresh (`job.full`), everything from the origin up to TE — and moves F to TE; a
   recompute rewrites committed windows `(lo, hi]` (late data, a changed SQL, a backfill;
   warehouse.recompute) — or, `job.full`, the whole table up to F — and keeps F;
2. **pin and read** each source at one Delta version, restricted to `(start − lookback, end]`
   (`lake.read`), bound to a temp view of its name in a session of the job's own (temp views are
   per session: concurrent jobs never share them);
3. **compute** the table's SQL over the views, `:window_start`/`:window_end` bound to the window;
4. **commit** in one write `(freshet/<table>, txn)`: an append (an update), a `replaceWhere` of
   the range (a recompute), or an overwrite of the whole table (`job.full`); the schema checked
   first (lake.evolution), then the commit found and kept (`lake.commit.finish`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from warehouse.config import TableConfig
from warehouse.events import StartJob
from warehouse.lake.commit import Lake, finish
from warehouse.lake.delta import (
    DERIVED_TIME_COLUMN,
    append_idempotent,
    ms,
    next_txn_version,
    overwrite_idempotent,
    range_predicate,
    table_path,
    with_partition_column,
)
from warehouse.lake.evolution import ADDITIVE, table_schema_change
from warehouse.lake.outcome import JobError, JobOutcome, JobRefused
from warehouse.lake.read import pin_sources, read_source
from warehouse.lake.session import job_session
from warehouse.sqltext import bind_window, sql_version, uses_window

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["run_derived", "run_recompute"]


def run_derived(lake: Lake, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
    """Compute the window `(F, job.end]` and append it; F moves to its end."""
    sql = _sql_of(tc)
    # 1. plan: the window after what is committed (a full refresh: from the origin, all of it)
    st = lake.table_state(tc.name)
    rewrite_whole = job.full
    start = job.start if st.freshness is None or rewrite_whole else max(job.start, st.freshness)
    end = job.end
    if end <= start or (rewrite_whole and st.freshness is not None and st.freshness >= end):
        return lake.noop(job, t0, st, f"its window ends at or before the committed freshness {st.freshness}")
    txn = next_txn_version(end, st.txn_version)
    if txn != ms(end):
        return lake.noop(job, t0, st, f"txn version {ms(end)} is not above the recorded {st.txn_version}")
    path = table_path(lake.config, tc.name)
    with job_session(lake.spark) as session:
        # 2. pin and read; 3. compute
        versions = pin_sources(lake.config, lake.log, tc)
        out = _compute(lake, session, tc, sql, versions, start, end)
        meta: dict[str, Any] = {"kind": "derived", "job_id": job.job_id, "partitions": {}, "freshness": end,
                                "safe_freshness": min(job.new_safe_freshness, end), "window": [start, end],
                                "sources": versions, "sql_version": sql_version(tc.sql)}
        if rewrite_whole:
            meta["full"] = True
        # 4. commit (the write runs while the job's session, and its views, exist)
        meta = _write(lake, tc, out, path, txn, meta, rewrite_whole=rewrite_whole, replace=None)
    return finish(lake, job, t0, st, path, txn, meta,
                  done=lambda now: now.freshness is not None and now.freshness >= end,
                  replayed="the write: already committed", missing="this job's work is not in the log",
                  sql_version=meta["sql_version"])


def run_recompute(lake: Lake, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
    """Rewrite the committed windows `(job.start, job.end]` — exactly that range (`replaceWhere`),
    or the whole table (`job.full`) — with the SQL over them. F does not move: the txn version is
    one above the recorded one, and `userMetadata` says why (`reasons`, the `late` partition ids)."""
    sql = _sql_of(tc)
    # 1. plan: the committed range (a whole rewrite: up to F, never dropping rows above)
    st = lake.table_state(tc.name)
    if st.freshness is None:
        return lake.noop(job, t0, st, "the table has no committed windows to recompute")
    rewrite_whole = job.full
    start, end = job.start, st.freshness if rewrite_whole else min(job.end, st.freshness)
    if end <= start:
        return lake.noop(job, t0, st, f"nothing committed in ({start}, {job.end}]")
    txn = next_txn_version(st.freshness, st.txn_version)
    path = table_path(lake.config, tc.name)
    with job_session(lake.spark) as session:
        # 2. pin and read; 3. compute
        versions = pin_sources(lake.config, lake.log, tc)
        out = _compute(lake, session, tc, sql, versions, start, end)
        meta: dict[str, Any] = {
            "kind": "recompute", "job_id": job.job_id, "partitions": {}, "freshness": st.freshness,
            "safe_freshness": st.safe_freshness if st.safe_freshness is not None else st.freshness,
            "window": [start, end], "sources": versions, "sql_version": sql_version(tc.sql),
            "reasons": list(job.reasons), "late": list(job.late)}
        if rewrite_whole:
            meta["full"] = True
        # 4. commit
        meta = _write(lake, tc, out, path, txn, meta, rewrite_whole=rewrite_whole,
                      replace=None if rewrite_whole else (start, end))
    return finish(lake, job, t0, st, path, txn, meta, done=lambda now: False,
                  replayed="the write: already committed", missing="this job's work is not in the log",
                  sql_version=meta["sql_version"])


def _sql_of(tc: TableConfig) -> str:
    if not tc.sql:
        raise JobError(f"derived table {tc.name!r} has no sql")
    return tc.sql


def _compute(lake: Lake, session: SparkSession, tc: TableConfig, sql: str, versions: dict[str, int],
             start: float, end: float) -> DataFrame:
    """`sql` over each source read at its pinned version in `(start − lookback, end]`, as a view
    of its name; the output with its partition column."""
    for src, version in versions.items():
        read_source(lake.config, session, lake.files, src, version, start - tc.lookback, end).createOrReplaceTempView(src)
    out = session.sql(bind_window(sql, start, end) if uses_window(sql) else sql)
    if DERIVED_TIME_COLUMN not in out.columns:
        raise JobError(f"the sql of derived table {tc.name!r} must output a {DERIVED_TIME_COLUMN!r} "
                       f"column (its event time); it outputs {', '.join(out.columns)}")
    return with_partition_column(out, tc, DERIVED_TIME_COLUMN, end)


def _write(lake: Lake, tc: TableConfig, df: DataFrame, path: str, txn: int, meta: dict[str, Any], *,
           rewrite_whole: bool, replace: tuple[float, float] | None) -> dict[str, Any]:
    """One write of `df` as `(freshet/<table>, txn)` with `meta`: an append, a `replaceWhere` of
    the range `replace`, or (`rewrite_whole`) an overwrite of the whole table. Output that adds
    columns evolves the table's schema (mergeSchema); one that drops or retypes a column is
    refused unless the table says `rebuild: true` and the job rewrites it whole (overwriteSchema).
    Returns the `userMetadata` written: `meta` fenced and signed (`lake.commit`)."""
    change = table_schema_change(lake.config, lake.log, lake.files, tc, df)
    if change not in (None, ADDITIVE) and not (tc.rebuild and rewrite_whole):
        raise JobRefused(f"table {tc.name!r}: its new SQL {change} — not an additive schema change; set "
                       f"`rebuild: true` on the table to rewrite it whole with the new schema")
    meta = lake.sign(meta)
    kw: dict[str, Any] = {"table": tc.name, "txn_version": txn, "metadata": meta, "partition_by": tc.partition_by,
                          "merge_schema": change == ADDITIVE}
    if not rewrite_whole and replace is None:
        append_idempotent(df, path, **kw)
    else:
        where = None if replace is None else range_predicate(tc, DERIVED_TIME_COLUMN, *replace)
        overwrite_idempotent(df, path, replace_where=where, overwrite_schema=change not in (None, ADDITIVE), **kw)
    return meta
