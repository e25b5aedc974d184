"""Ordering rules beyond the paper's §3.1: the quadratic index (`aoi-quadratic`), the Whittle index
of the bound's relaxation (`whittle`) and the benefit per second of fixed cost (`amortized`), on hand-worked examples whose order differs from Max-Benefit's; rollout (warehouse.rollout) on §3.1's Lookahead
example, worked by hand, and in seeded simulations against its base rule. No Spark."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from policies.basic import (
    FIXED_FLOOR,
    Candidate,
    amortized_benefit,
    marginal_benefit,
    policy_key,
    quadratic_index,
    whittle_index,
)
from tests.helpers_engine import config
from tests.test_engine_paper import lookahead_example
from warehouse.events import JobFinished, PartitionArrived
from warehouse.nextjob import fixed_cost
from warehouse.scheduler import Recovered, Scheduler

TAU = 100.0


def _blocked_pair(policy: str, costs: dict[str, dict[str, float]] | None = None) -> tuple[Scheduler, list[str]]:
    """t1 (ΔF = 10, E = 3) and t2 (ΔF = 5, E = 1), or E of `costs`, p = 1 each, released at τ while a
    blocker holds the one track; the blocker ends at τ. Returns the scheduler and the tables in the
    order they ran."""
    costs = costs or {"t1": {"alpha": 3, "beta": 0}, "t2": {"alpha": 1, "beta": 0}}
    cfg = config(
        [{"name": "s1", "period": 10}, {"name": "s2", "period": 10}, {"name": "sx", "period": 1000}],
        [
            {"name": "t1", "stream": "s1", "cost": costs["t1"]},
            {"name": "t2", "stream": "s2", "cost": costs["t2"]},
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
    j1 = Candidate(table="t1", priority=1, delta_f=10, cost=3, release=TAU, period=10, seq=1, fixed=3)
    j2 = Candidate(table="t2", priority=1, delta_f=5, cost=1, release=TAU, period=10, seq=2, fixed=1)
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
    free = Candidate(table="f", priority=1, delta_f=1, cost=0, release=0, period=1, seq=2, fixed=0)
    big = Candidate(table="b", priority=100, delta_f=100, cost=1, release=0, period=1, seq=1, fixed=1)
    assert sorted([big, free], key=key)[0].table == "f"


def test_whittle_index_orders_by_the_relaxations_price() -> None:
    """p = 1 for both jobs; E(n) = α + β·n over ΔF seconds of data.
    J1: ΔF = 10, α = 1, β = 0.5 → E = 6: Max-Benefit 10/6 ≈ 1.67, quadratic 100/6 ≈ 16.7,
        Whittle (½ + 0.5)·100/1 = 100.
    J2: ΔF = 5, α = 0.5, β = 0 → E = 0.5: Max-Benefit 10, quadratic 50, Whittle ½·25/0.5 = 25.
    Max-Benefit and the quadratic index run J2 first; the Whittle index J1, for its larger backlog
    and its β: the relaxation loads a table whose data costs more per second in smaller batches
    (x* falls as β grows), and only α rewards waiting. And the price is the one at which the batch
    ΔF is the relaxation's best: x* = √(λα/(p(½ + β)))."""
    assert whittle_index(1, 10, 6, 1) == pytest.approx(100.0)
    assert whittle_index(1, 5, 0.5, 0.5) == pytest.approx(25.0)
    lam, p, a, b = 100.0, 1.0, 1.0, 0.5
    x_star = (lam * a / (p * (0.5 + b))) ** 0.5
    assert whittle_index(p, x_star, a + b * x_star, a) == pytest.approx(lam)
    j1 = Candidate(table="t1", priority=1, delta_f=10, cost=6, release=TAU, period=10, seq=1, fixed=1)
    j2 = Candidate(table="t2", priority=1, delta_f=5, cost=0.5, release=TAU, period=10, seq=2, fixed=0.5)
    assert sorted([j1, j2], key=policy_key("max-benefit"))[0].table == "t2"
    assert sorted([j1, j2], key=policy_key("aoi-quadratic"))[0].table == "t2"
    assert sorted([j1, j2], key=policy_key("whittle"))[0].table == "t1"
    # through the Scheduler, with those costs as the tables' priors
    costs = {"t1": {"alpha": 1, "beta": 0.5}, "t2": {"alpha": 0.5, "beta": 0}}
    assert _blocked_pair("max-benefit", costs)[1] == ["t2", "t1"]
    assert _blocked_pair("whittle", costs)[1] == ["t1", "t2"]


def test_whittle_ranks_by_each_tables_own_fixed_cost_through_the_scheduler() -> None:
    """The fixed cost reaches the index from the table's cost model. p = 1 each.
    t1: ΔF = 10, α = 1, β = 0.05 → E = 1.5, A = 1:   Max-Benefit 10/1.5 ≈ 6.7, Whittle 0.55·100/1 = 55.
    t2: ΔF = 5, α = 0.1, β = 0.5 → E = 2.6, A = 0.1: Max-Benefit 5/2.6 ≈ 1.9, Whittle 1.0·25/0.1 = 250.
    Max-Benefit runs t1 first, Whittle t2. With A lost on the way (0, so FIXED_FLOOR for both) Whittle
    would run t1 first (55,000 against 25,000)."""
    costs = {"t1": {"alpha": 1, "beta": 0.05}, "t2": {"alpha": 0.1, "beta": 0.5}}
    assert whittle_index(1, 10, 1.5, 1) == pytest.approx(55.0)
    assert whittle_index(1, 5, 2.6, 0.1) == pytest.approx(250.0)
    assert whittle_index(1, 10, 1.5, 0) > whittle_index(1, 5, 2.6, 0)
    assert _blocked_pair("max-benefit", costs)[1] == ["t1", "t2"]
    assert _blocked_pair("whittle", costs)[1] == ["t2", "t1"]


def test_a_job_dearer_than_alpha_plus_beta_delta_f_counts_the_excess_as_fixed() -> None:
    """A full refresh of a week's history to land 600 s (α = 2, β = 0.01 per second of data: E = 2 +
    0.01·(604,800 + 600) = 6,056 s) against an incremental job of the same 600 s (E = 8 s), p = 1 each.
    The excess over α + β·ΔF is fixed (warehouse.nextjob.fixed_cost: 6,050), so the full refresh ranks
    far below: 0.51·600²/6,050 ≈ 30 against 0.51·600²/2 = 91,800 — and the dearer a job, the lower."""
    cost = SimpleNamespace(alpha=2.0, beta=0.01)
    table = SimpleNamespace(cost=cost)
    full, inc = 2 + 0.01 * (604_800 + 600), 2 + 0.01 * 600
    assert fixed_cost(table, 600, inc) == pytest.approx(2.0)  # a job of its own data: α
    assert fixed_cost(table, 600, full) == pytest.approx(full - 6.0)
    assert fixed_cost(table, 600, 3.0) == 2.0  # rows below the typical rate: still α
    w_full = whittle_index(1, 600, full, fixed_cost(table, 600, full))
    w_inc = whittle_index(1, 600, inc, fixed_cost(table, 600, inc))
    assert w_full == pytest.approx(0.51 * 600**2 / (full - 6.0)) and w_inc == pytest.approx(0.51 * 600**2 / 2)
    assert w_full < w_inc / 1000
    dearer = [whittle_index(1, 600, inc + h, fixed_cost(table, 600, inc + h)) for h in (0, 10, 100, 1000)]
    assert dearer == sorted(dearer, reverse=True)


def test_whittle_index_edges() -> None:
    """No staleness removed: 0; a fixed cost learned as 0 counts as FIXED_FLOOR (the tables still rank
    by p(½ + b)ΔF²); a cost below the fixed one: b = 0."""
    assert whittle_index(1, 0, 3, 1) == 0.0
    assert whittle_index(2, 4, 4, 0) == pytest.approx(2 * 1.5 * 16 / FIXED_FLOOR)
    assert whittle_index(1, 4, 0.5, 1) == pytest.approx(0.5 * 16)


def test_amortized_charges_a_job_its_fixed_cost_only() -> None:
    """p = 1 for both jobs; E(n) = α + β·n over ΔF seconds of data.
    J1: ΔF = 10, α = 0.8, β = 0.5 → E = 5.8: Max-Benefit 10/5.8 ≈ 1.72, amortized 10/0.8 = 12.5.
    J2: ΔF = 5, α = 0.5, β = 0 → E = 0.5: Max-Benefit 10, amortized 5/0.5 = 10.
    Max-Benefit runs J2 first; amortized J1: its 5 s of β are paid whenever t1 loads those 10 s of
    data, and only its α is saved by waiting. Through the Scheduler, with those costs as the priors."""
    assert amortized_benefit(1, 10, 0.8) == pytest.approx(12.5)
    assert amortized_benefit(1, 5, 0.5) == pytest.approx(10.0)
    assert marginal_benefit(1, 10, 5.8) < marginal_benefit(1, 5, 0.5)
    costs = {"t1": {"alpha": 0.8, "beta": 0.5}, "t2": {"alpha": 0.5, "beta": 0}}
    assert _blocked_pair("max-benefit", costs)[1] == ["t2", "t1"]
    assert _blocked_pair("amortized", costs)[1] == ["t1", "t2"]
    # linear in ΔF without levelling off: Max-Benefit tends to p/β = 2 as the backlog grows, this does not
    assert [round(marginal_benefit(1, d, 0.8 + 0.5 * d), 2) for d in (10, 100, 1000)] == [1.72, 1.97, 2.0]
    assert [amortized_benefit(1, d, 0.8) for d in (10, 100, 1000)] == pytest.approx([12.5, 125, 1250])


def test_amortized_ranks_a_full_refresh_by_its_excess_and_edges() -> None:
    """The full refresh of the Whittle test above (E = 6,056 s for 600 s of data, A = 6,050 s) against
    the incremental job (E = 8 s, A = α = 2 s), p = 1: 600/6,050 ≈ 0.099 against 600/2 = 300. No
    staleness removed: 0; a fixed cost learned as 0 counts as FIXED_FLOOR."""
    table = SimpleNamespace(cost=SimpleNamespace(alpha=2.0, beta=0.01))
    full, inc = 2 + 0.01 * (604_800 + 600), 2 + 0.01 * 600
    assert amortized_benefit(1, 600, fixed_cost(table, 600, full)) == pytest.approx(600 / (full - 6.0))
    assert amortized_benefit(1, 600, fixed_cost(table, 600, inc)) == pytest.approx(300.0)
    assert amortized_benefit(1, 0, 2) == 0.0
    assert amortized_benefit(3, 2, 0) == pytest.approx(6 / FIXED_FLOOR)


def test_the_new_rules_are_config_policies_and_bad_settings_are_named() -> None:
    from warehouse.errors import ConfigError

    one = ([{"name": "s", "period": 10}], [{"name": "t", "stream": "s"}])
    cfg = config(*one, policy="aoi-quadratic")
    assert (cfg.scheduler.policy, cfg.scheduler.ordering) == ("aoi-quadratic", "aoi-quadratic")
    cfg = config(*one, policy="whittle", rollout={"base": "whittle"})
    assert (cfg.scheduler.policy, cfg.scheduler.ordering) == ("whittle", "whittle")
    cfg = config(*one, policy="amortized")
    assert (cfg.scheduler.policy, cfg.scheduler.ordering) == ("amortized", "amortized")
    cfg = config(*one, policy="rollout", rollout={"k": 4, "horizon": "5m", "base": "edf-p"})
    r = cfg.scheduler.rollout
    assert (r.k, r.horizon, r.budget_events, cfg.scheduler.ordering) == (4, 300.0, 3000, "edf-p")
    assert r.terminal is True and r.credit == "inherited"  # the terminal credit is on unless switched off
    for bad, word in (({"base": "rollout"}, "base"), ({"k": 0}, "k"), ({"horizon": 0}, "horizon"),
                      ({"budget": 5}, "budget"), ({"terminal": "sometimes"}, "terminal"), ({"credit": "max"}, "credit")):
        with pytest.raises(ConfigError, match=f"rollout.*{word}|{word}.*rollout"):
            config(*one, policy="rollout", rollout=bad)


# ---- rollout (warehouse.rollout) ---------------------------------------------------------------------
def _window(s: Scheduler, first: list) -> tuple[list[str], dict[str, float]]:
    """Run on from τ: t3's partition arrives at τ + 1, each job ends at its estimate; p·∫S dτ per
    table over (τ, τ + 10] and the order the jobs ran in."""
    before = {t.name: t.weighted_staleness for t in s.stats(TAU).tables}
    order, pending, now = [], list(first), TAU
    arrived = False
    while pending:
        job = pending.pop(0)
        order.append(job.table)
        if not arrived:
            assert s.handle(PartitionArrived(stream="s3", partition_id="c2", start=TAU - 49, end=TAU + 1), TAU + 1) == []
            arrived = True
        now += job.estimate
        pending += s.handle(JobFinished(job_id=job.job_id, duration=job.estimate), now)
    after = {t.name: t.weighted_staleness for t in s.stats(TAU + 10).tables}
    return order, {n: after[n] - before[n] for n in ("t1", "t2", "t3")}


def test_rollout_runs_j2_where_max_benefit_runs_j1_and_its_future_is_less_stale() -> None:
    """Horizon 10 from τ = 100, one track, weighted staleness p·∫S dτ over (100, 110] by hand:
    Max-Benefit runs J1 (10/3 > 5/2) 100–103; J3 arrives at 101 (ΔF 50) and runs 103–106 (500/3 beats
    J2's 5/2); J2 106–108. t1: S 10→13 then 3→10: 34.5 + 45.5 = 80; t2: S 5→13 then 8→10: 72 + 18 = 90;
    t3: S 49→55 then 5→9: 312 + 28 = 340, × p 10 = 3400. Total 3570.
    Rollout runs J2 100–102, J3 102–105, J1 105–108. t1: S 10→18 then 8→10: 112 + 18 = 130; t2: S 5→7
    then 2→10: 12 + 48 = 60; t3: S 49→54 then 4→9: 257.5 + 32.5 = 290, × 10 = 2900. Total 3090: 480 less.
    tx (loaded to 99 at 100, next partition at 1099) adds the same to both. (Every job ends inside
    the horizon; without the terminal credit the sums are these by hand.)"""
    mb, mb_first = lookahead_example("max-benefit")
    ro, ro_first = lookahead_example("rollout", rollout={"k": 3, "horizon": 10, "terminal": False})
    assert [j.table for j in mb_first] == ["t1"]
    assert [j.table for j in ro_first] == ["t2"]
    stats = ro.stats(TAU).rollout
    assert stats is not None and (stats.decisions, stats.overrides, stats.fallbacks) == (1, 1, 0)
    scores = dict(stats.last)
    assert list(scores) == ["t1", "t2"]  # the base rule's order: t3 had not arrived
    assert scores["t1"] - scores["t2"] == pytest.approx(480.0)  # the simulated futures, as by hand
    order, area = _window(mb, mb_first)
    assert order == ["t1", "t3", "t2"] and area == pytest.approx({"t1": 80, "t2": 90, "t3": 3400})
    order, area = _window(ro, ro_first)
    assert order == ["t2", "t3", "t1"] and area == pytest.approx({"t1": 130, "t2": 60, "t3": 2900})


def _long_and_short(**rollout) -> tuple[Scheduler, list]:
    """One track. L (p = 10, ΔF = 100, E = 30) and S (p = 1, ΔF = 10, E = 1) are released at τ while tx
    holds the track; tx ends at τ. Max-Benefit ranks L first (1000/30 > 10/1). Returns the
    scheduler and the jobs it starts at τ."""
    cfg = config(
        [{"name": "sl", "period": 100}, {"name": "ss", "period": 10}, {"name": "sx", "period": 1000}],
        [
            {"name": "L", "stream": "sl", "priority": 10, "cost": {"alpha": 30, "beta": 0}},
            {"name": "S", "stream": "ss", "cost": {"alpha": 1, "beta": 0}},
            {"name": "tx", "stream": "sx", "cost": {"alpha": 1, "beta": 0}},
        ],
        policy="rollout", rollout={"k": 3, "horizon": 10, **rollout},
    )
    s = Scheduler(cfg, now=0, recovered={"L": Recovered(0), "S": Recovered(TAU - 10), "tx": Recovered(0)})
    (x,) = s.handle(PartitionArrived(stream="sx", partition_id="x", start=0, end=TAU - 1), TAU - 1)
    assert s.handle(PartitionArrived(stream="sl", partition_id="l", start=0, end=TAU), TAU) == []
    assert s.handle(PartitionArrived(stream="ss", partition_id="s", start=TAU - 10, end=TAU), TAU) == []
    return s, s.handle(JobFinished(job_id=x.job_id, duration=1), TAU)


def test_a_job_longer_than_the_horizon_is_credited_not_starved() -> None:
    """Horizon 10 from τ = 100; L's job (30 s) ends after it. Without a terminal credit L-first
    removes nothing by 110 and S-first removes S's 10 from 101: S-first is 90 less stale
    (t_S: [100, 110] 150 against 10.5 + 49.5 = 60), and rollout starts S although L is worth
    more — each time L's turn comes, so L starves while its backlog grows.
    With it: a tail of 30 (L's duration > the horizon) to 140 in which the running jobs end and
    nothing starts. L-first: S stays at F 90: 150 + 1,050; L runs 100–130: (1,050 + 2,400 + 350)
    × 10. S-first: S 60 + 750; L runs 101–131: (1,050 + 2,530.5 + 319.5) × 10. L-first is 610
    less stale: rollout keeps Max-Benefit's L (as Smith's rule would: 1000/30 > 10/1)."""
    s, first = _long_and_short()
    assert [j.table for j in first] == ["L"]
    stats = s.stats(TAU).rollout
    assert stats is not None and (stats.decisions, stats.overrides) == (1, 0)
    scores = dict(stats.last)
    assert list(scores) == ["L", "S"]
    assert scores["S"] - scores["L"] == pytest.approx(610.0)
    old, old_first = _long_and_short(terminal=False)
    assert [j.table for j in old_first] == ["S"]  # a job ending after the horizon counts as no gain
    scores = dict(old.stats(TAU).rollout.last)  # type: ignore[union-attr]
    assert scores["L"] - scores["S"] == pytest.approx(90.0)


def _chain_and_short(**rollout) -> tuple[Scheduler, list]:
    """One track, Max inheritance (§3.3). B (base, p = 0.001, ΔF = 100, E = 30) feeds the view D
    (p = 100), so Ip_B = 100; C (p = 1, ΔF = 10, E = 1) stands alone. B and C are released at τ while
    tx holds the track; tx ends at τ. Max-Benefit ranks B first (100·100/30 > 1·10/1). Returns the
    scheduler and the jobs it starts at τ."""
    cfg = config(
        [{"name": "sb", "period": 100}, {"name": "sc", "period": 10}, {"name": "sx", "period": 1000}],
        [
            {"name": "B", "stream": "sb", "priority": 0.001, "cost": {"alpha": 30, "beta": 0}},
            {"name": "D", "sources": ["B"], "priority": 100, "cost": {"alpha": 1, "beta": 0}},
            {"name": "C", "stream": "sc", "cost": {"alpha": 1, "beta": 0}},
            {"name": "tx", "stream": "sx", "cost": {"alpha": 1, "beta": 0}},
        ],
        inheritance="max", policy="rollout", rollout={"k": 3, "horizon": 10, **rollout},
    )
    rec = {"B": Recovered(0), "D": Recovered(0), "C": Recovered(TAU - 10), "tx": Recovered(0)}
    s = Scheduler(cfg, now=0, recovered=rec)
    (x,) = s.handle(PartitionArrived(stream="sx", partition_id="x", start=0, end=TAU - 1), TAU - 1)
    assert s.handle(PartitionArrived(stream="sb", partition_id="b", start=0, end=TAU), TAU) == []
    assert s.handle(PartitionArrived(stream="sc", partition_id="c", start=TAU - 10, end=TAU), TAU) == []
    return s, s.handle(JobFinished(job_id=x.job_id, duration=1), TAU)


def test_the_terminal_credit_weighs_a_source_job_by_its_inherited_priority() -> None:
    """Horizon 10 from τ = 100, a tail of 30 (B's job) to 140; D cannot run before B ends (130 or
    131), so D adds the same to both futures. By own priorities: B-first leaves C at F 90 (1,200)
    and B runs 100–130 ((3,450 + 350) × 0.001 = 3.8); C-first: C 10.5 + 799.5 = 810, B runs 101–131
    ((3,580.5 + 319.5) × 0.001 = 3.9). C-first is 389.9 less stale and the old credit starts C,
    though B is what lets the p = 100 view run next. At Ip_B = 100 B's removed staleness (∫ S of
    B without its job, 4,800, less 3,800 or 3,900: 1,000 or 900) counts 99.999 × 100 more for B-first:
    B-first is 9,610 less stale and rollout keeps Max-Benefit's B."""
    s, first = _chain_and_short()
    assert [j.table for j in first] == ["B"]
    assert s._tables["B"].inherited_priority == 100
    scores = dict(s.stats(TAU).rollout.last)  # type: ignore[union-attr]
    assert list(scores) == ["B", "C"]
    assert scores["C"] - scores["B"] == pytest.approx(9610.0)
    own, own_first = _chain_and_short(credit="own")
    assert [j.table for j in own_first] == ["C"]  # the source's job counted at p = 0.001
    scores = dict(own.stats(TAU).rollout.last)  # type: ignore[union-attr]
    assert scores["B"] - scores["C"] == pytest.approx(389.9)


@pytest.mark.parametrize(("budget", "slack"), [(1, None), (2, 1e9)])
def test_rollout_over_its_event_budget_leaves_the_round_to_the_base_rule(budget: int, slack: float | None,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget smaller than the candidates (t1, t2) covers no event; a share of one event, the
    horizon not shortened (SLACK as if every event fit), is passed by the second: both rounds are
    the base rule's, counted as fallbacks."""
    import warehouse.rollout as ro

    if slack is not None:
        monkeypatch.setattr(ro, "SLACK", slack)
    s, first = lookahead_example("rollout", rollout={"k": 3, "horizon": 10, "budget_events": budget})
    assert [j.table for j in first] == ["t1"]  # Max-Benefit's pick
    stats = s.stats(TAU).rollout
    assert stats is not None and (stats.decisions, stats.overrides, stats.fallbacks) == (1, 0, 1)


def test_rollout_counts_survive_a_reload() -> None:
    from warehouse.events import Reconfigure

    s, _ = lookahead_example("rollout", rollout={"k": 3, "horizon": 10, "terminal": False})
    s.handle(Reconfigure(config=s.config), TAU)
    stats = s.stats(TAU).rollout
    assert stats is not None and (stats.decisions, stats.overrides) == (1, 1)


def _sim_trace(policy: str, events: int = 800, **scheduler) -> tuple[str, object]:
    """A seeded simulation (two priority classes, 2 tracks, U = 1.05, slowdowns): its trace (every
    arrival and every job: table, window, duration, track, time) and the Scheduler's rollout counts."""
    import io

    from sim.simulator import Simulation, prepare
    from sim.trace import TraceWriter
    from sim.workload import TableClass, build_workload, config_of, with_utilization

    data = build_workload([TableClass(4, priorities=10.0, name="a"), TableClass(6, period=300.0, name="b")],
                          scheduler={"tracks": 2, "policy": policy, "autotune": "off", "chop": None,
                                     "partitioner": "global", **scheduler},
                          sim={"b": 0.5, "slowdown": {"factor": 3, "normal": 1000, "slow": 500}})
    cfg = prepare(config_of(with_utilization(data, 1.05)), 4)
    buf = io.StringIO()
    sim = Simulation(cfg, seed=4, writer=TraceWriter(buf))
    st = sim.run(events=events)
    return buf.getvalue(), (st.weighted_staleness, sim.sched.stats(st.horizon).rollout)


@pytest.mark.parametrize("base", ["max-benefit", "auto"])
def test_rollout_with_one_candidate_is_exactly_its_base_rule(base: str) -> None:
    """k = 1: the same jobs at the same times on the same tracks, event for event, as the base rule."""
    trace, (ws, stats) = _sim_trace("rollout", rollout={"k": 1, "base": base})
    want, (ws_base, none) = _sim_trace(base)
    assert trace.count('"table"') > 100 and trace == want and ws == ws_base
    assert none is None and stats is not None and stats.decisions == 0


def test_rollout_whose_futures_all_tie_changes_nothing() -> None:
    """k = 3 with a horizon too short for any simulated event and no terminal credit: every
    candidate's future has the same staleness, so the base rule's first job stays first — and the
    copies it simulated left the Scheduler as it was: the same run, event for event, as the base rule's."""
    trace, (ws, stats) = _sim_trace("rollout", rollout={"k": 3, "horizon": 1e-6, "terminal": False})
    want, (ws_base, _) = _sim_trace("max-benefit")
    assert stats is not None and stats.decisions > 20 and stats.overrides == 0 and stats.fallbacks == 0
    assert trace == want and ws == ws_base


def test_rollout_is_deterministic_and_decides() -> None:
    """k = 3: the same seed gives the same trace; rounds were weighed (the counts say how)."""
    one, (ws1, s1) = _sim_trace("rollout", events=600, rollout={"k": 3, "horizon": 300})
    two, (ws2, s2) = _sim_trace("rollout", events=600, rollout={"k": 3, "horizon": 300})
    assert one == two and ws1 == ws2 and s1 == s2
    assert s1 is not None and s1.decisions > 20 and s1.fallbacks == 0


def test_rollout_changes_only_copies_queries_between_events_change_no_decision() -> None:
    """The engine door test (tests/test_engine_door.py) under rollout: a saturated run with a derived
    table, every query asked between events or none — the same decisions; rollout weighed rounds."""
    from tests.test_engine_door import _cfg, _drive

    cfg, periods = _cfg("rollout")
    sc = cfg.scheduler.model_copy(update={"rollout": cfg.scheduler.rollout.model_copy(update={"horizon": 60.0})})
    cfg = cfg.model_copy(update={"scheduler": sc})
    quiet_s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    quiet = _drive(quiet_s, periods, ask=False)
    asked = _drive(Scheduler(cfg, now=0.0, initial_freshness=0.0), periods, ask=True)
    assert len(quiet) > 100 and asked == quiet
    stats = quiet_s.stats(quiet[-1][0]).rollout
    assert stats is not None and stats.decisions > 20


def test_the_simulators_report_carries_rollouts_counts_only_under_rollout() -> None:
    from sim.simulator import simulate
    from sim.workload import TableClass, build_workload, config_of, with_utilization

    def report(policy: str) -> dict:
        data = build_workload([TableClass(6)], scheduler={"tracks": 2, "policy": policy, "autotune": "off",
                                                          "rollout": {"horizon": 200}})
        return simulate(config_of(with_utilization(data, 1.0)), seed=2, events=300).to_json()

    ro = report("rollout")["rollout"]
    assert ro["decisions"] >= ro["overrides"] and ro["decisions"] > 0 and ro["fallbacks"] == 0
    assert "rollout" not in report("max-benefit")


def test_sim_run_prints_rollouts_settings_and_counts(tmp_path, capsys) -> None:
    import json

    import yaml

    from ops.cli import main as freshet
    from sim.workload import TableClass, build_workload, with_utilization

    data = build_workload([TableClass(6)], scheduler={"tracks": 2, "policy": "rollout", "autotune": "off",
                                                      "rollout": {"horizon": 200, "k": 2}})
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(with_utilization(data, 1.0)))
    assert freshet(["sim", "run", "--config", str(path), "--events", "300", "--seed", "2", "--json"]) == 0
    ro = json.loads(capsys.readouterr().out)["rollout"]
    assert freshet(["sim", "run", "--config", str(path), "--events", "300", "--seed", "2"]) == 0
    assert (f"rollout: k 2, horizon 200 s, terminal credit at inherited, 3000 events a decision, base max-benefit: "
            f"{ro['decisions']} rounds weighed, {ro['overrides']} changed from the base rule's, "
            f"{ro['fallbacks']} left to it (the budget)") in capsys.readouterr().out


def _state(s: Scheduler, now: float) -> tuple:
    """What a look-ahead must leave as it was: the snapshot, the queues' heads, the running jobs, the
    next wake-up and each table's run state (its queue version moves with any push or drain)."""
    tables = tuple((t.state, t.mode, t.queue.version, t.freshness, t.safe, t.last_arrival,
                    len(t.log.pending) if t.log is not None else None,
                    (t.derived.edge, t.derived.recompute.has_work()) if t.derived is not None else None)
                   for t in s._by_idx)
    return (dataclasses.replace(s.stats(now), rollout=None), tuple(s._queues.heads(10_000)), dict(s.running), s.next_wakeup(), tables,
            s._events, s._seq, s._next_job_id, tuple(s._queues.queued))


def test_a_local_look_ahead_changes_only_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large warehouse's look-ahead copies only the tables it can change (warehouse.rollout.involved)
    and shares the rest. Forced on a 41-table warehouse with a derived table: every decision leaves
    the Scheduler as it was, most decisions were local, and the run is the same, event for event, as
    with every query asked between events."""
    import warehouse.rollout as ro
    from tests.test_engine_door import _cfg, _drive

    monkeypatch.setattr(ro, "LOCAL_ABOVE", 0)
    seen = {"local": 0, "all": 0}
    whole = ro.involved

    def counted(*a):  # noqa: ANN002, ANN202
        out = whole(*a)
        seen["local" if out is not None else "all"] += 1
        return out

    monkeypatch.setattr(ro, "involved", counted)

    class Checked:
        """The Scheduler's first pick, with its state compared before and after each decision."""

        def __init__(self, inner: ro.Rollout) -> None:
            self.inner = inner

        @property
        def stats(self) -> ro.RolloutStats:
            return self.inner.stats

        def pick(self, s: Scheduler, now: float) -> str | None:
            before = _state(s, now)
            name = self.inner.pick(s, now)
            assert _state(s, now) == before
            return name

    cfg, periods = _cfg("rollout", n=40, tracks=3)
    sc = cfg.scheduler.model_copy(update={"rollout": cfg.scheduler.rollout.model_copy(update={"horizon": 120.0})})
    cfg = cfg.model_copy(update={"scheduler": sc})
    s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    s._first = Checked(s._first)  # type: ignore[arg-type]
    quiet = _drive(s, periods, ask=False)
    stats = s.stats(quiet[-1][0]).rollout
    assert stats is not None and stats.decisions > 20 and stats.fallbacks < stats.decisions
    assert seen["local"] > seen["all"] and seen["local"] > 20
    asked = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    assert _drive(asked, periods, ask=True) == quiet
