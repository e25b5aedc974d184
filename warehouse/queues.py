"""The ready queues: released jobs waiting for a track (§3.1-§3.2).

One heap per track-plan group (tracks.plan), keyed by the basic algorithm's key (§3.1,
policies.basic.policy_key), with lazy deletion: an entry `(key, version, index)` stands while its
table's version is the one it was pushed with (the caller's `valid`). A round merges the group
heads in key order, so a decision costs O(log n) per started job, not a sort of the queue; stale
entries are compacted away when they outnumber the live ones, so memory stays flat. Beside them,
the operator's urgent queue (ops.actions refresh): tables whose next job goes first, in the order
asked. Pure: no clock, no I/O; knows nothing of the Scheduler.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

__all__ = ["ReadyQueues"]

Entry = tuple  # (key, version, table index)


class ReadyQueues:
    """Heaps and counts of queued jobs per group, and the urgent queue."""

    __slots__ = ("heaps", "queued", "urgent", "valid")

    def __init__(self, valid: Callable[[Entry, int], bool]) -> None:
        self.valid = valid  # does an entry of group g still stand?
        self.heaps: list[list[Entry]] = []
        self.queued: list[int] = []  # released jobs per group (valid entries)
        self.urgent: dict[str, None] = {}  # tables whose next job an operator asked for now, in order

    def reset(self, groups: int) -> None:
        """A new track plan: empty queues for `groups` groups (the caller pushes what is pending)."""
        self.heaps = [[] for _ in range(groups)]
        self.queued = [0] * groups

    def push(self, g: int, entry: Entry) -> None:
        h = self.heaps[g]
        heapq.heappush(h, entry)
        if len(h) > 2 * self.queued[g] + 64:  # compact stale entries: memory stays flat
            h[:] = [e for e in h if self.valid(e, g)]
            heapq.heapify(h)

    def top(self, g: int) -> Entry | None:
        """The group's best valid entry (stale ones above it are dropped)."""
        h = self.heaps[g]
        while h:
            if self.valid(h[0], g):
                return h[0]
            heapq.heappop(h)
        return None

    def pop(self, g: int) -> None:
        heapq.heappop(self.heaps[g])

    def heads(self, k: int) -> list[Entry]:
        """The best `k` valid entries over all groups, in key order: a best-first walk of the
        heaps, none popped — O((k + s) log n) for s stale entries passed on the way."""
        frontier = [(h[0], g, 0) for g, h in enumerate(self.heaps) if h]
        heapq.heapify(frontier)
        out: list[Entry] = []
        while frontier and len(out) < k:
            e, g, i = heapq.heappop(frontier)
            if self.valid(e, g):
                out.append(e)
            h = self.heaps[g]
            for c in (2 * i + 1, 2 * i + 2):
                if c < len(h):
                    heapq.heappush(frontier, (h[c], g, c))
        return out

    def waiting(self, g: int) -> bool:
        return self.queued[g] > 0
