"""Building a job: a table's next job (warehouse.nextjob) turned into the `StartJob` that runs it.

An update job takes its partitions out of the backlog (warehouse.backlog) — all of them, chopped
to about c·P_i, or one time slice (§3.4) — or, for a derived table, its window up to the sources'
trailing edge (§2.2); a recompute job takes the committed windows it rewrites (warehouse.derived);
a maintenance job (warehouse.upkeep) takes nothing. Each returns the `StartJob`; what it changed
is the table's backlog or derived state. The job's state move, queue count and the track board
are the caller's. Pure: no clock, no I/O; knows nothing of the Scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from warehouse.backlog import Partition
from warehouse.events import PartitionArrived, StartJob
from warehouse.freshness import safe_freshness
from warehouse.recompute import Piece
from warehouse.table import JobShape, JobState, Mode, Table
from warehouse.upkeep import MAINTENANCE_KINDS, VACUUM, Upkeep

__all__ = ["recompute_job", "update_job", "upkeep_estimate", "upkeep_job", "upkeep_may_run", "upkeep_ranked"]

_ARRIVAL, _SAFE, _LATE = attrgetter("arrival"), attrgetter("safe_through"), attrgetter("late")


def update_job(t: Table, shape: JobShape, job_id: int, track: int) -> StartJob:
    """t's update job of `shape` (NextJob.shape) on `track`: what it loads leaves the backlog (a
    time slice's partition stays pending until its last slice); a full refresh takes its window."""
    start, end, new_f, n = shape.start, shape.end, shape.new_freshness, shape.work
    ref = t.freshness if t.freshness is not None else start
    parts: list[Partition] = []
    arrivals: tuple[PartitionArrived, ...] = ()
    if t.log is not None and shape.time_slice:  # a time slice: the partition stays pending until its last slice
        arrivals = (t.log.take_slice().arrival,)
        safe = safe_freshness(new_f, t.lateness, (), t.safe)
        chopped = True
    elif t.log is not None:
        parts = t.log.take(shape.partitions)
        arrivals = tuple(map(_ARRIVAL, parts))  # (map over attrgetter: no comprehension frame)
        safe = safe_freshness(new_f, t.lateness, map(_SAFE, arrivals), t.safe)
        chopped = bool(t.log.pending)
    else:
        assert t.derived is not None
        settle, edge = t.derived.settle, t.derived.edge
        safe = new_f if settle is None else min(new_f, settle)  # max_skew: final only below the edge
        chopped = edge is not None and end < edge
    full_refresh = t.derived is not None and t.derived.full_refresh
    if full_refresh:  # a full refresh: the SQL over (origin, end] overwrites the table (NextJob.shape)
        assert t.derived is not None
        t.derived.take(start, end, overwrite=True)
    stateful = t.derived is not None and t.derived.stateful
    if stateful:  # it reads the late rows committed so far too (lake.stateful)
        t.derived.folded()  # type: ignore[union-attr]
    return StartJob.build(
        job_id=job_id,
        table=t.name,
        track=track,
        kind="base" if t.base else "stateful" if stateful else "derived",
        start=start,
        end=end,
        new_freshness=new_f,
        new_safe_freshness=safe,
        arrivals=arrivals,
        sources=tuple([s.name for s in t.sources]) if t.sources else (),
        delta_f=new_f - ref,
        estimate=t.cost.estimate(n),
        chopped=chopped,
        late=tuple([p.arrival.partition_id for p in parts if p.late]) if any(map(_LATE, parts)) else (),
        full=full_refresh,
        sql_version=t.derived.recompute.sql_version if t.derived is not None else "",
        work=n if t.base else None,
        priority=t.inherited_priority,
    )


def recompute_job(t: Table, piece: Piece, overwrite: bool, job_id: int, track: int) -> StartJob:
    """t's recompute job of `piece` (NextJob.recompute): what it takes leaves `dirty` now, so a
    change that arrives while it runs is recomputed again after it."""
    assert t.derived is not None and t.freshness is not None
    reasons, late = t.derived.take(piece.lo, piece.hi, overwrite, upto=t.freshness, reasons=piece.reasons)
    # an old-SQL rewrite that covers late or backfill ranges rewrites them too: its commit says so
    reasons |= piece.reasons
    late |= piece.late
    return StartJob.build(
        job_id=job_id,
        table=t.name,
        track=track,
        kind="recompute",
        start=piece.lo,
        end=piece.hi,
        new_freshness=t.freshness,
        new_safe_freshness=t.safe if t.safe is not None else t.freshness,
        sources=tuple(s.name for s in t.sources),
        estimate=t.cost.estimate(piece.hi - piece.lo),
        late=tuple(sorted(late)),
        full=overwrite,
        reasons=tuple(sorted(reasons)),
        sql_version=t.derived.recompute.sql_version,
        priority=t.inherited_priority,
    )


def upkeep_job(t: Table, kind: str, upkeep: Upkeep, job_id: int, track: int) -> StartJob:
    """t's maintenance job `kind` (OPTIMIZE or VACUUM, warehouse.upkeep) over `(start, F]`."""
    assert t.freshness is not None
    start = upkeep.span(t.name, kind, t.freshness, t.origin)
    return StartJob.build(job_id=job_id, table=t.name, track=track, kind=kind, start=start, end=t.freshness,
                    new_freshness=t.freshness, new_safe_freshness=t.safe if t.safe is not None else t.freshness,
                    estimate=upkeep_estimate(t, kind, upkeep), priority=t.inherited_priority)


def upkeep_estimate(t: Table, kind: str, upkeep: Upkeep) -> float:
    """E of t's maintenance job `kind` from its own E(n) (Upkeep.estimate)."""
    assert t.freshness is not None
    return upkeep.estimate(t.name, kind, t.freshness, t.origin, t.cost.estimate, t.cost.alpha)


def upkeep_ranked(upkeep: Upkeep, waiting: Iterable[str], tables: dict[str, Table], running: dict[str, StartJob],
                  now: float) -> tuple[list[tuple[int, str]], list[str]]:
    """The due maintenance jobs of the `waiting` tables that may run now, best first: (table
    index, kind); and the tables no longer due. A maintenance job removes no staleness — zero
    marginal benefit (§3.1) — so among themselves they go by Ip · overdue / estimated cost
    (Upkeep.ranked); a table's waits while `upkeep_may_run` says no. `running`: each table's job."""
    def eligible(name: str, kind: str) -> tuple[float, float, int] | None:
        t = tables.get(name)
        if t is None or not upkeep_may_run(t, kind, running):
            return None
        return t.inherited_priority, upkeep_estimate(t, kind, upkeep), t.idx

    ranked, gone = upkeep.ranked(waiting, now, eligible)
    return [(idx, kind) for _, idx, kind in ranked], gone


def upkeep_may_run(t: Table, kind: str, running: dict[str, StartJob]) -> bool:
    """May t's maintenance `kind` start now? Not while the table has update work or runs a job
    (one writer per table), nor suspended, nor never loaded; its VACUUM not while a dependent's
    update job runs: that job read a pinned version whose files a VACUUM could delete (Nova, SIGMOD 2011
    §2.4: garbage collection respects the consumers' cursors). `running`: each table's job."""
    if t.state is not JobState.IDLE or t.mode is Mode.SUSPENDED or t.freshness is None:
        return False
    return kind != VACUUM or not any((j := running.get(d.name)) is not None and j.kind not in MAINTENANCE_KINDS
                                     for d in t.dependents)
