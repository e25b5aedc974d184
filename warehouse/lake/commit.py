"""The last step of every update job's pipeline: find the commit its txn made, and keep it.

Each pipeline (lake.base, lake.derived, lake.stateful, lake.rebuild) plans from the state its
table's Delta log records, reads its inputs at pinned versions, computes, and writes one commit
carrying the txn pair `(freshet/<table>, txn)` (docs/warehouse.md §5). Then `finish`:

1. looks the txn up in the log (`DeltaLog.commit_metrics`);
2. when Delta skipped the write — the txn was recorded already, a replay after an unknown outcome
   — reads the table's state from the log again: if it holds this job's work the job is a no-op,
   otherwise it fails (`JobError`), and the next job plans from the log;
3. otherwise keeps the new state in memory (`TableState.committed`) and reports the commit: its
   version, rows and the source versions read (the duration trains E(n), §2.4 of *Scalable
   Scheduling of Updates in Streaming Data Warehouses*).

Immediately before its Delta write each pipeline passes its `userMetadata` through `Lake.sign`:
the fence (the executor's `Leader`, the warehouse lease this daemon holds, must still be held with
margin, else `JobRefused`: nothing written) and the writer (`leader: {id, epoch}` added,
`leader_of`). Without a leader (tests, tools) there is neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from warehouse.lake.outcome import JobError, JobOutcome

if TYPE_CHECKING:
    from warehouse.config import FreshetConfig
    from warehouse.events import StartJob
    from warehouse.lake.files import LiveFiles
    from warehouse.lake.recovery import DeltaLog, TableState

__all__ = ["Lake", "Leader", "finish", "leader_of"]


class Leader(Protocol):
    """The warehouse lease this process holds (`ops.lease`, `ops.lease_s3`): who writes, and
    whether it still may."""

    owner: str
    epoch: int | None

    def lapsed(self) -> str | None:
        """None while this holder may write; else why it may not (no I/O: the monotonic clock)."""
        ...


def leader_of(leader: Leader) -> dict[str, Any]:
    """The `leader` field of a commit's `userMetadata`: the lease owner's id and its epoch."""
    return {"id": leader.owner, "epoch": leader.epoch}


class Lake(Protocol):
    """What a job's pipeline asks of the executor that runs it (lake.executor.Executor)."""

    config: FreshetConfig
    log: DeltaLog
    files: LiveFiles | None  # sources read from the files their log names (None: through Delta)

    @property
    def spark(self) -> Any: ...

    def table_state(self, table: str) -> TableState: ...

    def refresh(self, table: str) -> TableState: ...

    def reread(self, table: str) -> None: ...

    def commit_state(self, table: str, st: TableState) -> None: ...

    def noop(self, job: StartJob, t0: float, st: TableState, note: str) -> JobOutcome: ...

    def fence(self) -> None:
        """Raise `JobRefused` if this process may no longer write (the module docstring)."""
        ...

    def sign(self, meta: dict[str, Any]) -> dict[str, Any]:
        """`meta` for the write about to start: fenced, then naming its writer (the module docstring)."""
        ...


def finish(lake: Lake, job: StartJob, t0: float, st: TableState, path: str, txn: int, meta: dict[str, Any], *,
           done: Callable[[TableState], bool], replayed: str, missing: str, before: int | None = None,
           declared_rows: int = 0, sql_version: str | None = None) -> JobOutcome:
    """The commit `job` asked Delta for at `path` — txn `txn`, `userMetadata` `meta`, on top of
    the state `st` it planned from — found and kept, or found skipped (the module docstring).

    `done(state)`: whether the log's state holds this job's work (then "Delta skipped
    `replayed`" is the no-op's note; else the error says "but `missing`"). `before`: the Delta
    version before the write (a commit of the txn at or below it is an older one). Rows: the
    commit's own count (`lake.recovery.commit_rows`: a MERGE's keys inserted and updated, another
    write's output rows), else `declared_rows`."""
    version, counted = lake.log.commit_metrics(path, job.table, txn)
    if version is None or (before is not None and version <= before):  # Delta skipped the write
        now = lake.refresh(job.table)
        if done(now):
            return lake.noop(job, t0, now, f"Delta skipped {replayed}")
        raise JobError(f"table {job.table!r}: Delta skipped txn version {txn} (recorded {now.txn_version}) "
                       f"but {missing}")
    lake.commit_state(job.table, st.committed(meta, txn, version))
    n = counted if counted is not None else declared_rows
    return JobOutcome(job.job_id, job.table, True, n, time.monotonic() - t0, version, txn,
                      read=tuple(sorted(meta.get("sources", {}).items())), sql_version=sql_version)
