"""Partitioners (§3.2) on the §3.2.4 example and each step of the §3.2.3 algorithm."""

from __future__ import annotations

import pytest

from tracks.plan import JobProfile, cluster, make_plan, pack_edf, promotable

# §3.2.4: J1(4/1/0.25), J2(4/1/0.25), J3(8/2/0.25), J4(10/1.25/0.125)
JOBS = [JobProfile("J1", 4, 1), JobProfile("J2", 4, 1), JobProfile("J3", 8, 2), JobProfile("J4", 10, 1.25)]
NONE_LEFT = lambda g: False  # noqa: E731
ALL_LEFT = lambda g: True  # noqa: E731


def test_edf_partitioned_packing_and_promotability():
    packed = pack_edf(JOBS)
    assert [[p.table for p in tr] for tr in packed] == [["J1", "J2"], ["J3", "J4"]]
    assert sum(p.u for p in packed[0]) == pytest.approx(0.5)
    assert sum(p.u for p in packed[1]) == pytest.approx(0.375)
    by = {p.table: p for p in JOBS}
    # only J4 may be promoted (to the other track), counting its own u_i in U_r
    assert [j for j in ("J1", "J2") if promotable(by[j], packed[1])] == []
    assert not promotable(by["J3"], packed[0])
    assert promotable(by["J4"], packed[0])
    plan = make_plan("edf-partitioned", JOBS, 2)
    assert plan.promote == {"J1": (), "J2": (), "J3": (), "J4": (0,)}
    assert plan.free == () and plan.feasible


def test_edf_partitioned_placement_steps():
    plan = make_plan("edf-partitioned", JOBS, 3, aggressive=False)
    assert plan.free == (2,)
    assert plan.place("J1", {0, 1, 2}, NONE_LEFT) == 0  # a: home
    assert plan.place("J1", {1, 2}, NONE_LEFT) == 2  # b: free track
    assert plan.place("J1", {1}, NONE_LEFT) is None  # J1 cannot be promoted
    assert plan.place("J4", {0}, NONE_LEFT) == 0  # c: promoted, nobody waits for track 0
    assert plan.place("J4", {0}, ALL_LEFT) is None  # non-aggressive: track 0's own jobs wait
    aggressive = make_plan("edf-partitioned", JOBS, 2, aggressive=True)
    assert aggressive.place("J4", {0}, ALL_LEFT) == 0


def test_edf_partitioned_reports_too_few_tracks():
    uniform = [JobProfile(f"t{i}", 100, 30) for i in range(6)]  # u = 0.3, at most 2 per track
    plan = make_plan("edf-partitioned", uniform, 2)
    assert not plan.feasible and "needs 3 tracks" in plan.note
    assert set(plan.group_of.values()) == {0, 1}


def test_proportional_example_structure():
    """k = 2 → {J1, J2}, {J3, J4}; U_tot = 0.875; with M = N/U_tot the short cluster C0 owns one
    track outright and shares the other with C1, whose only home is that shared track.
    Numbering as §3.2.3's steps: the longest-job cluster starts at track 0."""
    assert [[p.table for p in c] for c in cluster(JOBS, 2)] == [["J1", "J2"], ["J4", "J3"]]
    plan = make_plan("proportional", JOBS, 2, k=2, allocation="all")
    assert plan.utilization == pytest.approx(0.875)
    c0, c1 = plan.group_of["J1"], plan.group_of["J3"]
    assert plan.group_of["J2"] == c0 and plan.group_of["J4"] == c1
    assert plan.home[c1] == (0,)
    assert plan.home[c0] == (0, 1)
    assert plan.interior[c0] == (1,) and plan.boundary[c0] == 0  # owns 1, shares 0
    assert plan.lo[c0] == pytest.approx(2 * 0.375 / 0.875)
    assert plan.free == ()


def test_proportional_basic_allocation_leaves_free_tracks():
    plan = make_plan("proportional", JOBS, 3, k=2, allocation="basic")
    assert plan.free == (1, 2)  # M = ⌈U⌉/U: everything fits in one track


def test_proportional_steps_b_to_e():
    c0 = "J1"  # short cluster
    # b: an interior track first
    p2 = make_plan("proportional", JOBS, 2, k=2, allocation="all")
    assert p2.place(c0, {0, 1}, NONE_LEFT) == 1
    # c: then the boundary track shared with the cluster below
    assert p2.place(c0, {0}, NONE_LEFT) == 0
    # d: then a free track
    p3 = make_plan("proportional", JOBS, 3, k=2, allocation="basic")
    assert p3.place(c0, {1, 2}, NONE_LEFT) == 1
    # e: then a lower track of a longer-job cluster: C0 spans [1.71, 4), C1 [0, 1.71)
    p4 = make_plan("proportional", JOBS, 4, k=2, allocation="all", aggressive=False)
    assert p4.interior[p4.group_of["J1"]] == (2, 3) and p4.boundary[p4.group_of["J1"]] == 1
    assert p4.place(c0, {0}, NONE_LEFT) == 0
    assert p4.place(c0, {0}, ALL_LEFT) is None  # non-aggressive: C1 still has jobs for track 0
    p4a = make_plan("proportional", JOBS, 4, k=2, allocation="all", aggressive=True)
    assert p4a.place(c0, {0}, ALL_LEFT) == 0
    # f: long jobs never take the short cluster's tracks
    assert p4a.place("J3", {2, 3}, NONE_LEFT) is None


def test_clustering_by_period_orders_of_magnitude():
    """§3.2.3: 5-minute, hourly and daily tables with k = 10 form three clusters."""
    jobs = [JobProfile("m5", 300, 5), JobProfile("h1", 3600, 60), JobProfile("d1", 86400, 600)]
    assert [[p.table for p in c] for c in cluster(jobs, 10)] == [["m5"], ["h1"], ["d1"]]
    # Fig. 9's classes (periods 100 and 10,000) with k = 1
    fig9 = [JobProfile(f"a{i}", 100, 11) for i in range(3)] + [JobProfile(f"b{i}", 10000, 1001) for i in range(3)]
    assert [len(c) for c in cluster(fig9, 1)] == [3, 3]


def test_global_uses_lowest_available_track():
    plan = make_plan("global", JOBS, 3)
    assert plan.place("J3", {2, 1}, NONE_LEFT) == 1
    with pytest.raises(ValueError, match="unknown partitioner"):
        make_plan("nope", JOBS, 1)


def test_auto_is_proportional_unless_the_long_jobs_are_the_valuable_ones():
    def jobs(p_short: float, p_long: float) -> list[JobProfile]:
        short = [JobProfile(f"s{i}", 100, 11, p_short * 100 / 11) for i in range(4)]
        long = [JobProfile(f"l{i}", 10_000, 1001, p_long * 10_000 / 1001) for i in range(4)]
        return short + long

    assert make_plan("auto", jobs(100, 1), 4, k=10).partitioner == "proportional"  # Fig. 9: protect short jobs
    assert make_plan("auto", jobs(1, 1), 4, k=10).partitioner == "proportional"  # alike per second of work
    plan = make_plan("auto", jobs(1, 100), 4, k=10)
    assert plan.partitioner == "global" and "longest-job cluster" in plan.note
    one = make_plan("auto", [JobProfile(f"t{i}", 100, 11, 1.0) for i in range(6)], 4)
    assert one.partitioner == "proportional" and len(one.groups) == 1  # one cluster on all tracks: Global


def test_auto_is_global_when_the_long_jobs_cannot_take_every_track():
    # `drift`'s shape: seven shorter tables (2-min and 10-min feeds) and two costly half-hourly ones
    # worth about as much per second of work; Proportional would confine the two to 0.8 of a track
    def jobs(n_long: int, p_long: float) -> list[JobProfile]:
        short = [JobProfile(f"a{i}", 120, 6.5, 10 * 120 / 6.5) for i in range(4)]
        mid = [JobProfile(f"e{i}", 600, 70, 2 * 600 / 70) for i in range(3)]
        long = [JobProfile(f"b{i}", 1800, 210, p_long * 1800 / 210) for i in range(n_long)]
        return short + mid + long

    plan = make_plan("auto", jobs(2, 20), 3, k=10)
    assert plan.partitioner == "global" and "fewer tables than tracks outside the shortest" in plan.note
    assert make_plan("proportional", jobs(2, 20), 3, k=10).home[-1] == (0,)  # what auto no longer does
    assert make_plan("auto", jobs(3, 20), 3, k=10).partitioner == "proportional"  # three can take every track
    assert make_plan("auto", jobs(2, 20), 3, k=1).partitioner == "proportional"  # k = 1: clusters of 4, 3, 2: five outside
    assert make_plan("auto", jobs(2, 5), 3, k=10).partitioner == "proportional"  # worth under half: capped
    assert make_plan("auto", jobs(2, 20), 4, k=10).partitioner == "global"


def test_auto_lends_a_long_cluster_an_idle_short_track_keeping_enough_free():
    # two clusters of equal load on 4 tracks: the long jobs' home is tracks 0-1, the short's 2-3
    jobs = [JobProfile(f"s{i}", 100, 11, 10.0) for i in range(4)] + [
        JobProfile(f"l{i}", 10_000, 1100, 9.0) for i in range(4)]
    paper, auto = make_plan("proportional", jobs, 4, k=10), make_plan("auto", jobs, 4, k=10)
    assert paper.home == auto.home == [(2, 3), (0, 1)] and auto.partitioner == "proportional"
    short_waits = lambda g: g == 0  # noqa: E731
    assert paper.place("l0", {2, 3}, NONE_LEFT) is None  # §3.2.3: long jobs never go up
    assert auto.place("l0", {2, 3}, NONE_LEFT) == 3  # f: one short track lent, one kept
    assert auto.place("l0", {2}, NONE_LEFT) is None  # the last free short track is kept
    assert auto.place("l0", {2, 3}, short_waits) is None  # a short job waits for it
    assert auto.place("s0", {0, 1}, ALL_LEFT) == 0  # e: short jobs still borrow down, aggressively
    assert auto.could_use(1, {3}) and not paper.could_use(1, {3})
    # a busier short cluster (U = 1.2): one free home track left would not carry it, so none is lent
    busy = [JobProfile(f"s{i}", 100, 30, 10.0) for i in range(4)] + jobs[4:]
    auto = make_plan("auto", busy, 4, k=10)
    assert auto.home[0] == (1, 2, 3) and auto.load[0] == pytest.approx(1.2)
    assert auto.place("l0", {2, 3}, NONE_LEFT) is None
