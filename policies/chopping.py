"""Update chopping (§3.4): a job loads at most c·P_i of freshness delta, never less than one
partition, so a backlog after overload is loaded in several short jobs instead of one long one."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T", bound=Any)

__all__ = ["chop_count", "chop_window"]


def chop_count(
    pending: Sequence[T], freshness: float, period: float, c: float | None, end: Callable[[T], float] = float
) -> int:
    """How many of the pending partitions (sorted by `end`) the next job loads: the longest prefix
    ending within c·P_i of the current freshness, and at least one. O(log n)."""
    if not pending:
        return 0
    if c is None:
        return len(pending)
    return max(1, bisect_right(pending, freshness + c * period, key=end))


def chop_window(start: float, edge: float, period: float, c: float | None, granularity: float | None) -> float:
    """End of a derived job's window (start, end] with end ≤ edge: at most c·P_i long, floored to
    the granularity, never less than one granule (one step of the source)."""
    if c is None:
        return edge
    end = min(edge, start + c * period)
    if granularity:
        floored = (end // granularity) * granularity
        end = floored if floored > start else min(edge, ((start // granularity) + 1) * granularity)
    return end
