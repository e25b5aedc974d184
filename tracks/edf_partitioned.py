"""EDF-Partitioned with track promotion (§3.2.1-§3.2.2): one home track per packed group."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracks.base import EPS, HasRemaining, JobProfile, Plan, hashable

__all__ = ["EdfPartitionedPlan", "pack_edf", "plan_edf_partitioned", "promotable"]


@dataclass
class EdfPartitionedPlan(Plan):
    promote: dict[str, tuple[int, ...]] = field(default_factory=dict)  # tracks each table may be promoted to

    def place(self, table: str, available: Collection[int], has_remaining: HasRemaining) -> int | None:
        """§3.2.2: (a) home track; (b) a free track; (c) a track it can be promoted to that is
        available and (non-aggressive) has no released job of its own still waiting."""
        (home,) = self.home[self.group_of[table]]
        if home in available:
            return home
        for t in self.free:
            if t in available:
                return t
        for r in self.promote.get(table, ()):
            if r in available and (self.aggressive or not any(has_remaining(h) for h in self.owners.get(r, ()))):
                return r
        return None

    def _usable(self, g: int) -> set[int]:
        return {r for t in self.groups[g] for r in self.promote.get(t, ())}

    def _acts(self) -> tuple[Any, ...]:
        return (hashable(self.promote), hashable(self.owners), self.aggressive if any(self.promote.values()) else None)


def pack_edf(profiles: Sequence[JobProfile]) -> list[list[JobProfile]]:
    """Greedy packing: by increasing period, open a new track whenever adding the job would break
    U_r ≤ 1 − E_max_r / P_min_r (§3.2.1)."""
    tracks: list[list[JobProfile]] = []
    for p in sorted(profiles, key=lambda p: (p.period, p.e_period, p.table)):
        if tracks and promotable(p, tracks[-1]):
            tracks[-1].append(p)
            continue
        tracks.append([p])
    return tracks


def promotable(p: JobProfile, track: Sequence[JobProfile]) -> bool:
    """J_i may be promoted to track r if U_r + u_i ≤ 1 − max(E_max_r, E_i(P_i)) / min(P_min_r, P_i).

    §3.2.2 writes U_r without u_i; counting the promoted job's own utilization is what makes the
    §3.2.4 example hold (only J4 promotable), and is the schedulability test of the track as it
    would be with J_i on it — the same test as packing (§3.2.1).
    """
    u = sum(q.u for q in track) + p.u
    e_max = max([q.e_period for q in track] + [p.e_period])
    p_min = min([q.period for q in track] + [p.period])
    return u <= 1 - e_max / p_min + EPS


def plan_edf_partitioned(
    profiles: Sequence[JobProfile], n: int, *, aggressive: bool = True, **_: object
) -> EdfPartitionedPlan:
    packed = pack_edf(profiles)
    feasible, note = True, ""
    if len(packed) > n:
        feasible = False
        note = f"EDF-Partitioned needs {len(packed)} tracks for this workload, {n} configured"
        # fold the overflow onto the least-utilized tracks; the schedule is no longer guaranteed
        for extra in packed[n:]:
            target = min(range(n), key=lambda r: (sum(q.u for q in packed[r]), r))
            packed[target].extend(extra)
        packed = packed[:n]
    groups = [[p.table for p in tr] for tr in packed]
    promote: dict[str, tuple[int, ...]] = {}
    for g, tr in enumerate(packed):
        for p in tr:
            promote[p.table] = tuple(r for r, other in enumerate(packed) if r != g and promotable(p, other))
    return EdfPartitionedPlan(
        partitioner="edf-partitioned",
        n_tracks=n,
        aggressive=aggressive,
        groups=groups,
        home=[(g,) for g in range(len(groups))],
        free=tuple(range(len(groups), n)),
        utilization=sum(p.u for p in profiles),
        feasible=feasible,
        note=note,
        owners={g: (g,) for g in range(len(groups))},
        uniform=False,
        promote=promote,
    )
