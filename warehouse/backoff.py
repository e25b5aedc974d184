"""Tables in back-off after a failed job, by when they are retried (exponential, capped).

A heap of (until, seq, table name) with lazy deletion: an entry counts while its table is still
in back-off until then (`current` says so; names, since indices move on a reconfigure); stale
entries leave at the top by `prune` (the owner's change of state), never by a query. Pure: no
clock, no I/O; knows nothing of the Scheduler.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = ["Backoffs", "backoff_for"]

T = TypeVar("T")


def backoff_for(failures: int, base: float, ceiling: float) -> float:
    """Seconds before the retry after `failures` failures in a row: base·2^(failures−1), capped at
    `ceiling` — at any count: the doubling is compared with the ceiling in logarithms, so no power
    of two is taken that a float cannot hold (base·2^1024 is not one)."""
    if failures <= 1 or not base < ceiling:
        return min(base, ceiling)
    doublings = failures - 1
    if doublings > _FLOAT_RANGE or doublings >= math.log2(ceiling) - math.log2(base):
        return ceiling
    return math.ldexp(base, doublings)  # base·2^doublings < ceiling: a finite float


_FLOAT_RANGE = 2100  # binary exponents of positive finite floats span less than this (-1074 … 1023)


class Backoffs:
    __slots__ = ("heap",)

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, str]] = []

    def push(self, until: float, seq: int, name: str) -> None:
        heapq.heappush(self.heap, (until, seq, name))

    def expired(self, now: float, current: Callable[[str, float], T | None]) -> Iterator[T]:
        """The tables whose back-off ended by `now`, in expiry order, each asked of `current` as
        its entry leaves (a generator: the caller retries one before the next is looked at)."""
        h = self.heap
        while h and h[0][0] <= now:
            until, _, name = heapq.heappop(h)
            if (t := current(name, until)) is not None:
                yield t

    def prune(self, current: Callable[[str, float], object | None]) -> None:
        """Stale entries at the top leave (a change of state: the Scheduler calls it in `handle`),
        so that `next` finds the earliest current one on top."""
        h = self.heap
        while h and current(h[0][2], h[0][0]) is None:
            heapq.heappop(h)

    def next(self) -> float | None:
        """The earliest back-off, if any: the top entry, current since the last `prune`. A query."""
        return self.heap[0][0] if self.heap else None
