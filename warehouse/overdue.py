"""The overdue queue (`scheduler.overdue_periods`): an aging bound, beyond the paper. A queued job
whose table has gone that many of its periods without getting fresher (`deadline`: counted from
its freshness's last change, not only from the job's release, §3.1 r_i) starts before the basic
algorithm's order, the longest overdue first — so in an overload no table waits for ever behind
more valuable ones (docs/operations.md §10). At most `overdue_lanes` such jobs run at once, so an
overload with many overdue tables does not turn the scheduler into FIFO. An overdue job loads at
most `OVERDUE_CHOP` of its table's periods of ΔF (§3.4's chopping): enough to end the table's
wait, not its whole backlog — the rest waits in the basic algorithm's order, released anew.

Pure: no clock, no I/O; the Scheduler hands it the time, its tables and how to start a job.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from tracks.plan import TrackPlan
from warehouse.queues import now_track
from warehouse.table import QUEUED, Table

__all__ = ["OVERDUE_CHOP", "Overdue", "deadline", "overdue_lanes"]

OVERDUE_CHOP = 1.0  # c of an overdue job: one period of ΔF (a burst's backlog is many)


def overdue_lanes(tracks: int) -> int:
    """At most this many overdue jobs run at once: half the tracks, at least one."""
    return max(1, tracks // 2)


def deadline(t: Table, release: float, periods: float, slack: float = 0.0) -> float:
    """When t's job, released at `release`, is overdue: `periods` units and `slack` seconds after
    t's wait began, a unit being t's period (or its granularity, when longer: it cannot get fresher
    more often).
    The wait begins at the last change of t's freshness (the staleness meter's), so a derived
    table's wait for its sources' loads counts — for a base table at most a unit before the
    release (a stream's pause is no wait). A job that only recomputes, a retry after a failure, a
    table never loaded: from the release."""
    unit = max(t.period, t.granularity or 0.0)
    since = release
    if t.freshness is not None and t.jobs.consecutive_failures == 0:
        if t.derived is None:
            since = max(min(t.meter.since, release), release - unit)
        elif t.derived.has_update(t.freshness):
            since = min(t.meter.since, release)
    return since + periods * unit + slack


class Overdue:
    """`periods` (None: off) and `slack`; `heap`: (when overdue, release seq, table), an entry standing while
    the table's job is queued with that `QueuePlace.seq`; `lanes`: how many overdue jobs may run
    (which run is the track board's: `StartJob.overdue`)."""

    __slots__ = ("heap", "lanes", "periods", "slack")

    def __init__(self) -> None:
        self.periods: float | None = None
        self.slack = 0.0
        self.lanes = 1
        self.heap: list[tuple[float, int, str]] = []

    def configure(self, periods: float | None, slack: float, tracks: int, tables: Iterable[Table]) -> None:
        """A (re)load: each waiting job's deadline again, from its table's wait and the new period."""
        self.periods, self.slack, self.lanes = periods, slack, overdue_lanes(tracks)
        self.heap = [] if periods is None else [(deadline(t, t.queue.release, periods, slack), t.queue.seq, t.name)
                                                for t in tables if t.state in QUEUED]
        heapq.heapify(self.heap)

    def released(self, t: Table, now: float) -> None:
        """t's job was released at `now` (the caller asks only while `periods` is set)."""
        heapq.heappush(self.heap, (deadline(t, now, self.periods, self.slack), t.queue.seq, t.name))  # type: ignore[arg-type]

    def serve(self, now: float, running: int, tables: dict[str, Table], plan: TrackPlan, available: set[int],
              waiting: Callable[[int], bool], bulk_waits: Callable[[Table], bool],
              start: Callable[[Table, int], None]) -> None:
        """The overdue jobs, the longest overdue first, while a lane and a track are free: each on
        the table's own tracks (the plan), else any free one; a bulk one that must wait for the bulk
        limit keeps its place. An entry whose release was served (its table started, drained or
        gone) is dropped. `running`: the overdue jobs running now; `start(t, track)` starts t's job;
        its track is taken from `available` here."""
        h, wait = self.heap, []
        while h and h[0][0] <= now and available and running < self.lanes:
            entry = heapq.heappop(h)
            t = tables.get(entry[2])
            if t is None or t.removed or t.state not in QUEUED or t.queue.seq != entry[1]:
                continue
            if bulk_waits(t):
                wait.append(entry)
                continue
            track = now_track(plan, t.name, available, waiting)
            start(t, track)
            running += 1
            t.jobs.overdue += 1
            available.discard(track)
        for entry in wait:
            heapq.heappush(h, entry)

    def only(self, names: set[str]) -> Overdue:
        """A copy holding the entries of these tables only (a rollout copy of some tables)."""
        c = Overdue()
        c.periods, c.slack, c.lanes = self.periods, self.slack, self.lanes
        c.heap = [e for e in self.heap if e[2] in names]
        heapq.heapify(c.heap)
        return c
