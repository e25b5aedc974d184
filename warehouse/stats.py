"""Frozen snapshots of the Scheduler's state, read by metrics, the HTTP API and the simulator.

`Scheduler.stats(now)` builds one; nothing in here refers back to the live engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from tracks.plan import TrackPlan
from warehouse.board import TrackBoard
from warehouse.events import StartJob, _quick_init
from warehouse.rollout import RolloutStats
from warehouse.table import QUEUED, Mode, Table
from warehouse.upkeep import UpkeepStats

__all__ = ["SchedulerStats", "TableStats", "TrackPlanStats", "TrackStats", "backlog", "plan_row", "snapshot",
           "table_stats", "track_rows"]


@_quick_init  # (a snapshot builds one row per table: each field set through its own slot)
@dataclass(frozen=True, slots=True, kw_only=True)
class TableStats:
    name: str
    kind: str  # "base" | "derived" | "stateful"
    state: str  # "idle" | "pending" | "running" | "backoff"
    priority: float  # p_i
    inherited_priority: float  # Ip_i (§3.3)
    period: float  # P_i (§2.4)
    freshness: float | None  # F_i; None until the first load
    safe_freshness: float | None  # F'_i (§2.2)
    arrived: float | None  # largest event time arrived (base) / safe trailing edge of sources (derived)
    staleness: float | None  # now − F_i
    weighted_staleness: float  # p_i ∫ S_i dτ so far (§2.3)
    backlog: float  # arrived − loaded event time, including what a running job is loading
    pending_delta: float  # the part of the backlog no job has taken yet (not chopped, §3.4)
    pending_partitions: int  # arrived partitions not committed yet, including the running job's
    running_partitions: int  # of which the running job is loading
    running_job: int | None
    running_track: int | None
    jobs_released: int
    jobs_overdue: int  # released jobs started as overdue (scheduler.overdue_periods)
    jobs_completed: int
    jobs_failed: int
    consecutive_failures: int
    delta_f_total: float  # Σ ΔF over completed jobs
    alpha: float  # learned α (§2.4)
    beta: float  # learned β
    last_result: str | None  # "ok" | "failed: …" | "ok (recovered)": no job yet, loaded per the Delta log
    target_staleness: float | None
    time_within_target: float  # seconds spent with staleness ≤ target
    observed_time: float  # seconds since the table's first load
    home_tracks: tuple[int, ...]
    origin: float | None = None  # the earliest event time it covers (the start of its first load)
    suspended: bool = False  # an operator suspended it: no jobs start (ops.actions)
    refresh_requested: bool = False  # an operator's refresh waits for the table's job to start
    upkeep: UpkeepStats | None = None  # maintenance: OPTIMIZE/VACUUM counts and times (warehouse.upkeep)
    # derived tables (warehouse.recompute): how they refresh and what is left to rewrite
    refresh_mode: str | None = None  # "incremental" | "full"
    sql_version: str | None = None  # the current SQL's version (warehouse.sqltext.sql_version)
    windows_old_sql: int = 0  # committed windows computed by an older SQL, not rewritten yet
    recompute_pending: float = 0.0  # seconds of committed windows to recompute (late, backfill, old SQL)
    windows_recomputed: int = 0  # windows rewritten by recompute jobs since start
    recompute_jobs: int = 0
    late_rows_unfolded: int = 0  # stateful: rows of late loads its state has not folded yet


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackStats:
    track: int
    running_job: int | None
    running_table: str | None
    busy_time: float  # seconds busy so far
    clusters: tuple[int, ...]  # clusters / EDF partitions whose home this track is
    free: bool  # a free track (§3.2.1)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackPlanStats:
    partitioner: str
    tracks: int
    clusters: tuple[tuple[str, ...], ...]  # tables per cluster (Proportional) or per home track (EDF-P)
    home_tracks: tuple[tuple[int, ...], ...]  # per cluster
    free_tracks: tuple[int, ...]
    utilization: float  # U_tot = Σ E_i(P_i)/P_i
    feasible: bool
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerStats:
    now: float
    tables: tuple[TableStats, ...]
    tracks: tuple[TrackStats, ...]
    plan: TrackPlanStats
    weighted_staleness: float  # Σ_i p_i ∫ S_i dτ (§2.3)
    jobs_released: int
    jobs_completed: int
    jobs_failed: int
    pending_jobs: int
    running_jobs: int
    events: int
    rollout: RolloutStats | None = None  # policy rollout's decisions, overrides and fallbacks (warehouse.rollout)


def backlog(t: Table, job: StartJob | None) -> tuple[float, float]:
    """(backlog, pending ΔF) of a table in event-time seconds, neither chopped (§3.4); `job`: the
    one it runs.

    backlog: everything arrived (base: the newest partition's end; derived: the sources' safe
    trailing edge) minus what is committed (F, or where the table starts before its first
    load), including what a running job is loading now. pending ΔF: the part of the backlog
    no job has taken yet (beyond the running job's new freshness). Both ≥ 0.
    """
    if t.log is not None:
        head = t.log.arrived
        floor = t.freshness if t.freshness is not None else t.log.floor()  # never loaded: earliest start
    else:
        head = t.derived.edge if t.derived is not None else None
        floor = t.freshness if t.freshness is not None else t.origin
    if head is None or floor is None:
        return 0.0, 0.0
    total = max(0.0, head - floor)
    taken = floor if job is None else max(floor, job.new_freshness)
    if t.log is not None:
        head = t.log.pending[-1].end if t.log.pending else taken
    return total, max(0.0, head - taken)


def table_stats(t: Table, now: float, job: StartJob | None, home: tuple[int, ...], upkeep: UpkeepStats | None,
                *, recovered: bool) -> TableStats:
    """A frozen row for table `t` at `now`; `job`: the one it runs; `recovered`: its freshness came
    from storage (no job yet is then "ok (recovered)"). (Built by position, in `TableStats`' field
    order, `_ROW`: a snapshot builds one per table.)"""
    total, pending_delta = backlog(t, job)
    meter = t.meter
    within, observed = meter.time_within(now)
    log, derived_state, mode, counts = t.log, t.derived, t.mode, t.jobs
    if derived_state is not None:
        d = derived_state.stats(t.granularity, t.period)
        derived = (d["refresh_mode"], d["sql_version"], d["windows_old_sql"], d["recompute_pending"],
                   d["windows_recomputed"], d["recompute_jobs"], d["late_rows_unfolded"])
    else:
        derived = _BASE
    return _row(
        t.name,
        "base" if t.base else "stateful" if derived_state is not None and derived_state.stateful else "derived",
        t.state.phase, t.priority, t.inherited_priority, t.period, t.freshness, t.safe,
        log.arrived if log is not None else derived_state.edge if derived_state is not None else None,
        meter.staleness(now), t.priority * meter.integral(now), total, pending_delta,
        len(log.pending) + len(log.running) if log is not None else 0,
        len(log.running) if log is not None else 0,
        job.job_id if job else None, job.track if job else None,
        counts.released, counts.overdue, counts.completed, counts.failed, counts.consecutive_failures, counts.delta_f_total,
        t.cost.alpha, t.cost.beta,
        counts.last_result if counts.last_result is not None or t.freshness is None or not recovered
        else "ok (recovered)",
        t.target, within, observed, home, t.origin, mode is Mode.SUSPENDED, mode is Mode.URGENT, upkeep,
        *derived)


_ROW = ("name", "kind", "state", "priority", "inherited_priority", "period", "freshness", "safe_freshness", "arrived",
        "staleness", "weighted_staleness", "backlog", "pending_delta", "pending_partitions", "running_partitions",
        "running_job", "running_track", "jobs_released", "jobs_overdue", "jobs_completed", "jobs_failed", "consecutive_failures",
        "delta_f_total", "alpha", "beta", "last_result", "target_staleness", "time_within_target", "observed_time",
        "home_tracks", "origin", "suspended", "refresh_requested", "upkeep", "refresh_mode", "sql_version",
        "windows_old_sql", "recompute_pending", "windows_recomputed", "recompute_jobs", "late_rows_unfolded")
assert tuple(f.name for f in fields(TableStats)) == _ROW, "table_stats builds rows in TableStats' field order"
_row = TableStats._trusted  # type: ignore[attr-defined]
_BASE = (None, None, 0, 0.0, 0, 0, 0)  # a base table's derived fields: TableStats' defaults


def track_rows(board: TrackBoard, plan: TrackPlan, now: float) -> tuple[TrackStats, ...]:
    """One row per track: its job, busy time so far, the clusters it serves (§3.2)."""
    rows = []
    for i in range(board.n):
        on = board.on(i)
        rows.append(TrackStats(track=i, running_job=on.job_id if on is not None else None,
                               running_table=on.table if on is not None else None,
                               busy_time=board.busy_time(i, now), clusters=plan.owners.get(i, ()),
                               free=i in plan.free))
    return tuple(rows)


def plan_row(p: TrackPlan) -> TrackPlanStats:
    """The track plan (§3.2) as shown."""
    return TrackPlanStats(partitioner=p.partitioner, tracks=p.n_tracks, clusters=tuple(tuple(g) for g in p.groups),
                          home_tracks=tuple(p.home), free_tracks=p.free, utilization=p.utilization,
                          feasible=p.feasible, note=p.note)


def snapshot(tables: list[Table], board: TrackBoard, plan: TrackPlan, upkeep: Callable[[str], UpkeepStats | None],
             now: float, weighted_staleness: float | None = None, *, recovered: bool, released: int, completed: int,
             failed: int, events: int, rollout: RolloutStats | None = None) -> SchedulerStats:
    """The Scheduler's snapshot at `now`: its tables (by index), tracks and plan, and its counts;
    Σ_i p_i ∫ S_i dτ (§2.3) summed from the rows unless given."""
    rows = []
    pending_jobs = 0
    for t in tables:
        pending_jobs += t.state in QUEUED
        rows.append(table_stats(t, now, board.by_table.get(t.name), plan.home[t.queue.group], upkeep(t.name),
                                recovered=recovered))
    return SchedulerStats(
        now=now,
        tables=tuple(rows),
        tracks=track_rows(board, plan, now),
        plan=plan_row(plan),
        weighted_staleness=sum(r.weighted_staleness for r in rows) if weighted_staleness is None else weighted_staleness,
        jobs_released=released,
        jobs_completed=completed,
        jobs_failed=failed,
        pending_jobs=pending_jobs,
        running_jobs=len(board.jobs),
        events=events,
        rollout=rollout,
    )
