"""Track reservation by lookahead (§3.1 Lookahead and §3.2 track reservation, extended).

Proportional (§3.2.3) keeps short jobs from waiting behind long ones by reserving tracks for them
statically; Lookahead (§3.1) looks at releases expected before the best job would finish but never
leaves a track idle. Freshet's default does both dynamically: before a *long* job J starts on a
track, it looks at the jobs K of higher marginal benefit expected (periodic arrivals, §2.4) before
J would end, and holds the track for them when that pays.

The rule is the exchange argument behind Max-Benefit (§3.1): a job that lands ΔF of freshness d
seconds later adds p·ΔF·d to the weighted staleness (§2.3, Fig. 2). Assign the expected jobs, in
release order, to the earliest free track, once with J started now (its track free at now + E_J)
and once with the track held (free now); the gain of holding is Σ_K p_K·ΔF_K·(wait with J −
wait without), its loss is p_J·ΔF_J times how much later J can start. Hold iff gain > loss.
Only a long job is checked: one that runs longer than the shortest period of the tables more
valuable than it, so that at least one of them is certain to be released while it runs. A job is
never kept waiting, in all, longer than it will run (the Scheduler's bound): the exchange looks at
one window at a time, and a valuable table released every few seconds would otherwise hold every
track from a long job for ever — with the bound, holding costs at most as much idle time as the job
itself, the ski-rental compromise between Lookahead's never-idle rule (§3.1) and a reserved track.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

__all__ = ["Releases", "Upcoming", "ValueRanking", "hold_for", "held_until"]

SCAN = 16  # expected releases looked at per check: a decision stays O(log n)


@dataclass(frozen=True, slots=True)
class Upcoming:
    """A job J_k expected at `release` (its table's last arrival + P_k, §2.4), as it would run then."""

    release: float
    weight: float  # p_k·ΔF_k = Ip_k·P_k
    cost: float  # E_k(P_k), seconds at the current pace


def hold_for(now: float, cost: float, weight: float, upcoming: Sequence[Upcoming], free_at: Sequence[float]) -> float | None:
    """Should the long job J (E_J = `cost`, p_J·ΔF_J = `weight`) leave this track for `upcoming`?

    `upcoming`: jobs of higher marginal benefit expected in (now, now + E_J), by release time.
    `free_at`: when each *other* track is expected free (now for an idle one). Returns the release
    time of the first expected job that needs the held track (hold it until then), or None: start J.
    """
    if not upcoming:
        return None
    started = _waits(upcoming, [*free_at, now + cost])
    held_tracks = [*free_at, now]
    held = _waits(upcoming, held_tracks)
    gain = sum(k.weight * (a - b) for k, a, b in zip(upcoming, started, held, strict=True))
    if gain <= 0:
        return None
    loss = weight * (min(held_tracks) - now)  # _waits advanced held_tracks: J starts at the first free one
    if gain <= loss:
        return None
    return next(k.release for k, a, b in zip(upcoming, started, held, strict=True) if a > b)


def _waits(upcoming: Sequence[Upcoming], tracks: list[float]) -> list[float]:
    """Each expected job's wait when it takes the earliest free track in release order; `tracks`
    (free times) is updated in place."""
    heapq.heapify(tracks)
    out = []
    for k in upcoming:
        free = heapq.heappop(tracks)
        start = max(free, k.release)
        out.append(start - k.release)
        heapq.heappush(tracks, start + k.cost)
    return out


def held_until(now: float, cost: float, weight: float, since: float, p_min: float | None,
               upcoming: Callable[[float], Sequence[Upcoming]], free_at: Callable[[], Sequence[float]]) -> float | None:
    """Hold a track from the long job J (E_J = `cost` at the current pace, p_J·ΔF_J = `weight`)?
    Checked only when J runs longer than `p_min`, the shortest period of the tables more valuable
    than it; `upcoming(horizon)` and `free_at()` are asked only then. Never longer, in all, than
    J will run (`since`: when it was first held). Until when, or None: start J."""
    if p_min is None or cost <= p_min:
        return None
    ks = upcoming(now + cost)
    if not ks:
        return None
    until = hold_for(now, cost, weight, ks, free_at())
    if until is None or until - since > cost:  # never kept waiting longer than it will run
        return None
    return until


class ValueRanking:
    """The tables by regular marginal benefit Ip_i·P_i / E_i(P_i) (§3.1), from (benefit, period,
    u_i) — period None for a derived table: the best benefit, and of the tables worth more than a
    job the shortest base period (who is *long*) and the load Σu_i (policies.chopping.chop_pays);
    `total`: the load of them all, U_tot (§3.2)."""

    __slots__ = ("_load", "_neg", "_pmin", "best", "total")

    def __init__(self, tables: Iterable[tuple[float, float | None, float]]) -> None:
        tables = list(tables)
        self.total = sum(u for _, _, u in tables)
        ranked = sorted(tables, key=lambda t: -t[0])
        self._neg = [-b for b, _, _ in ranked]
        self._pmin = list(accumulate((math.inf if p is None else p for _, p, _ in ranked), min))
        self._load = [0.0, *accumulate(u for _, _, u in ranked)]
        self.best = -self._neg[0] if self._neg else 0.0  # the best regular benefit

    def shortest_period_above(self, benefit: float) -> float | None:
        more = bisect_left(self._neg, -benefit)  # tables with a higher regular benefit
        p = self._pmin[more - 1] if more else math.inf
        return None if p == math.inf else p

    def load_above(self, benefit: float) -> float:
        return self._load[bisect_left(self._neg, -benefit)]


class Releases:
    """The next release expected of each base table — its last arrival + P_i (§2.4) — in one heap,
    walked best-first in time order without popping, at most `SCAN` entries per question.
    `current(when, item)` says whether an entry still stands (the table's latest expectation)."""

    __slots__ = ("_current", "_seq", "heap")

    def __init__(self, current: Callable[[float, Any], bool]) -> None:
        self.heap: list[tuple[float, int, Any]] = []
        self._seq = 0
        self._current = current

    def expect(self, when: float, item: Any, now: float) -> None:
        h = self.heap
        while h and h[0][0] <= now:  # past: memory stays at about one entry per table
            heapq.heappop(h)
        self._seq += 1
        heapq.heappush(h, (when, self._seq, item))

    def within(self, now: float, horizon: float, *, inclusive: bool) -> list[tuple[float, Any]]:
        """(when, item) expected in (now, horizon) — `inclusive`: (now, horizon] — in time order."""
        h, current = self.heap, self._current
        while h and (h[0][0] <= now or not current(h[0][0], h[0][2])):
            heapq.heappop(h)
        out: list[tuple[float, Any]] = []
        frontier = [(h[0][0], 0)] if h else []
        for _ in range(SCAN):
            if not frontier:
                break
            when, i = heapq.heappop(frontier)
            if when > horizon or (when == horizon and not inclusive):
                break
            if current(when, h[i][2]):
                out.append((when, h[i][2]))
            for c in (2 * i + 1, 2 * i + 2):
                if c < len(h):
                    heapq.heappush(frontier, (h[c][0], c))
        return out
