"""A stateful table's rebuild: its state folded again from its sources beside the live one — in a
shadow Delta table — and swapped in by one commit, so no reader and no dependent ever reads a
partial state (the loopback flow of "Programming Bulk-Incremental Dataflows" §3, recomputed).

Chunks of at most c·P_i (§3.4, warehouse.derived.Folded) fold `(lo, hi]` into the shadow
`<root>/_freshet_rebuild/<table>`, each source pinned at the version the first chunk read: the
first overwrites the shadow, the others MERGE. Each shadow commit carries its own txn pair
(`freshet/<table>/rebuild-<id>`, ms(hi)) and the progress (`rebuild`: id, from, to, done, versions),
read back after a restart. The live table keeps its update jobs and late folds meanwhile.

The last chunk then catches the shadow up with what the live state folded since the rebuild
began — the windows `(to, F]` and the rows committed after the pinned versions (late rows), as an
update job of the shadow — and overwrites the live state with the shadow's rows in one commit
`(freshet/<table>, recorded + 1)` whose `userMetadata` marks the rebuild swapped and records the
versions the state has read (`read`), where the next update job's late rows start.
"""

from __future__ import annotations

import shutil
import time
import uuid
from typing import TYPE_CHECKING, Any

from warehouse.config import TableConfig
from warehouse.events import StartJob
from warehouse.lake.delta import ms, next_txn_version, overwrite_idempotent, read_delta, table_path, utc
from warehouse.lake.outcome import JobError, JobOutcome
from warehouse.lake.recovery import TableState, shadow_path, under_way
from warehouse.lake.session import job_session
from warehouse.lake.stateful import Lake, increment, merge, merged_rows, state_rows
from warehouse.paths import local_path
from warehouse.sqltext import sql_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["run_rebuild"]

def _app(table: str, rid: str) -> str:
    """The shadow's txn app (`freshet/<table>/rebuild-<id>`): its own versions, one rebuild each."""
    return f"{table}/rebuild-{rid}"


def _rebuild_origin(ex: Lake, tc: TableConfig, origin: float) -> None:
    """Refuse a rebuild that would lose rows: every source must still hold its rows back to the
    state's origin (a source whose origin cannot be read, or starts later — its log or data
    cleaned up — would leave folds out of the rebuilt state)."""
    for src in tc.sources:
        sst = ex.table_state(src)
        if sst.origin is None:
            raise JobError(f"cannot rebuild stateful table {tc.name!r}: the origin of its source {src!r} cannot be "
                           f"read from its Delta log, so the rows folded since {utc(origin)} may not all be there; "
                           f"refused rather than lose them")
        if sst.origin > origin:
            raise JobError(f"cannot rebuild stateful table {tc.name!r}: its source {src!r} holds rows from "
                           f"{utc(sst.origin)} only, but the state folds rows from {utc(origin)}; a rebuild "
                           f"would lose the ones between, so it is refused")


def run_rebuild(ex: Lake, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
    """One chunk of a rebuild (warehouse.derived.Folded) into the shadow; the last one also swaps
    the shadow in. The first chunk (`job.full`) starts a new rebuild: pins each source at its
    current version, fixes where it ends (F now), overwrites the shadow from the origin. A chunk
    the shadow's log already holds is skipped (a retry, a restart); the swap, once committed, too."""
    st = ex.table_state(tc.name)
    path, spath = table_path(ex.config, tc.name), shadow_path(ex.config, tc.name)
    if st.freshness is None or ex.log.version(path) is None:
        return ex.noop(job, t0, st, "the state holds nothing to rebuild")
    if job.full:  # a new rebuild: from the origin, up to F now, the sources pinned now
        _rebuild_origin(ex, tc, job.start)
        pinned: dict[str, int] = {}
        for src in tc.sources:
            v = ex.log.version(table_path(ex.config, src))
            if v is None:
                raise JobError(f"source table {src!r} of {tc.name!r} has no Delta table to rebuild from")
            pinned[src] = v
        prog: dict[str, Any] = {"id": uuid.uuid4().hex[:12], "from": job.start, "to": st.freshness,
                                "done": job.start, "versions": pinned}
    else:
        prog = under_way(st.rebuild, ex.log.table_state(spath, tc.name).rebuild)  # type: ignore[assignment]
        if prog is None:
            return ex.noop(job, t0, st, "no rebuild of this state is under way (swapped in already)")
    app, lo, to = _app(tc.name, prog["id"]), float(prog["done"]), float(prog["to"])
    hi = min(job.end, to)
    version = None
    with job_session(ex.spark) as session:
        if lo < hi or job.full:
            version = _chunk(ex, session, job, tc, spath, app, prog, lo, hi)
        if hi >= to:
            return _swap(ex, session, job, tc, t0, prog)
    if version is None:
        return ex.noop(job, t0, st, "this chunk of the rebuild is already folded")
    return JobOutcome(job.job_id, tc.name, True, merged_rows(spath, version), time.monotonic() - t0, version,
                      ms(hi), read=tuple(sorted(prog["versions"].items())))


def _chunk(ex: Lake, session: SparkSession, job: StartJob, tc: TableConfig, spath: str, app: str,
           prog: dict[str, Any], lo: float, hi: float) -> int | None:
    """Fold `(lo, hi]` at the pinned versions into the shadow as `(app, ms(hi))`; its Delta
    version, or None when Delta skipped it (an earlier attempt folded it)."""
    pinned = dict(prog["versions"])
    meta = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": hi, "safe_freshness": hi,
            "window": [lo, hi], "sources": pinned, "read": pinned, "sql_version": sql_version(tc.increment),
            "reasons": list(job.reasons), "rebuild": {**prog, "done": hi, "lo": lo}}
    inc, _, _ = increment(session, ex.config, ex.log, tc, lo, hi, {}, pinned)
    if job.full:
        overwrite_idempotent(state_rows(tc, inc), spath, table=app, txn_version=ms(hi), metadata=meta,
                             partition_by=None, overwrite_schema=True)
    else:
        merge(session, tc, spath, inc, ms(hi), meta, app)
    version, _ = ex.log.commit_metrics(spath, app, ms(hi))
    if version is None:
        done = ex.log.table_state(spath, app).rebuild or {}
        if done.get("id") != prog["id"] or done.get("done", -1) < hi:
            raise JobError(f"table {tc.name!r}: Delta skipped rebuild txn version {ms(hi)} but the shadow's "
                           f"log does not hold the chunk up to {hi}")
    return version


def _swap(ex: Lake, session: SparkSession, job: StartJob, tc: TableConfig, t0: float,
          prog: dict[str, Any]) -> JobOutcome:
    """Catch the shadow up with the live state's freshness and late rows, then overwrite the
    live state with the shadow's rows in one commit."""
    st = ex.table_state(tc.name)
    spath, app = shadow_path(ex.config, tc.name), _app(tc.name, prog["id"])
    if st.rebuild and st.rebuild.get("id") == prog["id"] and st.rebuild.get("swapped"):
        return ex.noop(job, t0, st, "the rebuilt state is swapped in already")
    sh = ex.log.table_state(spath, app)
    assert st.freshness is not None and sh.freshness is not None
    f, start = st.freshness, sh.freshness
    inc, versions, late = increment(session, ex.config, ex.log, tc, start, f, sh.read)
    txn = next_txn_version(f, sh.txn_version)
    meta: dict[str, Any] = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": f,
                            "safe_freshness": f, "window": [start, f], "sources": versions, "read": versions,
                            "sql_version": sql_version(tc.increment), "rebuild": {**prog, "done": prog["to"]}}
    if late is not None:
        meta["late_since"], meta["late_from"] = dict(sh.read), late
    merge(session, tc, spath, inc, txn, meta, app)
    if ex.log.commit_metrics(spath, app, txn)[0] is None:  # an earlier attempt caught it up
        sh = ex.log.table_state(spath, app)
        if sh.freshness is None or sh.freshness < f:
            raise JobError(f"table {tc.name!r}: Delta skipped the rebuild's catch-up (txn {txn}) but the shadow "
                           f"holds the windows up to {sh.freshness} only, not {f}")
        versions = dict(sh.read)
    return _overwrite_live(ex, session, job, tc, t0, st, prog, versions)


def _overwrite_live(ex: Lake, session: SparkSession, job: StartJob, tc: TableConfig, t0: float, st: TableState,
                    prog: dict[str, Any], read: dict[str, int]) -> JobOutcome:
    """The swap: the shadow's rows become the live state, one commit `(freshet/<table>, recorded + 1)`."""
    path, spath = table_path(ex.config, tc.name), shadow_path(ex.config, tc.name)
    assert st.freshness is not None
    f = st.freshness
    txn = next_txn_version(f, st.txn_version)
    meta = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": f,
            "safe_freshness": st.safe_freshness if st.safe_freshness is not None else f,
            "window": [prog["from"], f], "sources": read, "read": read, "sql_version": sql_version(tc.increment),
            "reasons": list(job.reasons), "rebuild": {**prog, "done": prog["to"], "swapped": True}}
    overwrite_idempotent(read_delta(session, spath, None), path, table=tc.name, txn_version=txn, metadata=meta,
                         partition_by=None, overwrite_schema=True)
    version, _ = ex.log.commit_metrics(path, tc.name, txn)
    if version is None:
        st = ex.refresh(tc.name)
        if st.rebuild and st.rebuild.get("id") == prog["id"] and st.rebuild.get("swapped"):
            return ex.noop(job, t0, st, "Delta skipped the swap: the rebuilt state is swapped in already")
        raise JobError(f"table {tc.name!r}: Delta skipped the rebuild's swap (txn {txn}, recorded "
                       f"{st.txn_version}) and the log does not show it swapped in")
    new = st.copy()
    new.txn_version, new.delta_version = txn, version
    new.commits += 1
    new.origin = prog["from"] if new.origin is None else min(new.origin, prog["from"])
    new.versions.set(prog["from"], f, meta["sql_version"])
    new.read, new.rebuild = dict(read), meta["rebuild"]
    ex.commit_state(tc.name, new)
    local = local_path(spath)
    if local is not None:  # the shadow's files are not needed any more (a remote one stays until the next rebuild)
        shutil.rmtree(local, ignore_errors=True)
    return JobOutcome(job.job_id, tc.name, True, merged_rows(path, version), time.monotonic() - t0, version, txn,
                      read=tuple(sorted(read.items())))
