"""Global partitioning (§3.2): one queue over all tracks; a job takes the lowest available track."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tracks.base import HasRemaining, JobProfile, Plan

__all__ = ["GlobalPlan", "plan_global"]


@dataclass
class GlobalPlan(Plan):
    def place(self, table: str, available: Collection[int], has_remaining: HasRemaining) -> int | None:
        return min(available) if available else None


def plan_global(profiles: Sequence[JobProfile], n: int, *, aggressive: bool = True, **_: object) -> GlobalPlan:
    names = [p.table for p in profiles]
    return GlobalPlan(
        partitioner="global",
        n_tracks=n,
        aggressive=aggressive,
        groups=[names],
        home=[tuple(range(n))],
        free=(),
        utilization=sum(p.u for p in profiles),
        owners={t: (0,) for t in range(n)},
    )
