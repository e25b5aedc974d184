"""Update chopping (§3.4): a job loads at most c·P_i of freshness delta, never less than one
partition, so a backlog after overload is loaded in several short jobs instead of one long one."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from warehouse.freshness import floor_to

T = TypeVar("T", bound=Any)

__all__ = ["ALPHA_SHARE", "AUTO_C", "INVERSION", "OVERLOAD", "SLOW", "Pace", "chop_count", "chop_pays", "chop_window", "time_slice"]

AUTO_C = 3.0  # the paper's c (§4.7), used while chopping pays
SLOW = 1.5  # recent observed/estimated durations above this: a transient slowdown
INVERSION = 2.0  # a job this many times less valuable per second than the best table's: an inversion
OVERLOAD = 1.05  # offered load clearly above capacity (its estimate is noisy by a few percent)
ALPHA_SHARE = 0.01  # otherwise a job is still chopped where a longer one would save under 1% in α


def chop_count(
    pending: Sequence[T], freshness: float, period: float, c: float | None, end: Callable[[T], float] = float
) -> int:
    """How many of the pending partitions (sorted by `end`) the next job loads: the longest prefix
    ending within c·P_i of the current freshness, and at least one. O(log n)."""
    if not pending:
        return 0
    if c is None:
        return len(pending)
    n = bisect_right(pending, freshness + c * period, key=end)
    return n if n > 1 else 1


def chop_window(start: float, edge: float, period: float, c: float | None, granularity: float | None) -> float:
    """End of a derived job's window (start, end] with end ≤ edge: at most c·P_i long, floored to
    the granularity, never less than one granule (one step of the source)."""
    if c is None:
        return edge
    end = min(edge, start + c * period)
    if granularity:
        floored = floor_to(end, granularity)
        end = floored if floored > start else min(edge, floor_to(start, granularity) + granularity)
    return end



class Pace:
    """How fast jobs run compared with the cost model (§2.4). `now`: observed / estimated duration
    as an exponentially weighted mean over the last few completions of tables whose cost model has
    settled (`settled`: CostModel.has_settled) — 1 when the model predicts well, S while a slowdown
    of factor S lasts; a prior's error is the model's, not a slowdown (240 tables on two cores ran
    2-5× their prior all run, most tables a job or two each). `long`: Σ observed / Σ estimated over
    many completions, all of them (time spent per unit of estimated work, the mean slowdown m of §4.1)."""

    __slots__ = ("now", "_observed", "_estimated")

    NOW_WEIGHT = 0.25
    LONG_WEIGHT = 0.001
    MAX_RATIO = 1e6  # one job this many times slower than estimated says no more than this

    def __init__(self) -> None:
        self.now = 1.0
        self._observed = self._estimated = 0.0

    @property
    def long(self) -> float:
        return self._observed / self._estimated if self._estimated > 0 else 1.0

    def observe(self, duration: float, estimate: float, settled: bool) -> None:
        if estimate > 0 and duration >= 0:
            ratio = duration / estimate  # (an estimate near zero: at most MAX_RATIO, never inf)
            if settled:
                self.now += self.NOW_WEIGHT * ((ratio if ratio < self.MAX_RATIO else self.MAX_RATIO) - self.now)
            self._observed += self.LONG_WEIGHT * (duration - self._observed)
            self._estimated += self.LONG_WEIGHT * (estimate - self._estimated)


def chop_pays(
    pace: Pace, load: float, benefit: float, best_benefit: float, alpha: float = 0.0, beta_period: float = 0.0,
    load_above: Callable[[float], float] | None = None, tracks: int = 1,
) -> float | None:
    """`chop: auto` (§3.4 extended): c for the next job, or None to load everything pending.

    A chopped job pays α_i once more for the rest of its backlog. Chop to c·P_i, the paper's c:

    1. During a transient slowdown (`pace.now` > SLOW, the §3.4 "transient overload"): a job's pace
       is set when it starts, so a long job started while slow stays slow after the slowdown ends;
       short pieces stop paying the slowdown when it stops (`pace.now` counts settled cost models
       only: a prior's error is no slowdown, `Pace`).
    2. While capacity is spare (the offered load U_tot·m/N, m from observed durations, below
       OVERLOAD): splitting a backlog ΔF into a first piece x and the rest lands x earlier by
       β_i·(ΔF − x) and the rest later by α_i (plus whatever runs in between, which gains as much),
       so it pays once β_i·x > α_i — the exchange argument of §3.1 — and the extra α comes out of
       idle time; more valuable jobs released meanwhile (arrivals are periodic, §2.4) start after
       the first piece. c is raised to α_i/(β_i·P_i) where c periods would not pay their α.

    In sustained overload (load ≥ OVERLOAD) each extra α is capacity lost for good: a priority
    inversion — a job INVERSION times less valuable per second (p_i·ΔF_i/E_i(ΔF_i), §3.1) than the
    best table's typical p_k·P_k/E_k(P_k), a backlog that runs only when nothing better waits — is
    loaded whole so that it is amortised (§2.4), as long as the other tracks carry the tables worth
    more than it (their load Σu_k·m, `load_above(benefit)`·m, at most tracks − 1); where they cannot
    (few tracks), the whole backlog would hold a track they need, so it is chopped to the paper's c.
    Any other job is chopped only where a longer one would save less than ALPHA_SHARE of its cost in
    α, c = α_i / (ALPHA_SHARE·β_i·P_i) periods (at least AUTO_C): a slowdown that begins with a
    longer job would hold the track for its whole length, and is seen only when jobs finish.
    """
    if pace.now > SLOW:
        return AUTO_C
    if load < OVERLOAD:
        return max(AUTO_C, alpha / beta_period) if beta_period > 0 else AUTO_C  # a piece pays its α: β·c·P > α
    if beta_period <= 0:
        return None  # a piece would cost as much as the whole
    if benefit * INVERSION < best_benefit:
        above = load_above(benefit) * pace.long if load_above is not None else 0.0
        return AUTO_C if above > tracks - 1 else None
    return max(AUTO_C, alpha / (ALPHA_SHARE * beta_period))


def time_slice(loaded: float, partition_end: float, period: float, c: float | None) -> float | None:
    """Time-sliced loading: where to cut one partition that alone holds more than c·P_i past what
    is loaded of it (a backfill, or a partition longer than the period). The job loads the rows
    with loaded < ts ≤ cut; the rest stays pending for the next slice, each its own commit with its
    own watermark (docs/warehouse.md §5). None: load the whole partition."""
    if c is None:
        return None
    cut = loaded + c * period
    return cut if cut < partition_end else None
