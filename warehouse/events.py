"""Events into the Scheduler (past tense) and decisions out of it (imperative) —.

Times are float seconds on one axis chosen by the shell: epoch seconds in the daemon,
simulated seconds in the simulator. The Scheduler never reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

from warehouse.errors import SchedulerMisuse

__all__ = [
    "ACTION_EVENTS",
    "Backfill",
    "CancelBackfill",
    "Event",
    "JobFailed",
    "JobFinished",
    "OperatorAction",
    "PartitionArrived",
    "PartitionDropped",
    "Reconfigure",
    "Refresh",
    "Resume",
    "StartJob",
    "Suspend",
    "Tick",
]


_Class = TypeVar("_Class", bound=type)
_INF, _NINF = math.inf, -math.inf  # a float x is finite iff -inf < x < inf (NaN compares false): no call
_INT64 = 2**63 - 1  # the most rows a partition's files can hold (Parquet's row count is an int64)


def _quick_init(cls: _Class) -> _Class:
    """The hot events (one or more per simulated event) keep their frozen dataclass — same
    signature, defaults, `__post_init__`, equality, hash, immutability — with a faster `__init__`:
    the generated one calls `object.__setattr__` per field, looked up each time; this one sets each
    slot through its own descriptor."""
    ns: dict[str, Any] = {}
    params, body = [], []
    for f in fields(cls):
        assert f.default_factory is MISSING and f.kw_only, f"{cls.__name__}.{f.name}: keyword-only, plain default"
        params.append(f.name if f.default is MISSING else f"{f.name}=_d_{f.name}")
        ns[f"_d_{f.name}"] = f.default
        ns[f"_s_{f.name}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        body.append(f"_s_{f.name}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    ns["_new"], ns["_cls"] = object.__new__, cls

    def make(name: str, head: str, lines: list[str]) -> Any:
        """A function `name(head)` that makes a `cls` and runs `lines` on it (source built once, here)."""
        exec(f"def {name}({head}):\n    self = _new(_cls)\n    " + "\n    ".join(lines) + "\n    return self", ns)  # noqa: S102
        return ns[name]

    exec(f"def __init__(self, *, {', '.join(params)}) -> None:\n    " + "\n    ".join(body), ns)  # noqa: S102
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[misc]
    # `cls._trusted(*fields)`: the same object from the fields in order, without `__post_init__` —
    # for a caller whose values pass it by construction (the simulator's generated partitions)
    cls._trusted = staticmethod(make("_trusted", ", ".join(params), body[:len(params)]))  # type: ignore[attr-defined]
    # `cls.build(**fields)`: the same object as `cls(**fields)`, `__post_init__` and all, by a plain
    # function call — a class called with keywords packs them into a dict for its `__init__` (the
    # type call), a function binds them as they come: about 1 µs less per StartJob (the job path)
    cls.build = staticmethod(make("build", f"*, {', '.join(params)}", body))  # type: ignore[attr-defined]
    return cls


def _finite(name: str, value: float) -> None:
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise SchedulerMisuse(f"{name} must be a finite number, got {value!r}")


@_quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionArrived:
    """A partition of `stream` covering event time `(start, end]` arrived (§2.1).

    `safe_through` is the source's punctuation: no record at or before it will arrive later (§2.2).
    `files` (absolute paths) and `fingerprint` are what the landing zone validated; the Scheduler
    hands them on in the `StartJob` that loads the partition, so a worker never asks the intake.
    """

    stream: str
    partition_id: str
    start: float
    end: float
    rows: int = 0
    safe_through: float | None = None
    files: tuple[str, ...] = ()
    fingerprint: str = ""

    def __post_init__(self) -> None:
        start, end = self.start, self.end
        if not (type(start) is float and type(end) is float and _NINF < start < _INF and _NINF < end < _INF):
            _finite("start", start)  # finite floats (the usual case) need neither message nor conversion
            _finite("end", end)
            object.__setattr__(self, "start", float(start))
            object.__setattr__(self, "end", float(end))
        if self.end <= self.start:
            raise SchedulerMisuse(f"partition {self.partition_id!r} of {self.stream!r}: end <= start")
        if not 0 <= self.rows <= _INT64:
            got = str(self.rows)
            raise SchedulerMisuse(f"partition {self.partition_id!r}: rows must be a count from 0 to 2^63 − 1 "
                                  f"(a Parquet row count), got {got if len(got) < 24 else got[:20] + '…'}")

    def __deepcopy__(self, memo: dict) -> PartitionArrived:
        return self  # immutable: a copy of the Scheduler shares it (warehouse.rollout)


@_quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class JobFinished:
    """Job `job_id` ended with its work in the Delta log; it ran for `duration` seconds.

    `committed` is False for a no-op (a replay: the log already held the work). Only committed
    jobs refine α, β (§2.4): a no-op's near-zero duration says nothing about E(n). A maintenance
    job (`warehouse.upkeep`) reports the table's data `files` after it and the bytes a VACUUM
    deleted (`bytes_reclaimed`). `version`: the table's Delta version after the job (the one it
    wrote); `read`: (source, Delta version) for each source a derived job read — the lineage a
    catalog is told (ops.lineage). `sql_version`: for a derived job, the SQL version the log
    holds over its window — the one it committed, or for a no-op (a retry after an unknown
    outcome) the one the earlier attempt committed; None when not known (the Scheduler then takes
    the job's own for a commit and none, "", for a no-op: its windows count as on an old SQL).
    `cold`: the table's first committed job in this Spark session (its Delta snapshot read for the
    first time, its code not yet compiled): it teaches E(n) only if it ran within it (§2.4).
    """

    job_id: int
    duration: float
    rows: int = 0
    committed: bool = True
    files: int | None = None
    bytes_reclaimed: int = 0
    version: int | None = None
    read: tuple[tuple[str, int], ...] = ()
    sql_version: str | None = None
    cold: bool = False

    def __post_init__(self) -> None:
        if not (type(self.duration) is float and _NINF < self.duration < _INF):
            _finite("duration", self.duration)
        if self.duration < 0:
            raise SchedulerMisuse(f"job {self.job_id}: negative duration")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFailed:
    """Job `job_id` did not commit. Its data stays pending and is retried after a back-off —
    except `bad_partitions`: partitions found unloadable after acceptance (a file deleted or
    changed since it was validated), which the shell quarantines and the Scheduler drops."""

    job_id: int
    reason: str = ""
    bad_partitions: tuple[str, ...] = ()
    refused: bool = False  # it wrote nothing (a refusal before its write): not an unknown outcome


@dataclass(frozen=True, slots=True, kw_only=True)
class Tick:
    """Nothing happened but time passed (back-offs may have expired)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDropped:
    """Partition `partition_id` of `stream`, accepted earlier, was found unloadable (its files
    changed or vanished) and quarantined: it leaves every table's pending work, `arrived` and
    backlog at once (docs/operations.md §3). A partition already loaded is not affected."""

    stream: str
    partition_id: str
    reason: str = ""


# ---- operator actions (ops.actions): they enter by the same door as arrivals and finishes ----------
@dataclass(frozen=True, slots=True, kw_only=True)
class Suspend:
    """No job of `table` starts until `Resume` (a running one finishes); arrivals are still taken."""

    table: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resume:
    """Undo `Suspend`: what arrived meanwhile is released as one job (§2.4)."""

    table: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refresh:
    """Run `table`'s next update job ahead of every waiting job, on the first free track."""

    table: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Backfill:
    """Recompute the committed windows `(start, end]` of derived `table` (warehouse.recompute):
    benefit-ranked recompute jobs, like late data; `reason` goes into their commits."""

    table: str
    start: float
    end: float
    reason: str = "backfill"

    def __post_init__(self) -> None:
        _finite("start", self.start)
        _finite("end", self.end)


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelBackfill:
    """Forget the part of a `Backfill` (the one whose `reason` it names) not rewritten yet in
    `(start, end]`; a recompute job already running finishes. Windows also wrong for another
    reason (late data, old SQL) stay to recompute."""

    table: str
    start: float
    end: float
    reason: str

    def __post_init__(self) -> None:
        _finite("start", self.start)
        _finite("end", self.end)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconfigure:
    """A new configuration (a reload, §3.2: repartition when tables are added or removed or their
    parameters change). `recovered` (name → warehouse.scheduler.Recovered) is what storage holds
    for the tables: one added over existing data starts from there. `blueprint`: the config's
    layout, prepared off the scheduler loop by a reload (warehouse.blueprint); else built in `handle`."""

    config: Any  # warehouse.config.FreshetConfig (not imported: events stay a leaf module)
    recovered: Mapping[str, Any] | None = None
    blueprint: Any = None  # warehouse.blueprint.Blueprint of `config`, prepared off the loop; else built on it


OperatorAction = Suspend | Resume | Refresh | Backfill | CancelBackfill
ACTION_EVENTS: dict[str, type] = {"suspend": Suspend, "resume": Resume, "refresh": Refresh, "backfill": Backfill,
                                  "cancel_backfill": CancelBackfill}  # the trace's `action` names
Event = PartitionArrived | PartitionDropped | JobFinished | JobFailed | Tick | OperatorAction | Reconfigure


@_quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class StartJob:
    """Run update job `job_id` for `table` on `track` now.

    Base jobs load `arrivals` (the partitions as they arrived — ids, windows, files —
    chronological); derived jobs compute the window `(start, end]` of their SQL over `sources`
    (each read up to `end`). After the job the table's freshness is `new_freshness` and its safe
    freshness `new_safe_freshness`. `late` names the arrivals at or below the safe freshness.

    Recompute jobs (`kind="recompute"`, warehouse.recompute) rewrite the committed windows
    `(start, end]` of a derived table with `replaceWhere`; freshness does not move. `late` then
    names the late partitions behind it and `reasons` why ("late", "sql", "upstream", a backfill's
    reason). `full`: the SQL over everything from `start` (the table's origin) to `end` overwrites
    the whole table (§5 of docs/warehouse.md: full refresh). `sql_version`: the derived SQL's
    version (warehouse.sqltext.sql_version) the job runs, recorded in its commit. `work`: n of
    E(n) (§2.4, warehouse.cost.RowRate) where it is not the event time `end − start` (a base job
    whose rows differ from the stream's typical rate); read it as `n`. `priority`: the table's
    inherited priority Ip (§3.3) when the job started; `bulk`: its estimate is over the bulk
    threshold (policies.bulk) — both choose its fair-scheduler pool; `overdue`: it started before
    the basic algorithm's order, its table `scheduler.overdue_periods` of its periods without getting
    fresher (warehouse.overdue).
    """

    job_id: int
    table: str
    track: int
    kind: str  # "base" | "derived" | "stateful" | "recompute" | "optimize" | "vacuum" (maintenance, warehouse.upkeep)
    start: float
    end: float
    new_freshness: float
    new_safe_freshness: float
    arrivals: tuple[PartitionArrived, ...] = ()
    sources: tuple[str, ...] = ()
    delta_f: float = 0.0
    estimate: float = 0.0
    chopped: bool = False
    late: tuple[str, ...] = field(default=())
    full: bool = False
    reasons: tuple[str, ...] = ()
    sql_version: str = ""
    work: float | None = None
    priority: float = 0.0
    bulk: bool = False
    overdue: bool = False

    def __deepcopy__(self, memo: dict) -> StartJob:
        return self  # immutable: a copy of the Scheduler shares it (warehouse.rollout)

    @property
    def n(self) -> float:
        """n of E(n) = α + β·n (§2.4): `work`, else the event time the job covers."""
        return self.end - self.start if self.work is None else self.work

    @property
    def partitions(self) -> tuple[str, ...]:
        """The ids of the partitions this job loads (base jobs), chronological."""
        return tuple(p.partition_id for p in self.arrivals)

    @property
    def time_slice(self) -> bool:
        """A base job loading a time slice of one partition (§3.4): the partition ends after the
        job's window, and stays pending for the next slice."""
        return len(self.arrivals) == 1 and self.arrivals[0].end > self.end
