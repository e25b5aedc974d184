"""Choosing a partitioner (§3.2) by name. Each partitioner is one small strategy in its own module
(`global_plan`, `edf_partitioned`, `proportional`) that builds a `TrackPlan`; `auto` (Freshet's
default) chooses between Proportional and Global per workload (`plan_auto`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tracks.base import EPS, JobProfile, Plan, TrackPlan
from tracks.edf_partitioned import EdfPartitionedPlan, pack_edf, plan_edf_partitioned, promotable
from tracks.global_plan import GlobalPlan, plan_global
from tracks.proportional import ProportionalPlan, cluster, plan_proportional

__all__ = [
    "EPS",
    "FEW_LONG_TABLES",
    "LONG_MORE_VALUABLE",
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
    "plan_auto",
    "promotable",
]

LONG_MORE_VALUABLE = 2.0  # auto: Global when the longest cluster's jobs are worth this much more than
# every shorter cluster's, or (few long tables) at least 1/LONG_MORE_VALUABLE of every shorter cluster's
FEW_LONG_TABLES = "auto: fewer tables than tracks outside the shortest-job cluster, so one global queue"


def plan_auto(profiles: Sequence[JobProfile], n: int, **kw: object) -> Plan:
    """Proportional (§3.2.3, all + aggressive by default) unless the longest-job cluster is the
    valuable one, or the longer jobs cannot take every track and are not of little value.

    Proportional keeps short jobs from waiting behind long ones by giving the long-job clusters
    only their share of the tracks. That is what Max-Benefit wants while the short jobs are at
    least as valuable per second of work (§3.1: Ip·P/E(P), averaged over the cluster) — Fig. 9's
    case. When the long jobs are worth LONG_MORE_VALUABLE times more than every shorter cluster,
    confining them to their share starves the tables that matter (docs/experiments.md, "Fig. 9's
    question, answered on other mixes"), so a single Global queue lets Max-Benefit give them any track.

    The wait Proportional prevents needs long jobs on every track, and a table runs one job at a
    time: when fewer tables than tracks lie outside the shortest-job cluster, at least one track is
    always free of their jobs. There the split only caps the long jobs at their share of the load,
    which sheds an overload by cluster instead of by value; when the longest cluster is worth at
    least 1/LONG_MORE_VALUABLE of every shorter one, Global lets Max-Benefit shed it by value
    (docs/experiments.md, "The auto partitioner and a few long tables").

    The Proportional plan of `auto` lends (step f, `ProportionalPlan.lend`): a cluster whose load
    outgrows its share — a class busy for hours while another is quiet — may take an idle track of
    a shorter-job cluster whose other free home tracks still carry that cluster's load.
    """
    prop = plan_proportional(profiles, n, **kw)  # type: ignore[arg-type]
    if len(prop.groups) < 2:
        return prop  # one cluster: Proportional with all tracks is Global
    by_name = {p.table: p for p in profiles}
    worth = [sum(by_name[t].benefit for t in g) / len(g) for g in prop.groups]
    best_shorter = max(worth[:-1])  # groups are by increasing E_i(P_i)
    note = ""
    if worth[-1] > LONG_MORE_VALUABLE * best_shorter:
        note = "auto: the longest-job cluster is the most valuable, so one global queue"
    elif sum(len(g) for g in prop.groups[1:]) < n and LONG_MORE_VALUABLE * worth[-1] >= best_shorter:
        note = FEW_LONG_TABLES
    if note:
        plan = plan_global(profiles, n, **kw)  # type: ignore[arg-type]
        plan.note = note
        return plan
    prop.lend = True
    prop.note = prop.note or "auto: Proportional, the short jobs are at least as valuable as the long ones"
    return prop


PARTITIONERS: dict[str, Callable[..., Plan]] = {
    "auto": plan_auto,
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
