"""The ready queues: released jobs waiting for a track (§3.1-§3.2).

One heap per track-plan group (tracks.plan), keyed by the basic algorithm's key (§3.1,
policies.basic.policy_key), with lazy deletion: an entry `(*key, version, index)` stands while its
table's version is the one it was pushed with (the caller's `valid`). A round merges the group
heads in key order, so a decision costs O(log n) per started job, not a sort of the queue; stale
entries are compacted away when they outnumber the live ones, so memory stays flat. Beside them,
the operator's urgent queue (ops.actions refresh): tables whose next job goes first, in the order
asked. Pure: no clock, no I/O; knows nothing of the Scheduler.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from tracks.plan import TrackPlan
from warehouse.table import QUEUED, Table

__all__ = ["ReadyQueues", "now_track"]


def now_track(plan: TrackPlan, name: str, available: set[int], waiting: Callable[[int], bool]) -> int:
    """The track a job that goes first ("now": a refresh, an overdue job) takes: one of its table's
    own tracks (the plan), else any free one."""
    track = plan.place(name, available, waiting)
    return track if track is not None else min(available)

Entry = tuple  # (*key, version, table index): flat, so a heap compares one tuple, not a key tuple inside


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
        if len(h) > 2 * self.queued[g] + 16:  # compact stale entries: memory stays flat, the heap shallow
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

    def urgent_first(self, tables: dict[str, Table], plan: TrackPlan, available: set[int]) -> Iterator[tuple[Table, int]]:
        """The refreshes asked (ops.actions), in the order asked: each queued table with the track
        its job takes, its own tracks first (the plan), else any free one — "now". A table gone (a
        reconfigure) leaves the urgent queue. The caller starts each job and takes its track from
        `available` before it asks for the next."""
        for name in list(self.urgent):
            if not available:
                return
            t = tables.get(name)
            if t is None or t.removed:
                del self.urgent[name]
                continue
            if t.state not in QUEUED:
                continue  # running (its next job goes first) or waiting for its sources
            yield t, now_track(plan, name, available, self.waiting)

    def serve(self, plan: TrackPlan, available: set[int], names: list[str],
              take: Callable[[Entry, int], bool]) -> None:
        """One round (§3.2): the group heads merged in key order (`names`: the tables by the
        index in an entry), each asking the plan for one of
        the `available` tracks; `take(entry, track)` starts the job there (True: the track is
        taken) or holds the track for more valuable jobs expected (False: the job waits, the
        next one may be short). A job the plan has no track for waits too; with a uniform plan
        its group is blocked until another group runs out (non-aggressive checks, §3.2.3)."""
        if len(self.heaps) == 1:
            self._serve_one(plan, available, names, take)
            return
        heaps, valid, heappop, heappush = self.heaps, self.valid, heapq.heappop, heapq.heappush
        could_use, place = plan.could_use, plan.place
        aside: list[tuple[int, Entry]] = []
        aside_n = [0] * len(heaps)
        blocked: set[int] = set()

        def has_remaining(g: int) -> bool:
            return self.queued[g] - aside_n[g] > 0

        def top(g: int) -> Entry | None:  # the group's best valid entry (`top`, inlined)
            h = heaps[g]
            while h:
                if valid(h[0], g):
                    return h[0]
                heappop(h)
            return None

        # (the head it was valid as, group): a group is in the merge once at a time; its head
        # stays valid while the round serves others — a round changes only the tables it takes
        merge: list[tuple] = []
        for g in range(len(heaps)):
            first = top(g)
            if first is not None and could_use(g, available):
                merge.append((first, g))
        if len(merge) > 1:
            heapq.heapify(merge)
        while available and merge:
            entry, g = heappop(merge)
            h = heaps[g]
            if not h or h[0] is not entry:  # (pushed meanwhile: look again)
                entry = top(g)
                if entry is None:
                    continue
            heappop(h)
            track = place(names[entry[-1]], available, has_remaining)
            nxt: Entry | None
            if track is not None and take(entry, track):
                available.discard(track)
                if not available:  # the round is over: nothing more can start
                    break
                nxt = top(g)
            else:
                aside.append((g, entry))
                aside_n[g] += 1
                if track is None and plan.uniform:
                    blocked.add(g)
                    nxt = None
                else:
                    nxt = top(g)
            if nxt is not None and could_use(g, available):
                heappush(merge, (nxt, g))
            elif blocked and not has_remaining(g):
                # a group ran out: non-aggressive checks may now pass for the blocked ones
                for b in sorted(blocked):
                    first = top(b)
                    if first is not None and could_use(b, available):
                        heappush(merge, (first, b))
                blocked.clear()
        for g, entry in aside:
            self.push(g, entry)

    def _serve_one(self, plan: TrackPlan, available: set[int], names: list[str],
                   take: Callable[[Entry, int], bool]) -> None:
        """`serve` where the plan has one group (Global, one cluster): its heap in key order, no
        merge — the same decisions, fewer steps per round."""
        queued = self.queued
        aside: list[Entry] = []

        def has_remaining(g: int) -> bool:
            return queued[g] - len(aside) > 0

        # (methods called where used, not bound first: a round usually starts one job)
        entry = self.top(0)
        while entry is not None and plan.could_use(0, available):
            heapq.heappop(self.heaps[0])
            track = plan.place(names[entry[-1]], available, has_remaining)
            if track is not None and take(entry, track):
                available.discard(track)
                if not available:
                    break
            else:
                aside.append(entry)
                if track is None and plan.uniform:
                    break  # (no other group may run out: the round is over)
            entry = self.top(0)
        for entry in aside:
            self.push(0, entry)
