"""The bulk limit as the Scheduler keeps it (policies.bulk): the threshold above which a job is
bulk, how many bulk jobs may run at once, and which running jobs are bulk.

Tracks bound how many jobs run at once (§3.2), not what they cost the cores under them; this
noun bounds the bulk ones. The one definition of a bulk job serves the count and the check alike,
whatever the job (update, recompute, maintenance, an operator's refresh). A job counts from its
start to its end as it was when it started: a threshold moved by a repartition (§3.2) does not
recount the running jobs. Pure: no clock, no I/O; knows nothing of the Scheduler.
"""

from __future__ import annotations

import math

__all__ = ["BulkLimit"]


class BulkLimit:
    """`cap`: at most this many bulk jobs at once (None: no limit); `over`: a job estimated to run
    longer than this is bulk; `running`: the ids of the running jobs that were bulk at their start."""

    __slots__ = ("cap", "over", "running")

    def __init__(self) -> None:
        self.cap: int | None = None
        self.over = math.inf
        self.running: set[int] = set()

    def is_bulk(self, estimate: float) -> bool:
        """A job estimated to run `estimate` seconds is bulk: the one definition."""
        return estimate > self.over

    def full(self, estimate: float) -> bool:
        """A job of `estimate` would pass the limit: it is bulk, and the limit's bulk jobs run."""
        return self.cap is not None and len(self.running) >= self.cap and self.is_bulk(estimate)

    def started(self, job_id: int, estimate: float) -> bool:
        """Job `job_id`, estimated at `estimate`, starts: counted if it is bulk (returned)."""
        if self.is_bulk(estimate):
            self.running.add(job_id)
            return True
        return False

    def ended(self, job_id: int) -> None:
        """Job `job_id` ended (bulk or not)."""
        self.running.discard(job_id)
