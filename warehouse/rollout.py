"""Rollout (beyond the paper): the round's first job chosen by simulating the warehouse ahead.

`policy: rollout` orders the ready queues by its base rule (`scheduler.rollout.base`, default
Max-Benefit, §3.1). When a round starts with more than one job ready, it takes the base rule's
best `k` and, for each, simulates the next `horizon` seconds from a copy of the Scheduler: that
job starts now, then the base rule makes every later decision. The job whose simulated future has
the least priority-weighted staleness Σ p_i ∫ S_i dτ (§2.3) at the horizon starts; ties go to the
base rule's order, and when that is its first job the base rule's round runs as it would have. A
one-step rollout of the base policy (Bertsekas, Castañon, "Rollout Algorithms for Stochastic
Scheduling Problems", Journal of Heuristics 1999). The rest of the round is the base rule's, as
after Lookahead's first pick (§3.1); a round usually starts one job, on the track that freed.

The simulated future is the engine's own state and expectations, nothing more: the copy holds the
pending partitions, the running jobs, the learned costs E(n) (§2.4) and the pace; each running job
ends at its start plus its estimate at the current pace, each stream's next partition arrives a
period after its last (§2.4) covering the period after the newest one, with the stream's typical
rows, and nothing fails. A clockless event loop over the copy's one door, `handle`: no SimPy, no
clock, no I/O, no randomness of its own, so the same state gives the same pick. The copy's
Random draws (if any) come from its own copy of the generator, never the Scheduler's.

The budget is counted in simulated events (`budget_events` per decision, shared evenly between the
candidates), not CPU time: `time.process_time` would be a clock on the decision path. A candidate
whose future needs more events leaves the decision to the base rule, counted as a fallback
(`RolloutStats`, in the Scheduler's snapshot for the shells to export); so does a simulated event
the copy refuses, or a state linked too deep for `copy.deepcopy`. In the daemon the simulations run
on the scheduler loop: the budget bounds their events, not the copies, whose cost grows with the
number of tables and pending partitions.

This module reads the Scheduler's state (its queues, board, pace, streams and rates) to copy it and
to build the expected future; it is the one engine module that knows the Scheduler, and it changes
only copies.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
import math
from dataclasses import dataclass
from typing import Any

from warehouse.config import RolloutConfig
from warehouse.errors import FreshetError
from warehouse.events import JobFinished, PartitionArrived, StartJob, Tick

__all__ = ["Forced", "Rollout", "RolloutStats", "future"]

_FINISH, _ARRIVE, _TICK = 0, 1, 2  # what a simulated event is (the heap orders by time, then by push order)


@dataclass(frozen=True, slots=True)
class RolloutStats:
    """Rollout's decisions so far: rounds it weighed (more than one job ready), rounds whose first
    job differs from the base rule's (`overrides`), rounds the event budget left to the base rule
    (`fallbacks`); and the last decision's candidates with their simulated Σ p_i ∫ S_i dτ at the
    horizon, in the base rule's order (inf: the candidate could not start now)."""

    decisions: int = 0
    overrides: int = 0
    fallbacks: int = 0
    last: tuple[tuple[str, float], ...] = ()


class Forced:
    """A copy's first pick: `table` once, then none — the base rule decides from there."""

    __slots__ = ("table",)

    def __init__(self, table: str | None) -> None:
        self.table = table

    def pick(self, s: Any, now: float) -> str | None:
        table, self.table = self.table, None
        return table


class Rollout:
    """The first pick of `policy: rollout` (see the module docstring). `stats` carries over a reload."""

    __slots__ = ("budget", "horizon", "k", "stats")

    def __init__(self, settings: RolloutConfig, stats: RolloutStats | None = None) -> None:
        self.k = settings.k
        self.horizon = settings.horizon
        self.budget = settings.budget_events
        self.stats = stats if stats is not None else RolloutStats()

    def pick(self, s: Any, now: float) -> str | None:
        """The table whose job should start first in this round of Scheduler `s`, or None: the
        base rule's round (one candidate or none, it is the best, or the budget ran out)."""
        heads = s._queues.heads(self.k) if self.k > 1 else ()
        if len(heads) < 2:
            return None
        names = [s._by_idx[e[-1]].name for e in heads]
        share = self.budget // len(names)
        scores: list[float] = []
        for name in names:
            score = future(s, self, name, now, self.horizon, share)
            if score is None:  # over budget: the base rule decides
                self.stats = dataclasses.replace(self.stats, decisions=self.stats.decisions + 1,
                                                 fallbacks=self.stats.fallbacks + 1, last=())
                return None
            scores.append(score)
        best = min(range(len(names)), key=lambda i: (scores[i], i))
        override = best > 0 and math.isfinite(scores[best])
        self.stats = dataclasses.replace(self.stats, decisions=self.stats.decisions + 1,
                                         overrides=self.stats.overrides + override, last=tuple(zip(names, scores, strict=True)))
        return names[best] if override else None


def future(s: Any, first: object, table: str, now: float, horizon: float, budget: int) -> float | None:
    """Σ p_i ∫ S_i dτ at `now + horizon` if `table`'s job starts now in a copy of Scheduler `s` and
    the base rule decides the rest (`first`: the object `s` asks for its first pick, replaced by
    `Forced(table)` in the copy); inf if that job cannot start now (no track for it, the bulk
    limit); None past `budget` simulated events. `s` is not changed."""
    memo: dict[int, Any] = {id(s.config): s.config, id(s.plan): s.plan, id(first): Forced(table)}
    if s.blueprint is not None:
        memo[id(s.blueprint)] = s.blueprint  # (immutable: shared, as the config and the plan)
    try:
        c = copy.deepcopy(s, memo)
    except RecursionError:  # tables linked too deep for deepcopy (a long zig-zag of joins): no verdict
        return None
    end = now + horizon
    pace = c._pace.now
    heap: list[tuple[float, int, int, Any]] = []
    order = 0

    def push(when: float, kind: int, item: Any) -> None:
        nonlocal order
        order += 1
        heapq.heappush(heap, (when, order, kind, item))

    board = c._board
    for track, free in enumerate(board.free_at(now, pace, -1)):  # the running jobs: start + estimate · pace
        if (job := board.on(track)) is not None:
            push(free, _FINISH, job)
    for stream, tables in c._by_stream.items():  # each stream's next partition: a period after its last
        live = [t for t in tables if not t.removed and t.last_arrival is not None and t.log.arrived is not None]
        if live:
            period = live[0].period
            rate = c._rates[stream].rate
            rows = round(rate * period) if rate is not None else 0
            lo = max(t.log.arrived for t in live)
            push(max(max(t.last_arrival for t in live) + period, now), _ARRIVE, (stream, lo, period, rows, 0))
    try:
        started = c.handle(Tick(), now)  # the copy's round: `table` first (Forced), then the base rule
        if not any(j.table == table for j in started):
            return math.inf
        tick_at = _started(c, started, now, end, pace, push, None)
        events = 0
        while heap and heap[0][0] < end:
            when, _, kind, item = heapq.heappop(heap)
            events += 1
            if events > budget:
                return None
            ev: Any
            if kind == _FINISH:
                ev = JobFinished(job_id=item.job_id, duration=item.estimate * pace, rows=sum(a.rows for a in item.arrivals))
            elif kind == _ARRIVE:
                stream, lo, period, rows, n = item
                ev = PartitionArrived(stream=stream, partition_id=f"~rollout/{stream}/{n}", start=lo, end=lo + period,
                                      rows=rows)
                push(when + period, _ARRIVE, (stream, lo + period, period, rows, n + 1))
            else:
                if when != tick_at:  # (stale: an earlier wake-up took its place)
                    continue
                ev, tick_at = Tick(), None
            tick_at = _started(c, c.handle(ev, when), when, end, pace, push, tick_at)
    except FreshetError:  # a simulated event the copy refused: no verdict, as over budget
        return None
    return c.weighted_staleness(end)


def _started(c: Any, jobs: list[StartJob], now: float, end: float, pace: float, push: Any,
             tick_at: float | None) -> float | None:
    """Each started job ends at `now` + its estimate · pace; a wake-up the copy asks for before
    `end` (a back-off, maintenance, a held track) is a Tick then. Returns the Tick pending."""
    for job in jobs:
        push(now + job.estimate * pace, _FINISH, job)
    wake = c.next_wakeup()
    if wake is not None and wake < end and (tick_at is None or wake < tick_at):
        tick_at = wake if wake > now else now
        push(tick_at, _TICK, None)
    return tick_at
