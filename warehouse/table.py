"""A table as the Scheduler keeps it (the DataDepot paper §2): its facts — priority and inherited
priority Ip_i (§3.3), period, freshness F and safe freshness F' (§2.1-§2.4), origin — and its nouns:

    state, mode, maintenance   its `JobState`, the operator's `Mode` and its `MaintenanceState`,
                               moved only by the transition table (warehouse.lifecycle)
    log | derived              a base table's `Backlog` (warehouse.backlog) or a derived table's
                               `Derived` (warehouse.derived: its edge, refresh mode, recompute)
    queue                      `QueuePlace`: its released job in the ready queues (§3.1-§3.2)
    jobs                       `JobCounts`: what its jobs did, its failures in a row and retry time
    profile                    `JobProfile`: P_i, E_i(P_i) and benefit at the last (re)partition (§3.2)
    cost, meter                its E(n) (warehouse.cost) and staleness meter (warehouse.freshness)

and the functions over them: has it work, a commit, a failure, its edge and F' moving with its
sources' (§2.2), a backfill's range. What storage held for it on start is `Recovered`.
Pure data: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from policies.reservation import ValueRanking
from tracks.plan import JobProfile, TrackPlan
from warehouse.backlog import Backlog
from warehouse.backoff import backoff_for
from warehouse.blueprint import job_profile, plan_profiles
from warehouse.config import SchedulerConfig
from warehouse.cost import CostModel, RowRate
from warehouse.derived import Derived
from warehouse.errors import RecomputeRefused, SchedulerMisuse
from warehouse.events import JobFailed, JobFinished, StartJob
from warehouse.freshness import StalenessMeter
from warehouse.recompute import touched, window_count

__all__ = ["BUSY", "QUEUED", "JobCounts", "JobShape", "JobState", "MaintenanceState", "Mode", "QueuePlace", "Recovered",
           "Table", "backfill_range", "base_periods", "committed", "expecting", "failed", "has_work", "named", "profile",
           "raise_safe", "read_stale", "recompute_target", "recomputed", "sources_changed", "stale_windows",
           "take_plan", "track_plan", "update_edge"]


class JobShape(NamedTuple):
    """An update job's window and size: what it loads or computes, `(start, end]`, the freshness it
    reaches, how many pending partitions it takes (a base table's), whether it loads a time slice
    of one long partition (§3.4), and `work`, the n of its E(n) (§2.4)."""

    start: float
    end: float
    new_freshness: float
    partitions: int
    time_slice: bool
    work: float


class JobState(Enum):
    """Where a table's job is (§3.1: released, running). `phase` is what stats show."""

    IDLE = "idle"
    PENDING = "pending"  # released, waits in its group's queue
    HELD = "held"  # released; a track it could take waits for more valuable jobs (policies.reservation)
    RUNNING = "running"  # an update job
    SLICING = "slicing"  # an update job loading a time slice of one long partition (§3.4)
    RECOMPUTING = "recomputing"  # a recompute job rewriting committed windows (warehouse.recompute)
    MAINTAINING = "maintaining"  # OPTIMIZE/VACUUM (warehouse.upkeep) as the table's one writer
    BACKOFF = "backoff"  # the last job failed; retried after the back-off

    __hash__ = object.__hash__  # members are singletons: identity hashing, in C (the hot path looks them up)

    @property
    def phase(self) -> str:
        """idle, pending, running or backoff (`TableStats.state`, the metrics' labels)."""
        return _PHASE[self]


class Mode(Enum):
    """What an operator asked of a table (ops.actions)."""

    ACTIVE = "active"
    URGENT = "urgent"  # refresh: its next update job starts ahead of the queue
    SUSPENDED = "suspended"  # no job starts; arrivals are kept

    __hash__ = object.__hash__


class MaintenanceState(Enum):
    """Whether a table's maintenance (OPTIMIZE/VACUUM, warehouse.upkeep) is due: a due one waits
    for a track no update job takes (Nova, SIGMOD 2011 §2.4)."""

    CURRENT = "current"
    DUE = "due"

    __hash__ = object.__hash__


# (the hot paths test membership in these module constants: a member looked up on its class goes
# through EnumType's __getattr__ each time)
QUEUED = frozenset({JobState.PENDING, JobState.HELD})
BUSY = frozenset({JobState.RUNNING, JobState.SLICING, JobState.RECOMPUTING, JobState.MAINTAINING})
_PHASE = {JobState.IDLE: "idle", JobState.PENDING: "pending", JobState.HELD: "pending", JobState.RUNNING: "running",
          JobState.SLICING: "running", JobState.RECOMPUTING: "running", JobState.MAINTAINING: "running",
          JobState.BACKOFF: "backoff"}


@dataclass(frozen=True, slots=True)
class Recovered:
    """A table's state read back from storage on start (docs/warehouse.md §5).

    `origin` is the earliest event time the table covers (the start of its first load): a new
    derived table over recovered sources is computed from there, not from their freshness.
    The rest is the maintenance history (`warehouse.upkeep`): Freshet commits since the last
    OPTIMIZE, the freshness it compacted through, when it and the last VACUUM ran, and the time
    of the first retained commit (the vacuum clock's start before any VACUUM).
    """

    freshness: float | None
    safe_freshness: float | None = None
    origin: float | None = None
    commits_since_optimize: int = 0
    optimized_through: float | None = None
    last_optimize: float | None = None
    last_vacuum: float | None = None
    first_commit: float | None = None
    sql_versions: tuple[tuple[float, float, str], ...] = ()  # derived: (lo, hi, version) committed
    dirty: tuple[tuple[float, float], ...] = ()  # derived: committed ranges a later source commit made wrong
    rebuild: tuple[float, float] | None = None  # stateful: a rebuild under way (its next chunk's start, its end)
    slices: tuple[tuple[str, float], ...] = ()  # base: partitions time slices loaded in part, through when


UNPLANNED = JobProfile("", 0.0, 0.0)  # a table's profile before its first (re)partition


@dataclass(slots=True)
class QueuePlace:
    """Where a table's released job stands in the ready queues (warehouse.queues, §3.1-§3.2): its
    track-plan group, the version that tells its current heap entry from stale ones (lazy
    deletion), its release time r_i and the tie-breakers the basic algorithms order by (§3.1:
    release order for FIFO, a draw for Random), the stream's row rate its entry was keyed at, and
    — a base table under a fixed c — the shape it was keyed with, which holds while the version
    and the rate do (`NextJob.shape` reads it). HELD: when its job first left a track waiting
    (policies.reservation)."""

    group: int = 0
    version: int = 0
    release: float = 0.0
    seq: int = 0
    rand: float = 0.0
    keyed_rate: float | None = -1.0
    shape: JobShape | None = None
    shape_version: int = -1  # the version `shape` was kept at
    held_since: float = 0.0


@dataclass(slots=True)
class JobCounts:
    """What a table's jobs did (the snapshot's `jobs_*`): released (§3.1), started as overdue, completed, failed, the
    freshness they gained (Σ ΔF), the last result; the failures in a row and when the retry after
    them is due (`backoff_until`, warehouse.backoff)."""

    released: int = 0
    overdue: int = 0  # of which started as overdue (scheduler.overdue_periods, warehouse.overdue)
    completed: int = 0
    failed: int = 0
    delta_f_total: float = 0.0
    last_result: str | None = None
    consecutive_failures: int = 0
    backoff_until: float = 0.0


@dataclass(slots=True, eq=False)
class Table:
    name: str
    idx: int
    base: bool
    priority: float
    period: float
    lateness: float
    granularity: float | None
    target: float | None
    stream: str | None
    cost: CostModel
    meter: StalenessMeter
    inherited_priority: float = 0.0  # Ip_i (§3.3): the priority it inherits from its dependents
    sources: list[Table] = field(default_factory=list)
    dependents: list[Table] = field(default_factory=list)
    freshness: float | None = None
    safe: float | None = None
    origin: float | None = None
    log: Backlog | None = None  # base: the partitions arrived and not loaded (warehouse.backlog)
    rate: RowRate | None = None  # base: its stream's typical rows per second (shared, Scheduler._rates)
    state: JobState = JobState.IDLE
    mode: Mode = Mode.ACTIVE
    maintenance: MaintenanceState = MaintenanceState.CURRENT
    last_arrival: float | None = None
    queue: QueuePlace = field(default_factory=QueuePlace)  # its released job in the ready queues
    profile: JobProfile = UNPLANNED  # P_i, E_i(P_i) and Ip_i·P_i / E_i(P_i) at the last (re)partition (§3.2)
    jobs: JobCounts = field(default_factory=JobCounts)  # what its jobs did: counts, failures in a row, retry
    removed: bool = False
    derived: Derived | None = None  # derived: edge, refresh mode, what to recompute (warehouse.derived)


def has_work(t: Table) -> bool:
    """t has a job to release: pending partitions, windows to recompute, or a window to update."""
    if t.log is not None:
        return bool(t.log.pending)
    assert t.derived is not None
    if t.freshness is not None and t.derived.recompute.has_work():
        return True
    return t.derived.has_update(t.freshness if t.freshness is not None else t.origin)


def update_edge(d: Table) -> bool:
    """Derived: TE = safe trailing edge of the sources, floored to the granularity (§2.2). Moved?"""
    assert d.derived is not None
    changed = d.derived.update_edge([s.safe for s in d.sources], d.granularity)
    if d.origin is None and d.derived.edge is not None:  # never loaded: start where the sources start
        edge = d.derived.edge
        d.origin = min(s.origin if s.origin is not None else edge for s in d.sources)
    return changed


def sources_changed(d: Table, moved: Callable[[Table], None]) -> None:
    """A source's safe freshness moved: d's edge may move (§2.2), and with it (max_skew) d's own F'
    and so its dependents' edges, depth first; `moved(t)` for each table whose edge moved."""
    edge_moved = update_edge(d)
    if raise_safe(d):
        for e in d.dependents:
            sources_changed(e, moved)
    if edge_moved:
        moved(d)


def raise_safe(d: Table) -> bool:
    """Derived F' (§2.2): below it d's windows are final — at most its freshness, the sources'
    safe trailing edge (max_skew lets F run ahead of it) and the oldest window to recompute. Raised?"""
    if d.derived is None or d.freshness is None or (cand := d.derived.safe(d.freshness)) is None:
        return False
    if d.safe is None or cand > d.safe:
        d.safe = cand
        return True
    return False


def committed(t: Table, job: StartJob, ev: JobFinished, now: float, drift: float) -> bool:
    """t's update `job` finished (`ev`): E(n) observed (a no-op's duration says nothing of it,
    §2.4), F (and the staleness meter, §2.3), F' (§2.2), its counts, a derived table's SQL
    version over the window. Has E_i(P_i) drifted from the plan's by more than `drift` (§3.2)?"""
    if ev.committed and t.cost.learn:
        t.cost.observe(job.n, ev.duration, ev.cold)
    # (E_i(P_i) moves only by learning: the plan's was taken from this model, §3.2)
    planned = t.profile.e_period
    drifted = t.cost.learn and planned > 0 and abs(t.cost.estimate(t.period) - planned) > drift * planned
    if t.freshness is None:
        t.meter.start(job.new_freshness, now)
        t.freshness = job.new_freshness
        t.origin = job.start if t.origin is None else t.origin
    elif job.new_freshness > t.freshness:
        t.meter.set_freshness(job.new_freshness, now)
        t.freshness = job.new_freshness
    if t.safe is None or job.new_safe_freshness > t.safe:
        t.safe = job.new_safe_freshness
    counts = t.jobs
    counts.completed += 1
    counts.delta_f_total += job.delta_f
    counts.consecutive_failures = 0
    counts.last_result = "ok"
    if t.derived is not None:
        # the version the log holds (JobFinished.sql_version); a no-op that names none: an earlier
        # attempt wrote these windows with a SQL version not known — "", so they count as on an old SQL
        version = ev.sql_version if ev.sql_version is not None else job.sql_version if ev.committed else ""
        t.derived.committed(job.start, job.end, version, None, replayed=not ev.committed)
    return drifted


def recomputed(t: Table, job: StartJob, ev: JobFinished) -> None:
    """t's recompute `job` rewrote `(start, end]`: its E(n) observed, the SQL version recorded
    (counted in the recompute jobs, not in update jobs), its failures reset."""
    assert t.derived is not None
    if ev.committed:
        t.cost.observe(job.n, ev.duration, ev.cold)
    version = ev.sql_version if ev.sql_version is not None else job.sql_version
    t.derived.committed(job.start, job.end, version, window_count(job.end - job.start, t.granularity, t.period))
    t.jobs.consecutive_failures = 0
    t.jobs.last_result = "ok"


def failed(t: Table, job: StartJob, ev: JobFailed, now: float, sc: SchedulerConfig) -> None:
    """t's `job` failed: what it took stays to do — the partitions pending, but what the shell
    quarantines (`bad_partitions`); the windows to recompute — and its retry is due after the
    back-off (`JobCounts.backoff_until`, exponential in the failures in a row)."""
    if t.log is not None:
        t.log.failed(set(ev.bad_partitions), t.freshness)
    if t.derived is not None:
        window = (job.start, job.end)  # a refused job wrote nothing: its window is not in doubt
        t.derived.failed(job.kind != "recompute", t.freshness, None if job.kind != "recompute" else window,
                         None if ev.refused else window)
    counts = t.jobs
    counts.consecutive_failures += 1
    counts.failed += 1
    counts.last_result = f"failed: {ev.reason}" if ev.reason else "failed"
    counts.backoff_until = now + backoff_for(counts.consecutive_failures, sc.retry_backoff, sc.retry_backoff_max)


def stale_windows(x: Table, lo: float, hi: float, reason: str, late: tuple[str, ...],
                  running: dict[str, StartJob], rows: int = 0) -> list[Table]:
    """x's rows in `(lo, hi]` changed (late data, a rewritten source, a dependent that ran ahead by
    max_skew): the windows its dependents computed from them are marked to recompute
    (warehouse.derived); the dependents that got work. `running`: the job each table runs."""
    return [d for d in x.dependents
            if d.derived is not None and read_stale(d, running.get(d.name), lo, hi, reason, late, rows)]


def read_stale(d: Table, job: StartJob | None, lo: float, hi: float, reason: str, late: tuple[str, ...],
               rows: int = 0) -> bool:
    """A source of the derived table d changed its rows in `(lo, hi]`: mark the windows d computed
    from the old rows — committed, or being computed by its running update `job` — to recompute.
    True when that gave d work."""
    assert d.derived is not None
    update = job if job is not None and job.kind != "recompute" else None
    unsure = d.derived.unsure if update is None else None  # a failed update job's windows, maybe committed
    if d.freshness is None and update is None and unsure is None:
        return False  # nothing computed, nothing being computed: its first job reads the new rows
    # what it computed, and what its running job (its first one, too) may have read the old rows for
    taken = max(d.freshness if d.freshness is not None else -math.inf,
                update.new_freshness if update is not None else unsure[1] if unsure is not None else -math.inf)
    origin = (d.origin if d.origin is not None else update.start if update is not None
              else unsure[0] if unsure is not None else None)
    return d.derived.mark(lo, hi, reason, late, granularity=d.granularity, taken=taken, origin=origin, rows=rows,
                     held=unsure is not None)


def named(tables: dict[str, Table], name: str) -> Table:
    """The table `name` an operator action names; SchedulerMisuse if there is none."""
    t = tables.get(name)
    if t is None:
        raise SchedulerMisuse(f"unknown table {name!r}")
    return t


def recompute_target(tables: dict[str, Table], name: str) -> Table:
    """The derived table `name` a backfill (or its cancel) rewrites; RecomputeRefused for an
    unknown or a base table."""
    t = tables.get(name)
    if t is None:
        raise RecomputeRefused(name, f"no such table (known: {', '.join(sorted(tables))})")
    if t.derived is None:
        raise RecomputeRefused(name, "a base table holds what arrived: recompute a derived table "
                                     f"({', '.join(d.name for d in t.dependents) or 'none reads it'})")
    return t


def backfill_range(t: Table, start: float, end: float) -> tuple[float, float]:
    """The committed windows of t a backfill of `(start, end]` rewrites (warehouse.recompute);
    RecomputeRefused for an empty range or one with no committed window."""
    if not (end > start):
        raise RecomputeRefused(t.name, f"empty range: end {end} is not after start {start}")
    r = touched(start, end, lookback=0.0, granularity=t.granularity, taken=t.freshness, origin=t.origin)
    if r is None:
        raise RecomputeRefused(t.name, f"nothing computed in ({start}, {end}]: the table covers "
                                       f"({t.origin}, {t.freshness}]")
    if t.derived is not None and t.derived.stateful:  # a rebuild of the whole state from its sources' rows
        for s in t.sources:
            if s.origin is None or t.origin is None or s.origin > t.origin:
                raise RecomputeRefused(t.name, f"its state is rebuilt from its sources, but {s.name!r} holds rows "
                                               f"from {s.origin} only and the state folds rows from {t.origin}: "
                                               "a rebuild would lose rows")
    return r


def profile(t: Table) -> JobProfile:
    """t's job profile for (re)partitioning (§3.2) at its E_i(P_i) now (warehouse.blueprint.job_profile)."""
    return job_profile(t.name, t.period, t.inherited_priority, t.cost.estimate(t.period))


def take_plan(tables: list[Table], plan: TrackPlan, profiles: tuple[JobProfile, ...] | list[JobProfile]) -> None:
    """Each table takes its group in `plan` and its profile (by index): E_i(P_i) and benefit."""
    group_of = plan.group_of
    for t, p in zip(tables, profiles, strict=True):
        t.profile, t.queue.group = p, group_of[t.name]


def track_plan(sc: SchedulerConfig, tables: list[Table]) -> tuple[TrackPlan, ValueRanking, list[JobProfile]]:
    """(Re)partition (§3.2) from each table's profile at its current E_i(P_i): the plan (each table
    takes its group), the tables by decreasing benefit (policies.reservation.ValueRanking: who is
    "long", what load outranks a job) and the profiles."""
    profiles = [profile(t) for t in tables]
    plan, ranking = plan_profiles(sc, profiles, base_periods(tables))
    take_plan(tables, plan, profiles)
    return plan, ranking, profiles


def base_periods(tables: list[Table]) -> list[float | None]:
    """Each table's period if it is a base table, None for a derived one (what `plan_profiles` takes)."""
    return [t.period if t.base else None for t in tables]


def expecting(when: float, k: Table) -> bool:
    """The release expected of k at `when` is still its latest (§2.4)."""
    return not k.removed and k.last_arrival is not None and k.last_arrival + k.period == when
