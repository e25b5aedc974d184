"""Ordering rules beyond the paper's §3.1: the quadratic index (`aoi-quadratic`), on a hand-worked
example whose order differs from Max-Benefit's."""

from __future__ import annotations

import pytest

from policies.basic import Candidate, marginal_benefit, policy_key, quadratic_index
from tests.helpers_engine import config
from warehouse.events import JobFinished, PartitionArrived
from warehouse.scheduler import Recovered, Scheduler

TAU = 100.0


def _blocked_pair(policy: str) -> tuple[Scheduler, list[str]]:
    """t1 (ΔF = 10, E = 3) and t2 (ΔF = 5, E = 1), p = 1 each, released at τ while a blocker holds the
    one track; the blocker ends at τ. Returns the scheduler and the tables in the order they ran."""
    cfg = config(
        [{"name": "s1", "period": 10}, {"name": "s2", "period": 10}, {"name": "sx", "period": 1000}],
        [
            {"name": "t1", "stream": "s1", "cost": {"alpha": 3, "beta": 0}},
            {"name": "t2", "stream": "s2", "cost": {"alpha": 1, "beta": 0}},
            {"name": "tx", "stream": "sx", "cost": {"alpha": 1, "beta": 0}},
        ],
        policy=policy,
    )
    s = Scheduler(cfg, now=0, recovered={"t1": Recovered(TAU - 10), "t2": Recovered(TAU - 5), "tx": Recovered(0)})
    (x,) = s.handle(PartitionArrived(stream="sx", partition_id="x", start=0, end=TAU - 1), TAU - 1)
    assert s.handle(PartitionArrived(stream="s1", partition_id="a", start=TAU - 10, end=TAU), TAU) == []
    assert s.handle(PartitionArrived(stream="s2", partition_id="b", start=TAU - 5, end=TAU), TAU) == []
    order, now = [], TAU
    pending = s.handle(JobFinished(job_id=x.job_id, duration=1.0), now)
    while pending:
        job = pending.pop(0)
        order.append(job.table)
        now += job.estimate
        pending += s.handle(JobFinished(job_id=job.job_id, duration=job.estimate), now)
    return s, order


def test_quadratic_index_orders_differently_from_max_benefit() -> None:
    """p = 1 for both jobs.
    J1: ΔF = 10, E = 3 → Max-Benefit p·ΔF/E = 10/3 ≈ 3.33; quadratic p·ΔF²/E = 100/3 ≈ 33.3.
    J2: ΔF = 5,  E = 1 → Max-Benefit 5/1 = 5;              quadratic 25/1 = 25.
    Max-Benefit runs J2 first (5 > 3.33), the quadratic index J1 (33.3 > 25)."""
    assert quadratic_index(1, 10, 3) == pytest.approx(100 / 3)
    assert quadratic_index(1, 5, 1) == pytest.approx(25.0)
    assert quadratic_index(2, 5, 1) == pytest.approx(2 * 5 * marginal_benefit(1, 5, 1))  # p·ΔF/E · ΔF
    j1 = Candidate(table="t1", priority=1, delta_f=10, cost=3, release=TAU, period=10, seq=1)
    j2 = Candidate(table="t2", priority=1, delta_f=5, cost=1, release=TAU, period=10, seq=2)
    assert sorted([j1, j2], key=policy_key("max-benefit"))[0].table == "t2"
    assert sorted([j1, j2], key=policy_key("aoi-quadratic"))[0].table == "t1"
    # through the Scheduler: the same numbers, the same orders
    assert _blocked_pair("max-benefit")[1] == ["t2", "t1"]
    assert _blocked_pair("aoi-quadratic")[1] == ["t1", "t2"]


def test_quadratic_index_edges() -> None:
    """No staleness removed: index 0; a free job that removes some: first (as Max-Benefit's inf)."""
    assert quadratic_index(1, 0, 3) == 0.0
    assert quadratic_index(1, 4, 0) == float("inf")
    assert quadratic_index(1, 0, 0) == 0.0
    key = policy_key("aoi-quadratic")
    free = Candidate(table="f", priority=1, delta_f=1, cost=0, release=0, period=1, seq=2)
    big = Candidate(table="b", priority=100, delta_f=100, cost=1, release=0, period=1, seq=1)
    assert sorted([big, free], key=key)[0].table == "f"


def test_quadratic_index_is_a_valid_config_policy() -> None:
    cfg = config([{"name": "s", "period": 10}], [{"name": "t", "stream": "s"}], policy="aoi-quadratic")
    assert cfg.scheduler.policy == "aoi-quadratic"
