"""Choosing a partitioner (§3.2) by name. Each partitioner is one small strategy in its own module
(`global_plan`, `edf_partitioned`, `proportional`) that builds a `TrackPlan`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tracks.base import EPS, JobProfile, Plan, TrackPlan
from tracks.edf_partitioned import EdfPartitionedPlan, pack_edf, plan_edf_partitioned, promotable
from tracks.global_plan import GlobalPlan, plan_global
from tracks.proportional import ProportionalPlan, cluster, plan_proportional

__all__ = [
    "EPS",
    "PARTITIONERS",
    "EdfPartitionedPlan",
    "GlobalPlan",
    "JobProfile",
    "Plan",
    "ProportionalPlan",
    "TrackPlan",
    "cluster",
    "make_plan",
    "pack_edf",
    "promotable",
]

PARTITIONERS: dict[str, Callable[..., Plan]] = {
    "global": plan_global,
    "edf-partitioned": plan_edf_partitioned,
    "proportional": plan_proportional,
}


def make_plan(
    partitioner: str,
    profiles: Sequence[JobProfile],
    n_tracks: int,
    *,
    k: float = 10.0,
    allocation: str = "all",
    aggressive: bool = True,
) -> Plan:
    """The plan of `partitioner` for these profiles on `n_tracks` tracks."""
    if n_tracks < 1:
        raise ValueError("tracks must be ≥ 1")
    build = PARTITIONERS.get(partitioner)
    if build is None:
        raise ValueError(f"unknown partitioner {partitioner!r} ({', '.join(PARTITIONERS)})")
    return build(profiles, n_tracks, k=k, allocation=allocation, aggressive=aggressive)
