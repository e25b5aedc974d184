"""The configuration schema (docs/warehouse.md): one YAML file read by the daemon and the simulator.

Loaded in layers — file → text → dict → model — so tests validate plain dicts. Every model is
strict (`extra="forbid"`) and frozen; cross-field rules are named `verify_*` functions whose
messages name the table or stream. Durations accept `90s`, `5m`, `1h`, `1d`, `250ms` or a bare
number of seconds.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from warehouse.config_base import Duration, Name, Slope, Strict, parse_duration
from warehouse.config_scheduler import (  # noqa: F401 - re-exported: the scheduler section lives there
    Inheritance,
    Partitioner,
    Policy,
    RolloutBase,
    RolloutConfig,
    SchedulerConfig,
    parse_chop,
)
from warehouse.config_sim import SimConfig
from warehouse.config_storage import S3Settings, WarehousePaths
from warehouse.errors import ConfigError

__all__ = [
    "CostPrior",
    "FreshetConfig",
    "LineageConfig",
    "Maintenance",
    "MaintenancePolicy",
    "S3Settings",
    "SchedulerConfig",
    "SimConfig",
    "SparkConfig",
    "StreamConfig",
    "TableConfig",
    "WarehousePaths",
    "load_config",
    "parse_chop",
    "parse_config",
    "parse_duration",
    "with_cores",
]

SQL_TYPES = ("string", "timestamp", "date", "double", "float", "long", "int", "integer", "boolean", "binary")


# Hadoop S3A's own credential keys: never in the config file (warehouse.s3.credentials says where they come from)
_S3A_SECRET = re.compile(r"fs\.s3a\.(?:bucket\.[^.]+\.)?(?:access\.key|secret\.key|session\.token)$", re.IGNORECASE)


class StreamConfig(Strict):
    """A source pushing partitions `(start, end]` roughly every `period` (§2.1)."""

    name: Name
    period: Duration = Field(description="P_s, the expected interval between partitions", gt=0)
    lateness: Duration = Field(0.0, description="how late a record may arrive; F' = F − lateness (§2.2)")
    time_column: Name = Field("ts", description="the event-time column")
    format: Literal["parquet", "json", "csv"] = "parquet"
    schema_: dict[Name, str] = Field(default_factory=dict, alias="schema", description="column → Spark SQL type")
    max_future_skew: Duration = Field(
        300.0, description="a partition whose end lies further beyond the daemon's clock is quarantined (§4.3)")
    allow_overlap: bool = Field(
        False, description="accept partitions whose (start, end] overlaps another one of the stream "
                           "(sources that split one window into several partitions)")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _schema_types(self) -> StreamConfig:
        for col, typ in self.schema_.items():
            base = typ.split("(")[0].strip().lower()
            if base not in SQL_TYPES and base != "decimal":
                raise ValueError(f"column {col!r} has unknown type {typ!r} (one of {', '.join(SQL_TYPES)})")
        if self.schema_ and self.time_column not in self.schema_:
            raise ValueError(f"time_column {self.time_column!r} is not in the schema")
        return self


class CostPrior(Strict):
    """Prior for E(n) = α + β·n (§2.4); refined online from observed durations."""

    alpha: Duration = Field(1.0, description="α: fixed start-up cost of a job, seconds")
    beta: Slope = Field(0.1, description="β: seconds of work per second of data")


class Maintenance(Strict):
    """Compaction and garbage collection as scheduled jobs (Nova, SIGMOD 2011 §2.4; `warehouse.upkeep`).

    Global under `maintenance:`, and per table under `tables[].maintenance:`, where a field that
    is given (even `null`) overrides the global one and a field left out inherits it.
    """

    optimize_every: int | None = Field(
        None, ge=1, le=1_000_000, description="OPTIMIZE (compact small files) after this many commits of the "
                                             "table; null = never")
    vacuum_every: Duration | None = Field(
        None, gt=0, description="VACUUM (delete files no version within the retention needs) this often; "
                                "null = never")
    vacuum_retain: Duration | None = Field(
        None, ge=0, description="VACUUM keeps files removed less than this long ago (default 7d, Delta's "
                                "default); never below the table's delta.deletedFileRetentionDuration")


DEFAULT_VACUUM_RETAIN = 7 * 86400.0


class MaintenancePolicy(Strict):
    """One table's maintenance after merging the table's override into the global section."""

    optimize_every: int | None = None
    vacuum_every: float | None = None
    vacuum_retain: float = DEFAULT_VACUUM_RETAIN

    @property
    def active(self) -> bool:
        return self.optimize_every is not None or self.vacuum_every is not None


FOLDS = ("sum", "count", "min", "max", "last", "first")
Fold = Literal["sum", "count", "min", "max", "last", "first"]


class TableConfig(Strict):
    """A base table (loaded from one `stream`), a derived table (`sql` over `sources`) or a
    stateful table (`kind: stateful`: keyed state folded increment by increment, Programming Bulk-Incremental Dataflows §3)."""

    name: Name
    kind: Literal["base", "derived", "stateful"] | None = Field(
        None, description="base, derived or stateful; left out: base with a `stream`, derived with `sources`")
    stream: Name | None = Field(None, description="base tables: the stream that feeds it")
    sources: list[Name] = Field(default_factory=list, description="derived tables: the tables its SQL reads")
    sql: str | None = Field(None, description="derived tables: Spark SQL over the sources, by name")
    priority: float = Field(1.0, gt=0, le=1e6, description="p_i, the user priority (§2.3)")
    cost: CostPrior | None = Field(None, description="prior for E(n); default from `sim`")
    granularity: Duration | None = Field(None, description="derived: window end floored to this")
    lookback: Duration = Field(0.0, description="derived: read sources this far before the window (band joins)")
    target_staleness: Duration | None = Field(None, description="the staleness SLO shown and alerted on")
    partition_by: Literal["date", "hour"] = Field("date", description="Delta partition column derived from time")
    maintenance: Maintenance | None = Field(None, description="overrides of the global `maintenance:` section")
    max_skew: Duration = Field(
        0.0, description="derived: update up to where the sources' safe freshness differ by at most this "
                         "(Olston, Modeling and Scheduling Asynchronous Incremental Workflows bound_inconsistency); 0 = the safe trailing edge (§2.2)")
    refresh_mode: Literal["auto", "incremental", "full"] = Field(
        "auto", description="derived: incremental (append windows, replaceWhere rewrites), full (overwrite the "
                            "table each job) or auto (full only for SQL that is not window-local, "
                            "warehouse.sqltext.refresh_plan)")
    rebuild: bool = Field(
        False, description="derived: on a SQL change, rewrite the whole table at once (a schema change that "
                           "is not additive needs it) instead of window by window in the background; "
                           "stateful: on a change of the increment, rebuild the state from the sources in chunks")

    key: list[Name] = Field(default_factory=list, description="stateful: the key columns of the state")
    increment: str | None = Field(
        None, description="stateful: Spark SQL over the sources giving one row per key for the window "
                          "(:window_start, :window_end] — the increment folded into the state (Programming Bulk-Incremental Dataflows §3)")
    fold: dict[Name, Fold] = Field(
        default_factory=dict, description="stateful: how each increment column combines with the state: "
                                          "sum, count, min, max, last, first (last/first by `time_column`)")
    time_column: Name | None = Field(
        None, description="stateful: the increment's event-time column that `last`/`first` compare (default ts)")
    order: dict[Name, Name] = Field(
        default_factory=dict, description="stateful: a `last`/`first` column's own ordering column (default "
                                          "`time_column`): a `first` needs the earliest time of its key's rows "
                                          "in the increment (min(ts)), a `last` the latest (max(ts))")

    @property
    def is_base(self) -> bool:
        return self.stream is not None

    @property
    def is_stateful(self) -> bool:
        return self.kind == "stateful"

    @property
    def peer_kind(self) -> tuple[bool, bool] | None:
        """(base, stateful): the kind of table whose settled cost models this one's prior follows
        (cost.Peers); None when its `cost` is stated."""
        return None if self.cost is not None else (self.is_base, self.is_stateful)


TIME_ZONE_KEY = "spark.sql.session.timeZone"
UTC_NAMES = frozenset({"utc", "etc/utc", "z", "+00:00", "gmt", "etc/gmt"})  # what the key may say
_REMOTE = re.compile(r"^sc://[^/:\s]+(:\d{1,5})?(/;[^\s]*)?$")
_LOCAL_ALL = re.compile(r"^local\[\*(?:\s*,\s*\d+)?\]$")


class SparkConfig(Strict):
    """Where the Spark work runs (docs/warehouse.md §2): a driver in this process (`master`, the default
    `local[*]`), or a Spark Connect server (`remote`). One or the other, never both."""

    master: str | None = Field(None, description="spark.master: local[*] (default), spark://host:port, k8s://…")
    remote: str | None = Field(None, description="Spark Connect: sc://host:port (instead of master)")
    app_name: str = "freshet"
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark configuration")
    cores: int | None = Field(None, ge=1, le=65536, description="the cores Spark's jobs share, for `scheduler."
                              "bulk_limit: auto`; default: N of local[N]; for local[*] the machine's (the daemon "
                              "counts them when it starts); a cluster or Spark Connect: say it, else no limit")

    @field_validator("conf")
    @classmethod
    def _utc_session(cls, conf: dict[str, str]) -> dict[str, str]:
        """The session time zone stays UTC: partition columns follow it while source pruning and
        `replaceWhere` ranges are computed in UTC, so another zone silently misses rows."""
        for key, value in conf.items():
            if _S3A_SECRET.search(key):
                raise ValueError(f"{key}: no credentials in the config file — give them to the daemon in its "
                                 f"environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and set "
                                 f"warehouse.s3.credentials (env or default)")
            if key.lower() == TIME_ZONE_KEY.lower() and str(value).strip().lower() not in UTC_NAMES:
                raise ValueError(f"{key} is {value!r}: Freshet needs UTC (its partition columns, source pruning "
                                 f"and replaceWhere ranges are in UTC; another session time zone silently "
                                 f"misses rows) — remove the key, Freshet sets UTC itself")
        return conf

    @model_validator(mode="before")
    @classmethod
    def _default_master(cls, data: Any) -> Any:
        """Neither given: `local[*]`, Spark inside the daemon."""
        if isinstance(data, Mapping) and data.get("master") is None and data.get("remote") is None:
            return {**data, "master": "local[*]"}
        return data

    @model_validator(mode="after")
    def _master_or_remote(self) -> SparkConfig:
        if self.master is not None and self.remote is not None:
            raise ValueError(f"set either master ({self.master!r}) or remote ({self.remote!r}), not both: "
                             "master runs Spark in (or from) this process, remote talks to a Spark Connect server")
        if self.remote is not None and not _REMOTE.match(self.remote):
            raise ValueError(f"remote {self.remote!r} is not a Spark Connect URL: expected sc://host:port")
        return self

    @property
    def all_local_cores(self) -> bool:
        """`local[*]` (or `local[*, F]`): Spark in this process on every core of the machine."""
        return self.remote is None and _LOCAL_ALL.match((self.master or "").strip()) is not None

    @property
    def where(self) -> str:
        """`remote sc://…` or `master local[*]`: what `freshet validate` and the logs show."""
        return f"remote {self.remote}" if self.remote else f"master {self.master}"


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class LineageConfig(Strict):
    """OpenLineage events for every job (ops.lineage): off unless this section is given.

    `http`: POSTed to `url` + `endpoint` (Marquez: `http://marquez:5000`, endpoint `api/v1/lineage`),
    with `Authorization: Bearer $<api_key_env>` when `api_key_env` names an environment variable;
    `file`: one JSON event per line appended to the path `url`; `console`: logged.
    """

    transport: Literal["http", "file", "console"] = Field(description="where the events go")
    url: str | None = Field(None, description="http: the lineage server's base URL; file: the path to append to")
    namespace: str = Field("freshet", min_length=1, max_length=256,
                           description="the OpenLineage job namespace: jobs are `<namespace>/<table>`")
    api_key_env: str | None = Field(None, description="http: the environment variable holding the API key")
    endpoint: str = Field("api/v1/lineage", description="http: the path under `url` events are POSTed to")
    timeout: Duration = Field(5.0, gt=0, le=300, description="http: seconds one POST may take")
    buffer: int = Field(10_000, ge=1, le=10_000_000, description="events kept while the endpoint is slow or "
                                                                  "down; beyond it new ones are dropped and counted")
    retries: int = Field(5, ge=0, le=100, description="further tries of one event, with doubling back-off, "
                                                      "before it is dropped and counted")

    @model_validator(mode="after")
    def _transport_fields(self) -> LineageConfig:
        if self.transport == "http":
            if not self.url or not re.match(r"^https?://[^\s/]+", self.url):
                raise ValueError(f"transport http needs `url`, the lineage server's http(s):// base URL "
                                 f"(Marquez: http://marquez:5000), got {self.url!r}")
        elif self.transport == "file":
            if not self.url or "://" in self.url.removeprefix("file://"):
                raise ValueError(f"transport file needs `url`, the path of the file events are appended to, "
                                 f"got {self.url!r}")
        elif self.url is not None:
            raise ValueError(f"transport console takes no `url` (got {self.url!r}): events go to the log")
        if self.api_key_env is not None:
            if self.transport != "http":
                raise ValueError(f"api_key_env is for transport http only (transport is {self.transport})")
            if not _ENV_NAME.match(self.api_key_env):
                raise ValueError(f"api_key_env must name an environment variable (e.g. OPENLINEAGE_API_KEY), "
                                 f"got {self.api_key_env!r}")
        return self


class FreshetConfig(Strict):
    """The whole file."""

    version: Literal[1] = 1
    warehouse: WarehousePaths = Field(default_factory=WarehousePaths)
    listen: str = Field("127.0.0.1:9464", description="HOST:PORT of the daemon's HTTP API")
    streams: list[StreamConfig] = Field(default_factory=list)
    tables: list[TableConfig] = Field(min_length=1)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    sim: SimConfig = Field(default_factory=SimConfig)
    maintenance: Maintenance = Field(default_factory=Maintenance, description="OPTIMIZE/VACUUM jobs (§2.4 of "
                                                                             "Nova, SIGMOD 2011); tables may override")
    lineage: LineageConfig | None = Field(None, description="OpenLineage events for every job (ops.lineage); "
                                                            "off when absent")

    @model_validator(mode="after")
    def _cross_field(self) -> FreshetConfig:
        problems: list[str] = []
        for rule in (verify_unique_names, verify_base_and_derived, verify_stateful, verify_sources,
                     verify_streams_read, verify_acyclic, verify_sim_bursts):
            problems.extend(rule(self))
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def stream(self, name: str) -> StreamConfig:
        return next(s for s in self.streams if s.name == name)

    def table(self, name: str) -> TableConfig:
        return next(t for t in self.tables if t.name == name)

    def maintenance_of(self, table: TableConfig) -> MaintenancePolicy:
        """The table's maintenance: its own fields where given (even null), else the global ones."""
        merged = {k: getattr(self.maintenance, k) for k in Maintenance.model_fields}
        if table.maintenance is not None:
            merged.update({k: getattr(table.maintenance, k) for k in table.maintenance.model_fields_set})
        if merged["vacuum_retain"] is None:
            merged["vacuum_retain"] = DEFAULT_VACUUM_RETAIN
        return MaintenancePolicy(**merged)

    def cost_prior(self, table: TableConfig) -> CostPrior:
        return table.cost or CostPrior(alpha=self.sim.alpha, beta=self.sim.beta)

    def job_definitions(self, names: Iterable[str]) -> dict[str, tuple]:
        """What the jobs of the tables `names` run, as the config says (a table it has not: left
        out): the table's entry but its scheduling parameters (priority, target staleness, cost
        prior, maintenance) and, for a base table, the format of the stream it loads. Two configs
        that give a table the same definition run the same job for it."""
        wanted = set(names)
        streams = {s.name: s for s in self.streams}
        return {t.name: (t.model_dump(exclude=_SCHEDULING),
                         streams[t.stream].model_dump(include=_STREAM_FORMAT) if t.stream in streams else None)
                for t in self.tables if t.name in wanted}


_SCHEDULING = frozenset({"priority", "target_staleness", "cost", "maintenance"})
_STREAM_FORMAT = frozenset({"time_column", "format", "schema_"})


def _hint(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" — did you mean {close[0]!r}?" if close else ""


def verify_sim_bursts(cfg: FreshetConfig) -> list[str]:
    """Every table a `sim.bursts` entry names is a table of the config."""
    names = {t.name for t in cfg.tables}
    unknown = sorted({n for bu in cfg.sim.bursts for n in bu.tables} - names)
    return [f"sim.bursts names table(s) not in the config: {', '.join(unknown)}"] if unknown else []


def verify_unique_names(cfg: FreshetConfig) -> list[str]:
    problems = []
    for kind, names in (("stream", [s.name for s in cfg.streams]), ("table", [t.name for t in cfg.tables])):
        seen: set[str] = set()
        for n in names:
            if n in seen:
                problems.append(f"duplicate {kind} name {n!r}")
            seen.add(n)
    return problems


def verify_base_and_derived(cfg: FreshetConfig) -> list[str]:
    problems = []
    for t in cfg.tables:
        if t.stream is not None and t.sources:
            problems.append(f"table {t.name!r} is a base table (stream {t.stream!r}) and must not have sources")
        if t.stream is None and not t.sources:
            problems.append(f"table {t.name!r} needs either a stream (base) or sources (derived)")
        if t.stream is not None and t.sql is not None:
            problems.append(f"table {t.name!r} is a base table and must not have sql")
        if t.stream is not None:
            for key, default in (("max_skew", 0.0), ("refresh_mode", "auto"), ("rebuild", False)):
                if getattr(t, key) != default:
                    problems.append(f"table {t.name!r} is a base table: {key} applies to derived tables only")
    return problems


STATEFUL_FIELDS = ("key", "increment", "fold", "time_column", "order")


def verify_stateful(cfg: FreshetConfig) -> list[str]:
    """`kind` agrees with the table's fields; a stateful table has a key, an increment and folds
    that fit the increment's output columns (read with sqlglot, `warehouse.sqltext.output_columns`)."""
    problems = []
    for t in cfg.tables:
        where = f"tables[{t.name}]"
        if t.kind == "base" and t.stream is None:
            problems.append(f"{where}.kind: a base table needs a `stream`")
        if t.kind in ("derived", "stateful") and t.stream is not None:
            problems.append(f"{where}.kind: a {t.kind} table reads `sources`, not a `stream`")
        if not t.is_stateful:
            problems.extend(f"{where}.{f}: applies to stateful tables only (`kind: stateful`)"
                            for f in STATEFUL_FIELDS if getattr(t, f) not in (None, [], {}))
            continue
        if t.sql is not None:
            problems.append(f"{where}.sql: a stateful table has an `increment`, not `sql`")
        for f, default in (("lookback", 0.0), ("max_skew", 0.0), ("refresh_mode", "auto"), ("granularity", None)):
            if getattr(t, f) != default:
                problems.append(f"{where}.{f}: does not apply to a stateful table")
        if not t.key:
            problems.append(f"{where}.key: a stateful table needs the key columns of its state")
        if not t.fold:
            problems.append(f"{where}.fold: a stateful table needs a fold for each non-key column of its increment")
        if not t.increment:
            problems.append(f"{where}.increment: a stateful table needs the increment SQL")
            continue
        from warehouse.sqltext import output_columns, uses_window

        if not uses_window(t.increment):
            problems.append(f"{where}.increment: must read only the new rows — filter on :window_start and "
                            f":window_end (e.g. WHERE ts > :window_start AND ts <= :window_end)")
        cols = output_columns(t.increment)
        if cols is None:
            continue  # a SELECT * or a text sqlglot does not parse: Spark checks it at the first job
        have = set(cols)
        tcol = t.time_column or "ts"
        problems.extend(f"{where}.key: key column {k!r} is not an output column of the increment "
                        f"(it outputs {', '.join(cols)})" for k in t.key if k not in have)
        problems.extend(f"{where}.fold: fold on {c!r}, which the increment does not output "
                        f"(it outputs {', '.join(cols)}){_hint(c, cols)}" for c in t.fold if c not in have)
        problems.extend(f"{where}.fold: {c!r} is a key column; keys are matched, not folded"
                        for c in t.fold if c in t.key)
        orders = {c: t.order.get(c, tcol) for c, f in t.fold.items() if f in ("last", "first")}
        problems.extend(_order_problems(t, where, orders, cols))
        loose = [c for c in cols if c not in t.key and c not in t.fold and c not in orders.values()]
        if loose:
            problems.append(f"{where}.fold: no fold for increment column(s) {', '.join(loose)} "
                            f"(one of {', '.join(FOLDS)})")
    return problems


def _order_problems(t: TableConfig, where: str, orders: dict[str, str], cols: list[str]) -> list[str]:
    """Each `last`/`first` column's ordering column (`order`, else `time_column`): output by the
    increment, and the right end of its key's rows — a `first` compares the earliest time
    (folded `min`), a `last` the latest (folded `max`), so one column cannot serve both."""
    problems = [f"{where}.order: {c!r} is not a `last`/`first` fold column" for c in t.order if c not in orders]
    for o in sorted({o for c, o in orders.items() if o not in cols}):
        own = sorted(c for c in t.order if t.order[c] == o)
        what = f"order: {', '.join(own)} compare" if own else "time_column: `last`/`first` folds compare"
        problems.append(f"{where}.{what} the increment's {o!r} column, which it does not output "
                        f"(it outputs {', '.join(cols)})")
    for o in sorted(set(orders.values())):
        users = {f: sorted(c for c, x in orders.items() if x == o and t.fold[c] == f) for f in ("first", "last")}
        if users["first"] and users["last"]:
            problems.append(
                f"{where}.fold: {', '.join(users['first'])} (first) and {', '.join(users['last'])} (last) order by "
                f"one column {o!r}: a first needs the earliest time of each key's rows in the increment, a last "
                f"the latest — with max({o}) a late row earlier than the first value held would not replace it. "
                f"Give the first its own ordering column: output `min(ts) AS first_ts`, fold it `min`, and set "
                f"`order: {{{users['first'][0]}: first_ts}}`")
            continue
        want = "min" if users["first"] else "max"
        if t.fold.get(o) in ("min", "max") and t.fold[o] != want:
            kind = "first" if users["first"] else "last"
            problems.append(f"{where}.fold: {', '.join(users[kind])} ({kind}) order by {o!r}, which is folded "
                            f"{t.fold[o]}: a {kind} needs the {'earliest' if kind == 'first' else 'latest'} "
                            f"time of each key's rows ({want}({o})), folded {want}")
    return problems


def verify_sources(cfg: FreshetConfig) -> list[str]:
    problems = []
    streams = [s.name for s in cfg.streams]
    tables = [t.name for t in cfg.tables]
    stream_set, table_set = set(streams), set(tables)  # membership in O(1): configs of 100,000 tables
    for t in cfg.tables:
        if t.stream is not None and t.stream not in stream_set:
            problems.append(f"table {t.name!r} reads unknown stream {t.stream!r}{_hint(t.stream, streams)}")
        for s in t.sources:
            if s not in table_set:
                problems.append(f"table {t.name!r} reads unknown source {s!r}{_hint(s, tables)}")
            elif s == t.name:
                problems.append(f"table {t.name!r} reads itself")
    return problems


def verify_streams_read(cfg: FreshetConfig) -> list[str]:
    """Every stream feeds at least one base table: a partition of a stream that no table reads
    could never be loaded."""
    read = {t.stream for t in cfg.tables if t.stream is not None}
    return [f"streams[{s.name}]: stream {s.name!r} is read by no table — add a base table with "
            f"`stream: {s.name}` or remove the stream" for s in cfg.streams if s.name not in read]


def verify_acyclic(cfg: FreshetConfig) -> list[str]:
    """Report each cycle once, with its members in order."""
    names = {t.name for t in cfg.tables}
    graph = {t.name: [s for s in t.sources if s in names and s != t.name] for t in cfg.tables}
    color: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(n: str, again: Callable[[str, Any], None]) -> None:  # (a function that called itself
        color[n] = 1                                                 # by name is a reference cycle)
        stack.append(n)
        for s in graph[n]:
            if color.get(s, 0) == 0:
                again(s, again)
            elif color[s] == 1:
                cyc = stack[stack.index(s):] + [s]
                cycles.append("cycle in the table DAG: " + " -> ".join(cyc))
        stack.pop()
        color[n] = 2

    for n in graph:
        if color.get(n, 0) == 0:
            visit(n, visit)
    return cycles


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the config's model takes at `loc`, by their YAML names; a list index or a mapping's
    key stays with the item's model. [] where `loc` leads to no model."""
    model: Any = FreshetConfig
    for part in loc:
        fields = {f.alias or name: f for name, f in model.model_fields.items()}
        if part in fields and (model := _model_in(fields[part].annotation)) is None:
            return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_in(annotation: Any) -> Any:
    """The pydantic model an annotation holds (itself, or inside a list, a dict or an Optional)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def _format_errors(err: ValidationError, source: str | None, data: Any) -> list[str]:
    out = []
    for e in err.errors():
        loc = e["loc"]
        path = ".".join(str(p) for p in loc)
        # name the table/stream instead of a bare index where possible
        if len(loc) >= 2 and loc[0] in ("tables", "streams") and isinstance(loc[1], int):
            try:
                item = data[loc[0]][loc[1]]
                if isinstance(item, Mapping) and "name" in item:
                    path = f"{loc[0]}[{item['name']}]" + "".join(f".{p}" for p in loc[2:])
            except (KeyError, IndexError, TypeError):
                pass
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and loc:
            msg += _hint(str(loc[-1]), _keys_at(loc[:-1]))
        got = e.get("input")
        shown = f" (got {got!r})" if loc and not isinstance(got, Mapping | list) and e["type"] != "missing" else ""
        for line in msg.split("\n"):
            out.append(f"{path}: {line}{shown}" if path else line)
    return out


def parse_config(data: Any, *, source: str | None = None) -> FreshetConfig:
    """dict → model, or ConfigError with every problem listed."""
    if not isinstance(data, Mapping):
        raise ConfigError("the file must be a YAML mapping with `tables:` (and `streams:`)", source=source)
    try:
        return FreshetConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_errors(err, source, data), source=source) from None


def with_cores(config: FreshetConfig, cores: int | None) -> FreshetConfig:
    """`config` with `spark.cores` = `cores`, the machine's, where its master is `local[*]` and the
    config does not say them: the number `scheduler.bulk_limit: auto` needs (policies.bulk). The
    shell counts them (the daemon, once, when it starts); the config stays the one input of the
    Scheduler, so a simulator given this config decides as the daemon does."""
    sp = config.spark
    if cores is None or sp.cores is not None or not sp.all_local_cores:
        return config
    return config.model_copy(update={"spark": sp.model_copy(update={"cores": cores})})


# libyaml's safe loader where PyYAML has it (its wheels do): the same documents, parsed about 3×
# faster than the pure-Python one — a large config is read at every start and every SIGHUP
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_config(path: str | Path) -> FreshetConfig:
    """file → text → dict → model."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config: {e.strerror}", source=str(p)) from None
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 — a safe loader
    except yaml.YAMLError as e:
        raise ConfigError(f"not valid YAML: {e}", source=str(p)) from None
    return parse_config(data, source=str(p))
