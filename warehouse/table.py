"""A table as the Scheduler keeps it: where its job is (`JobState`), what an operator asked of it
(`Mode`), what storage held for it on start (`Recovered`), and its facts — priority, period,
freshness (§2.1-§2.4), its base backlog (warehouse.backlog) or derived state (warehouse.derived).
The moves between states are the Scheduler's transition table (`warehouse.scheduler.TRANSITIONS`).
Pure data: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from policies.inheritance import inherit
from warehouse.backlog import Backlog
from warehouse.config import FreshetConfig
from warehouse.cost import CostModel, RowRate
from warehouse.dag import Dag
from warehouse.derived import Derived
from warehouse.freshness import StalenessMeter, safe_freshness

__all__ = ["BUSY", "QUEUED", "JobState", "Mode", "Recovered", "Table", "build_tables"]


class JobState(Enum):
    """Where a table's job is (§3.1: released, running). `phase` is what stats show."""

    IDLE = "idle"
    PENDING = "pending"  # released, waits in its group's queue
    HELD = "held"  # released; a track it could take waits for more valuable jobs (policies.reservation)
    RUNNING = "running"  # an update job
    SLICING = "slicing"  # an update job loading a time slice of one long partition (§3.4)
    RECOMPUTING = "recomputing"  # a recompute job rewriting committed windows (warehouse.recompute)
    MAINTAINING = "maintaining"  # OPTIMIZE/VACUUM (warehouse.upkeep) as the table's one writer
    BACKOFF = "backoff"  # the last job failed; retried after the back-off

    __hash__ = object.__hash__  # members are singletons: identity hashing, in C (the hot path looks them up)

    @property
    def phase(self) -> str:
        """idle, pending, running or backoff (`TableStats.state`, the metrics' labels)."""
        return _PHASE[self]


class Mode(Enum):
    """What an operator asked of a table (ops.actions)."""

    ACTIVE = "active"
    URGENT = "urgent"  # refresh: its next update job starts ahead of the queue
    SUSPENDED = "suspended"  # no job starts; arrivals are kept

    __hash__ = object.__hash__


QUEUED = frozenset({JobState.PENDING, JobState.HELD})
BUSY = frozenset({JobState.RUNNING, JobState.SLICING, JobState.RECOMPUTING, JobState.MAINTAINING})
_PHASE = {JobState.IDLE: "idle", JobState.PENDING: "pending", JobState.HELD: "pending", JobState.RUNNING: "running",
          JobState.SLICING: "running", JobState.RECOMPUTING: "running", JobState.MAINTAINING: "running",
          JobState.BACKOFF: "backoff"}


@dataclass(frozen=True, slots=True)
class Recovered:
    """A table's state read back from storage on start (DESIGN.md §4.4).

    `origin` is the earliest event time the table covers (the start of its first load): a new
    derived table over recovered sources is computed from there, not from their freshness.
    The rest is the maintenance history (`warehouse.upkeep`): Freshet commits since the last
    OPTIMIZE, the freshness it compacted through, when it and the last VACUUM ran, and the time
    of the first retained commit (the vacuum clock's start before any VACUUM).
    """

    freshness: float | None
    safe_freshness: float | None = None
    origin: float | None = None
    commits_since_optimize: int = 0
    optimized_through: float | None = None
    last_optimize: float | None = None
    last_vacuum: float | None = None
    first_commit: float | None = None
    sql_versions: tuple[tuple[float, float, str], ...] = ()  # derived: (lo, hi, version) committed
    dirty: tuple[tuple[float, float], ...] = ()  # derived: committed ranges a later source commit made wrong


@dataclass(slots=True, eq=False)
class Table:
    name: str
    idx: int
    base: bool
    priority: float
    period: float
    lateness: float
    granularity: float | None
    target: float | None
    stream: str | None
    cost: CostModel
    meter: StalenessMeter
    ip: float = 0.0
    sources: list[Table] = field(default_factory=list)
    dependents: list[Table] = field(default_factory=list)
    freshness: float | None = None
    safe: float | None = None
    origin: float | None = None
    edge: float | None = None  # derived: safe trailing edge of the sources, floored (§2.2)
    log: Backlog | None = None  # base: the partitions arrived and not loaded (warehouse.backlog)
    rate: RowRate | None = None  # base: its stream's typical rows per second (shared, Scheduler._rates)
    state: JobState = JobState.IDLE
    mode: Mode = Mode.ACTIVE
    release: float = 0.0
    last_arrival: float | None = None
    seq: int = 0
    rand: float = 0.0
    version: int = 0
    group: int = 0
    plan_e: float = 0.0
    benefit: float = 0.0  # Ip_i·P_i / E_i(P_i): a regular job's marginal benefit (§3.1)
    held_since: float = 0.0  # HELD: when its job first left a track waiting (policies.reservation)
    backoff_until: float = 0.0
    failures: int = 0
    released: int = 0
    completed: int = 0
    failed: int = 0
    delta_total: float = 0.0
    last_result: str | None = None
    removed: bool = False
    dv: Derived | None = None  # derived: edge, refresh mode, what to recompute (warehouse.derived)


def build_tables(config: FreshetConfig, dag: Dag, old: dict[str, Table], recovered: dict[str, Recovered],
                 initial: float | None, now: float) -> tuple[dict[str, Table], list[Table]]:
    """The tables of `config` in topological order, wired to their sources and dependents, with
    inherited priorities (§3.3): a table that stays keeps its run state (during a run the
    Scheduler owns it) and takes the new parameters; a new one starts from what storage holds
    (`recovered`) or `initial`. Tables of `old` no longer configured are marked removed.
    (tables by name, the new ones)."""
    sc = config.scheduler
    periods = dag.periods()
    streams = {s.name: s for s in config.streams}
    configs = {t.name: t for t in config.tables}  # config.table() is a scan: O(n²) at 100,000 tables
    tables: dict[str, Table] = {}
    new: list[Table] = []
    for i, name in enumerate(dag.order):
        tc = configs[name]
        prior = config.cost_prior(tc)
        t = was = old.get(name)
        rec = recovered.get(name)
        if t is None or t.base != tc.is_base or t.removed:
            t = Table(
                name=name,
                idx=i,
                base=tc.is_base,
                priority=tc.priority,
                period=periods[name],
                lateness=streams[tc.stream].lateness if tc.stream else 0.0,
                granularity=tc.granularity,
                target=tc.target_staleness,
                stream=tc.stream,
                cost=CostModel(prior.alpha, prior.beta, learn=sc.learn_costs),
                meter=StalenessMeter(target=tc.target_staleness),
                log=Backlog() if tc.is_base else None,
                mode=was.mode if was is not None else Mode.ACTIVE,  # an operator's word outlives a reload
            )
            new.append(t)
            f = rec.freshness if rec else initial
            if f is not None:
                t.freshness = f
                t.origin = rec.origin if rec and rec.origin is not None else f
                t.safe = safe_freshness(f, t.lateness, (rec.safe_freshness if rec else None,))
                t.meter.start(f, now)
        else:
            t.idx, t.priority, t.period = i, tc.priority, periods[name]
            t.lateness = streams[tc.stream].lateness if tc.stream else 0.0
            t.granularity, t.target, t.stream = tc.granularity, tc.target_staleness, tc.stream
            t.meter.target = tc.target_staleness
            t.cost.learn = sc.learn_costs
        t.sources, t.dependents = [], []
        if not t.base:  # refresh mode, skew bound and SQL version (warehouse.derived)
            sql = tc.increment if tc.is_stateful else tc.sql  # a stateful table: its increment (lake.stateful)
            if t.dv is None:
                t.dv = Derived(sql, rec.sql_versions if rec else (), rec.dirty if rec else ())
            tcols = tuple(streams[c.stream].time_column if c.stream else "ts" for c in (configs[n] for n in tc.sources))
            t.dv.configure(sql, tcols, tc.refresh_mode, tc.lookback, tc.max_skew, tc.rebuild, stateful=tc.is_stateful)
        tables[name] = t
    for name, t in tables.items():
        t.sources = [tables[s] for s in dag.sources[name]]
        t.dependents = [tables[d] for d in dag.dependents[name]]
    for name, t in old.items():
        if name not in tables:
            t.removed = True
    ip = inherit({n: t.priority for n, t in tables.items()}, dag.dependents, dag.order, sc.inheritance, sc.inheritance_k)
    for n, t in tables.items():
        t.ip = ip[n]
    return tables, new
