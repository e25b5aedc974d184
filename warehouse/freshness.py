"""Freshness, staleness and consistency (§2.2-§2.3).

F_i(τ) is the largest event time loaded into T_i; S_i(τ) = τ − F_i(τ). Between loads S grows with
slope 1 and drops at each load, so ∫ S dτ is an exact sum of trapezoids (Fig. 2). The simulator
and the metrics both read the integral from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["StalenessMeter", "floor_to", "safe_freshness", "trailing_edge"]


def floor_to(t: float, granularity: float | None) -> float:
    """Floor a time to a multiple of `granularity` (no-op without one)."""
    if not granularity:
        return t
    return math.floor(t / granularity + 1e-12) * granularity


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
    return min(safe, freshness)


def trailing_edge(freshness: Iterable[float | None]) -> float | None:
    """min_i F_i over a set of tables (§2.2); with safe freshness F'_i, the safe trailing edge.
    None while any table has never been loaded."""
    out: float | None = None
    for f in freshness:
        if f is None:
            return None
        out = f if out is None or f < out else out
    return out


@dataclass(slots=True)
class StalenessMeter:
    """Exact ∫ S(τ) dτ and time within a staleness target for one table (§2.3)."""

    freshness: float | None = None
    since: float = 0.0  # time of the last change
    area: float = 0.0  # ∫ S dτ up to `since`
    within: float = 0.0  # seconds with S ≤ target up to `since`
    observed: float = 0.0  # seconds observed up to `since`
    target: float | None = None

    @staticmethod
    def _segment(t0: float, t1: float, f: float) -> float:
        return (t1 - t0) * ((t0 - f) + (t1 - f)) / 2.0

    def _within(self, t0: float, t1: float, f: float) -> float:
        if self.target is None:
            return 0.0
        # S(τ) = τ − f ≤ target  ⇔  τ ≤ f + target
        return min(max(f + self.target - t0, 0.0), t1 - t0)

    def set_freshness(self, f: float, now: float) -> None:
        """The table's freshness became `f` at time `now`."""
        if self.freshness is not None and now > self.since:
            self.area += self._segment(self.since, now, self.freshness)
            self.within += self._within(self.since, now, self.freshness)
            self.observed += now - self.since
        self.freshness = f
        self.since = max(now, self.since) if self.freshness is not None else now

    def start(self, f: float, now: float) -> None:
        self.freshness, self.since = f, now

    def integral(self, now: float) -> float:
        """∫ S dτ from the first known freshness to `now`."""
        if self.freshness is None or now <= self.since:
            return self.area
        return self.area + self._segment(self.since, now, self.freshness)

    def time_within(self, now: float) -> tuple[float, float]:
        """(seconds with S ≤ target, seconds observed) up to `now`."""
        if self.freshness is None or now <= self.since:
            return self.within, self.observed
        return (
            self.within + self._within(self.since, now, self.freshness),
            self.observed + now - self.since,
        )

    def staleness(self, now: float) -> float | None:
        return None if self.freshness is None else now - self.freshness
