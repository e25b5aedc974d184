"""The round's look ahead: Max Benefit with Lookahead's first pick (§3.1) and track reservation's
hold (policies.reservation), both against the releases expected next (§2.4); and who picks a
round's first job (`first_pick`: Lookahead, rollout — warehouse.rollout, beyond the paper — or none).

Queries only: each returns its answer — the table to start first, or until when a track waits —
and changes nothing; the Scheduler applies it. Knows nothing of the Scheduler (rollout does).
"""

from __future__ import annotations

from collections.abc import Callable

from policies.basic import Candidate, Expected, choose_with_lookahead
from policies.reservation import Releases, Upcoming, held_until
from warehouse.config import SchedulerConfig
from warehouse.nextjob import NextJob
from warehouse.queues import ReadyQueues
from warehouse.rollout import Forced, Rollout
from warehouse.table import JobState, Mode, Table

__all__ = ["LOOK", "LOOKAHEAD", "FirstPick", "first_pick", "hold_until", "lookahead_first", "lookahead_pick"]

LOOK = 10  # jobs Lookahead weighs against the releases expected while the first runs (§3.1)
LOOKAHEAD = "lookahead"  # the Scheduler's first pick under `policy: lookahead` (`lookahead_first`)
FirstPick = str | Rollout | Forced | None  # who picks a round's first job, before the base rule's round


def first_pick(sc: SchedulerConfig, was: FirstPick) -> FirstPick:
    """Who picks a round's first job under `sc`: Lookahead (§3.1), rollout (warehouse.rollout: `was`'s
    counts carry over when it was rollout too, so a reload keeps them), or none (the base rule's round)."""
    if sc.policy == LOOKAHEAD:
        return LOOKAHEAD
    if sc.policy == "rollout":
        return Rollout(sc.rollout, was.stats if isinstance(was, Rollout) else None)
    return None


def lookahead_pick(ordered: list[Candidate], releases: Releases, now: float) -> str | None:
    """Max Benefit with Lookahead (§3.1): the table whose job should go first, weighing the best
    released jobs `ordered` (best first) against the releases expected before the best would end
    (at most `policies.reservation.SCAN` of them); None: the best one, as without Lookahead."""
    horizon = now + ordered[0].cost
    expected = [
        Expected(table=t.name, release=when, priority=t.inherited_priority, delta_f=t.period,
                 cost=t.cost.estimate(t.period))
        for when, t in releases.within(now, horizon, inclusive=True)
        if t.base and t.state is JobState.IDLE and t.mode is not Mode.SUSPENDED
    ]
    if not expected:
        return None
    chosen = choose_with_lookahead(ordered, expected, now)
    return None if chosen.table == ordered[0].table else chosen.table


def lookahead_first(queues: ReadyQueues, nextjob: NextJob, tables: list[Table], releases: Releases,
                    now: float) -> str | None:
    """`first_pick` over the best `LOOK` released jobs of the ready `queues` (`tables`: by index). The
    heads are walked best-first in their heaps, none popped: O((k + s) log n) for k entries taken
    and s stale ones passed (compaction, `ReadyQueues.push`, keeps s below the queue's length + 64)."""
    valid = queues.heads(LOOK)
    if not valid:
        return None
    return lookahead_pick([nextjob.candidate(tables[e[-1]])[0] for e in valid], releases, now)


def hold_until(t: Table, benefit: float, nextjob: NextJob, releases: Releases, pace: float,
               free_at: Callable[[], list[float]], now: float) -> float | None:
    """Track reservation by lookahead (policies.reservation): until when should a track wait for
    jobs of higher marginal benefit expected before t's long job (`nextjob.shape`) would end? None:
    start it. `free_at`: when each other track is expected free."""
    p_min = nextjob.ranking.shortest_period_above(benefit)
    if p_min is None:
        return None
    shape = nextjob.shape(t)
    delta = shape.new_freshness - (t.freshness if t.freshness is not None else shape.start)

    def upcoming(horizon: float) -> list[Upcoming]:  # idle tables worth more, expected before it ends
        return [Upcoming(when, k.inherited_priority * k.period, k.profile.e_period * pace)
                for when, k in releases.within(now, horizon, inclusive=False)
                if k.profile.benefit > benefit and k.state is JobState.IDLE]

    return held_until(now, t.cost.estimate(shape.work) * pace, t.inherited_priority * delta,
                      t.queue.held_since if t.state is JobState.HELD else now, p_min, upcoming, free_at)
