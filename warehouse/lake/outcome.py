"""What an update job did (`JobOutcome`) or why it did not commit (`JobError`): shared by the
executor (lake.executor) and the stateful job (lake.stateful)."""

from __future__ import annotations

from dataclasses import dataclass

from warehouse.errors import WarehouseError
from warehouse.events import JobFinished

__all__ = ["JobError", "JobOutcome"]


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

    def event(self) -> JobFinished:
        return JobFinished(job_id=self.job_id, duration=self.duration, rows=self.rows, committed=self.committed,
                           files=self.files, bytes_reclaimed=self.bytes_reclaimed, version=self.delta_version,
                           read=self.read)
