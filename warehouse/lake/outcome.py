"""What an update job did (`JobOutcome`) or why it did not commit (`JobError`): shared by the
executor (lake.executor) and the stateful job (lake.stateful)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.errors import WarehouseError
from warehouse.events import JobFinished, StartJob

if TYPE_CHECKING:
    from warehouse.lake.recovery import TableState

__all__ = ["JobError", "JobOutcome", "noop_outcome"]


class JobError(WarehouseError):
    """An update job did not commit (Spark error, bad SQL, missing source, bad partition)."""


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What a job did. `committed=False` means it was already committed (a replay): a no-op."""

    job_id: int
    table: str
    committed: bool
    rows: int
    duration: float
    delta_version: int | None = None
    txn_version: int | None = None
    note: str = ""
    files: int | None = None  # maintenance jobs: data files after it
    bytes_reclaimed: int = 0  # VACUUM: bytes deleted
    read: tuple[tuple[str, int], ...] = ()  # derived jobs: (source, Delta version read)
    sql_version: str | None = None  # derived jobs: the SQL version the log holds over the job's window

    def event(self) -> JobFinished:
        return JobFinished(job_id=self.job_id, duration=self.duration, rows=self.rows, committed=self.committed,
                           files=self.files, bytes_reclaimed=self.bytes_reclaimed, version=self.delta_version,
                           read=self.read, sql_version=self.sql_version)


def noop_outcome(job: StartJob, duration: float, st: TableState, note: str) -> JobOutcome:
    """`job`'s work is already in the log `st` (a replay after an unknown outcome): nothing
    committed. A derived job reports the SQL version the log records over its window — the one
    the earlier attempt committed (its `userMetadata`) — so the Scheduler records that version
    rather than none; None where the window holds no single version."""
    version = st.versions.over(job.start, job.end) if job.kind in ("derived", "stateful") else None
    return JobOutcome(job.job_id, job.table, False, 0, duration, st.delta_version, st.txn_version, note,
                      sql_version=version)
