"""The overdue queue (`scheduler.overdue_periods`): an aging bound, beyond the paper. A job that
has waited that many of its table's periods since its release (§3.1 r_i) starts before the basic
algorithm's order, the longest overdue first — so in an overload no table waits for ever behind
more valuable ones (docs/operations.md §10). At most `overdue_lanes` such jobs run at once, so an
overload with many overdue tables does not turn the scheduler into FIFO. An overdue job loads at
most `OVERDUE_CHOP` of its table's periods of ΔF (§3.4's chopping): enough to end the table's wait,
not its whole backlog — the rest waits in the basic algorithm's order, released anew.

Pure: no clock, no I/O; the Scheduler hands it the time, its tables and how to start a job.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from tracks.plan import TrackPlan
from warehouse.events import StartJob
from warehouse.queues import now_track
from warehouse.table import QUEUED, Table

__all__ = ["OVERDUE_CHOP", "Overdue", "overdue_lanes"]

OVERDUE_CHOP = 1.0  # c of an overdue job: one period of ΔF (a burst's backlog is many)


def overdue_lanes(tracks: int) -> int:
    """At most this many overdue jobs run at once: a quarter of the tracks, at least one."""
    return max(1, tracks // 4)


class Overdue:
    """`periods` (None: off); `heap`: (when overdue, release seq, table), an entry standing while
    the table's job is queued with that `QueuePlace.seq`; `running`: the ids of the jobs it started
    that still run; `lanes`: how many may."""

    __slots__ = ("heap", "lanes", "periods", "running")

    def __init__(self) -> None:
        self.periods: float | None = None
        self.lanes = 1
        self.heap: list[tuple[float, int, str]] = []
        self.running: set[int] = set()

    def configure(self, periods: float | None, tracks: int, tables: Iterable[Table]) -> None:
        """A (re)load: each waiting job's deadline again, from its release and the new period."""
        self.periods, self.lanes = periods, overdue_lanes(tracks)
        self.heap = [] if periods is None else [(t.queue.release + periods * t.period, t.queue.seq, t.name)
                                                for t in tables if t.state in QUEUED]
        heapq.heapify(self.heap)

    def released(self, t: Table, now: float) -> None:
        """t's job was released at `now` (the caller asks only while `periods` is set)."""
        heapq.heappush(self.heap, (now + self.periods * t.period, t.queue.seq, t.name))  # type: ignore[operator]

    def due(self, now: float) -> bool:
        """A job may be overdue at `now` and a lane is free."""
        return bool(self.heap) and self.heap[0][0] <= now and len(self.running) < self.lanes

    def serve(self, now: float, tables: dict[str, Table], plan: TrackPlan, available: set[int],
              waiting: Callable[[int], bool], bulk_waits: Callable[[Table], bool],
              start: Callable[[Table, int], StartJob]) -> None:
        """The overdue jobs, the longest overdue first, while a lane and a track are free: each on
        the table's own tracks (the plan), else any free one; a bulk one that must wait for the bulk
        limit keeps its place. An entry whose release was served (its table started, drained or
        gone) is dropped. `start(t, track)` starts t's job; its track is taken from `available` here."""
        h, wait = self.heap, []
        while h and h[0][0] <= now and available and len(self.running) < self.lanes:
            entry = heapq.heappop(h)
            t = tables.get(entry[2])
            if t is None or t.removed or t.state not in QUEUED or t.queue.seq != entry[1]:
                continue
            if bulk_waits(t):
                wait.append(entry)
                continue
            track = now_track(plan, t.name, available, waiting)
            self.running.add(start(t, track).job_id)
            t.jobs.overdue += 1
            available.discard(track)
        for entry in wait:
            heapq.heappush(h, entry)

    def ended(self, job_id: int) -> None:
        self.running.discard(job_id)

    def only(self, names: set[str]) -> Overdue:
        """A copy holding the entries of these tables only (a rollout copy of some tables)."""
        c = Overdue()
        c.periods, c.lanes, c.running = self.periods, self.lanes, set(self.running)
        c.heap = [e for e in self.heap if e[2] in names]
        heapq.heapify(c.heap)
        return c
