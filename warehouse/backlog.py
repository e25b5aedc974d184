"""A base table's backlog: the partitions arrived and not loaded yet (§2.4), and what its running
job loads of them.

Pending partitions are kept sorted by end, so the next job's shape — all of them in one job, or
chopped to about c·P_i (§3.4), or one long partition in time slices — costs O(log n) however long
the backlog. A time slice leaves its partition pending (with how far it is `loaded`) until the
last slice. Pure: no clock, no I/O; knows nothing of the Scheduler.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

from policies.chopping import chop_count, time_slice
from warehouse.cost import RowRate
from warehouse.events import PartitionArrived

__all__ = ["Backlog", "Partition", "Shape"]


@dataclass(slots=True)
class Partition:
    end: float
    start: float
    seq: int
    late: bool
    arrival: PartitionArrived  # handed on in the StartJob that loads it
    loaded: float | None = None  # time-sliced: rows up to here are loaded already

    @property
    def pid(self) -> str:
        return self.arrival.partition_id

    @property
    def safe_through(self) -> float | None:
        return self.arrival.safe_through

    @property
    def low(self) -> float:
        """Where what is left of it to load begins."""
        return self.start if self.loaded is None else self.loaded

    def key(self) -> tuple[float, float, int]:
        return (self.end, self.start, self.seq)


_END = attrgetter("end")  # Partition.end, in C (chop_count's bisect key)
_ROWS, _PID = attrgetter("arrival.rows"), attrgetter("arrival.partition_id")  # (map: no comprehension frame)
Shape = tuple[float, float, float, int, bool]  # the next job: start, end, new freshness, partitions, a slice?


class Backlog:
    """Pending partitions (sorted by end), their rows, the ids pending or running, the largest end
    arrived, and the running job's partitions (or the one it loads a time slice of)."""

    __slots__ = ("arrived", "ids", "partial", "pending", "rows", "running", "slice", "sliced")

    def __init__(self, sliced: dict[str, float] | None = None) -> None:
        self.pending: list[Partition] = []
        self.rows = 0  # the rows of `pending`
        self.ids: set[str] = set()  # pending or running partition ids
        self.arrived: float | None = None  # the largest end arrived and not dropped
        self.running: list[Partition] = []  # what the running job loads
        self.slice: Partition | None = None  # the partition the running job loads a time slice of
        self.partial: Partition | None = None  # a pending partition partly loaded by time slices
        # recovered (a restart): partitions time slices loaded in part, through when, until they arrive again
        self.sliced: dict[str, float] = sliced or {}

    def __contains__(self, pid: str) -> bool:
        return pid in self.ids

    def add(self, p: Partition) -> bool:
        """`p` is pending now; True if it went last (in order: the usual case, no search)."""
        if self.sliced and (cut := self.sliced.pop(p.pid, None)) is not None:
            p.loaded, self.partial = cut, p  # re-delivered after a restart: the rest of it is pending
        pending = self.pending
        last = not pending or (q := pending[-1]).end < p.end or q.end == p.end and q.start <= p.start
        if last:  # (seq only breaks ties, and it grows: an equal (end, start) goes last)
            pending.append(p)
        else:
            insort(pending, p, key=Partition.key)
        a = p.arrival
        self.ids.add(a.partition_id)
        self.rows += a.rows
        if self.arrived is None or p.end > self.arrived:
            self.arrived = p.end
        return last

    def adopt(self, parts: list[Partition]) -> None:
        """A job of a previous incarnation of the table runs these (a reconfigure)."""
        self.running = parts
        self.ids.update(p.pid for p in parts)

    def adopt_slice(self, p: Partition, start: float) -> None:
        """A job of a previous incarnation of the table loads a time slice of `p` from `start`
        (a reconfigure): `p` is pending, loaded up to `start`, as after `take_slice`; the rest of
        it stays to load after the slice."""
        self.add(p)
        if start > p.start and (p.loaded is None or start > p.loaded):
            p.loaded = start
        if p.loaded is not None:
            self.partial = p
        self.slice = p
        self.running = []

    # ---- the next job (§2.4, §3.4) ------------------------------------------------------------
    def shape(self, freshness: float | None, period: float, c: float | None, slicing: bool) -> Shape:
        """The job that loads the backlog now — (start, end, new freshness, partitions, a time
        slice?) — up to c·P_i of it (§3.4; c None: all), never across a partly loaded partition;
        with `slicing` one partition longer than that in time slices."""
        pending = self.pending
        first = pending[0]
        low = first.low
        ref = freshness if freshness is not None else low
        count = chop_count(pending, ref, period, c, _END)
        if self.partial is not None and self.partial is not first and count > 1:
            # late data below a partly loaded partition: load it first, never across the slice
            count = min(count, max(1, bisect_left(pending, self.partial.key(), key=Partition.key)))
        end = pending[count - 1].end
        start = low if low < ref else ref  # the earliest data this job touches (min, without the call)
        cut = time_slice(max(ref, low), first.end, period, c) if count == 1 and slicing else None
        if cut is not None:
            end = cut
        new_f = end if freshness is None or end > freshness else freshness
        return start, end, new_f, count, cut is not None

    def work(self, rate: RowRate, count: int, start: float, end: float) -> float:
        """n of E(n) (§2.4) for loading `pending[:count]` through `end`: its rows at the stream's
        typical rate (warehouse.cost.RowRate) — all pending rows are a running total, a chopped
        job sums its few partitions — less the part of the first that time slices loaded already
        or leave to a later slice."""
        if rate.rate is None:
            return end - start
        first = self.pending[0]
        rows = self.rows if count == len(self.pending) else sum(p.arrival.rows for p in self.pending[:count])
        rows -= first.arrival.rows * (1.0 - (min(first.end, end) - first.low) / (first.end - first.start))
        return rate.work(rows, end - start)

    def whole(self, freshness: float | None) -> tuple[float, float]:
        """(start, end) of everything pending: what an unchopped job would load."""
        return (freshness if freshness is not None else self.pending[0].start), self.pending[-1].end

    # ---- a job starts and ends ----------------------------------------------------------------
    def take(self, count: int) -> list[Partition]:
        """The first `count` pending partitions leave for the running job."""
        parts = self.pending[:count]
        del self.pending[:count]  # in place: no copy of the rest of the backlog
        if self.rows:  # (rows are never negative: a zero total has none to take)
            self.rows -= sum(map(_ROWS, parts))
        if self.partial is not None and any(p is self.partial for p in parts):
            self.partial = None
        self.running = parts
        return parts

    def take_slice(self) -> Partition:
        """The running job loads a time slice of the first partition; it stays pending."""
        self.slice = self.pending[0]
        self.running = []
        return self.slice

    def finished(self, end: float, spans: bool = True) -> list[tuple[Partition, float, float]]:
        """The running job committed through `end`: (partition, lo, hi] of what it loaded of
        each — a slice only its slice, the rest of a partly loaded one from where it stopped
        (if `spans`: none are wanted where no dependent reads the table)."""
        out = [(p, p.low, min(p.end, end)) for p in (self.running if self.slice is None else [self.slice])] if spans else []
        self.ids.difference_update(map(_PID, self.running))
        self.running = []
        if self.slice is not None:
            self.slice.loaded, self.partial = end, self.slice
            self.slice = None
        return out

    def failed(self, bad: set[str], freshness: float | None) -> None:
        """The running job did not commit: its partitions are pending again (nothing valid is
        dropped), except `bad` ones found unloadable since acceptance."""
        for p in self.running:
            if p.pid in bad:
                self.ids.discard(p.pid)
                continue
            insort(self.pending, p, key=Partition.key)
            self.rows += p.arrival.rows
        self.running = []
        self.slice = None  # a failed slice: its partition never left the pending list
        if bad:
            self.drop(bad, freshness)

    def drop(self, bad: set[str], freshness: float | None) -> None:
        """Partitions `bad` leave the backlog — and `arrived` — at once (not a running job's)."""
        self.pending = [p for p in self.pending if p.pid not in bad]
        self.rows = sum(p.arrival.rows for p in self.pending)
        self.ids.difference_update(bad)
        if self.partial is not None and self.partial.pid in bad:
            self.partial = None
        if self.slice is not None and self.slice.pid in bad:
            self.slice = None
        arrived = max((p.end for p in chain(self.pending, self.running)), default=freshness)
        self.arrived = arrived if freshness is None or arrived is None else max(arrived, freshness)

    def is_running(self, pid: str) -> bool:
        return any(p.pid == pid for p in self.running)

    # ---- observation --------------------------------------------------------------------------
    def floor(self) -> float | None:
        """The earliest start waiting or running (a table never loaded starts there)."""
        return min((p.start for p in chain(self.pending, self.running)), default=None)
