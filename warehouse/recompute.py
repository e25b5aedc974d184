"""Recomputing derived windows that are already committed: late data, changed logic, backfills.

The DataDepot paper only ever moves a table's freshness forward; it leaves out what
happens when data arrives for windows already computed (§2.2 assumes it cannot), when a derived
table's SQL changes (Olston, Graceful Logic Evolution in Web Data Processing Workflows, graceful evolution of derived logic), or when a table may run ahead
of its slowest source by a bounded skew (Olston, Modeling and Scheduling Asynchronous Incremental Workflows §5, `bound_inconsistency`). Each of these makes a
range of a derived table's committed windows wrong; this module keeps, per derived table, which
ranges and why, and the Scheduler turns them into *recompute jobs* of that table: the SQL over the
range, written with `replaceWhere` of the range (or, when that is cheaper or the SQL is not
window-local, a full overwrite), competing with update jobs by marginal benefit on the same tracks.

What a recompute job is worth — §3.1's marginal benefit `p_i·ΔF_i / E_i(ΔF_i)`, extended: until
its windows are rewritten, a wrong range `(lo, hi]` is as good as not loaded, so the staleness the
job removes is its length `hi − lo`, the ΔF it stands for. Rewrites asked for by a SQL change keep
correct-but-old windows in place, so they run at `EVOLVE_SHARE` of the table's priority: in the
background, newest first (what readers look at most).

Pure: no clock, no I/O, like the Scheduler that owns these objects.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from warehouse.freshness import WHOLE, floor_to

__all__ = [
    "EVOLVE_SHARE",
    "Piece",
    "Ranges",
    "RecomputePlan",
    "TableRecompute",
    "VersionMap",
    "ceil_to",
    "full_pays",
    "touched",
    "window_count",
]

EVOLVE_SHARE = 0.1  # a SQL-change rewrite is worth this share of the table's priority (low, in the background)


def ceil_to(t: float, granularity: float | None) -> float:
    """Ceil a time to a multiple of `granularity` (no-op without one)."""
    if not granularity:
        return t
    q = t / granularity - 1e-12
    return math.ceil(q) * granularity if -WHOLE < q < WHOLE else t  # (as floor_to)


def touched(a: float, b: float, *, lookback: float, granularity: float | None, taken: float | None,
            origin: float | None) -> tuple[float, float] | None:
    """The committed windows of a derived table that a change of its source in `(a, b]` makes
    wrong: outputs in `(a, b + lookback]` (a window reads its sources from `lookback` before it),
    widened to whole granules and cut to what the table has computed, `(origin, taken]`.
    None when that is empty (the next update job reads the change anyway)."""
    if taken is None:
        return None
    lo = floor_to(a, granularity)
    hi = min(ceil_to(b + lookback, granularity), taken)
    if origin is not None:
        lo = max(lo, origin)
    return (lo, hi) if hi > lo else None


def window_count(length: float, granularity: float | None, period: float) -> int:
    """How many windows a range of `length` seconds holds: granules, or periods without a granularity."""
    step = granularity or period
    if not (length > 0 and step > 0):
        return 0
    q = length / step
    return max(1, round(q)) if q < WHOLE else int(WHOLE)  # (never round(inf))


def full_pays(alpha: float, beta: float, work: float, span: float, table: float, c: float) -> bool:
    """The incremental or batch variant, by cost (Olston, Modeling and Scheduling Asynchronous
    Incremental Workflows §6), with the learned E(n) = α + β·n (§2.4): `work` seconds of windows
    rewritten in pieces of at most `span` cost ⌈work/span⌉·α + β·work; one full overwrite of the
    table's `table` seconds costs α + β·table. True when the full one is cheaper — the rewrite is a
    large share of the table — and no longer than `c` pieces, so it never holds a track much longer
    than a chopped job would (§3.4)."""
    if work <= 0 or table <= 0:
        return False
    q = work / span - 1e-9 if span > 0 else 1.0
    pieces = math.ceil(q) if q < WHOLE else WHOLE  # (never ceil(inf))
    full = alpha + beta * table
    return full < pieces * alpha + beta * work and full <= c * (alpha + beta * span)


@dataclass(slots=True)
class Piece:
    """One interval of `Ranges`: `(lo, hi]`, why (`reasons`) and the late partitions behind it."""

    lo: float
    hi: float
    reasons: set[str] = field(default_factory=set)
    late: set[str] = field(default_factory=set)


class RecomputePlan(NamedTuple):
    """A derived table's next recompute job: the range it rewrites and why (`piece`), whether it
    overwrites the whole table from its origin instead, and the share of the table's priority it
    runs at (1, or EVOLVE_SHARE for a SQL change's rewrite in the background)."""

    piece: Piece
    overwrite: bool
    share: float


class Ranges:
    """Disjoint intervals `(lo, hi]` of event time, sorted, each with its reasons; adding merges
    what overlaps or touches (their reasons and late ids are united)."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Piece] = []

    def __bool__(self) -> bool:
        return bool(self.items)

    def total(self) -> float:
        return sum(p.hi - p.lo for p in self.items)

    def add(self, lo: float, hi: float, reasons: Iterable[str], late: Iterable[str] = ()) -> None:
        if hi <= lo:
            return
        new = Piece(lo, hi, set(reasons), set(late))
        keep: list[Piece] = []
        for p in self.items:
            if p.hi < new.lo or p.lo > new.hi:
                keep.append(p)
            else:
                new.lo, new.hi = min(new.lo, p.lo), max(new.hi, p.hi)
                new.reasons |= p.reasons
                new.late |= p.late
        keep.insert(bisect_left([p.lo for p in keep], new.lo), new)
        self.items = keep

    def remove(self, lo: float, hi: float) -> list[Piece]:
        """Take `(lo, hi]` out (a job rewrites it); the parts taken (to put back if it fails)."""
        out: list[Piece] = []
        taken: list[Piece] = []
        for p in self.items:
            if p.hi <= lo or p.lo >= hi:
                out.append(p)
                continue
            if p.lo < lo:
                out.append(Piece(p.lo, lo, set(p.reasons), set(p.late)))
            if p.hi > hi:
                out.append(Piece(hi, p.hi, set(p.reasons), set(p.late)))
            taken.append(Piece(max(p.lo, lo), min(p.hi, hi), set(p.reasons), set(p.late)))
        self.items = out
        return taken

    def newest(self, span: float, granularity: float | None) -> Piece | None:
        """The newest piece of at most `span` (never less than one granule): newest first."""
        if not self.items:
            return None
        last = self.items[-1]
        lo = max(last.lo, floor_to(last.hi - span, granularity))
        if lo >= last.hi:
            lo = last.lo
        return Piece(lo, last.hi, set(last.reasons), set(last.late))

    def lowest(self) -> float | None:
        return self.items[0].lo if self.items else None


class VersionMap:
    """Which SQL version (`warehouse.sqltext.sql_version`) computed each committed range of a
    derived table (Olston, Graceful Logic Evolution in Web Data Processing Workflows): disjoint `[lo, hi, version]`, sorted, neighbours with one version merged."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[tuple[float, float, str]] = ()) -> None:
        self.items: list[list] = []
        for lo, hi, v in items:
            self.set(lo, hi, v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VersionMap) and self.items == other.items

    def __repr__(self) -> str:
        return f"VersionMap({self.items!r})"

    def set(self, lo: float, hi: float, version: str) -> None:
        """Record `version` over `(lo, hi]`: only the items it overlaps or touches are replaced,
        found by bisection (a log replayed commit by commit stays linear, not quadratic)."""
        if hi <= lo:
            return
        items = self.items
        i = bisect_right(items, lo, key=_hi)  # the first item ending after lo
        j = bisect_left(items, hi, lo=i, key=_lo)  # the first item starting at or after hi
        new = [lo, hi, version]
        out: list[list] = []
        if i < j and items[i][0] < lo:
            out.append([items[i][0], lo, items[i][2]])
        out.append(new)
        if i < j and items[j - 1][1] > hi:
            out.append([hi, items[j - 1][1], items[j - 1][2]])
        if i > 0 and items[i - 1][1] == out[0][0] and items[i - 1][2] == out[0][2]:  # touching neighbours
            i -= 1
            out[0] = [items[i][0], out[0][1], out[0][2]]
        if j < len(items) and items[j][0] == out[-1][1] and items[j][2] == out[-1][2]:
            out[-1] = [out[-1][0], items[j][1], out[-1][2]]
            j += 1
        merged: list[list] = []
        for item in out:
            if merged and merged[-1][1] == item[0] and merged[-1][2] == item[2]:
                merged[-1] = [merged[-1][0], item[1], item[2]]
            else:
                merged.append(item)
        items[i:j] = merged

    def over(self, lo: float, hi: float) -> str | None:
        """The one version recorded over all of `(lo, hi]`; None if none, several, or a gap."""
        if hi <= lo:
            return None
        found = [(a, b, v) for a, b, v in self.items if b > lo and a < hi]
        if len(found) != 1 or found[0][0] > lo or found[0][1] < hi:
            return None
        return found[0][2]

    def stale(self, current: str) -> list[tuple[float, float]]:
        """The ranges computed by another version than `current` (oldest first)."""
        return [(a, b) for a, b, v in self.items if v != current]

    def tuples(self) -> tuple[tuple[float, float, str], ...]:
        return tuple((a, b, v) for a, b, v in self.items)

    def copy(self) -> VersionMap:
        """A map that later `set`s of this one leave as it is (`set` replaces items, never changes one)."""
        new = VersionMap()
        new.items = list(self.items)
        return new


def _lo(item: list) -> float:
    return item[0]


def _hi(item: list) -> float:
    return item[1]


@dataclass(slots=True)
class TableRecompute:
    """A derived table's committed windows that are wrong (`dirty`: late data, backfills, a source
    rewritten) or old (`versions` not at `sql_version`: a SQL change), and what was done about it."""

    sql_version: str
    versions: VersionMap = field(default_factory=VersionMap)
    dirty: Ranges = field(default_factory=Ranges)
    rewrite_all: bool = False  # one full rewrite is asked for (rebuild: true after a SQL change)
    windows_recomputed: int = 0
    recompute_jobs: int = 0

    def old(self) -> list[tuple[float, float]]:
        return self.versions.stale(self.sql_version)

    def old_length(self) -> float:
        return sum(b - a for a, b in self.old())

    def has_work(self) -> bool:
        return self.rewrite_all or bool(self.dirty) or bool(self.old())

    def newest_old(self, span: float, granularity: float | None) -> Piece | None:
        """The newest piece of windows on an old SQL version (Olston, Graceful Logic Evolution in Web Data Processing Workflows: rewritten newest first)."""
        old = self.old()
        if not old:
            return None
        lo, hi = old[-1]
        start = max(lo, floor_to(hi - span, granularity))
        if start >= hi:
            start = lo
        return Piece(start, hi, {"sql"})

    def done(self, lo: float, hi: float, version: str, windows: int) -> None:
        """`(lo, hi]` was rewritten by `version`. What the job took left `dirty` when it started
        (warehouse.derived.take); what was marked while it ran stays, to be recomputed after it."""
        self.versions.set(lo, hi, version)
        self.windows_recomputed += windows
        self.recompute_jobs += 1
