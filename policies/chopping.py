"""Update chopping (§3.4): a job loads at most c·P_i of freshness delta, never less than one
partition, so a backlog after overload is loaded in several short jobs instead of one long one."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["chop_count", "chop_window"]


def chop_count(ends: Sequence[float], freshness: float, period: float, c: float | None) -> int:
    """How many of the pending partitions (sorted by end) the next job loads.

    Takes the longest prefix whose last end is within c·P_i of the current freshness; at least one.
    """
    if not ends:
        return 0
    if c is None:
        return len(ends)
    limit = freshness + c * period
    n = 0
    for e in ends:
        if e > limit and n > 0:
            break
        n += 1
    return n


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
