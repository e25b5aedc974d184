"""The orders that come from outside the data and the jobs: an operator's (ops.actions) — suspend,
resume, refresh now, backfill and cancel a backfill — and the intake's drop of an accepted
partition it quarantined (docs/operations.md §3).

Each order is a generator of moves `(table, move)`; the Scheduler applies each move through its
transition helpers (`warehouse.scheduler.TRANSITIONS`, the one door) before it asks for the next,
so an order may read the outcome of its last move. The moves: "suspend", "resume", "refresh"
(the table's mode), "retry" (its back-off ends now), "drain" (its queued job leaves the queue),
"work" (its work changed: released or re-keyed), "requeue" (some of its work went away),
"upkeep" (its maintenance may be due). Knows nothing of the Scheduler. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from warehouse.events import Backfill, CancelBackfill, Event, PartitionDropped, Refresh, Resume, Suspend
from warehouse.table import QUEUED, JobState, Mode, Table, backfill_range, has_work, named, recompute_target

__all__ = ["ORDERS", "Moves"]

Moves = Iterator[tuple[Table, str]]


def suspend(ev: Suspend, now: float, tables: dict[str, Table], readers: dict[str, list[Table]]) -> Moves:
    """No job of the table starts until `Resume` (a running one finishes). Arrivals are still
    taken; dependents wait at their trailing edge, which stops at the table's freshness."""
    t = named(tables, ev.table)
    yield t, "suspend"
    if t.state in QUEUED:  # out of the queue (its heap entry is dropped lazily)
        yield t, "drain"


def resume(ev: Resume, now: float, tables: dict[str, Table], readers: dict[str, list[Table]]) -> Moves:
    """Undo `Suspend`: what arrived meanwhile is released as one job (§2.4), maintenance too."""
    t = named(tables, ev.table)
    yield t, "resume"
    yield t, "work"
    yield t, "upkeep"


def refresh(ev: Refresh, now: float, tables: dict[str, Table], readers: dict[str, list[Table]]) -> Moves:
    """Trigger an update now: the table's next update job goes ahead of every waiting job, on
    the first track free (its own tracks first). A table in back-off is retried now. Nothing
    happens to a table with nothing to load, or a suspended one."""
    t = named(tables, ev.table)
    if t.mode is Mode.SUSPENDED:
        yield t, "refresh"
        return
    if t.state is JobState.BACKOFF:
        yield t, "retry"
        yield t, "work"
    if t.state is not JobState.IDLE or has_work(t):
        yield t, "refresh"


def backfill(ev: Backfill, now: float, tables: dict[str, Table], readers: dict[str, list[Table]]) -> Moves:
    """Queue a recompute of the committed windows `(start, end]` of a derived table:
    benefit-ranked jobs like late data; what depends on it follows when each piece is
    rewritten. RecomputeRefused for an unknown or base table, an empty range, or a range
    with no committed window (the update jobs will compute it)."""
    t = recompute_target(tables, ev.table)
    lo, hi = backfill_range(t, ev.start, ev.end)
    assert t.derived is not None
    if t.derived.backfill(lo, hi, ev.reason or "backfill", now):  # a stateful table: a rebuild of its state
        yield t, "work"


def cancel_backfill(ev: CancelBackfill, now: float, tables: dict[str, Table],
                    readers: dict[str, list[Table]]) -> Moves:
    """Forget what a backfill (named by its reason) still had to rewrite in `(start, end]`;
    ranges also wrong for another reason stay, without it."""
    t = recompute_target(tables, ev.table)
    assert t.derived is not None
    t.derived.cancel(ev.start, ev.end, ev.reason)
    yield t, "requeue"


def dropped(ev: PartitionDropped, now: float, tables: dict[str, Table], readers: dict[str, list[Table]]) -> Moves:
    """An accepted partition was quarantined: it leaves every table of its stream at once —
    pending work, `arrived`, backlog (docs/operations.md §3). A job loading it fails and drops it."""
    for t in readers.get(ev.stream, ()):
        if ev.partition_id in t.log and not t.log.is_running(ev.partition_id):
            t.log.drop({ev.partition_id}, t.freshness)
            yield t, "requeue"


ORDERS: dict[type[Event], Callable[..., Moves]] = {
    Suspend: suspend, Resume: resume, Refresh: refresh, Backfill: backfill, CancelBackfill: cancel_backfill,
    PartitionDropped: dropped}
