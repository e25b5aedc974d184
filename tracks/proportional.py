"""Proportional partitioning (§3.2.3): clusters of similar jobs, each given tracks in proportion to
its utilization, the longest-job cluster from track 0 upward."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracks.base import EPS, HasRemaining, JobProfile, Plan, hashable

__all__ = ["ProportionalPlan", "cluster", "plan_proportional"]


@dataclass
class ProportionalPlan(Plan):
    interior: list[tuple[int, ...]] = field(default_factory=list)  # step b tracks per cluster
    boundary: list[int | None] = field(default_factory=list)  # the step c track per cluster
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)  # U of each cluster (Σ u_i)
    lend: bool = False  # step f (Freshet's `auto`): a shorter cluster's idle track, enough kept free

    def place(self, table: str, available: Collection[int], has_remaining: HasRemaining) -> int | None:
        """§3.2.3 steps b-e, tracks numbered as the steps say: the longest-job cluster from track 0."""
        g = self.group_of[table]
        for t in self.interior[g]:  # b: track_lo+1 .. track_hi
            if t in available:
                return t
        b = self.boundary[g]  # c: track_lo, possibly shared with the cluster below
        if b is not None and b in available:
            return b
        for t in self.free:  # d: a free track
            if t in available:
                return t
        limit = math.floor(self.lo[g] + EPS)  # e: a track of a longer-job cluster, 0..track_lo−1
        for r in sorted(t for t in available if t < limit):
            if self.aggressive or not any(has_remaining(h) for h in self.owners.get(r, ())):
                return r
        return self._lent(g, available, has_remaining) if self.lend else None

    def _lent(self, g: int, available: Collection[int], has_remaining: HasRemaining) -> int | None:
        """f: a track of a shorter-job cluster none of whose jobs waits, when its other free home
        tracks still carry its load (Σu_i) — so a cluster whose load outgrows its share (a class
        busy for hours) uses what the others leave idle, and their jobs still find a track."""
        for r in sorted(available, reverse=True):
            owners = [h for h in self.owners.get(r, ()) if h < g]
            if owners and not any(has_remaining(h) for h in owners) and all(
                    sum(u != r and u in available for u in self.home[h]) >= max(self.load[h], EPS) for h in owners):
                return r
        return None

    def _usable(self, g: int) -> set[int]:
        return set(range(self.n_tracks)) if self.lend else set(range(math.floor(self.lo[g] + EPS)))

    def _acts(self) -> tuple[Any, ...]:
        below = tuple(math.floor(x + EPS) for x in self.lo)  # step e's tracks: those below each cluster's
        return (hashable(self.interior), tuple(self.boundary), below, hashable(self.owners), self.lend,
                self.aggressive if any(below) else None, tuple(self.load) if self.lend else None)


def cluster(profiles: Sequence[JobProfile], k: float) -> list[list[JobProfile]]:
    """Clusters of similar jobs (§3.2.3): by increasing E_i(P_i); a job joins the current cluster
    if its period is at most k times the cluster's minimum period, else starts a new one.

    The text compares E_i(P_i) with k·P_min, which puts all four jobs of the §3.2.4 example
    (k = 2) in one cluster; comparing periods gives the example's {J1, J2}, {J3, J4}, the
    "5 minutes / hour / day with k = 10" clusters of §3.2.3, and Fig. 9's two classes with k = 1.
    """
    out: list[list[JobProfile]] = []
    p_min = 0.0
    for p in sorted(profiles, key=lambda p: (p.e_period, p.period, p.table)):
        if out and p.period <= k * p_min + EPS:
            out[-1].append(p)
            p_min = min(p_min, p.period)
        else:
            out.append([p])
            p_min = p.period
    return out


def plan_proportional(
    profiles: Sequence[JobProfile], n: int, *, k: float = 10.0, allocation: str = "all", aggressive: bool = True,
    **_: object,
) -> ProportionalPlan:
    clusters = cluster(profiles, k)
    uc = [sum(p.u for p in c) for c in clusters]
    u_tot = sum(uc)
    note = ""
    if u_tot <= 0:
        m = 1.0
    elif allocation == "all" or math.ceil(u_tot - EPS) > n:
        m = n / u_tot
        if allocation != "all":
            note = f"U_tot = {u_tot:.2f} exceeds {n} tracks: all tracks allocated (M = N/U_tot)"
    else:
        m = math.ceil(u_tot - EPS) / u_tot
    c = len(clusters)
    lo, hi = [0.0] * c, [0.0] * c
    # §3.2.3 steps 4-5: the last cluster (longest jobs) from track 0 upward
    for j in range(c - 1, -1, -1):
        lo[j] = 0.0 if j == c - 1 else hi[j + 1]
        hi[j] = lo[j] + m * uc[j]
    used = min(n, round(m * u_tot)) if u_tot > 0 else 0
    interior, boundary, home = [], [], []
    owners: dict[int, list[int]] = {}
    for j in range(c):
        first = math.floor(lo[j] + EPS)
        last = min(n, math.ceil(hi[j] - EPS)) - 1  # highest track touched
        inner = tuple(range(first + 1, last + 1))
        bnd = first if first < n and (first <= last or uc[j] == 0) else None
        interior.append(inner)
        boundary.append(bnd)
        h = tuple(sorted(set(inner) | ({bnd} if bnd is not None else set())))
        home.append(h)
        for t in h:
            owners.setdefault(t, []).append(j)
    groups = [[p.table for p in cl] for cl in clusters]
    return ProportionalPlan(
        partitioner="proportional",
        n_tracks=n,
        aggressive=aggressive,
        groups=groups,
        home=home,
        free=tuple(range(used, n)),
        utilization=u_tot,
        note=note,
        owners={t: tuple(g) for t, g in owners.items()},
        interior=interior,
        boundary=boundary,
        lo=lo,
        hi=hi,
        load=uc,
    )
