"""Track plans (§3.2). Track numbers are 0-based.

Every plan groups tables (one group for Global; one per home track for EDF-Partitioned; one per
cluster for Proportional) and answers `place(table, available, has_remaining)`: the track the
table's job may start on now, or None to delay it. `has_remaining(group)` tells whether released
jobs of that group are still waiting further down the sorted list (the non-aggressive checks).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

__all__ = ["EPS", "JobProfile", "TrackPlan", "cluster", "make_plan", "pack_edf", "promotable"]

EPS = 1e-9


@dataclass(frozen=True, slots=True)
class JobProfile:
    """What partitioning needs of table i: P_i and E_i(P_i) (§3.2.1)."""

    table: str
    period: float
    e_period: float

    @property
    def u(self) -> float:
        """u_i = E_i(P_i) / P_i."""
        return self.e_period / self.period if self.period > 0 else 0.0


@dataclass
class TrackPlan:
    partitioner: str
    n_tracks: int
    aggressive: bool
    group_of: dict[str, int]
    groups: list[list[str]]  # tables per group, in plan order
    home: list[tuple[int, ...]]  # home tracks per group
    free: tuple[int, ...]
    utilization: float
    feasible: bool = True
    note: str = ""
    # Proportional: step b tracks and the step c track per group
    interior: list[tuple[int, ...]] = field(default_factory=list)
    boundary: list[int | None] = field(default_factory=list)
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)
    # EDF-Partitioned: tracks each table may be promoted to (§3.2.2)
    promote: dict[str, tuple[int, ...]] = field(default_factory=dict)
    owners: dict[int, tuple[int, ...]] = field(default_factory=dict)  # track → groups homed there
    uniform: bool = True  # placement depends on the group only, not on the job

    # ---- placement -------------------------------------------------------------------------
    def place(self, table: str, available: Collection[int], has_remaining: Callable[[int], bool]) -> int | None:
        g = self.group_of[table]
        if self.partitioner == "global":
            return min(available) if available else None
        if self.partitioner == "edf-partitioned":
            return self._place_edf(table, g, available, has_remaining)
        return self._place_proportional(g, available, has_remaining)

    def _place_edf(self, table: str, g: int, available: Collection[int], has_remaining) -> int | None:
        """§3.2.2: (a) home track; (b) a free track; (c) a track it can be promoted to that is
        available and (non-aggressive) has no released job of its own still waiting."""
        (home,) = self.home[g]
        if home in available:
            return home
        for t in self.free:
            if t in available:
                return t
        for r in self.promote.get(table, ()):
            if r in available and (self.aggressive or not any(has_remaining(h) for h in self.owners.get(r, ()))):
                return r
        return None

    def _place_proportional(self, g: int, available: Collection[int], has_remaining) -> int | None:
        """§3.2.3 steps b-e, tracks numbered as the steps say: the longest-job cluster from track 0."""
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
        return None

    def could_use(self, g: int, available: Collection[int]) -> bool:
        """Cheap filter: might some job of group g start on one of `available`?"""
        return not self.usable[g].isdisjoint(available)

    @property
    def usable(self) -> list[frozenset[int]]:
        """Per group, every track one of its jobs could ever be placed on."""
        cached = self.__dict__.get("_usable")
        if cached is None:
            cached = []
            for g in range(len(self.groups)):
                if self.partitioner == "global":
                    u = set(range(self.n_tracks))
                elif self.partitioner == "edf-partitioned":
                    u = {r for t in self.groups[g] for r in self.promote.get(t, ())}
                else:
                    u = set(range(math.floor(self.lo[g] + EPS)))
                cached.append(frozenset(u | set(self.home[g]) | set(self.free)))
            self.__dict__["_usable"] = cached
        return cached


# ---- Global -------------------------------------------------------------------------------------
def _global(profiles: Sequence[JobProfile], n: int, aggressive: bool) -> TrackPlan:
    names = [p.table for p in profiles]
    return TrackPlan(
        partitioner="global",
        n_tracks=n,
        aggressive=aggressive,
        group_of=dict.fromkeys(names, 0),
        groups=[names],
        home=[tuple(range(n))],
        free=(),
        utilization=sum(p.u for p in profiles),
        owners={t: (0,) for t in range(n)},
    )


# ---- EDF-Partitioned (§3.2.1-§3.2.2) -------------------------------------------------------------
def pack_edf(profiles: Sequence[JobProfile]) -> list[list[JobProfile]]:
    """Greedy packing: by increasing period, open a new track whenever adding the job would break
    U_r ≤ 1 − E_max_r / P_min_r (§3.2.1)."""
    tracks: list[list[JobProfile]] = []
    for p in sorted(profiles, key=lambda p: (p.period, p.e_period, p.table)):
        if tracks:
            cur = tracks[-1]
            u = sum(q.u for q in cur) + p.u
            e_max = max([q.e_period for q in cur] + [p.e_period])
            p_min = min([q.period for q in cur] + [p.period])
            if u <= 1 - e_max / p_min + EPS:
                cur.append(p)
                continue
        tracks.append([p])
    return tracks


def promotable(p: JobProfile, track: Sequence[JobProfile]) -> bool:
    """J_i may be promoted to track r if U_r + u_i ≤ 1 − max(E_max_r, E_i(P_i)) / min(P_min_r, P_i).

    §3.2.2 writes U_r without u_i; counting the promoted job's own utilization is what makes the
    §3.2.4 example hold (only J4 promotable), and is the schedulability test of the track as it
    would be with J_i on it.
    """
    u = sum(q.u for q in track) + p.u
    e_max = max([q.e_period for q in track] + [p.e_period])
    p_min = min([q.period for q in track] + [p.period])
    return u <= 1 - e_max / p_min + EPS


def _edf_partitioned(profiles: Sequence[JobProfile], n: int, aggressive: bool) -> TrackPlan:
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
    group_of = {t: g for g, names in enumerate(groups) for t in names}
    promote: dict[str, tuple[int, ...]] = {}
    for g, tr in enumerate(packed):
        for p in tr:
            promote[p.table] = tuple(r for r, other in enumerate(packed) if r != g and promotable(p, other))
    return TrackPlan(
        partitioner="edf-partitioned",
        n_tracks=n,
        aggressive=aggressive,
        group_of=group_of,
        groups=groups,
        home=[(g,) for g in range(len(groups))],
        free=tuple(range(len(groups), n)),
        utilization=sum(p.u for p in profiles),
        feasible=feasible,
        note=note,
        promote=promote,
        owners={g: (g,) for g in range(len(groups))},
        uniform=False,
    )


# ---- Proportional (§3.2.3) -----------------------------------------------------------------------
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


def _proportional(profiles: Sequence[JobProfile], n: int, k: float, allocation: str, aggressive: bool) -> TrackPlan:
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
    return TrackPlan(
        partitioner="proportional",
        n_tracks=n,
        aggressive=aggressive,
        group_of={t: g for g, names in enumerate(groups) for t in names},
        groups=groups,
        home=home,
        free=tuple(range(used, n)),
        utilization=u_tot,
        note=note,
        interior=interior,
        boundary=boundary,
        lo=lo,
        hi=hi,
        owners={t: tuple(g) for t, g in owners.items()},
    )


def make_plan(
    partitioner: str,
    profiles: Sequence[JobProfile],
    n_tracks: int,
    *,
    k: float = 10.0,
    allocation: str = "all",
    aggressive: bool = True,
) -> TrackPlan:
    if n_tracks < 1:
        raise ValueError("tracks must be ≥ 1")
    if partitioner == "global":
        return _global(profiles, n_tracks, aggressive)
    if partitioner == "edf-partitioned":
        return _edf_partitioned(profiles, n_tracks, aggressive)
    if partitioner == "proportional":
        return _proportional(profiles, n_tracks, k, allocation, aggressive)
    raise ValueError(f"unknown partitioner {partitioner!r} (global, edf-partitioned, proportional)")
