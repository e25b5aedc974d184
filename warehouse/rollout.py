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
horizon holds more events than a candidate's share is expected to (a partition per period of each
stream, a finished job per period of each table, §2.4), the look-ahead is shortened to what the
share covers, the same for every candidate. A candidate whose future still needs more events
leaves the decision to the base rule, counted as a fallback (`RolloutStats`, in the Scheduler's
snapshot for the shells to export); so does a simulated event the copy refuses, or a state linked
too deep for `copy.deepcopy`. In the daemon the simulations run on the scheduler loop.

A large warehouse (more than `LOCAL_ABOVE` tables) is not copied whole: a look-ahead copies only
the tables it can change (`involved`: the candidates, the running jobs' tables, the base rule's
next ready jobs, what an operator or a timer moves before the horizon, their streams' tables and
their dependents down the DAG) and shares the others, read only; its queues hold only their jobs,
only their streams' arrivals are simulated, and the sum is over them (the others add the same to
every candidate). Its cost then follows the tables near the decision, not the warehouse.

This module reads the Scheduler's state (its queues, board, pace, streams and rates) to copy it and
to build the expected future; it is the one engine module that knows the Scheduler, and it changes
only copies.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import heapq
import io
import math
import pickle
import types
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from warehouse.config import RolloutConfig
from warehouse.errors import FreshetError
from warehouse.events import JobFinished, PartitionArrived, StartJob, Tick
from warehouse.freshness import staleness_area
from warehouse.queues import ReadyQueues

__all__ = ["Forced", "Local", "Rollout", "RolloutStats", "future", "involved", "terminal"]

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
        local = involved(s, tables, now + self.horizon, self.k + 2 * s._board.n)
        rate = expected_rate(s, local)
        horizon = self.horizon if rate * self.horizon <= share else share / rate  # what the budget covers
        tail = 0.0
        if self.terminal:  # as long as the horizon, or the longest candidate's expected duration
            longest = max(s._nextjob.candidate(t)[0].cost for t in tables) * s._pace.now
            tail = longest if longest > horizon else horizon
        scores: list[float] = []
        for name in names:
            score = future(s, self, name, now, horizon, share, tail, local, inherited=self.credit == "inherited")
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


def future(s: Any, first: object, table: str, now: float, horizon: float, budget: int,
           tail: float = 0.0, local: Local | None = None, inherited: bool = True) -> float | None:
    """Σ p_i ∫ S_i dτ at `now + horizon` if `table`'s job starts now in a copy of Scheduler `s` and
    the base rule decides the rest (`first`: the object `s` asks for its first pick, replaced by
    `Forced(table)` in the copy), plus the terminal `tail` (`terminal`, with `inherited`); inf if that job cannot
    start now (no track for it, the bulk limit); None past `budget` simulated events. With `local`
    (`involved`) only those tables are copied and summed, and only their streams' arrivals are
    simulated. `s` is not changed."""
    try:
        c = _copy(s, first, table, local)
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


def expected_rate(s: Any, local: Local | None) -> float:
    """Simulated events a second a look-ahead of Scheduler `s` expects (`local`: of those tables):
    a partition per period of each stream, a finished job per period of each table (§2.4)."""
    tables = s._by_idx if local is None else [s._by_idx[i] for i in local.tables]
    streams = s._by_stream if local is None else local.streams
    rate = sum(1.0 / t.period for t in tables if not t.removed)
    for x in streams:
        live = [t for t in s._by_stream[x] if not t.removed]
        if live:
            rate += 1.0 / live[0].period
    return rate


_BY_TABLE = frozenset({"_tables", "_by_idx", "_by_stream", "_rates", "_queues"})  # rebuilt by `_copy`, not deep-copied


def _copy(s: Any, first: object, table: str, local: Local | None) -> Any:
    """A copy of Scheduler `s` whose first pick is `table`: deep, but for the immutable config,
    plan and blueprint (shared); with `local`, only those tables are copied, the others shared
    (read, never changed: `involved`), and the copy's queues hold only their entries."""
    shared: dict[int, Any] = {id(s.config): s.config, id(s.plan): s.plan, id(first): Forced(table)}
    if s.blueprint is not None:
        shared[id(s.blueprint)] = s.blueprint  # (immutable: shared, as the config and the plan)
    if local is None:
        return _clone(s, shared)
    by_idx, keep = s._by_idx, set(local.tables)
    shared[id(s._nextjob.ranking)] = s._nextjob.ranking  # (replaced on a repartition, never changed)
    for i in local.tables:  # the sources outside, read by their dependents: shared
        for x in by_idx[i].sources:
            if x.idx not in keep:
                shared[id(x)] = x
    for _, _, x in s._releases.heap:  # (track reservation's expected releases: read only)
        if x.idx not in keep:
            shared[id(x)] = x
    c = object.__new__(type(s))
    shared[id(s)] = c  # (its bound methods, the handlers and the queues' check, are the copy's)
    state = {name: value for name, value in vars(s).items() if name not in _BY_TABLE and name != "_upkeep"}
    up = s._upkeep  # (maintenance, per table: only the kept tables' entries are copied, the others shared)
    mine = [x for x in (by_idx[i].name for i in local.tables) if x in up.tables]
    state, copies, rates, kept = _clone((state, [by_idx[i] for i in local.tables], [s._rates[x] for x in local.streams],
                                         [up.tables[x] for x in mine]), shared)
    c.__dict__.update(state)
    c._upkeep = object.__new__(type(up))
    c._upkeep.__dict__.update({k: v.copy() if isinstance(v, dict | set | list) else v for k, v in vars(up).items()})
    c._upkeep.tables.update(zip(mine, kept, strict=True))
    c._by_idx = list(by_idx)
    c._tables = dict(s._tables)
    for t in copies:
        c._by_idx[t.idx] = c._tables[t.name] = t
    c._by_stream = dict(s._by_stream)
    c._rates = dict(s._rates)
    for x, rate in zip(local.streams, rates, strict=True):  # (every table of a stream is kept, and shares its rate)
        c._by_stream[x] = [c._by_idx[t.idx] for t in s._by_stream[x]]
        c._rates[x] = rate
    q = s._queues
    c._queues = queues = ReadyQueues(c._valid)
    queues.queued, queues.urgent = list(q.queued), dict(q.urgent)
    for h in q.heaps:
        mine = [e for e in h if e[-1] in keep]
        heapq.heapify(mine)
        queues.heaps.append(mine)
    c._last_plan_event = math.inf  # no repartition in the copy
    return c


# Copies go through pickle (its C implementation: about half the CPU time of copy.deepcopy on an
# engine's state), with the objects that are shared or immutable passed by reference: those `_copy`
# names, functions (the handlers' and the keys' lambdas cannot be pickled), enum members, the frozen
# events (PartitionArrived, StartJob: copy.deepcopy shares them too) and the frozen config models. A state pickle refuses is
# copied by copy.deepcopy instead, with the same sharing.
_BY_REFERENCE = (types.FunctionType, enum.Enum, PartitionArrived, StartJob, BaseModel)  # (config models are frozen)
_SHARED: list[Any] = []  # the objects passed by reference, while one copy is loaded


def _shared(i: int) -> Any:
    return _SHARED[i]


class _Copier(pickle.Pickler):
    __slots__ = ("objs", "shared")

    def __init__(self, buf: io.BytesIO, shared: dict[int, Any]) -> None:
        super().__init__(buf, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = shared  # id → the object the copy holds instead
        self.objs: list[Any] = []

    def reducer_override(self, obj: Any) -> Any:
        got = self.shared.get(id(obj), _shared)
        if got is _shared:
            if obj is _shared or not isinstance(obj, _BY_REFERENCE):  # (`_shared` itself: by its name)
                return NotImplemented
            got = obj
        self.objs.append(got)
        return _shared, (len(self.objs) - 1,)


def _clone(obj: Any, shared: dict[int, Any]) -> Any:
    """A deep copy of `obj` in which each object whose id is in `shared` is replaced by its value
    there (and functions, enum members and frozen events are the same objects)."""
    global _SHARED
    buf = io.BytesIO()
    pickler = _Copier(buf, shared)
    try:
        pickler.dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy(obj, dict(shared))
    _SHARED = pickler.objs
    try:
        return pickle.loads(buf.getbuffer())
    finally:
        _SHARED = []
