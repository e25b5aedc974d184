"""What an update job did (`JobOutcome`) or why it did not commit (`JobError`): shared by the
pipelines of every job kind (lake.base, lake.derived, lake.stateful, lake.rebuild, lake.maintain)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.errors import WarehouseError
from warehouse.events import JobFinished, StartJob

if TYPE_CHECKING:
    from warehouse.lake.recovery import TableState

__all__ = ["JobError", "JobOutcome", "JobRefused", "failure_reason", "noop_outcome", "root_cause"]


class JobError(WarehouseError):
    """An update job did not commit (Spark error, bad SQL, missing source, bad partition)."""


class JobRefused(JobError):
    """The job refused to write before writing anything (a schema change it may not make): it is
    known not to have committed — not an unknown outcome (`JobFailed.refused`)."""


_CAUSED_BY = re.compile(r"^\s*Caused by: (.+?)\s*$", re.MULTILINE)


def root_cause(err: BaseException) -> str | None:
    """The innermost `Caused by:` of the Java exception chain behind a Spark error — from its text
    (a Py4JJavaError carries the JVM stack trace), the stack trace classic PySpark keeps beside a
    converted exception, or the one Spark Connect fetched from the server — or None."""
    for text in (str(err), getattr(err, "_stackTrace", None), getattr(err, "_stacktrace", None)):
        if isinstance(text, str) and (causes := _CAUSED_BY.findall(text)):
            return causes[-1]
    return None


def failure_reason(err: BaseException, limit: int = 500) -> str:
    """A one-line reason from a Spark/Py4J error (the JVM stack trace stays in the log): its first
    line and, when that does not say it, the root cause of the Java exception chain — a full disk
    is `… [TASK_WRITE_FAILED] Task failed while writing rows … (cause: java.io.IOException: No space
    left on device)`, not TASK_WRITE_FAILED alone."""
    text = str(err).strip() or type(err).__name__
    lines = text.splitlines()
    first = lines[0].strip()
    if first.startswith("An error occurred while calling") and len(lines) > 1:
        first = lines[1].strip()
    head = f"{type(err).__name__}: {first}"
    root = root_cause(err)
    if not root or root in head:
        return head[:limit]
    tail = f" (cause: {root[:limit // 2]})"
    return head[:limit - len(tail)] + tail


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
    cold: bool = False  # the table's first commit in this Spark session (JobFinished.cold)

    def event(self) -> JobFinished:
        return JobFinished(job_id=self.job_id, duration=self.duration, rows=self.rows, committed=self.committed,
                           files=self.files, bytes_reclaimed=self.bytes_reclaimed, version=self.delta_version,
                           read=self.read, sql_version=self.sql_version, cold=self.cold)


def noop_outcome(job: StartJob, duration: float, st: TableState, note: str) -> JobOutcome:
    """`job`'s work is already in the log `st` (a replay after an unknown outcome): nothing
    committed. A derived job reports the SQL version the log records over its window — the one
    the earlier attempt committed (its `userMetadata`) — so the Scheduler records that version
    rather than none; None where the window holds no single version."""
    version = st.versions.over(job.start, job.end) if job.kind in ("derived", "stateful") else None
    return JobOutcome(job.job_id, job.table, False, 0, duration, st.delta_version, st.txn_version, note,
                      sql_version=version)
