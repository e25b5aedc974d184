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
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Upcoming", "hold_for"]


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
