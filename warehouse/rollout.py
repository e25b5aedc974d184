"""Rollout (beyond the paper): the round's first job chosen by simulating the warehouse ahead.

`policy: rollout` orders the ready queues by its base rule (`scheduler.rollout.base`, default
Max-Benefit, §3.1). When a round starts with more than one job ready, it takes the base rule's
best `k` and, for each, simulates the next `horizon` seconds from a copy of the Scheduler: that
job starts now, then the base rule makes every later decision. The job whose simulated future has
the least priority-weighted staleness Σ p_i ∫ S_i dτ (§2.3) starts; ties go to the base rule's
order, and when that is its first job the base rule's round runs as it would have. A
one-step rollout of the base policy (Bertsekas, Castañon, "Rollout Algorithms for Stochastic
Scheduling Problems", Journal of Heuristics 1999). The rest of the round is the base rule's, as
after Lookahead's first pick (§3.1); a round usually starts one job, on the track that freed.

The simulated future is the engine's own state and expectations, nothing more: the copy holds the
pending partitions, the running jobs, the learned costs E(n) (§2.4) and the pace; each running job
ends at its start plus its estimate at the current pace, each stream's next partition arrives a
period after its last (§2.4) covering the period after the newest one, with the stream's typical
rows, and nothing fails.

The terminal credit (`terminal`, on by default). A job still running at the horizon has cost its
track time and removed no staleness yet: judged at the horizon alone, every job longer than the
horizon is pure loss, and a look-ahead shorter than the long jobs starves them (their backlog, and
so their next job, only grows). So the sum runs on over a tail after the horizon, as long as the
horizon or the longest candidate's expected duration (the same for every candidate of a decision),
in which the jobs running at the horizon end at their expected ends and nothing else starts: in
closed form, each table's ∫ S dτ over the tail with its freshness moved to the running job's
`new_freshness` at that job's end. A started job thus counts the staleness it removes, ΔF, times
the part of the tail left after it ends: discounted linearly by its remaining time, and a job that
ends at the horizon counts as fully as one that ended before it. The removed staleness is weighed
by the table's inherited priority Ip (§3.3, `credit: inherited`, the default), not its own p: in
the tail nothing else starts, so a source's job (p = 0.001 under a p = 100 view) would otherwise
earn nothing for the views it lets run next. The tables' staleness before the job ends is still
weighed by their own p; so the sum can fall below zero, and only the candidates' order counts. (A
source's job that ended inside the horizon earns Ip only through its views' jobs there: the credit
at Ip is for the jobs still running.)

A clockless event loop over the copy's one door, `handle`: no SimPy, no clock, no I/O, no
randomness of its own, so the same state gives the same pick. The copy's Random draws (if any)
come from its own copy of the generator, never the Scheduler's.

The budget is counted in simulated events (`budget_events` per decision, shared evenly between the
candidates), not CPU time: `time.process_time` would be a clock on the decision path. Where the
horizon holds more events than SLACK of a candidate's share is expected to (`covered`: a partition
per period of each stream; the jobs running and ready now, and one per period of each table
released since, ending as fast as the tracks run them — a busy track finishes short jobs every few
seconds, §2.4), the look-ahead is shortened to what the share covers, the same for every
candidate. A candidate whose future still needs more events than its share, or a budget smaller
than the candidates, leaves the decision to the base rule, counted as a fallback (`RolloutStats`, in the Scheduler's
snapshot for the shells to export); so does a simulated event the copy refuses, or a state linked
too deep to copy. In the daemon the simulations run on the scheduler loop.

A large warehouse (more than `LOCAL_ABOVE` tables) is not copied whole: a look-ahead copies only
the tables it can change (`involved`: the candidates, the running jobs' tables, the base rule's
next ready jobs, what an operator or a timer moves before the horizon, their streams' tables and
their dependents down the DAG) and shares the others, read only; its queues hold only their jobs,
only their streams' arrivals are simulated, and the sum is over them (the others add the same to
every candidate). Its cost then follows the tables near the decision, not the warehouse.
The copies are warehouse.rollout_copy's: the state pickled once per decision, each candidate's
copy a fresh load of it, the partitions shared.

This module reads the Scheduler's state (its queues, board, pace, streams and rates) to build the
expected future, and warehouse.rollout_copy to copy it: the two engine modules that know the
Scheduler. They change only copies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import math
from dataclasses import dataclass
from typing import Any

from warehouse.config import RolloutConfig
from warehouse.errors import FreshetError
from warehouse.events import JobFinished, PartitionArrived, StartJob, Tick
from warehouse.freshness import staleness_area
from warehouse.rollout_copy import Copies
from warehouse.table import QUEUED

__all__ = ["Forced", "Local", "Rollout", "RolloutStats", "covered", "future", "involved", "reach", "terminal"]

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

    __slots__ = ("budget", "credit", "horizon", "k", "stats", "terminal")

    def __init__(self, settings: RolloutConfig, stats: RolloutStats | None = None) -> None:
        self.k = settings.k
        self.horizon = settings.horizon
        self.budget = settings.budget_events
        self.terminal = settings.terminal
        self.credit = settings.credit
        self.stats = stats if stats is not None else RolloutStats()

    def pick(self, s: Any, now: float) -> str | None:
        """The table whose job should start first in this round of Scheduler `s`, or None: the
        base rule's round (one candidate or none, it is the best, or the budget ran out)."""
        heads = s._queues.heads(self.k) if self.k > 1 else ()
        if len(heads) < 2:
            return None
        tables = [s._by_idx[e[-1]] for e in heads]
        names = [t.name for t in tables]
        share = self.budget // len(names)
        costs = [s._nextjob.candidate(t)[0].cost for t in tables]
        local, horizon, tail, copies = None, 0.0, 0.0, None
        if share > 0:  # (a budget smaller than the candidates covers no event: the base rule decides)
            local = involved(s, tables, now + self.horizon, self.k + 2 * s._board.n)
            pace = s._pace.now
            horizon = covered(s, local, [c * pace for c in costs], self.horizon, share)  # what the budget covers
            if self.terminal:  # as long as the horizon, or the longest candidate's expected duration
                longest = max(costs) * pace
                tail = longest if longest > horizon else horizon
            with contextlib.suppress(RecursionError):  # (tables linked too deep to copy, a long zig-zag of joins: no verdict)
                copies = Copies(s, local)  # (the state pickled once; a copy per candidate loaded from it)
        scores: list[float] = []
        for name in names:
            score = None if copies is None else future(s, name, now, horizon, share, tail, local, copies,
                                                       inherited=self.credit == "inherited")
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


def future(s: Any, table: str, now: float, horizon: float, budget: int, tail: float = 0.0,
           local: Local | None = None, copies: Copies | None = None, inherited: bool = True) -> float | None:
    """Σ p_i ∫ S_i dτ at `now + horizon` if `table`'s job starts now in a copy of Scheduler `s` and
    the base rule decides the rest (the copy's first pick is `Forced(table)`), plus the terminal
    `tail` (`terminal`, with `inherited`); inf if that job cannot start now (no track for it, the
    bulk limit); None past `budget` simulated events. With `local` (`involved`) only those tables are copied and
    summed, and only their streams' arrivals are simulated. `copies`: the decision's (made here if
    None). `s` is not changed."""
    try:
        c = (copies if copies is not None else Copies(s, local)).copy(Forced(table))
    except RecursionError:  # tables linked too deep to copy (a long zig-zag of joins): no verdict
        return None
    try:
        return _simulate(c, table, now, horizon, budget, tail, local, inherited)
    finally:  # (its handlers and queues hold the copy: cut, it is freed now, not by a collection)
        c.__dict__.clear()


def _simulate(c: Any, table: str, now: float, horizon: float, budget: int, tail: float, local: Local | None,
              inherited: bool) -> float | None:
    """`future` on the copy `c`."""
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
    streams = c._by_stream.items() if local is None else [(x, c._by_stream[x]) for x in local.streams]
    for stream, tables in streams:  # each stream's next partition: a period after its last
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
    if local is None:
        out, summed = c.weighted_staleness(end), c._by_idx
    else:  # the tables outside add the same to every candidate's future
        summed = [c._by_idx[i] for i in local.tables]
        out = sum(t.priority * t.meter.integral(end) for t in summed)
    if tail > 0:
        out += terminal(summed, [(when, item) for when, _, kind, item in heap if kind == _FINISH], end, tail, inherited)
    return out


def terminal(tables: list[Any], running: list[tuple[float, StartJob]], end: float, tail: float,
             inherited: bool = True) -> float:
    """Σ p_i ∫ S_i dτ of `tables` over (end, end + tail] if the `running` jobs (with their expected
    ends, none before `end`) end then and nothing else starts (§2.3: S_i falls to τ − new_freshness
    when its job ends): the terminal credit (module docstring). `inherited`: the staleness a job
    removes counts at its table's inherited priority Ip_i (§3.3), not p_i."""
    stop = end + tail
    ends = {job.table: (when, job.new_freshness) for when, job in running if when < stop}
    total = 0.0
    for t in tables:
        f = t.meter.freshness
        if f is None:  # never loaded: no staleness counted (StalenessMeter.integral)
            continue
        done = ends.get(t.name)
        if done is not None and done[1] > f:
            left = staleness_area(end, done[0], f) + staleness_area(done[0], stop, done[1])
            total += t.priority * left
            if inherited:  # the removed part, ∫ S without the job less `left`, at Ip_i rather than p_i
                total -= (t.inherited_priority - t.priority) * (staleness_area(end, stop, f) - left)
        else:
            total += t.priority * staleness_area(end, stop, f)
    return total


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


# ---- a large warehouse: the look-ahead copies only the tables it can change ----------------------
LOCAL_ABOVE = 64  # tables: at most this many, the whole Scheduler is copied
LOCAL_MOST = 0.5  # the share of the tables above which a look-ahead copies them all anyway


@dataclass(frozen=True, slots=True)
class Local:
    """A local look-ahead: the tables it copies (by index, sorted) and the streams it simulates."""

    tables: tuple[int, ...]
    streams: tuple[str, ...]


def involved(s: Any, candidates: list[Any], end: float, heads: int) -> Local | None:
    """The tables of Scheduler `s` a look-ahead to `end` from the `candidates` may change, or
    None: all of them (at most LOCAL_ABOVE tables, or more than LOCAL_MOST of them). They are the
    candidates, the tables with a running job, the next `heads` ready jobs of the base rule, the
    tables an operator or a timer before `end` moves (refresh, maintenance due, back-off over), every
    table of their streams (an arrival reaches them all) and, down the DAG, every dependent (a
    finished job moves its dependents' edges, §2.2). Nothing outside them can change in the copy:
    its queues hold only their jobs, and it does not repartition (that would touch every table)."""
    by_idx, tables = s._by_idx, s._tables
    n = len(by_idx)
    if n <= LOCAL_ABOVE:
        return None
    seed = list(candidates)
    seed += [by_idx[e[-1]] for e in s._queues.heads(heads)]
    named = [j.table for j in s._board.jobs.values()]
    named += list(s._queues.urgent) + list(s._due)
    named += [x for when, _, x in s._backoffs.heap if when < end]
    named += [x for when, x in s._upkeep.timers if when < end]
    seed += [tables[x] for x in named if x in tables]
    keep: set[int] = set()
    streams: set[str] = set()
    while seed:
        t = seed.pop()
        if t.idx in keep:
            continue
        keep.add(t.idx)
        seed.extend(t.dependents)
        if t.stream is not None and t.stream not in streams:
            streams.add(t.stream)
            seed.extend(s._by_stream.get(t.stream, ()))
    if len(keep) > LOCAL_MOST * n:
        return None
    return Local(tuple(sorted(keep)), tuple(x for x in s._by_stream if x in streams))


SLACK = 0.75  # the part of a candidate's share of the budget its expected events may fill (they vary)


def covered(s: Any, local: Local | None, costs: list[float], horizon: float, share: int) -> float:
    """The look-ahead of Scheduler `s` (`local`: of those tables), at most `horizon`, whose expected
    simulated events fit SLACK · `share`: each stream's partitions, one a period (§2.4), and the jobs
    that finish — those running or ready now, and one a period of each table released since (§2.4),
    at most what the tracks run, each a job per expected duration (of the running jobs' and the
    candidates' `costs`, in seconds at the pace)."""
    pace = s._pace.now
    if local is None:
        tables, streams, ready = s._by_idx, list(s._by_stream), sum(s._queues.queued)
    else:
        tables, streams = [s._by_idx[i] for i in local.tables], local.streams
        ready = sum(1 for t in tables if t.state in QUEUED)
    arrive = 0.0
    for x in streams:
        live = [t for t in s._by_stream[x] if not t.removed]
        if live:
            arrive += 1.0 / live[0].period
    release = sum(1.0 / t.period for t in tables if not t.removed)
    spans = [job.estimate * pace for job in s._board.jobs.values()]
    ready += len(spans)
    spans += costs
    # each track a job per expected duration: n / the harmonic mean (a few long jobs do not hide the short ones)
    drain = s._board.n * sum(1.0 / d for d in spans) / len(spans) if spans and min(spans) > 0 else math.inf
    return reach(horizon, SLACK * share, arrive, release, ready, drain)


def reach(horizon: float, events: float, arrive: float, release: float, ready: float, drain: float) -> float:
    """The longest h ≤ `horizon` expected to hold at most `events` simulated events: arrive·h
    partitions and min(drain·h, ready + release·h) finished jobs — the tracks' pace while the jobs
    ready and released keep them busy, the jobs there are once they do not (`covered`)."""
    if arrive * horizon + min(drain * horizon, ready + release * horizon) <= events:
        return horizon
    if drain < math.inf:
        h = events / (arrive + drain)  # every track busy to the end
        if drain * h <= ready + release * h:
            return h
    rate = arrive + release  # the tracks run out of jobs first: arrive·h + ready + release·h = events
    return max((events - ready) / rate, 0.0) if rate > 0 else 0.0
