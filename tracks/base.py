"""What every partitioner (§3.2) shares: job profiles, the `TrackPlan` protocol, and the grouping
fields a plan carries. Track numbers are 0-based."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

__all__ = ["EPS", "HasRemaining", "JobProfile", "Plan", "TrackPlan", "hashable"]

EPS = 1e-9

HasRemaining = Callable[[int], bool]


@dataclass(frozen=True, slots=True)
class JobProfile:
    """What partitioning needs of table i: P_i and E_i(P_i) (§3.2.1)."""

    table: str
    period: float
    e_period: float
    benefit: float = 0.0  # Ip_i·P_i / E_i(P_i), the marginal benefit of a regular job (§3.1); for `auto`

    @property
    def u(self) -> float:
        """u_i = E_i(P_i) / P_i."""
        return self.e_period / self.period if self.period > 0 else 0.0


class TrackPlan(Protocol):
    """A partition of the tables into groups, each served by some tracks (§3.2).

    `place(table, available, has_remaining)` answers the track the table's job may start on now,
    or None to delay it; `has_remaining(group)` tells whether released jobs of that group are still
    waiting further down the sorted list (the non-aggressive checks). `could_use(g, available)` is a
    cheap filter: might some job of group g start on one of `available`?
    """

    partitioner: str
    n_tracks: int
    aggressive: bool
    group_of: dict[str, int]
    groups: list[list[str]]
    home: list[tuple[int, ...]]
    free: tuple[int, ...]
    owners: dict[int, tuple[int, ...]]
    utilization: float
    feasible: bool
    note: str
    uniform: bool

    def place(self, table: str, available: Collection[int], has_remaining: HasRemaining) -> int | None: ...

    def could_use(self, g: int, available: Collection[int]) -> bool: ...

    def behaviour(self) -> tuple[Any, ...]: ...


@dataclass
class Plan:
    """The grouping fields every plan has; subclasses add `place` and `_usable`."""

    partitioner: str
    n_tracks: int
    aggressive: bool
    groups: list[list[str]]  # tables per group, in plan order
    home: list[tuple[int, ...]]  # home tracks per group
    free: tuple[int, ...]
    utilization: float
    feasible: bool = True
    note: str = ""
    owners: dict[int, tuple[int, ...]] = field(default_factory=dict)  # track → groups homed there
    uniform: bool = True  # placement depends on the group only, not on the job
    group_of: dict[str, int] = field(init=False)  # table → its group, derived from `groups`

    def __post_init__(self) -> None:
        self.group_of = {t: g for g, names in enumerate(self.groups) for t in names}

    def place(self, table: str, available: Collection[int], has_remaining: HasRemaining) -> int | None:
        raise NotImplementedError

    def _usable(self, g: int) -> set[int]:
        """Tracks beyond home and free ones that a job of group g could be placed on."""
        return set()

    def could_use(self, g: int, available: Collection[int]) -> bool:
        return not self.usable[g].isdisjoint(available)

    def behaviour(self) -> tuple[Any, ...]:
        """What the Scheduler reads of this plan, hashable: its groups and what `place` and
        `could_use` read. Two plans alike place every job alike, whichever partitioner and settings
        made them (their name, note, utilization and feasibility, read by the stats alone, aside);
        the tuner's screen simulates one setting of each (sim.autotune.alike)."""
        return (type(self).__name__, self.n_tracks, hashable(self.groups), hashable(self.home), self.free,
                self.uniform, *self._acts())

    def _acts(self) -> tuple[Any, ...]:
        """What this kind of plan's `place` and `_usable` read besides the groups, home and free tracks."""
        return ()

    @cached_property
    def usable(self) -> list[frozenset[int]]:
        """Per group, every track one of its jobs could ever be placed on."""
        return [frozenset(self._usable(g) | set(self.home[g]) | set(self.free)) for g in range(len(self.groups))]


def hashable(value: Any) -> Any:
    """`value` with its lists and dicts made tuples (dicts as sorted items): hashable."""
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(hashable(v) for v in value)
    return value
