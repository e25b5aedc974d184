"""A stateful table's rebuild: its state folded again from its sources beside the live one — in a
shadow Delta table — and swapped in by one commit, so no reader and no dependent ever reads a
partial state (the loopback flow of *Programming Bulk-Incremental Dataflows* §3, recomputed;
docs/warehouse.md §9).

Read top to bottom, `run_rebuild` is the pipeline of one chunk:

1. **plan**: the first chunk (`job.full`) starts a rebuild — checks every source still holds the
   rows back to the state's origin, pins each source at its current version, fixes where the
   rebuild ends (F now) — and its progress (`rebuild`: id, from, to, done, versions) rides in
   every shadow commit's `userMetadata`, where a later chunk (after a restart too) reads it;
2. **fold a chunk** `(done, min(job.end, to)]` of at most c·P_i (§3.4 of *Scalable Scheduling
   of Updates in Streaming Data Warehouses*, warehouse.derived.Folded) into the shadow
   `<root>/_freshet_rebuild/<table>`, the sources read at the pinned versions: the first chunk
   overwrites the shadow, the others MERGE; each commit carries the rebuild's own txn pair
   (`freshet/<table>/rebuild-<id>`, ms(chunk end));
3. **the last chunk swaps**: it catches the shadow up with what the live state folded since the
   rebuild began — the windows `(to, F]` and the rows committed after the pinned versions (late
   rows), as an update job of the shadow — and overwrites the live state with the shadow's rows in
   one commit `(freshet/<table>, recorded + 1)` whose `userMetadata` marks the rebuild swapped and
   records the versions the state has read (`read`), where the next update job's late rows start.

A chunk the shadow's log already holds is skipped (a retry, a restart); the swap, once
committed, too. The live table keeps its update jobs and late folds meanwhile.
"""

from __future__ import annotations

import shutil
import time
import uuid
from typing import TYPE_CHECKING, Any

from warehouse.config import TableConfig
from warehouse.events import StartJob
from warehouse.lake.commit import Lake, finish
from warehouse.lake.delta import ms, next_txn_version, overwrite_idempotent, read_delta, table_path, utc
from warehouse.lake.outcome import JobError, JobOutcome
from warehouse.lake.read import pin_sources
from warehouse.lake.recovery import TableState, shadow_path, under_way
from warehouse.lake.session import job_session
from warehouse.lake.stateful import increment, merge, state_rows
from warehouse.paths import local_path
from warehouse.sqltext import sql_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["run_rebuild"]


def run_rebuild(lake: Lake, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
    """One chunk of a rebuild into the shadow; the last one also swaps the shadow in (the module
    docstring)."""
    # 1. plan: a new rebuild, or the one under way as the shadow's log records it
    st = lake.table_state(tc.name)
    path, shadow = table_path(lake.config, tc.name), shadow_path(lake.config, tc.name)
    if st.freshness is None or lake.log.version(path) is None:
        return lake.noop(job, t0, st, "the state holds nothing to rebuild")
    starts_rebuild = job.full  # the first chunk: from the origin, up to F now, the sources pinned now
    if starts_rebuild:
        _check_sources_reach_origin(lake, tc, job.start)
        progress: dict[str, Any] = {"id": uuid.uuid4().hex[:12], "from": job.start, "to": st.freshness,
                                    "done": job.start, "versions": pin_sources(lake.config, lake.log, tc)}
    else:
        progress = under_way(st.rebuild, lake.log.table_state(shadow, tc.name).rebuild)  # type: ignore[assignment]
        if progress is None:
            return lake.noop(job, t0, st, "no rebuild of this state is under way (swapped in already)")
    app, lo, to = _app(tc.name, progress["id"]), float(progress["done"]), float(progress["to"])
    hi = min(job.end, to)
    version, rows = None, None
    with job_session(lake.spark) as session:
        if lo < hi or starts_rebuild:  # 2. fold the chunk into the shadow
            version, rows = _fold_chunk(lake, session, job, tc, shadow, app, progress, lo, hi, starts_rebuild)
        if hi >= to:  # 3. the last chunk: catch up and swap in
            return _swap(lake, session, job, tc, t0, progress)
    if version is None:
        return lake.noop(job, t0, st, "this chunk of the rebuild is already folded")
    return JobOutcome(job.job_id, tc.name, True, rows or 0, time.monotonic() - t0, version,
                      ms(hi), read=tuple(sorted(progress["versions"].items())))


def _app(table: str, rebuild_id: str) -> str:
    """The shadow's txn app (`freshet/<table>/rebuild-<id>`): its own versions, one rebuild each."""
    return f"{table}/rebuild-{rebuild_id}"


def _check_sources_reach_origin(lake: Lake, tc: TableConfig, origin: float) -> None:
    """Refuse a rebuild that would lose rows: every source must still hold its rows back to the
    state's origin (a source whose origin cannot be read, or starts later — its log or data
    cleaned up — would leave folds out of the rebuilt state)."""
    for src in tc.sources:
        source_state = lake.table_state(src)
        if source_state.origin is None:
            raise JobError(f"cannot rebuild stateful table {tc.name!r}: the origin of its source {src!r} cannot be "
                           f"read from its Delta log, so the rows folded since {utc(origin)} may not all be there; "
                           f"refused rather than lose them")
        if source_state.origin > origin:
            raise JobError(f"cannot rebuild stateful table {tc.name!r}: its source {src!r} holds rows from "
                           f"{utc(source_state.origin)} only, but the state folds rows from {utc(origin)}; a rebuild "
                           f"would lose the ones between, so it is refused")


def _fold_chunk(lake: Lake, session: SparkSession, job: StartJob, tc: TableConfig, shadow: str, app: str,
                progress: dict[str, Any], lo: float, hi: float, first: bool) -> tuple[int | None, int | None]:
    """Fold `(lo, hi]` at the pinned versions into the shadow as `(app, ms(hi))` — the `first`
    chunk overwrites it; its Delta version and rows (`DeltaLog.commit_metrics`), or None when
    Delta skipped it (an earlier attempt folded it)."""
    pinned = dict(progress["versions"])
    meta = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": hi, "safe_freshness": hi,
            "window": [lo, hi], "sources": pinned, "read": pinned, "sql_version": sql_version(tc.increment),
            "reasons": list(job.reasons), "rebuild": {**progress, "done": hi, "lo": lo}}
    inc = increment(lake, session, tc, lo, hi, since={}, pinned=pinned)
    meta = lake.sign(meta)  # the fence, then the writer (lake.commit)
    if first:
        overwrite_idempotent(state_rows(tc, inc.rows), shadow, table=app, txn_version=ms(hi), metadata=meta,
                             partition_by=None, overwrite_schema=True)
    else:
        merge(session, tc, shadow, inc.rows, ms(hi), meta, app)
    version, rows = lake.log.commit_metrics(shadow, app, ms(hi))
    if version is None:
        done = lake.log.table_state(shadow, app).rebuild or {}
        if done.get("id") != progress["id"] or done.get("done", -1) < hi:
            raise JobError(f"table {tc.name!r}: Delta skipped rebuild txn version {ms(hi)} but the shadow's "
                           f"log does not hold the chunk up to {hi}")
    return version, rows


def _swapped(st: TableState, progress: dict[str, Any]) -> bool:
    """The live state's log shows this rebuild swapped in."""
    return bool(st.rebuild and st.rebuild.get("id") == progress["id"] and st.rebuild.get("swapped"))


def _swap(lake: Lake, session: SparkSession, job: StartJob, tc: TableConfig, t0: float,
          progress: dict[str, Any]) -> JobOutcome:
    """Catch the shadow up with the live state's freshness and late rows, then overwrite the
    live state with the shadow's rows in one commit `(freshet/<table>, recorded + 1)`."""
    st = lake.table_state(tc.name)
    path, shadow = table_path(lake.config, tc.name), shadow_path(lake.config, tc.name)
    app = _app(tc.name, progress["id"])
    if _swapped(st, progress):
        return lake.noop(job, t0, st, "the rebuilt state is swapped in already")
    # catch up: the shadow folds what the live state folded since the rebuild began
    shadow_state = lake.log.table_state(shadow, app)
    assert st.freshness is not None and shadow_state.freshness is not None
    freshness, start = st.freshness, shadow_state.freshness
    inc = increment(lake, session, tc, start, freshness, since=shadow_state.read)
    txn = next_txn_version(freshness, shadow_state.txn_version)
    meta: dict[str, Any] = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": freshness,
                            "safe_freshness": freshness, "window": [start, freshness], "sources": inc.versions,
                            "read": inc.versions, "sql_version": sql_version(tc.increment),
                            "rebuild": {**progress, "done": progress["to"]}}
    if inc.late_from is not None:
        meta["late_since"], meta["late_from"] = dict(shadow_state.read), inc.late_from
    merge(session, tc, shadow, inc.rows, txn, lake.sign(meta), app)
    read = inc.versions
    if lake.log.commit_metrics(shadow, app, txn)[0] is None:  # an earlier attempt caught it up
        shadow_state = lake.log.table_state(shadow, app)
        if shadow_state.freshness is None or shadow_state.freshness < freshness:
            raise JobError(f"table {tc.name!r}: Delta skipped the rebuild's catch-up (txn {txn}) but the shadow "
                           f"holds the windows up to {shadow_state.freshness} only, not {freshness}")
        read = dict(shadow_state.read)
    # the swap: the shadow's rows become the live state
    txn = next_txn_version(freshness, st.txn_version)
    meta = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": freshness,
            "safe_freshness": st.safe_freshness if st.safe_freshness is not None else freshness,
            "window": [progress["from"], freshness], "sources": read, "read": read,
            "sql_version": sql_version(tc.increment), "reasons": list(job.reasons),
            "rebuild": {**progress, "done": progress["to"], "swapped": True}}
    meta = lake.sign(meta)
    overwrite_idempotent(read_delta(session, shadow, None), path, table=tc.name, txn_version=txn, metadata=meta,
                         partition_by=None, overwrite_schema=True)
    outcome = finish(lake, job, t0, st, path, txn, meta, done=lambda now: _swapped(now, progress),
                     replayed="the swap: the rebuilt state is swapped in already",
                     missing="the log does not show the rebuilt state swapped in")
    local = local_path(shadow)
    if outcome.committed and local is not None:  # the shadow's files are not needed any more (a remote one stays)
        shutil.rmtree(local, ignore_errors=True)
    return outcome
