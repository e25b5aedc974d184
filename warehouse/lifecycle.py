"""A table's lifecycle as one transition table (the DataDepot paper §3.1): every state a table
can be in and every move between them. `Scheduler._transition` applies
it; a move not in it raises `SchedulerMisuse` and changes nothing.

A table is in one job state, one operator mode and one maintenance state; all move only by `TRANSITIONS`
(`transit` moves a mode or maintenance state and keeps the index of the tables it marks):

    idle ──work──▶ pending ──start──▶ running ──finish──▶ idle (──work──▶ pending …)
                      │ ──slice──▶ slicing (a time slice of one partition, §3.4)
                      │ ──recompute──▶ recomputing (rewrites committed windows, warehouse.recompute)
                      └──hold──▶ held (a track waits for more valuable jobs, policies.reservation)
    running | slicing | recomputing ──fail──▶ backoff ──retry──▶ idle
    idle ──upkeep──▶ maintaining (OPTIMIZE/VACUUM, warehouse.upkeep) ──finish──▶ idle
    idle ──adopt──▶ running | slicing | recomputing (a reload: the job its last incarnation runs, §4.4)

    active ──refresh──▶ urgent (its next job goes first) ──served──▶ active
    active | urgent ──suspend──▶ suspended (never released) ──resume──▶ active

    current ──due──▶ due (its OPTIMIZE/VACUUM waits for a track left idle) ──maintain──▶ current
    due ──undue──▶ current (no longer due: a new policy, the table removed)
"""

from __future__ import annotations

from warehouse.errors import SchedulerMisuse
from warehouse.table import BUSY, QUEUED, JobState, MaintenanceState, Mode, Table

__all__ = ["TRANSITIONS", "WORK_WAITS", "transit"]

TRANSITIONS: dict[tuple[JobState | Mode | MaintenanceState, str], JobState | Mode | MaintenanceState] = {
    # the job (§3.1)
    (JobState.IDLE, "work"): JobState.PENDING,  # a release (§3.1: r_i = now)
    (JobState.PENDING, "work"): JobState.PENDING,  # merged into the pending job (§2.4)
    (JobState.HELD, "work"): JobState.HELD,
    **{(b, "work"): b for b in BUSY},  # waits for the running job
    (JobState.BACKOFF, "work"): JobState.BACKOFF,  # waits for the back-off
    (JobState.PENDING, "hold"): JobState.HELD,  # reservation: the track it could take waits (held since now)
    (JobState.HELD, "hold"): JobState.HELD,
    **{(q, k): r for q in QUEUED for k, r in (("start", JobState.RUNNING), ("slice", JobState.SLICING), ("recompute", JobState.RECOMPUTING))},
    **{(b, "finish"): JobState.IDLE for b in BUSY},
    **{(b, "fail"): JobState.BACKOFF for b in (JobState.RUNNING, JobState.SLICING, JobState.RECOMPUTING)},  # (a failed maintenance job ends by "finish": upkeep retries it)
    (JobState.BACKOFF, "retry"): JobState.IDLE,
    (JobState.PENDING, "drain"): JobState.IDLE,  # a reconfigure took the pending work away, or the table was suspended
    (JobState.HELD, "drain"): JobState.IDLE,
    (JobState.IDLE, "upkeep"): JobState.MAINTAINING,
    (JobState.IDLE, "adopt"): JobState.RUNNING,  # a table back by a reload takes over its last incarnation's running job (§4.4)
    (JobState.IDLE, "adopt slice"): JobState.SLICING,
    (JobState.IDLE, "adopt recompute"): JobState.RECOMPUTING,  # (and its maintenance job by "upkeep")
    # the operator (ops.actions)
    (Mode.ACTIVE, "refresh"): Mode.URGENT,
    (Mode.URGENT, "refresh"): Mode.URGENT,
    (Mode.SUSPENDED, "refresh"): Mode.SUSPENDED,  # no job while suspended, even asked
    (Mode.ACTIVE, "served"): Mode.ACTIVE,
    (Mode.URGENT, "served"): Mode.ACTIVE,  # its job started, or it has nothing to load
    **{(m, "suspend"): Mode.SUSPENDED for m in Mode},
    (Mode.ACTIVE, "resume"): Mode.ACTIVE,
    (Mode.URGENT, "resume"): Mode.URGENT,
    (Mode.SUSPENDED, "resume"): Mode.ACTIVE,
    # maintenance (warehouse.upkeep, Nova, SIGMOD 2011 §2.4)
    **{(c, "due"): MaintenanceState.DUE for c in MaintenanceState},  # by its commits, or by the clock
    (MaintenanceState.DUE, "maintain"): MaintenanceState.CURRENT,  # its maintenance job started (and JobState.IDLE ──upkeep──▶ JobState.MAINTAINING)
    **{(c, "undue"): MaintenanceState.CURRENT for c in MaintenanceState},
}


WORK_WAITS = frozenset(s for s in JobState if TRANSITIONS.get((s, "work")) is s and s not in QUEUED)  # work waits
# every other state is idle or queued, and work leaves a queued job where it is (the Scheduler re-keys it only)
assert all(s is JobState.IDLE or s in QUEUED and TRANSITIONS[(s, "work")] is s for s in JobState if s not in WORK_WAITS)


def transit(t: Table, was: Mode | MaintenanceState, kind: str, marked: Mode | MaintenanceState,
         index: dict[str, None]) -> Mode | MaintenanceState:
    """t's mode or maintenance state after `kind` (TRANSITIONS); `index` keeps the tables `marked`,
    in order (the Scheduler's urgent queue and due maintenance)."""
    new = TRANSITIONS.get((was, kind))
    if new is None:
        raise SchedulerMisuse(f"table {t.name!r} is {was.value} and cannot take '{kind}'")
    if new is marked:
        index[t.name] = None
    else:
        index.pop(t.name, None)
    return new  # type: ignore[return-value]
