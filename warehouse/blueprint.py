"""What the Scheduler lays out from a config alone (§2-§3.3), prepared where it costs nothing.

A `Blueprint` holds every fact of a config that the Scheduler's tables take from it: the DAG and
its topological order (§2.1), each table's parameters (`Spec`: priority, period P_i §2.4,
lateness, granularity, target, stream, cost prior, its sources and dependents, a derived table's
SQL and refresh settings), the inherited priorities Ip_i (§3.3), the maintenance policies
(Nova, SIGMOD 2011 §2.4) and the base tables reading each stream. It reads nothing but the
config, so a reload builds it off the scheduler loop (`ops.reload`) — and parses the derived
tables' SQL there, warming the cache `warehouse.derived` reads — and hands it in with the
`Reconfigure` event. The Scheduler then compares it with the blueprint it runs
(`changed`) and touches only the tables whose parameters changed, plus cheap passes.

The track plan (§3.2) needs each table's E_i(P_i), which the Scheduler learns (§2.4): a reload
copies the cost models' (α, β) on the loop when it begins (`Scheduler.costs`) and plans ahead
from them off the loop (`Ahead`). If a model moved before the switch (a job finished meanwhile),
the plan is redone after as many events as there are tables, as after a drift (§3.2). Immutable
once built; pure: no clock, no I/O, no engine state.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from policies.basic import marginal_benefit
from policies.bulk import bulk_threshold
from policies.inheritance import inherit
from policies.reservation import ValueRanking
from tracks.plan import JobProfile, TrackPlan, make_plan
from warehouse.config import FreshetConfig, MaintenancePolicy, SchedulerConfig
from warehouse.cost import CostModel
from warehouse.dag import Dag
from warehouse.derived import _plan as refresh_plan  # the lru-cached parse `Derived.configure` reads

__all__ = ["Ahead", "Blueprint", "Changes", "Spec", "blueprint", "changed", "job_profile", "moved", "plan_profiles"]


class Spec(NamedTuple):
    """One table's parameters as a config gives them (`warehouse.layout.build_tables` applies them)."""

    priority: float  # (the two weights first: a table whose other fields stay is only re-weighed)
    target: float | None
    base: bool
    period: float  # P_i (§2.4): a base table's stream's, a derived table's the max of its ancestors'
    lateness: float
    granularity: float | None
    stream: str | None
    alpha: float  # the cost prior (§2.4): a new table's CostModel starts from it
    beta: float
    learn: bool  # scheduler.learn_costs
    row: float  # a learning base table's seconds per row beyond the sizes it has run (scheduler.row_cost); 0: none
    peer_kind: tuple[bool, bool] | None  # TableConfig.peer_kind: on the default prior, the kind whose settled models it leans on
    sources: tuple[str, ...]
    dependents: tuple[str, ...]
    # derived: (sql or the stateful increment, its sources' time columns, refresh_mode, lookback,
    # max_skew, rebuild, stateful) — what `Derived.configure` takes
    derived: tuple | None
    policy: tuple  # the maintenance policy's fields (its model is in `Blueprint.policies`)


@dataclass(frozen=True, slots=True, eq=False)
class Ahead:
    """A track plan (§3.2) made ahead from the cost models' (α, β) by table (`costs`; a table not
    in it: its prior): the plan, the tables by benefit, their profiles by index, the bulk
    threshold (policies.bulk)."""

    costs: Mapping[str, tuple[float, float]]
    plan: TrackPlan
    ranking: ValueRanking
    profiles: tuple[JobProfile, ...]
    bulk_over: float


class Changes(NamedTuple):
    """What a blueprint changes of the one it replaces: the tables to lay out again (new, or a
    parameter but their weights changed) and those only re-weighed (priority, target)."""

    touch: frozenset[str]
    reweigh: frozenset[str]


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Blueprint:
    """A config's layout (see the module docstring): `specs` and `inherited_priority` (Ip_i, §3.3)
    by table name, `readers` the base tables of each stream in topological order; `ahead`, its track plan if made;
    `against`, the blueprint it was compared with off the loop (a weak reference: no chain of old
    configs) and `changes`, what it changes of that one."""

    config: FreshetConfig
    dag: Dag
    specs: Mapping[str, Spec]
    inherited_priority: Mapping[str, float]
    policies: Mapping[str, MaintenancePolicy]
    readers: Mapping[str, tuple[str, ...]]
    rebuilding: frozenset[str]  # derived tables with `rebuild: true` (Derived.configure: touched every time)
    ahead: Ahead | None = None
    against: weakref.ref[Blueprint] | None = None
    changes: Changes | None = None


def job_profile(name: str, period: float, inherited_priority: float, e_period: float) -> JobProfile:
    """Table `name`'s job profile for (re)partitioning (§3.2): its period, E_i(P_i) and the
    regular job's marginal benefit Ip_i·P_i / E_i(P_i) (§3.1)."""
    return JobProfile(name, period, e_period, marginal_benefit(inherited_priority, period, e_period))


def plan_profiles(sc: SchedulerConfig, profiles: list[JobProfile],
                  base_periods: list[float | None]) -> tuple[TrackPlan, ValueRanking]:
    """(Re)partition (§3.2) from the profiles: the plan and the tables by decreasing benefit
    (policies.reservation.ValueRanking: who is "long", what load outranks a job); `base_periods`:
    a base table's period, None for a derived one."""
    ranking = ValueRanking((p.benefit, bp, p.u) for p, bp in zip(profiles, base_periods, strict=True))
    plan = make_plan(sc.partitioner, profiles, sc.tracks, k=sc.k, allocation=sc.allocation, aggressive=sc.aggressive)
    return plan, ranking


def blueprint(config: FreshetConfig, costs: Mapping[str, tuple[float, float]] | None = None,
              against: Blueprint | None = None) -> Blueprint:
    """The blueprint of `config` (reads nothing else); with `costs`, its track plan made ahead;
    with `against` (immutable), what it changes of that one."""
    sc = config.scheduler
    dag = Dag.from_config(config)
    periods = dag.periods()
    streams = {s.name: s for s in config.streams}
    configs = {t.name: t for t in config.tables}  # config.table() is a scan: O(n²) at 100,000 tables
    specs: dict[str, Spec] = {}
    policies: dict[str, MaintenancePolicy] = {}
    readers: dict[str, list[str]] = {}
    for name in dag.order:
        tc = configs[name]
        prior = config.cost_prior(tc)
        policy = policies[name] = config.maintenance_of(tc)
        derived = None
        if not tc.is_base:
            sql = tc.increment if tc.is_stateful else tc.sql  # a stateful table: its increment (lake.stateful)
            tcols = tuple(streams[c.stream].time_column if c.stream else "ts" for c in (configs[n] for n in tc.sources))
            derived = (sql, tcols, tc.refresh_mode, tc.lookback, tc.max_skew, tc.rebuild, tc.is_stateful)
            if sql and not tc.is_stateful:
                refresh_plan(sql, tcols)  # parsed here, off the loop: the loop's configure finds it cached
        elif tc.stream is not None:
            readers.setdefault(tc.stream, []).append(name)
        specs[name] = Spec(
            base=tc.is_base, priority=tc.priority, period=periods[name],
            lateness=streams[tc.stream].lateness if tc.stream else 0.0, granularity=tc.granularity,
            target=tc.target_staleness, stream=tc.stream, alpha=prior.alpha, beta=prior.beta, learn=sc.learn_costs,
            row=sc.row_cost if tc.is_base and sc.learn_costs else 0.0,
            peer_kind=tc.peer_kind,
            sources=dag.sources[name], dependents=dag.dependents[name], derived=derived,
            policy=(policy.optimize_every, policy.vacuum_every, policy.vacuum_retain))
    inherited = inherit({n: s.priority for n, s in specs.items()}, dag.dependents, dag.order, sc.inheritance, sc.inheritance_k)
    ahead = None
    if costs is not None:
        if against is not None:  # a table whose kind changes is a new one: it starts from its prior
            was = against.specs
            costs = {n: c for n, c in costs.items() if n in specs and (n not in was or was[n].base == specs[n].base)}
        profiles = [job_profile(n, s.period, inherited[n], CostModel(*costs.get(n, (s.alpha, s.beta))).estimate(s.period))
                    for n, s in specs.items()]
        plan, ranking = plan_profiles(sc, profiles, [s.period if s.base else None for s in specs.values()])
        ahead = Ahead(costs, plan, ranking, tuple(profiles), bulk_threshold(sc.bulk_cost, (p.e_period for p in profiles)))
    rebuilding = frozenset(n for n, s in specs.items() if s.derived is not None and s.derived[5])
    return Blueprint(config, dag, specs, inherited, policies, {s: tuple(ns) for s, ns in readers.items()}, rebuilding, ahead,
                     None if against is None else weakref.ref(against),
                     None if against is None else _compare(specs, against.specs))


def moved(ahead: Ahead, models: Iterable[tuple[str, CostModel]]) -> bool:
    """A cost model the plan was made from has moved since (`models`: by table, now)."""
    was = ahead.costs
    for name, m in models:
        c = was.get(name)
        if c is not None and (m.alpha != c[0] or m.beta != c[1]):
            return True
    return False


def changed(new: Blueprint, was: Blueprint | None) -> Changes | None:
    """What `new` changes of `was` (compared off the loop if `new` was prepared against it);
    None: everything (no blueprint to compare with)."""
    if was is None:
        return None
    if new.changes is not None and new.against is not None and new.against() is was:
        return new.changes
    return _compare(new.specs, was.specs)


def _compare(specs: Mapping[str, Spec], old: Mapping[str, Spec]) -> Changes:
    touch, reweigh = set(), set()
    for n, s in specs.items():
        o = old.get(n)
        if o is None or o[2:] != s[2:]:
            touch.add(n)
        elif o != s:
            reweigh.add(n)
    return Changes(frozenset(touch), frozenset(reweigh))
