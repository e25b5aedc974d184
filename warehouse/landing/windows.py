"""The event-time windows of one stream's partitions, for the intake's overlap check
(docs/warehouse.md §3: a partition overlapping another's `(start, end]` is refused unless the
stream sets `allow_overlap`)."""

from __future__ import annotations

import bisect

__all__ = ["Windows"]


class Windows:
    """The `(start, end]` windows of one stream's pending and loaded partitions, sorted by start.

    `overlapping` is a binary search: the windows the intake admits are disjoint, so their ends are
    sorted too and only the window starting last before a new `end` can overlap it. (Windows
    admitted while the stream allowed overlaps may hide an older overlapping one: the check is
    exact for disjoint windows.)
    """

    __slots__ = ("_ids", "_items", "_starts")

    def __init__(self) -> None:
        self._starts: list[float] = []
        self._items: list[tuple[float, float, str]] = []
        self._ids: dict[str, float] = {}  # id → start

    def __len__(self) -> int:
        return len(self._items)

    def add(self, pid: str, start: float, end: float) -> None:
        if pid in self._ids:
            return
        i = bisect.bisect_right(self._starts, start)
        self._starts.insert(i, start)
        self._items.insert(i, (start, end, pid))
        self._ids[pid] = start

    def window(self, pid: str) -> tuple[float, float] | None:
        """`(start, end)` of `pid`, or None."""
        start = self._ids.get(pid)
        if start is None:
            return None
        i = bisect.bisect_left(self._starts, start)
        while self._items[i][2] != pid:
            i += 1
        return self._items[i][0], self._items[i][1]

    def discard(self, pid: str) -> None:
        start = self._ids.pop(pid, None)
        if start is None:
            return
        i = bisect.bisect_left(self._starts, start)
        while self._items[i][2] != pid:  # windows with the same start sit side by side
            i += 1
        del self._starts[i], self._items[i]

    def overlapping(self, start: float, end: float, pid: str) -> tuple[float, float, str] | None:
        """A window of another id that overlaps `(start, end]`, or None."""
        i = bisect.bisect_left(self._starts, end)  # windows [0, i) start before `end`
        for j in (i - 1, i - 2):  # i - 2: when i - 1 is `pid` itself (partly loaded)
            if j >= 0:
                s, e, other = self._items[j]
                if other != pid and e > start:
                    return self._items[j]
        return None
