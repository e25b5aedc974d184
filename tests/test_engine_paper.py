"""The paper's worked examples, with the paper's numbers, driven through the Scheduler."""

from __future__ import annotations

import pytest

from policies.basic import Candidate, Expected, choose_with_lookahead, marginal_benefit, set_benefit
from policies.chopping import chop_count
from policies.inheritance import inherit
from tests.helpers_engine import config
from warehouse.dag import Dag
from warehouse.events import JobFinished, PartitionArrived
from warehouse.scheduler import Recovered, Scheduler

TAU = 100.0


def _two_tables(policy: str, **extra):
    cfg = config(
        [{"name": "s1", "period": 10}, {"name": "s2", "period": 10}],
        [
            {"name": "t1", "stream": "s1", "cost": {"alpha": 3, "beta": 0}},
            {"name": "t2", "stream": "s2", "cost": {"alpha": 2, "beta": 0}},
        ],
        policy=policy,
        **extra,
    )
    rec = {"t1": Recovered(TAU - 10, TAU - 10), "t2": Recovered(TAU - 5, TAU - 5)}
    return Scheduler(cfg, now=TAU, recovered=rec)


def _run_one_track(s: Scheduler, first: list) -> list[str]:
    """Run jobs back to back on the one track, each for its estimate; return tables in order."""
    order, pending, now = [], list(first), TAU
    while pending:
        job = pending.pop(0)
        order.append(job.table)
        now += job.estimate
        pending += s.handle(JobFinished(job_id=job.job_id, duration=job.estimate), now)
    return order


def test_max_benefit_example_section_3_1():
    """§3.1 / Fig. 3: J1 first → 80 over (τ, τ+5]; J2 first → 85; Max-Benefit picks J1."""
    s = _two_tables("max-benefit")
    started = s.handle(PartitionArrived(stream="s1", partition_id="a", start=TAU - 10, end=TAU), TAU)
    started += s.handle(PartitionArrived(stream="s2", partition_id="b", start=TAU - 5, end=TAU), TAU)
    assert [j.table for j in started] == ["t1"]
    assert marginal_benefit(1, 10, 3) > marginal_benefit(1, 5, 2)
    assert _run_one_track(s, started) == ["t1", "t2"]
    assert s.weighted_staleness(TAU + 5) == pytest.approx(80.0)
    by = {t.name: t.weighted_staleness for t in s.stats(TAU + 5).tables}
    assert by == pytest.approx({"t1": 42.5, "t2": 37.5})

    # the other order: FIFO with J2 released first
    s2 = _two_tables("fifo")
    started = s2.handle(PartitionArrived(stream="s2", partition_id="b", start=TAU - 5, end=TAU), TAU)
    started += s2.handle(PartitionArrived(stream="s1", partition_id="a", start=TAU - 10, end=TAU), TAU)
    assert _run_one_track(s2, started) == ["t2", "t1"]
    assert s2.weighted_staleness(TAU + 5) == pytest.approx(85.0)


def test_lookahead_example_section_3_1():
    """§3.1: J3 expected at τ+1 (p=10, E=3, ΔF=50) makes Lookahead run J2; B[S] = 505/5 = 101."""
    j1 = Candidate(table="t1", priority=1, delta_f=10, cost=3, release=TAU, period=10, seq=1, fixed=3)
    j2 = Candidate(table="t2", priority=1, delta_f=5, cost=2, release=TAU, period=10, seq=2, fixed=2)
    j3 = Expected(table="t3", release=TAU + 1, priority=10, delta_f=50, cost=3)
    assert set_benefit([j2], j3) == pytest.approx(101.0)
    assert choose_with_lookahead([j1, j2], [j3], TAU).table == "t2"
    assert choose_with_lookahead([j1, j2], [], TAU).table == "t1"


def lookahead_example(policy: str, **scheduler) -> tuple[Scheduler, list]:
    """§3.1's Lookahead example through the Scheduler: t1
    (ΔF = 10, E = 3) and t2 (ΔF = 5, E = 2), p = 1, released at τ while tx holds the one track; t3
    (p = 10, E = 3) last arrived at τ − 49 with period 50, so its next partition, (τ − 49, τ + 1], is
    expected at τ + 1. Returns the scheduler and the jobs it starts when tx ends at τ."""
    cfg = config(
        [{"name": "s1", "period": 10}, {"name": "s2", "period": 10}, {"name": "s3", "period": 50},
         {"name": "sx", "period": 1000}],
        [
            {"name": "t1", "stream": "s1", "cost": {"alpha": 3, "beta": 0}},
            {"name": "t2", "stream": "s2", "cost": {"alpha": 2, "beta": 0}},
            {"name": "t3", "stream": "s3", "priority": 10, "cost": {"alpha": 3, "beta": 0}},
            {"name": "tx", "stream": "sx", "priority": 1000, "cost": {"alpha": 1, "beta": 0}},
        ],
        policy=policy,
        **scheduler,
    )
    s = Scheduler(cfg, now=0, recovered={"t1": Recovered(TAU - 10), "t2": Recovered(TAU - 5), "t3": Recovered(0),
                                         "tx": Recovered(0)})
    (j,) = s.handle(PartitionArrived(stream="s3", partition_id="c", start=0, end=TAU - 49), TAU - 49)
    assert s.handle(JobFinished(job_id=j.job_id, duration=3), TAU - 46) == []
    # keep the track busy so J1 and J2 are both released before the decision
    (x,) = s.handle(PartitionArrived(stream="sx", partition_id="x", start=0, end=TAU - 1), TAU - 1)
    assert s.handle(PartitionArrived(stream="s1", partition_id="a", start=TAU - 10, end=TAU), TAU) == []
    assert s.handle(PartitionArrived(stream="s2", partition_id="b", start=TAU - 5, end=TAU), TAU) == []
    return s, s.handle(JobFinished(job_id=x.job_id, duration=1), TAU)


def test_lookahead_scheduler_prefers_j2():
    """The same example through the Scheduler: t3's stream last arrived at τ−49, period 50."""
    _, (nxt,) = lookahead_example("lookahead")
    assert nxt.table == "t2"  # Max-Benefit alone would pick t1


def test_fig2_staleness_of_a_base_table():
    """Fig. 2: data up to 3 arrives at 4, loaded at 5 → S = 2; batches at 7 and 9 loaded together at
    11 → S = 2; ∫ S over (0, 11] is 12.5 + 30 = 42.5 by hand."""
    cfg = config(
        [{"name": "s", "period": 3}, {"name": "other", "period": 100}],
        [
            {"name": "t", "stream": "s", "cost": {"alpha": 1, "beta": 0}},
            {"name": "x", "stream": "other", "cost": {"alpha": 4, "beta": 0}},
        ],
    )
    s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    (j1,) = s.handle(PartitionArrived(stream="s", partition_id="b1", start=0, end=3), 4)
    assert s.handle(JobFinished(job_id=j1.job_id, duration=1), 5) == []
    assert s.stats(5).tables[0].staleness == 2
    (jx,) = s.handle(PartitionArrived(stream="other", partition_id="x1", start=0, end=6), 6)
    assert s.handle(PartitionArrived(stream="s", partition_id="b2", start=3, end=7), 7) == []
    assert s.handle(PartitionArrived(stream="s", partition_id="b3", start=7, end=9), 9) == []
    (j2,) = s.handle(JobFinished(job_id=jx.job_id, duration=4), 10)
    assert j2.partitions == ("b2", "b3") and j2.delta_f == 6  # merged into one job (§2.4)
    s.handle(JobFinished(job_id=j2.job_id, duration=1), 11)
    t = next(x for x in s.stats(11).tables if x.name == "t")
    assert t.staleness == 2
    assert t.weighted_staleness == pytest.approx(12.5 + 30.0)


def test_inheritance_modes_on_a_small_dag():
    """§3.3 on b → d1 → d2 and b → d3 with p = 1, 2, 10, 5."""
    sources = {"b": (), "d1": ("b",), "d2": ("d1",), "d3": ("b",)}
    dag = Dag.build(sources, {"b": 60})
    p = {"b": 1, "d1": 2, "d2": 10, "d3": 5}
    args = (p, dag.dependents, dag.order)
    assert inherit(*args, "none") == p
    assert inherit(*args, "sum") == {"b": 18, "d1": 12, "d2": 10, "d3": 5}
    assert inherit(*args, "max") == {"b": 10, "d1": 10, "d2": 10, "d3": 5}
    assert inherit(*args, "max-plus", 2.0) == {"b": 40, "d1": 20, "d2": 10, "d3": 5}


def test_sum_counts_a_shared_dependent_once():
    dag = Dag.build({"b": (), "x": ("b",), "y": ("b",), "z": ("x", "y")}, {"b": 1})
    got = inherit({"b": 1, "x": 2, "y": 3, "z": 100}, dag.dependents, dag.order, "sum")
    assert got["b"] == 106 and got["x"] == 102


def test_chopping_a_ten_period_backlog_with_c_3():
    """§3.4: a backlog of 10 periods with c = 3 is loaded as 3, 3, 3, 1 periods."""
    assert chop_count([10.0 * i for i in range(1, 11)], 0.0, 10.0, 3.0) == 3
    cfg = config(
        [{"name": "s", "period": 10}, {"name": "blk", "period": 1000}],
        [
            {"name": "t", "stream": "s", "cost": {"alpha": 1, "beta": 0.1}},
            {"name": "b", "stream": "blk", "cost": {"alpha": 500, "beta": 0}},
        ],
        chop=3,
    )
    s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    (blocker,) = s.handle(PartitionArrived(stream="blk", partition_id="z", start=0, end=1), 1)
    for i in range(10):
        assert s.handle(PartitionArrived(stream="s", partition_id=f"p{i}", start=10 * i, end=10 * (i + 1)), 10 * (i + 1)) == []
    now, sizes = 500.0, []
    (job,) = s.handle(JobFinished(job_id=blocker.job_id, duration=499), now)
    while job is not None:
        sizes.append(len(job.partitions))
        assert job.chopped == (sum(sizes) < 10)
        now += 1
        nxt = s.handle(JobFinished(job_id=job.job_id, duration=1), now)
        job = nxt[0] if nxt else None
    assert sizes == [3, 3, 3, 1]
    assert s.stats(now).tables[0].freshness == 100


def test_chopping_never_loads_less_than_one_partition():
    # one partition spanning 5 periods is still loaded whole
    assert chop_count([50.0], 0.0, 10.0, 1.0) == 1
