"""Freshness, staleness and consistency (§2.2-§2.3).

F_i(τ) is the largest event time loaded into T_i; S_i(τ) = τ − F_i(τ). Between loads S grows with
slope 1 and drops at each load, so ∫ S dτ is an exact sum of trapezoids (Fig. 2). The simulator
and the metrics both read the integral from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["WHOLE", "StalenessMeter", "floor_to", "longest_gap", "safe_freshness", "staleness_area", "time_within_target",
           "trailing_edge"]


def floor_to(t: float, granularity: float | None) -> float:
    """Floor a time to a multiple of `granularity` (no-op without one, or one too fine for a float
    to count `t` in: every float beyond 2^53 is whole already)."""
    if not granularity:
        return t
    q = t / granularity + 1e-12
    return math.floor(q) * granularity if -WHOLE < q < WHOLE else t


WHOLE = 2.0**53  # floats at or beyond this are whole numbers: floor and ceil leave them as they are


def safe_freshness(
    freshness: float, lateness: float, punctuations: Iterable[float | None] = (), previous: float | None = None
) -> float:
    """F'_i (§2.2): the time below which no more records can arrive — the largest of F − lateness,
    the sources' punctuations (`safe_through`) and what was already safe, never above F."""
    safe = freshness - lateness
    for p in punctuations:
        if p is not None and p > safe:
            safe = p
    if previous is not None and previous > safe:
        safe = previous
    return freshness if freshness < safe else safe  # (min, without the call: it is on every job's path)


def trailing_edge(freshness: Iterable[float | None]) -> float | None:
    """min_i F_i over a set of tables (§2.2); with safe freshness F'_i, the safe trailing edge.
    None while any table has never been loaded."""
    out: float | None = None
    for f in freshness:
        if f is None:
            return None
        out = f if out is None or f < out else out
    return out


def staleness_area(t0: float, t1: float, f: float) -> float:
    """∫ S dτ over [t0, t1] while the freshness stays `f`: a trapezoid, S grows with slope 1 (Fig. 2)."""
    return (t1 - t0) * ((t0 - f) + (t1 - f)) / 2.0


def time_within_target(t0: float, t1: float, f: float, target: float | None) -> float:
    """Seconds of [t0, t1] with S(τ) = τ − f ≤ target, while the freshness stays `f`."""
    if target is None:
        return 0.0
    return min(max(f + target - t0, 0.0), t1 - t0)  # S ≤ target ⇔ τ ≤ f + target


def longest_gap(marks: Iterable[float], t0: float, t1: float) -> float:
    """The longest time within [t0, t1] without a mark (sorted times a table got fresher), the
    window's ends counting as marks: a starvation (docs/operations.md §10)."""
    edges = [t0, *(m for m in marks if t0 < m < t1), t1]
    return max(b - a for a, b in zip(edges, edges[1:], strict=False))


@dataclass(slots=True)
class StalenessMeter:
    """Exact ∫ S(τ) dτ and time within a staleness target for one table (§2.3)."""

    freshness: float | None = None
    since: float = 0.0  # time of the last change
    area: float = 0.0  # ∫ S dτ up to `since`
    within: float = 0.0  # seconds with S ≤ target up to `since`
    observed: float = 0.0  # seconds observed up to `since`
    target: float | None = None

    def set_freshness(self, f: float, now: float) -> None:
        """The table's freshness became `f` at time `now`."""
        if self.freshness is not None and now > self.since:
            self.area += staleness_area(self.since, now, self.freshness)
            if self.target is not None:  # (without one, no time counts as within it)
                self.within += time_within_target(self.since, now, self.freshness, self.target)
            self.observed += now - self.since
        self.freshness = f
        self.since = self.since if self.freshness is not None and self.since > now else now  # (max, without the call)

    def start(self, f: float, now: float) -> None:
        self.freshness, self.since = f, now

    def integral(self, now: float) -> float:
        """∫ S dτ from the first known freshness to `now`."""
        if self.freshness is None or now <= self.since:
            return self.area
        return self.area + staleness_area(self.since, now, self.freshness)

    def time_within(self, now: float) -> tuple[float, float]:
        """(seconds with S ≤ target, seconds observed) up to `now`."""
        if self.freshness is None or now <= self.since:
            return self.within, self.observed
        return (
            self.within + time_within_target(self.since, now, self.freshness, self.target),
            self.observed + now - self.since,
        )

    def staleness(self, now: float) -> float | None:
        return None if self.freshness is None else now - self.freshness
