"""Running the Scheduler's StartJob decisions on Spark (docs/warehouse.md §5).

Track workers call `Executor.execute(job)` from their own threads; it runs the update job, measures
its duration (the Scheduler re-estimates α, β from it — §2.4) and answers with the event to feed
back: `JobFinished` or `JobFailed`. Spark errors become events; they never reach the core.

Every job is planned from the watermark committed in the table's Delta log: after a failure whose
outcome is unknown the table's state is re-read before its next job, so a job that did commit
becomes a no-op (its partitions are already recorded; its window is already covered), and the
Delta txn (`freshet/<table>`, version) guards against a replay that slips past that.

- **Base job** (§2.1): the job's partitions, read with the stream's declared schema, appended.
- **Derived job** (§2.2): the SQL over each source restricted to `(F_D − lookback, TE]`, every
  source read at one pinned Delta version (from the files its log names, `lake.files`, when the
  log is local), in a session of its own (temp views are per session).

After each commit the table's new Delta snapshot is warmed in the background (`lake.warm`): the
state reconstruction Delta's txn check needs runs then, not in the table's next job.

The same jobs run over Spark Connect (`spark.remote`): DataFrame writes with the txn options,
sources pinned with `versionAsOf`, the log read through Spark (`lake.recovery.SparkLog`). A lost
connection fails the job like any Spark error (it is retried after its back-off) and is reported
to the daemon's `SparkLink`, which opens a new session for the next job.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from policies.bulk import pool_for
from warehouse.config import FreshetConfig, TableConfig
from warehouse.events import JobFailed, JobFinished, StartJob
from warehouse.lake import maintain
from warehouse.lake.delta import (
    DERIVED_TIME_COLUMN,
    append_idempotent,
    ms,
    next_txn_version,
    overwrite_idempotent,
    range_predicate,
    read_delta,
    spark_schema_ddl,
    table_path,
    time_column,
    window_filter,
    with_partition_column,
)
from warehouse.lake.files import LiveFiles
from warehouse.lake.outcome import JobError, JobOutcome, failure_reason, noop_outcome
from warehouse.lake.rebuild import run_rebuild
from warehouse.lake.recovery import LocalLog, RecoveryState, TableState, delta_log, recover
from warehouse.lake.session import SparkLink, job_description, job_session, read_session
from warehouse.lake.stateful import change_feed, run_stateful, state_rows
from warehouse.lake.warm import SnapshotWarmer
from warehouse.sqltext import bind_window, sql_version, uses_window
from warehouse.upkeep import MAINTENANCE_KINDS, OPTIMIZE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Executor", "JobError", "JobOutcome", "schema_change"]

log = logging.getLogger("freshet.executor")


def _reason(err: BaseException) -> str:
    """A one-line reason with the Java root cause (lake.outcome.failure_reason)."""
    return failure_reason(err)


class Executor:
    """Runs base and derived update jobs against the Delta tables under `warehouse.root`."""

    def __init__(self, config: FreshetConfig, spark: SparkSession | None, state: RecoveryState | None = None,
                 *, link: SparkLink | None = None) -> None:
        """`spark`: the session; or `link`, the daemon's (reconnecting) line to Spark."""
        self.config = config
        self._spark = spark
        self.link = link
        self.log = delta_log(config, lambda: self.spark)  # the files, or through Spark (lake.recovery)
        state = state if state is not None else recover(config, self.log)
        self._states: dict[str, TableState] = {t.name: state.tables.get(t.name, TableState()).copy()
                                               for t in config.tables}
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self.warmer = SnapshotWarmer(lambda: self.spark)  # lake.warm
        # sources read at their pinned versions from files the log names, no Delta scan (lake.files)
        self.files = LiveFiles() if isinstance(self.log, LocalLog) else None

    def reconfigure(self, config: FreshetConfig, state: RecoveryState | None = None) -> None:
        """Apply a new config (SIGHUP): new tables start from their recovered state."""
        state = state if state is not None else recover(config, self.log)
        with self._lock:
            self.config = config
            for t in config.tables:
                if t.name not in self._states:
                    self._states[t.name] = state.tables.get(t.name, TableState()).copy()

    @property
    def _least(self) -> float:
        """The least priority of the warehouse: its jobs' pools weigh relative to it (policies.bulk)."""
        return min((t.priority for t in self.config.tables), default=1.0)

    @property
    def spark(self) -> SparkSession:
        """The session jobs run in (over Connect: the link's current one, reconnecting if lost)."""
        if self.link is not None:
            return self.link.session()
        assert self._spark is not None, "an Executor needs a SparkSession or a SparkLink"
        return self._spark

    # ---- committed state --------------------------------------------------------------------------
    def refresh(self, table: str) -> TableState:
        """Re-read `table`'s committed watermark from its Delta log (after an unknown outcome)."""
        st = self.log.table_state(table_path(self.config, table), table)
        with self._lock:
            self._states[table] = st
            self._dirty.discard(table)
        return st.copy()

    def table_state(self, table: str) -> TableState:
        """What is committed for `table` now (a copy)."""
        with self._lock:
            dirty = table in self._dirty
            if not dirty:
                return self._states.setdefault(table, TableState()).copy()
        return self.refresh(table)

    def commit_state(self, table: str, st: TableState) -> None:
        with self._lock:
            self._states[table] = st

    # ---- running jobs -----------------------------------------------------------------------------
    def execute(self, job: StartJob) -> JobFinished | JobFailed:
        """Run `job`; the event for the Scheduler. Never raises."""
        generation = self.link.generation if self.link is not None else None
        try:
            return self.run(job).event()
        except Exception as err:  # noqa: BLE001 — every failure becomes an event
            if self.link is not None and self.link.lost(err, generation):
                reason = f"Spark Connect connection lost ({self.link.error}); retried after the back-off"
                log.warning("job %d (%s, %s) failed: %s", job.job_id, job.kind, job.table, reason)
                return JobFailed(job_id=job.job_id, reason=reason)
            reason = err.reason if isinstance(err, JobError) else _reason(err)
            log.warning("job %d (%s, %s) failed: %s", job.job_id, job.kind, job.table, reason,
                        exc_info=not isinstance(err, JobError))
            return JobFailed(job_id=job.job_id, reason=reason)

    def run(self, job: StartJob) -> JobOutcome:
        """Run `job` and return its outcome; JobError (or a Spark exception) if it did not commit."""
        try:
            tc = self.config.table(job.table)
        except StopIteration:
            raise JobError(f"unknown table {job.table!r}") from None
        t0 = time.monotonic()
        pool = pool_for(job.priority, self._least, job.bulk)
        try:
            with job_description(self.spark, f"freshet {job.kind} job {job.job_id}: {job.table}", pool=pool):
                outcome = self._dispatch(job, tc, t0)
        except BaseException:
            with self._lock:  # outcome unknown: plan the next job from the log, not from memory
                self._dirty.add(job.table)
            raise
        if outcome.committed:  # the next job's txn check finds the new snapshot's state computed
            self.warmer.warm(table_path(self.config, job.table), pool)
        return outcome

    def _dispatch(self, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
        if job.kind in MAINTENANCE_KINDS:
            return self._run_upkeep(job, tc, t0)
        if tc.is_base:
            return self._run_base(job, tc, t0)
        if tc.is_stateful:  # one MERGE of the increment, never a window rewrite (lake.stateful)
            if job.kind == "recompute" and "rebuild" in job.reasons:  # a chunk of a rebuild (lake.rebuild)
                return run_rebuild(self, job, tc, t0)
            return run_stateful(self, job, tc, t0)
        if job.kind == "recompute":
            return self._run_recompute(job, tc, t0)
        return self._run_derived(job, tc, t0)

    def _run_upkeep(self, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
        """OPTIMIZE or VACUUM (lake.maintain). Its commits carry no Freshet txn, so the next job
        of the table re-reads the log (as after any commit Freshet did not make itself)."""
        path = table_path(self.config, tc.name)
        if self.log.version(path) is None:
            raise JobError(f"table {tc.name!r} has no Delta table yet at {path}: nothing to {job.kind}")
        try:
            if job.kind == OPTIMIZE:
                done = maintain.optimize(self.spark, path)
            else:
                done = maintain.vacuum(self.spark, path, self.config.maintenance_of(tc).vacuum_retain)
        finally:
            with self._lock:
                self._dirty.add(tc.name)
        log.info("job %d (%s, %s): files %s -> %s, %d bytes reclaimed", job.job_id, job.kind, tc.name,
                 done.files_before, done.files_after, done.bytes_reclaimed)
        return JobOutcome(job.job_id, tc.name, True, 0, time.monotonic() - t0, note=job.kind,
                          files=done.files_after, bytes_reclaimed=done.bytes_reclaimed)

    def noop(self, job: StartJob, t0: float, st: TableState, note: str) -> JobOutcome:
        log.info("job %d (%s): %s — nothing appended", job.job_id, job.table, note)
        return noop_outcome(job, time.monotonic() - t0, st, note)

    def _read_partitions(self, stream_name: str, files: list[str], session: SparkSession | None = None) -> DataFrame:
        spark = session or self.spark
        stream = self.config.stream(stream_name)
        ddl = spark_schema_ddl(stream.schema_)
        reader = spark.read
        if ddl:
            reader = reader.schema(ddl)
        if not files:
            if not ddl:
                raise JobError(f"stream {stream_name!r} declares no schema: cannot load an empty partition")
            return spark.createDataFrame([], ddl)
        if stream.format == "parquet":
            return reader.parquet(*files)
        if stream.format == "csv":
            return reader.option("header", "true").csv(list(files))
        return reader.json(list(files))

    def _run_base(self, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
        assert tc.stream is not None
        st = self.table_state(tc.name)
        parts = [p for p in job.arrivals if p.partition_id not in st.partitions]
        # time slices (§3.4, policies.chopping.time_slice): rows of a partition with
        # loaded < ts ≤ min(its end, the job's end), where `loaded` is what earlier slices committed
        loaded = {p.partition_id: st.slices[p.partition_id] for p in parts if p.partition_id in st.slices}
        parts = [p for p in parts if loaded.get(p.partition_id, p.start) < min(p.end, job.end)]
        if not parts:
            return self.noop(job, t0, st, "its partitions (or this slice of them) are already committed")
        new_f = max(job.new_freshness, st.freshness) if st.freshness is not None else job.new_freshness
        new_safe = job.new_safe_freshness if st.safe_freshness is None else max(job.new_safe_freshness,
                                                                                 st.safe_freshness)
        new_safe = min(new_safe, new_f)
        txn = next_txn_version(new_f, st.txn_version)
        whole = [p for p in parts if p.end <= job.end and p.partition_id not in loaded]
        cut = [p for p in parts if p not in whole]
        fps = {p.partition_id: p.fingerprint for p in parts if p.end <= job.end}
        slices = {p.partition_id: job.end for p in parts if p.end > job.end}
        if job.late:
            log.warning("table %s: loading late partition(s) %s (the derived windows computed without "
                        "them are recomputed after this load; a derived table holds nothing before its "
                        "origin, so data older than that stays out of it: docs/warehouse.md §8)",
                        tc.name, ", ".join(job.late))
        tcol = time_column(self.config, tc)
        meta = {"kind": "base", "job_id": job.job_id, "partitions": fps, "freshness": new_f,
                "safe_freshness": new_safe, "window": [job.start, job.end],
                "windows": {p.partition_id: [p.start, p.end] for p in parts}}  # the intake's overlap check, after a restart
        if slices:
            meta["slices"] = slices

        def done(now: TableState) -> bool:
            return all(p in now.partitions for p in fps) and all(
                p in now.partitions or now.slices.get(p, -math.inf) >= c for p, c in slices.items())

        with read_session(self.spark, job.bulk) as session:  # a bulk job: short tasks (lake.session)
            df = (self._read_partitions(tc.stream, [f for p in whole for f in p.files], session)
                  if whole or not cut else None)
            for p in cut:
                part = window_filter(self._read_partitions(tc.stream, list(p.files), session), tc, tcol,
                                     loaded.get(p.partition_id, p.start), min(p.end, job.end))
                df = part if df is None else df.unionByName(part)
            assert df is not None
            df = with_partition_column(df, tc, tcol, new_f)
            return self._commit(job, tc, df, st, t0, txn, meta, done,
                                declared_rows=0 if cut else sum(p.rows for p in whole))

    def _run_derived(self, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
        st = self.table_state(tc.name)
        start = job.start if st.freshness is None or job.full else max(job.start, st.freshness)
        end = job.end
        if end <= start or (job.full and st.freshness is not None and st.freshness >= end):
            return self.noop(job, t0, st, f"its window ends at or before the committed freshness {st.freshness}")
        txn = next_txn_version(end, st.txn_version)
        if txn != ms(end):
            return self.noop(job, t0, st, f"txn version {ms(end)} is not above the recorded {st.txn_version}")
        with job_session(self.spark) as session:  # temp views are per session: concurrent jobs never share them
            out, versions = self._compute(session, tc, start, end)
            meta = {"kind": "derived", "job_id": job.job_id, "partitions": {}, "freshness": end,
                    "safe_freshness": min(job.new_safe_freshness, end), "window": [start, end], "sources": versions,
                    "sql_version": sql_version(tc.sql)}
            if job.full:
                meta["full"] = True
            # the write runs while the job's session (and its views) exist
            return self._commit(job, tc, out, st, t0, txn, meta,
                                lambda now: now.freshness is not None and now.freshness >= end)

    def _run_recompute(self, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
        """Rewrite the committed windows `(start, end]` (late data, a changed SQL, a backfill —
        warehouse.recompute): the SQL over the range replaces exactly the range (`replaceWhere`),
        or the whole table (`full`). Freshness does not move; the txn version is one above the
        recorded one, and `userMetadata` says why (`reasons`, the `late` partition ids)."""
        st = self.table_state(tc.name)
        if st.freshness is None:
            return self.noop(job, t0, st, "the table has no committed windows to recompute")
        # a full pass rewrites the whole table: up to what is committed, never dropping rows above
        start, end = job.start, st.freshness if job.full else min(job.end, st.freshness)
        if end <= start:
            return self.noop(job, t0, st, f"nothing committed in ({start}, {job.end}]")
        txn = next_txn_version(st.freshness, st.txn_version)
        with job_session(self.spark) as session:
            out, versions = self._compute(session, tc, start, end)
            meta = {"kind": "recompute", "job_id": job.job_id, "partitions": {}, "freshness": st.freshness,
                    "safe_freshness": st.safe_freshness if st.safe_freshness is not None else st.freshness,
                    "window": [start, end], "sources": versions, "sql_version": sql_version(tc.sql),
                    "reasons": list(job.reasons), "late": list(job.late)}
            if job.full:
                meta["full"] = True
            return self._commit(job, tc, out, st, t0, txn, meta, lambda now: False,
                                replace=None if job.full else (start, end))

    def _compute(self, session: SparkSession, tc: TableConfig, start: float, end: float) -> tuple[DataFrame, dict[str, int]]:
        """The SQL of `tc` over its sources restricted to `(start − lookback, end]`, each pinned at
        its current Delta version; (the output with its partition column, the versions read)."""
        if not tc.sql:
            raise JobError(f"derived table {tc.name!r} has no sql")
        versions: dict[str, int] = {}
        for src in tc.sources:
            scfg = self.config.table(src)
            spath = table_path(self.config, src)
            v = self.log.version(spath)
            if v is None:
                raise JobError(f"source table {src!r} of {tc.name!r} has no Delta table yet at {spath}")
            versions[src] = v
            tcol = time_column(self.config, scfg)
            df = self.files.read(session, spath, v, tcol, start - tc.lookback, end) if self.files else None
            df = window_filter(read_delta(session, spath, v) if df is None else df, scfg, tcol,
                               start - tc.lookback, end)
            df.createOrReplaceTempView(src)
        out = session.sql(bind_window(tc.sql, start, end) if uses_window(tc.sql) else tc.sql)
        if DERIVED_TIME_COLUMN not in out.columns:
            raise JobError(f"the sql of derived table {tc.name!r} must output a {DERIVED_TIME_COLUMN!r} "
                           f"column (its event time); it outputs {', '.join(out.columns)}")
        return with_partition_column(out, tc, DERIVED_TIME_COLUMN, end), versions

    def _schema_change(self, tc: TableConfig, df: DataFrame, session: SparkSession) -> str | None:
        """How `df`'s schema differs from the table's (Olston, Graceful Logic Evolution in Web Data Processing Workflows): None (same), "additive" (new
        columns only: Delta schema evolution) or a JobError's reason when it is not additive."""
        path = table_path(self.config, tc.name)
        version = self.log.version(path)
        if version is None:
            return None
        try:
            schema = self.files.schema(path, version, DERIVED_TIME_COLUMN) if self.files else None
            if schema is None:
                schema = read_delta(session, path, None).schema
            have = {f.name: f.dataType.simpleString() for f in schema.fields}
        except Exception:  # noqa: BLE001 — no table yet (a race with its first commit): nothing to compare
            return None
        return schema_change(have, {f.name: f.dataType.simpleString() for f in df.schema.fields})

    def evolution_problems(self, new: FreshetConfig) -> list[str]:
        """For a reload (SIGHUP): each derived table whose SQL in `new` would change its Delta
        schema in a way that is not additive (a column dropped or retyped) while the table does
        not say `rebuild: true` — analysed by Spark against the sources' schemas, no job run."""
        changed = [tc for tc in new.tables if not tc.is_base and not tc.rebuild
                   and tc.name in {t.name for t in self.config.tables}
                   and sql_version(tc.sql) != sql_version(self.config.table(tc.name).sql)]
        if not changed:
            return []
        problems: list[str] = []
        with job_session(self.spark) as session:
            schemas: dict[str, Any] = {}
            _analyze(new, session, schemas)
            for tc in changed:
                path = table_path(new, tc.name)
                if tc.name not in schemas or self.log.version(path) is None:
                    continue  # a SQL that does not analyse fails its jobs with its own reason
                have = {f.name: f.dataType.simpleString() for f in read_delta(session, path, None).schema.fields}
                change = schema_change(have, {f.name: f.dataType.simpleString() for f in schemas[tc.name].fields})
                if change not in (None, "additive"):
                    problems.append(f"tables[{tc.name}].sql: the new SQL {change} — not an additive schema change; "
                                    f"set `rebuild: true` on the table to rewrite it whole with the new schema")
        return problems

    def _commit(self, job: StartJob, tc: TableConfig, df: DataFrame, st: TableState, t0: float, txn: int,
                meta: dict[str, Any], done: Callable[[TableState], bool], declared_rows: int = 0,
                replace: tuple[float, float] | None = None) -> JobOutcome:
        """Append `df` as `(freshet/<table>, txn)` with `meta` — derived: replace the range
        `replace`, or the whole table for a `full` job — and return the outcome and the new state.

        When Delta skips the write (the txn version is already recorded), the log is re-read:
        `done(state)` says whether this job's work is in it (a replay: a no-op) or not (an error).
        A derived SQL whose output adds columns evolves the table's schema (mergeSchema); one that
        drops or retypes a column is refused unless the table says `rebuild: true` and the job is a
        full one (overwriteSchema).
        """
        path = table_path(self.config, tc.name)
        change = None if tc.is_base else self._schema_change(tc, df, df.sparkSession)
        if change not in (None, "additive") and not (tc.rebuild and job.full):
            raise JobError(f"table {tc.name!r}: its new SQL {change} — not an additive schema change; set "
                           f"`rebuild: true` on the table to rewrite it whole with the new schema")
        kw = {"table": tc.name, "txn_version": txn, "metadata": meta, "partition_by": tc.partition_by}
        if tc.is_base or not (job.full or replace is not None):
            props = change_feed(self.config, tc) if tc.is_base and self.log.version(path) is None else None
            append_idempotent(df, path, merge_schema=change == "additive", properties=props, **kw)
        else:
            where = None if replace is None else range_predicate(tc, DERIVED_TIME_COLUMN, *replace)
            overwrite_idempotent(df, path, replace_where=where, overwrite_schema=change not in (None, "additive"),
                                 merge_schema=change == "additive", **kw)
        version, rows = self.log.commit_metrics(path, tc.name, txn)
        if version is None:  # Delta skipped the write: someone committed this version already
            st = self.refresh(tc.name)
            if done(st):
                return self.noop(job, t0, st, "Delta skipped the write: already committed")
            raise JobError(f"table {tc.name!r}: Delta skipped txn version {txn} (recorded "
                           f"{st.txn_version}) but this job's work is not in the log")
        start, end = meta["window"]
        new = st.copy()
        new.freshness, new.safe_freshness = meta["freshness"], meta["safe_freshness"]
        new.txn_version, new.delta_version = txn, version
        new.record(meta["partitions"], meta.get("slices", {}))
        new.windows.update({pid: (w[0], w[1]) for pid, w in meta.get("windows", {}).items()})
        new.commits += 1
        new.origin = start if new.origin is None else min(new.origin, start)
        if "sql_version" in meta:
            new.versions.set(start, end, meta["sql_version"])
        self.commit_state(tc.name, new)
        n = rows if rows is not None else declared_rows
        return JobOutcome(job.job_id, tc.name, True, n, time.monotonic() - t0, version, txn,
                          read=tuple(sorted(meta.get("sources", {}).items())), sql_version=meta.get("sql_version"))


def analyze_derived(config: FreshetConfig, spark: SparkSession) -> dict[str, str]:
    """Analyse every derived table's SQL against its sources' schemas, running no Spark job.

    Base sources are empty views with their stream's declared schema (plus the partition
    column); derived sources take the analysed output of their own SQL, in DAG order. Returns
    table → problem for each SQL that does not analyse or has no `ts` column (empty: all fine).
    """
    with job_session(spark) as session:
        return _analyze(config, session)


def schema_change(have: dict[str, str], new: dict[str, str]) -> str | None:
    """Column → type before and after a SQL change (Olston, Graceful Logic Evolution in Web Data Processing Workflows): None (the same), "additive" (new
    columns only: Delta schema evolution), or what makes it not additive."""
    dropped = sorted(set(have) - set(new))
    changed = sorted(c for c in set(have) & set(new) if have[c] != new[c])
    if not dropped and not changed:
        return "additive" if set(new) - set(have) else None
    what = [f"drops column(s) {', '.join(dropped)}"] if dropped else []
    what += [f"changes {c} from {have[c]} to {new[c]}" for c in changed]
    return "; ".join(what)


def _analyze(config: FreshetConfig, session: SparkSession, schemas: dict[str, Any] | None = None) -> dict[str, str]:
    """Problems per table; `schemas` (if given) receives each table's analysed schema."""
    schemas = {} if schemas is None else schemas
    problems: dict[str, str] = {}
    remaining = list(config.tables)
    while remaining:
        progressed = False
        for tc in list(remaining):
            if tc.stream is not None:
                ddl = spark_schema_ddl(config.stream(tc.stream).schema_)
                df: DataFrame = session.createDataFrame([], ddl) if ddl else session.createDataFrame([], "ts timestamp")
            elif all(s in schemas or s in problems for s in tc.sources):
                if any(s in problems for s in tc.sources):
                    problems[tc.name] = "a source's SQL does not analyse"
                    remaining.remove(tc)
                    progressed = True
                    continue
                for s in tc.sources:
                    session.createDataFrame([], schemas[s]).createOrReplaceTempView(s)
                try:
                    df = session.sql(bind_window((tc.increment if tc.is_stateful else tc.sql) or "", 0.0, 1.0))
                    _ = df.schema
                except Exception as err:  # noqa: BLE001 — reported per table
                    problems[tc.name] = _reason(err)
                    remaining.remove(tc)
                    progressed = True
                    continue
                if tc.is_stateful:  # the state's columns (lake.stateful): no partition column
                    schemas[tc.name] = state_rows(tc, df).schema
                    remaining.remove(tc)
                    progressed = True
                    continue
                if DERIVED_TIME_COLUMN not in df.columns:
                    problems[tc.name] = f"the sql must output a {DERIVED_TIME_COLUMN!r} column (its event time)"
            else:
                continue
            df = with_partition_column(df, tc, time_column(config, tc) if tc.stream else DERIVED_TIME_COLUMN, 0.0)
            schemas[tc.name] = df.schema
            remaining.remove(tc)
            progressed = True
        if not progressed:
            break
    return problems
