"""The Scheduler: DataDepot's update scheduling framework (§2-§3) as a pure state machine.

Events go in with the current time — `PartitionArrived`, `PartitionDropped`, `JobFinished`,
`JobFailed`, `Tick` and the operator actions `Suspend`, `Resume`, `Refresh`, `Backfill`,
`CancelBackfill` — through one door, `handle(event, now)`, and `StartJob` decisions come out.
Everything else is a query and changes nothing. No clock, no I/O: the SimPy simulator and the
daemon drive this same object (docs/architecture.md). Same config, events and seed → same decisions.

A table is in one job state, one operator mode and one maintenance state; all move only by the
transition table (`warehouse.lifecycle`).

Released jobs wait in the ready queues (warehouse.queues: a heap per track-plan group, keyed by
the basic algorithm, §3.1); a round asks the plan (§3.2) for tracks at O(log n) per started job.

The engine's nouns — each knows nothing of the Scheduler; only this module imports them — are
mapped in the package docstring (`warehouse`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from types import MappingProxyType

from policies.basic import Candidate
from policies.bulk import bulk_limit, bulk_threshold
from policies.chopping import Pace
from policies.reservation import Releases
from tracks.plan import TrackPlan
from warehouse.backlog import Partition
from warehouse.backoff import Backoffs
from warehouse.blueprint import Ahead, Blueprint, blueprint, moved
from warehouse.board import TrackBoard
from warehouse.bulk import BulkLimit
from warehouse.config import FreshetConfig
from warehouse.cost import RowRate
from warehouse.errors import PartitionRefused, SchedulerMisuse
from warehouse.events import Event, JobFailed, JobFinished, PartitionArrived, Reconfigure, StartJob, Tick
from warehouse.jobs import recompute_job, update_job, upkeep_estimate, upkeep_job, upkeep_ranked
from warehouse.layout import Change, adopt, lay_out
from warehouse.lifecycle import TRANSITIONS, WORK_WAITS, transit
from warehouse.lookahead import LOOKAHEAD, FirstPick, first_pick, hold_until, lookahead_first
from warehouse.nextjob import NextJob
from warehouse.orders import ORDERS
from warehouse.overdue import OVERDUE_CHOP, Overdue
from warehouse.queues import ReadyQueues
from warehouse.table import (
    QUEUED,
    JobState,
    MaintenanceState,
    Mode,
    Recovered,
    Table,
    committed,
    expecting,
    failed,
    has_work,
    raise_safe,
    recomputed,
    sources_changed,
    stale_windows,
    take_plan,
    track_plan,
)
from warehouse.upkeep import MAINTENANCE_KINDS, OPTIMIZE, VACUUM, Upkeep
from warehouse.views import Views

__all__ = ["TRANSITIONS", "JobState", "MaintenanceState", "Mode", "Recovered", "Scheduler"]


_ADOPT_KIND = {"recompute": "adopt recompute", OPTIMIZE: "upkeep", VACUUM: "upkeep"}  # taking a running job over, by its kind


class Scheduler(Views):
    """One object per warehouse; see the module docstring. Not thread-safe: one caller at a time."""

    def __init__(self, config: FreshetConfig, *, now: float = 0.0, recovered: dict[str, Recovered] | None = None,
                 initial_freshness: float | None = None, first_job: int = 1) -> None:
        self.config = config
        self._now = now
        self._initial = initial_freshness
        self._rng = random.Random(config.scheduler.seed)
        self._tables: dict[str, Table] = {}
        self._by_idx: list[Table] = []
        self._by_stream: dict[str, list[Table]] = {}
        self._rates: dict[str, RowRate] = {}  # per stream: the typical rows per second (§2.4 n)
        self._board = TrackBoard()  # which job runs on which track (and for which table)
        self._bulk = BulkLimit()  # the bulk limit: threshold, cap, the bulk jobs running (warehouse.bulk)
        # per running job, its sources' rows that changed while it ran: a reload may remove and
        # re-add its table, and the returning table that takes the job over must recompute them
        self._read_old: dict[int, list[Change]] = {}
        self._orphans: set[int] = set()  # running jobs whose table a reload removed
        self._next_job_id = first_job  # a restarted daemon's: above the ids its Delta log records
        self._seq = 0
        self._race = 0.0  # the Random policy's clock: the key of the last job it started
        self._pace = Pace()  # observed / estimated durations (chop auto, §3.4)
        self._events = self._released = self._completed = self._failed = self._duplicates = self._late = 0
        self._backoffs = Backoffs()  # tables in back-off, by retry time
        self._releases = Releases(expecting)  # the next arrival expected of each base table (§2.4)
        self._hold_until: float | None = None
        self._first: FirstPick = None  # who picks a round's first job: Lookahead, rollout or none (_build)
        self._plan_dirty, self._last_plan_event = False, 0
        self._upkeep = Upkeep()  # maintenance counts and clocks (Nova, SIGMOD 2011 §2.4)
        self._due: dict[str, None] = {}  # the tables in MaintenanceState.DUE, in the order they fell due
        self._queues = ReadyQueues(self._valid)  # released jobs by track-plan group; the urgent ones
        self._overdue = Overdue()  # the aging bound (scheduler.overdue_periods): jobs waiting too long
        self._bp: Blueprint | None = None  # the blueprint the tables were laid out from (warehouse.blueprint)
        self._handlers = {  # data, jobs, the clock and the config; the orders (warehouse.orders)
            PartitionArrived: self._arrived, JobFinished: self._finished, JobFailed: self._failed_job,
            Tick: lambda ev, now: None, Reconfigure: self._reconfigure, **dict.fromkeys(ORDERS, self._ordered)}
        self._build(config, recovered or {}, now)
        self._prune()

    # ---- construction and reconfiguration ------------------------------------------------------
    def _build(self, config: FreshetConfig, recovered: dict[str, Recovered], now: float,
               bp: Blueprint | None = None, retried: frozenset[str] = frozenset()) -> None:
        """Lay `config` out (`bp`: its blueprint, prepared off the loop, else built here); only the
        tables it touches (and `retried` ones) are looked at again, but for cheap passes."""
        sc = config.scheduler
        bp = bp if bp is not None and bp.config is config else blueprint(config)
        self.config = config
        self._nextjob = NextJob(sc.chop, sc.ordering, self._pace)  # (rollout: its base rule orders the queues)
        self._first = first_pick(sc, self._first)  # (warehouse.lookahead; rollout's counts kept across a reload)
        self._reserve = sc.ordering == "auto"  # track reservation by lookahead (policies.reservation)
        self._expects = self._reserve or self._first is LOOKAHEAD  # both look at the releases expected next
        self._bulk.cap = bulk_limit(sc.bulk_limit, config.spark.master, config.spark.cores)  # (policies.bulk)
        lay = lay_out(bp, self._bp, self._tables, self._by_stream, recovered, self._initial, now, self._rates,
                      self._board.by_table)
        self._bp = bp
        for t, job in lay.adopting:  # a returning table takes over its running job (warehouse.layout)
            self._transition(t, "adopt slice" if job.time_slice else _ADOPT_KIND.get(job.kind, "adopt"))
            self._seq = adopt(t, job, self._seq, self._read_old.get(job.job_id, ()), now)
        self._tables, self._by_idx, self._names, self._by_stream = lay.tables, lay.by_idx, lay.names, lay.by_stream
        self._orphans = {j.job_id for j in self._board.jobs.values() if j.table not in lay.tables}
        self._board.resize(sc.tracks, now)
        for t in self._by_idx:
            if t.state in QUEUED and not has_work(t):
                self._transition(t, "drain")
        ahead = bp.ahead
        self._plan_tables(ahead)  # counts and queues what is pending
        self._overdue.configure(sc.overdue_periods, sc.overdue_slack, sc.tracks, self._by_idx)
        if ahead is not None and moved(ahead, ((t.name, t.cost) for t in self._by_idx)):  # a job finished since
            self._plan_dirty = True  # redone as after a drift (§3.2)
        touched = lay.touched
        if retried:  # tables a reload took out of back-off: looked at again too
            was_touched = set(touched)
            touched = [t for t in self._by_idx if t in was_touched or t.name in retried]
        self._upkeep.configure(bp.policies, recovered, None if touched is self._by_idx else [t.name for t in touched])
        self._due = {n: None for n in self._due
                     if n in lay.tables and lay.tables[n].maintenance is MaintenanceState.DUE}
        if active := self._upkeep.active:  # (nothing falls due of a table without a maintenance policy)
            for t in self._by_idx:  # recovered (or re-configured) tables already due
                if t.name in active:
                    self._check_upkeep(t, now)
        for t in touched:  # releases where due (a table not touched has had its release already;
            if t.state not in QUEUED:  # a queued one was keyed again by the plan)
                self._work_changed(t, now)

    def _plan_tables(self, ahead: Ahead | None = None) -> None:
        """(Re)partition (§3.2): profiles from current E_i(P_i) estimates (or the plan a reload made
        ahead, warehouse.blueprint); rebuild the queues."""
        sc = self.config.scheduler
        self.plan: TrackPlan
        if ahead is None:
            self.plan, self._nextjob.ranking, profiles = track_plan(sc, self._by_idx)
            self._bulk.over = bulk_threshold(sc.bulk_cost, (p.e_period for p in profiles))  # a bulk job costs more
        else:
            self.plan, self._nextjob.ranking, self._bulk.over = ahead.plan, ahead.ranking, ahead.bulk_over
            take_plan(self._by_idx, ahead.plan, ahead.profiles)
        self._nextjob.tracks = sc.tracks
        self._queues.reset(len(self.plan.groups))
        for t in self._by_idx:
            if t.state in QUEUED:
                self._queues.queued[t.queue.group] += 1
                self._push(t)
        self._plan_dirty = False
        self._last_plan_event = self._events

    def _reconfigure(self, ev: Reconfigure, now: float) -> None:
        """Apply a new config: added/removed tables, changed priorities; repartition (§3.2).
        Tables that stay keep their run state — during a run the Scheduler owns it; a table added
        over existing data starts from what storage holds (`ev.recovered`), not as never loaded.
        A table in back-off whose job the new config changes (its SQL, say) is retried now, its
        failures forgotten: they were the old job's. `ev.blueprint` (warehouse.blueprint, prepared
        off the loop by a reload) says which tables changed: only those are laid out again."""
        retried = set()
        if backing := [t for t in self._by_idx if t.state is JobState.BACKOFF]:
            names = [t.name for t in backing]
            was, new = self.config.job_definitions(names), ev.config.job_definitions(names)
            for t in backing:
                if t.name in new and new[t.name] != was.get(t.name):
                    t.jobs.backoff_until, t.jobs.consecutive_failures = now, 0  # (its heap entry goes stale)
                    self._transition(t, "retry")
                    retried.add(t.name)
        self._build(ev.config, dict(ev.recovered or {}), now, ev.blueprint, frozenset(retried))

    # ---- the event interface ---------------------------------------------------------------------
    def handle(self, event: Event, now: float) -> list[StartJob]:
        """Apply one event at time `now`; return the jobs to start now. The only way the
        Scheduler's state changes (docs/architecture.md)."""
        handler = self._handlers.get(type(event))
        if handler is None:
            raise SchedulerMisuse(f"unknown event {event!r}")
        if now < self._now:  # a wall clock stepped back: never let time run backwards inside
            now = self._now
        self._now = now
        self._events += 1
        handler(event, now)
        if (b := self._backoffs.heap) and b[0][0] <= now:
            self._expire_backoffs(now)
        if (u := self._upkeep.timers) and u[0][0] <= now:  # maintenance due by the clock (warehouse.upkeep)
            for name in self._upkeep.ripe(now):
                if (t := self._tables.get(name)) is not None:
                    self._maintenance(t, "due")
        out = self._dispatch(now) if self._board.idle else []
        if self._backoffs.heap or self._upkeep.timers:  # (the usual case: both empty, no call)
            self._prune()
        return out

    def _prune(self) -> None:
        """Timers no longer standing leave the tops of their heaps, so `next_wakeup` (a query) reads
        the tops as they are."""
        if self._backoffs.heap:
            self._backoffs.prune(self._backing_off)
        if self._upkeep.timers:
            self._upkeep.prune()

    def next_wakeup(self) -> float | None:
        """The earliest back-off expiry, maintenance due time or end of a track reservation, if
        any: call `handle(Tick(), t)` then. A query: it changes nothing."""
        hold = self._hold_until if self._hold_until is not None and self._hold_until > self._now else None
        backoff = self._backoffs.next() if self._backoffs.heap else None
        due = self._upkeep.next_due() if self._upkeep.timers else None
        if backoff is None and due is None:  # (the usual case, asked after every event)
            return hold
        return min((w for w in (hold, backoff, due) if w is not None), default=None)

    # ---- orders: the operator's (ops.actions) and a dropped partition (warehouse.orders) ---------
    def _ordered(self, ev: Event, now: float) -> None:
        """Each move an order makes of a table (warehouse.orders) goes through the door helpers
        (TRANSITIONS) before the order decides its next."""
        for t, move in ORDERS[type(ev)](ev, now, self._tables, self._by_stream):
            if move == "work":
                self._work_changed(t, now)
            elif move == "requeue":
                self._requeue(t)
            elif move == "drain":
                self._drain(t)
            elif move == "retry":  # its back-off ends now (the heap's entry goes stale)
                t.jobs.backoff_until = now
                self._transition(t, move)
            elif move == "upkeep":
                self._check_upkeep(t, now)
            else:  # suspend, resume, refresh: the operator's word
                self._mode(t, move)

    def _mode(self, t: Table, kind: str) -> None:
        t.mode = transit(t, t.mode, kind, Mode.URGENT, self._queues.urgent)  # type: ignore[assignment]

    def _maintenance(self, t: Table, kind: str) -> None:
        t.maintenance = transit(t, t.maintenance, kind, MaintenanceState.DUE, self._due)  # type: ignore[assignment]

    def drained(self) -> bool:
        """No update job runs, waits for a track or backs off (maintenance aside): all that arrived
        is loaded, but in a suspended table. A query (the simulator's end of a trace)."""
        return all(t.state is JobState.IDLE or t.state is JobState.MAINTAINING for t in self._by_idx)

    def _check_upkeep(self, t: Table, now: float) -> None:
        """t's maintenance falls due if it is due now (warehouse.upkeep)."""
        if self._upkeep.due(t.name, now) is not None:
            self._maintenance(t, "due")

    def is_suspended(self, table: str) -> bool:
        return (t := self._tables.get(table)) is not None and t.mode is Mode.SUSPENDED

    def refresh_pending(self, table: str) -> bool:
        """A refresh of `table` waits for its job to start."""
        return (t := self._tables.get(table)) is not None and t.mode is Mode.URGENT

    # ---- events --------------------------------------------------------------------------------
    def _arrived(self, ev: PartitionArrived, now: float) -> None:
        tables = self._by_stream.get(ev.stream)
        if not tables:
            raise PartitionRefused(ev.stream, ev.partition_id, "no table reads this stream")
        pid, end = ev.partition_id, ev.end
        rate = self._rates[ev.stream]
        if ev.rows > 0 and (  # (no rows: nothing to learn of the rate)
                (pid not in tables[0].log.ids) if len(tables) == 1 else any(pid not in t.log.ids for t in tables)):
            rate.observe(ev.rows, end - ev.start)  # once per new partition, before its jobs are costed
        c = self._nextjob.chop if not self._nextjob.auto else None
        for t in tables:
            log = t.log
            if pid in log.ids:
                self._duplicates += 1
                continue
            late = t.safe is not None and end <= t.safe
            self._late += late
            self._seq += 1
            last = log.add(Partition(end, ev.start, self._seq, late, ev))
            t.last_arrival = now
            if self._expects:  # its next arrival is expected a period from now (§2.4)
                self._releases.expect(now + t.period, t, now)
            if (last and c is not None and t.state is JobState.PENDING and t.queue.keyed_rate == rate.rate and len(log.pending) > 1
                    and end > (t.freshness if t.freshness is not None else log.pending[0].low) + c * t.period):
                continue  # beyond the chop bound of its pending job: that job and its key are unchanged (§3.4)
            self._work_changed(t, now)

    def _job(self, job_id: int) -> tuple[StartJob, Table | None]:
        job = self._board.release(job_id, self._now)
        if job is None:
            raise SchedulerMisuse(f"job {job_id} is not running")
        self._bulk.ended(job_id)
        self._read_old.pop(job_id, None)
        self._orphans.discard(job_id)
        t = self._tables.get(job.table)
        return job, (t if t is not None and not t.removed else None)  # None: removed by a reconfigure

    @property
    def running(self) -> Mapping[int, StartJob]:
        """The jobs running now, by id: a read-only view of the track board's (it follows the board)."""
        return MappingProxyType(self._board.jobs)

    def _finished(self, ev: JobFinished, now: float) -> None:
        job, t = self._job(ev.job_id)
        if job.kind in MAINTENANCE_KINDS:
            self._maintained(job, t, ev, now)
            return
        self._completed += 1
        if t is None:
            return
        self._transition(t, "finish")
        # what each partition loaded matters to dependents, and to a removed table's job still running
        reads = bool(t.dependents or self._orphans and any(t.name in self._board.jobs[i].sources for i in self._orphans))
        spans = t.log.finished(job.end, reads) if t.log is not None else []  # what it loaded of each
        if job.kind == "recompute":
            self._recomputed(t, job, ev, now)
            return
        if ev.committed:  # a no-op's duration says nothing about E(n) (§2.4)
            self._pace.observe(ev.duration, job.estimate, t.cost.has_settled)
            if self._upkeep.committed(t.name, now) is not None:  # its maintenance is due now
                self._maintenance(t, "due")
        late = t.derived is not None and t.derived.stateful and t.derived.taken  # a stateful job folded late rows too
        start = min(job.start, t.derived.taken[0].lo) if late and t.derived is not None else job.start
        if committed(t, job, ev, now, self.config.scheduler.repartition_drift):
            self._plan_dirty = True  # its E_i(P_i) drifted from the plan's (§3.2)
        if t.base:  # what each partition loaded may fall in windows dependents computed already
            for p, lo, hi in spans:  # (a time slice touches only its slice)
                a = p.arrival
                rows = round(a.rows * (hi - lo) / (a.end - a.start)) if a.end > a.start else a.rows
                self._touch(t, lo, hi, "late", (p.pid,), now, rows)
        else:
            self._touch(t, start, job.end, "upstream", (), now)  # dependents that ran ahead (max_skew)
        for d in t.dependents:
            sources_changed(d, lambda x: self._work_changed(x, now))
        self._ended(t, now)

    def _ended(self, t: Table, now: float) -> None:
        """t's update or recompute job ended: its next job is released; a refresh asked while it ran
        is served if t has nothing left to do (all loaded, nothing to rewrite)."""
        self._work_changed(t, now)
        if t.state is JobState.IDLE and t.mode is Mode.URGENT:
            self._mode(t, "served")

    def _maintained(self, job: StartJob, t: Table | None, ev: JobFinished | JobFailed, now: float) -> None:
        """A maintenance job ended: the table is free for its update jobs again. A failure is
        counted and retried after the back-off ceiling; it never delays the table's updates."""
        if t is None:
            return
        self._transition(t, "finish")
        self._upkeep.ended(job, ev, now, self.config.scheduler.retry_backoff_max)
        self._work_changed(t, now)
        self._check_upkeep(t, now)

    def _recomputed(self, t: Table, job: StartJob, ev: JobFinished, now: float) -> None:
        """A recompute job rewrote `(start, end]`: record the version, pass it down the DAG. A
        stateful table's late fold changes the keys of its late rows, whose state rows lie anywhere
        from the earliest of them to F; its rebuild changes nothing readers see until its last
        chunk swaps the rebuilt state in, which may change every key: its dependents' windows over
        the whole state are recomputed then, once (lake.rebuild)."""
        recomputed(t, job, ev)
        assert t.derived is not None and t.freshness is not None
        if not t.derived.stateful:
            self._touch(t, job.start, job.end, "upstream", job.late, now)
        elif "rebuild" not in job.reasons:
            self._touch(t, job.start, t.freshness, "upstream", job.late, now)
        elif t.derived.rebuilt(job.end):
            self._touch(t, t.origin if t.origin is not None else job.start, t.freshness, "upstream", (), now)
        if raise_safe(t):
            for d in t.dependents:
                sources_changed(d, lambda x: self._work_changed(x, now))
        self._ended(t, now)

    def _touch(self, x: Table, lo: float, hi: float, reason: str, late: tuple[str, ...], now: float,
               rows: int = 0) -> None:
        """x's rows in `(lo, hi]` changed (`rows` of them loaded): its dependents' windows computed
        from them are wrong; a stateful dependent's late rows to fold."""
        for d in stale_windows(x, lo, hi, reason, late, self._board.by_table, rows):
            self._work_changed(d, now)
        for job in self._board.jobs.values():  # kept for a returning table (_build): rows it read
            if lo < job.end and x.name in job.sources:
                self._read_old.setdefault(job.job_id, []).append((lo, hi, reason, late))

    def _failed_job(self, ev: JobFailed, now: float) -> None:
        job, t = self._job(ev.job_id)
        if job.kind in MAINTENANCE_KINDS:
            self._maintained(job, t, ev, now)
            return
        self._failed += 1
        if t is None:
            return
        self._transition(t, "fail")
        failed(t, job, ev, now, self.config.scheduler)
        self._seq += 1
        self._backoffs.push(t.jobs.backoff_until, self._seq, t.name)

    def _backing_off(self, name: str, until: float) -> Table | None:
        """The table if this heap entry is still its current back-off (lazy deletion)."""
        t = self._tables.get(name)
        return t if t is not None and t.state is JobState.BACKOFF and t.jobs.backoff_until == until else None

    def _expire_backoffs(self, now: float) -> None:
        for t in self._backoffs.expired(now, self._backing_off):
            self._transition(t, "retry")
            self._work_changed(t, now)

    # ---- table state ---------------------------------------------------------------------------
    def _transition(self, t: Table, kind: str) -> None:
        new = TRANSITIONS.get((t.state, kind))
        if new is None:
            raise SchedulerMisuse(f"table {t.name!r} is {t.state.value} and cannot take '{kind}'")
        t.state = new

    def _work_changed(self, t: Table, now: float) -> None:
        if t.state in WORK_WAITS or t.mode is Mode.SUSPENDED or not has_work(t):
            return
        was = t.state  # IDLE or queued (WORK_WAITS): work moves a queued job nowhere (warehouse.lifecycle)
        if was is JobState.IDLE:  # a release: ΔF went from zero to nonzero (§3.1)
            self._transition(t, "work")
            self._seq += 1
            q = t.queue
            q.seq, q.release = self._seq, now
            q.rand = self._race + self._rng.expovariate(1.0)  # Random (§4.3): see policies.basic._random
            t.jobs.released += 1
            self._released += 1
            self._queues.queued[q.group] += 1
            if self._overdue.periods is not None:
                self._overdue.released(t, now)
            self._push(t)
        elif was in QUEUED:
            self._push(t)

    # ---- the next job of a table (warehouse.nextjob) -------------------------------------------------
    def _candidate(self, t: Table) -> Candidate:
        """t's next job as the basic algorithm sees it (§3.1): a query."""
        return self._nextjob.candidate(t)[0]

    def _drain(self, t: Table) -> None:
        """t's queued job leaves the queue (its heap entry is dropped lazily)."""
        self._transition(t, "drain")
        q = t.queue
        q.version += 1
        self._queues.queued[q.group] -= 1

    def _requeue(self, t: Table) -> None:
        """Some of t's pending work went away: a queued job is re-keyed, or drained if none is left."""
        if t.state in QUEUED and has_work(t):
            self._push(t)
        elif t.state in QUEUED:
            self._drain(t)

    def _push(self, t: Table) -> None:
        """t's job is (re)keyed in its queue; a base table's shape under a fixed c is kept with it
        (`QueuePlace.shape`: NextJob.shape reads it until the version or the row rate moves)."""
        q = t.queue
        q.version += 1
        q.keyed_rate = t.rate.rate if t.rate is not None else None
        nextjob = self._nextjob
        if t.log is not None and not nextjob.auto:
            q.shape, q.shape_version = (shape := nextjob.shape(t)), q.version
            self._queues.push(q.group, (*nextjob.queue_key(t, shape), q.version, t.idx))
        else:
            self._queues.push(q.group, (*nextjob.queue_key(t), q.version, t.idx))

    def _valid(self, entry: tuple, g: int) -> bool:
        t = self._by_idx[entry[-1]]
        q = t.queue
        return q.version == entry[-2] and t.state in QUEUED and q.group == g

    # ---- a scheduling round (§3.2) ---------------------------------------------------------------
    def _dispatch(self, now: float) -> list[StartJob]:
        """One round: refreshes asked by an operator first, then the update jobs by the basic
        algorithm and the track plan (§3.1-§3.2), then due maintenance on the tracks left idle."""
        if not self._board.idle:
            return []
        available = set(self._board.idle)
        out: list[StartJob] = []
        if self._queues.urgent:
            self._refresh_first(now, available, out)
        if available and (h := self._overdue.heap) and h[0][0] <= now:  # (the usual case: empty, no call)
            self._overdue_first(now, available, out)
        if available and any(self._queues.queued):
            self._round(now, available, out)
        if available and self._due:
            self._maintain(now, available, out)
        return out

    def _refresh_first(self, now: float, available: set[int], out: list[StartJob]) -> None:
        """The jobs of the tables an operator asked to refresh, first (warehouse.queues picks them);
        a bulk one only within the bulk limit (it keeps its place: first when a bulk job ends)."""
        for t, track in self._queues.urgent_first(self._tables, self.plan, available):
            if self._bulk.cap is not None and self._bulk_waits(t):
                continue
            out.append(self._start(t, track, now))
            available.discard(track)

    def _overdue_first(self, now: float, available: set[int], out: list[StartJob]) -> None:
        """The jobs of tables `overdue_periods` of their periods without getting fresher, next (warehouse.overdue)."""
        running = sum(j.overdue for j in self._board.jobs.values())  # (the board's: StartJob.overdue)
        self._overdue.serve(now, running, self._tables, self.plan, available, self._queues.waiting,
                            lambda t: self._bulk_waits(t, OVERDUE_CHOP),
                            lambda t, track: out.append(self._start(t, track, now, overdue=True)))

    def _maintain(self, now: float, available: set[int], out: list[StartJob]) -> None:
        """Due maintenance (warehouse.upkeep) on tracks no update job took this round, best first
        (warehouse.jobs.upkeep_ranked): it removes no staleness, so it only runs where nothing better waits."""
        ranked, gone = upkeep_ranked(self._upkeep, list(self._due), self._tables, self._board.by_table, now)
        for name in gone:
            if (t := self._tables.get(name)) is not None:
                self._maintenance(t, "undue")
            else:  # removed by a reconfigure
                del self._due[name]
        for idx, kind in ranked:
            if not available:
                return
            t = self._by_idx[idx]
            if self._bulk.cap is not None and self._bulk.full(upkeep_estimate(t, kind, self._upkeep)):
                continue  # the bulk limit is reached: it stays due
            track = self.plan.place(t.name, available, self._queues.waiting)
            if track is not None:
                out.append(self._start_upkeep(t, kind, track, now))
                available.discard(track)

    def _start_upkeep(self, t: Table, kind: str, track: int, now: float) -> StartJob:
        self._transition(t, "upkeep")
        t.queue.version += 1
        self._maintenance(t, "maintain")
        return self._occupy(t, upkeep_job(t, kind, self._upkeep, self._next_job_id, track), track, now)

    def _round(self, now: float, available: set[int], out: list[StartJob]) -> None:
        if self._plan_dirty and self._events - self._last_plan_event >= max(len(self._by_idx), 1):
            self._plan_tables()
        if self._first is not None:
            self._first_pick(now, available, out)

        def take(entry: tuple, track: int) -> bool:
            t = self._by_idx[entry[-1]]
            if self._bulk.cap is not None and self._bulk_waits(t):  # (no limit: no call)
                return False  # the bulk limit is reached: a small job may take the track
            until = hold_until(t, -entry[0], self._nextjob, self._releases, self._pace.now,
                               lambda: self._board.free_at(now, self._pace.now, but=track), now) if self._reserve else None
            if until is not None:
                self._hold(t, until, now)  # the track waits for valuable jobs; the next may be short
                return False
            out.append(self._start(t, track, now))
            return True

        self._queues.serve(self.plan, available, self._names, take)

    def _first_pick(self, now: float, available: set[int], out: list[StartJob]) -> None:
        """Lookahead (§3.1) or rollout (warehouse.rollout: it simulates copies of this Scheduler) picks the round's first job."""
        name = (lookahead_first(self._queues, self._nextjob, self._by_idx, self._releases, now)
                if (first := self._first) is LOOKAHEAD else first.pick(self, now))  # type: ignore[union-attr]
        if name is not None and not self._bulk_waits(t := self._tables[name]) and (
                track := self.plan.place(name, available, self._queues.waiting)) is not None:
            out.append(self._start(t, track, now))
            available.discard(track)

    def _hold(self, t: Table, until: float, now: float) -> None:
        """t's job leaves a track waiting until `until` (policies.reservation); wake up then."""
        if t.state is not JobState.HELD:
            t.queue.held_since = now
        self._transition(t, "hold")
        self._hold_until = until if self._hold_until is None or self._hold_until <= now else min(self._hold_until, until)

    def _start(self, t: Table, track: int, now: float, *, overdue: bool = False) -> StartJob:
        """Start t's next job on `track` (warehouse.jobs builds it): its recompute job where that
        ranks first (warehouse.nextjob), else its update job (an overdue one chopped at OVERDUE_CHOP)."""
        derived, q, cap = t.derived, t.queue, OVERDUE_CHOP if overdue else None
        if (derived is not None and t.freshness is not None and derived.recompute.has_work()
                and self._nextjob.candidate(t, cap)[1]):
            plan = self._nextjob.recompute(t)
            assert plan is not None
            self._transition(t, "recompute")
            q.version += 1
            self._queues.queued[q.group] -= 1
            job = recompute_job(t, plan.piece, plan.overwrite, self._next_job_id, track)
            derived.rewriting = (now, job.start, job.end)  # (a backfill asked at this instant is served by it)
        else:
            shape = self._nextjob.shape(t, cap)
            self._transition(t, "slice" if shape.time_slice and t.base else "start")
            if t.mode is Mode.URGENT:
                self._mode(t, "served")
            q.version += 1
            self._queues.queued[q.group] -= 1
            job = update_job(t, shape, self._next_job_id, track)
            if job.full and t.derived is not None and t.derived.unsure is None:  # it rewrites every window, as a recompute
                t.derived.rewriting = (now, job.start, job.end)  # (not a retry that may be a no-op, Derived.unsure)
        self._race = q.rand if q.rand > self._race else self._race  # (max, without the call)
        return self._occupy(t, job, track, now, overdue)

    def _occupy(self, t: Table, job: StartJob, track: int, now: float, overdue: bool = False) -> StartJob:
        """`job` (numbered `_next_job_id`) runs on `track` from `now`; marked and counted bulk if it is
        (warehouse.bulk); marked overdue if the overdue queue started it."""
        self._next_job_id += 1
        if (bulk := self._bulk.started(job.job_id, job.estimate)) or overdue:
            job = dataclasses.replace(job, bulk=bulk, overdue=overdue)
        self._board.occupy(job, now)
        return job

    def _bulk_waits(self, t: Table, cap: float | None = None) -> bool:
        """t's next job (the one `_start` would start: warehouse.nextjob) waits for the bulk limit (warehouse.bulk)."""
        return self._bulk.cap is not None and self._bulk.full(self._nextjob.candidate(t, cap)[0].cost)
