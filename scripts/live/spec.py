"""The benchmark warehouse. Today's (`DEFAULT`, 15 tables): 12 streams with periods 10 s – 5 min,
priorities 1 – 100, and three derived tables — a windowed roll-up (`d_rollup`, 1-minute buckets of `b04`), a two-source
band join (`d_join`: each `b01` row with the `b02` rows of its key in the 30 s before it) and a
second roll-up (`d_agg`, 30-second buckets of `b03`).

`build(N)` makes a warehouse of N tables from the same mix (`--tables N` of scripts/bench_live.py).
Every contestant builds the same tables (names and schemas) from these definitions: Freshet and
`cron` read the YAML config made by `freshet_config`; `structured-streaming` and
`declarative-pipelines` write the same queries with the streaming DataFrame API.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = ["DEFAULT", "HOT_STREAMS", "KEYS", "SCHEMA", "SPARK_CONF", "SPEC_SEED", "STATE_FOLD", "TRACE_KINDS", "Derived",
           "Spec", "Stream", "build", "bursting", "from_env", "state_of"]

SCHEMA = {"ts": "timestamp", "key": "int", "value": "double"}  # every stream; tables add `date`
KEYS = 16  # distinct `key` values: the join's fan-out is rows(b02 in 30 s) / KEYS


@dataclass(frozen=True, slots=True)
class Stream:
    """A source and its base table `table` (priority p, loaded from partitions every `period`)."""

    name: str
    table: str
    period: float
    priority: float
    rate: float  # rows per second of event time, outside the burst
    bursts: bool  # its rate is multiplied during the burst

    @property
    def target(self) -> float:
        """Time-within-target threshold: one period plus 30 s."""
        return self.period + 30.0


@dataclass(frozen=True, slots=True)
class Derived:
    name: str
    sources: tuple[str, ...]
    priority: float
    granularity: float | None  # a roll-up's bucket length; None for a band join
    lookback: float
    target: float
    sql: str  # a stateful table's increment
    stateful: bool = False

    @property
    def shape(self) -> str:
        """`rollup` (`granularity`-second buckets of one source), `join` (each row of
        `sources[0]` with the rows of `sources[1]` of its key in the `lookback` before it) or
        `stateful` (per key of one source: its rows, their sum, its newest time — `STATE_FOLD`)."""
        return "stateful" if self.stateful else "join" if self.granularity is None else "rollup"


# Today's twelve streams (period s, priority, rows/s, bursts): the mix every warehouse size draws from.
_P = [(10, 100, 20, False), (10, 60, 2, False), (15, 30, 20, False), (20, 10, 50, True),
      (30, 8, 50, True), (30, 5, 50, True), (45, 3, 50, True), (60, 2, 50, True),
      (60, 1, 50, True), (120, 2, 50, True), (180, 1, 50, True), (300, 1, 50, True)]


def _bucket(seconds: int, src: str) -> str:
    # (start, end] buckets labelled by their end, like the partitions (docs/warehouse.md)
    return (f"SELECT timestamp_seconds(CAST(ceil(unix_micros(ts) / {seconds * 1_000_000}.0) AS BIGINT) * {seconds})"
            f" AS ts, key, count(*) AS n, sum(value) AS total FROM {src} GROUP BY 1, 2")


def _band(a: str, b: str) -> str:
    return (f"SELECT a.ts, a.key, a.value AS a_value, b.ts AS b_ts, b.value AS b_value "
            f"FROM {a} a JOIN {b} b ON a.key = b.key AND b.ts > a.ts - INTERVAL 30 SECONDS AND b.ts <= a.ts "
            "WHERE a.ts > :window_start AND a.ts <= :window_end")


def _state(src: str) -> str:
    """The increment of a stateful table (docs/warehouse.md § Stateful tables): one row per key."""
    return (f"SELECT key, count(*) AS n, sum(value) AS total, max(ts) AS ts FROM {src} "
            "WHERE ts > :window_start AND ts <= :window_end GROUP BY key")


STATE_FOLD = {"n": "count", "total": "sum", "ts": "max"}  # the state: SELECT key, count(*), sum(value), max(ts) GROUP BY key


def state_of(df: Any) -> Any:
    """A stateful table's state as a peer computes it with the DataFrame API (a stream or a whole
    source): `STATE_FOLD`'s aggregate by key."""
    from pyspark.sql import functions as F

    return df.groupBy("key").agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"), F.max("ts").alias("ts"))

# The derived shapes: (name, priority, granularity, target); today's three first, their sources
# today's; beyond them the four in turn (the stateful one since the warehouse had one, Scale in
# docs/benchmarks.md), their sources drawn from the seed (`build`).
_SHAPES = (("d_rollup", 40.0, 60.0, 120.0), ("d_join", 50.0, None, 60.0), ("d_agg", 20.0, 30.0, 90.0),
           ("d_state", 30.0, None, 90.0))
SPEC_SEED = 20261128  # fixed before the first scale run (docs/benchmarks.md § Scale)


@dataclass(frozen=True, slots=True)
class Spec:
    """A benchmark warehouse: its streams (a base table each) and its derived tables."""

    streams: tuple[Stream, ...]
    derived: tuple[Derived, ...]

    @property
    def tables(self) -> int:
        return len(self.streams) + len(self.derived)

    def stream_index(self, name: str) -> int:
        return next(i for i, s in enumerate(self.streams) if s.name == name)

    def priorities(self) -> dict[str, float]:
        return {**{s.table: s.priority for s in self.streams}, **{d.name: d.priority for d in self.derived}}

    def targets(self) -> dict[str, float]:
        return {**{s.table: s.target for s in self.streams}, **{d.name: d.target for d in self.derived}}

    def periods(self) -> dict[str, float]:
        """How often a table can advance at best: a base table's stream period; a derived table's
        granularity or its slowest source's period, whichever is longer (the unit of starvation)."""
        base = {s.table: s.period for s in self.streams}
        return {**base, **{d.name: max(d.granularity or 0.0, *(base[s] for s in d.sources)) for d in self.derived}}

    def alignment(self) -> float:
        """Seconds every contestant's t0 is a multiple of: the least common multiple of the derived
        tables' bucket lengths (scripts/bench_live.start_time), so buckets start at the same instant
        of every replay."""
        out = 1
        for d in self.derived:
            if d.granularity:
                out = math.lcm(out, int(d.granularity))
        return float(out)

    def burst_scale(self) -> float:
        """What the burst's factor is multiplied by so that the burst offers as many rows in all as
        today's warehouse does (its bursting streams share them): a larger warehouse is harder for
        its number of tables and updates, not for a burst no two cores could ever load."""
        return sum(s.bursts for s in DEFAULT.streams) / max(1, sum(s.bursts for s in self.streams))

    def freshet_config(self, root: str, landing: str, *, master: str = "local[2]", tracks: int = 4,
                       policy: str = "auto", partitioner: str = "auto", listen: str = "127.0.0.1:9464",
                       trace: str | None = None) -> dict[str, Any]:
        """The warehouse as a Freshet config (docs/warehouse.md): Freshet's defaults apart from the
        tracks (the benchmark's concurrency), the policy/partitioner (the ablation), Spark, and the
        aging bound the benchmark's starvation target asks for (`overdue_periods`, opt-in:
        docs/operations.md)."""
        return {
            "version": 1,
            "warehouse": {"root": root, "landing": landing, **({"trace": trace} if trace else {})},
            "listen": listen,
            "streams": [{"name": s.name, "period": s.period, "lateness": 0, "time_column": "ts", "format": "parquet",
                         "schema": dict(SCHEMA)} for s in self.streams],
            "tables": [
                *({"name": s.table, "stream": s.name, "priority": s.priority, "target_staleness": s.target}
                  for s in self.streams),
                *({"name": d.name, "sources": list(d.sources), "priority": d.priority, "sql": d.sql,
                   "target_staleness": d.target, "lookback": d.lookback,
                   **({"granularity": d.granularity} if d.granularity else {})}
                  for d in self.derived if not d.stateful),
                *({"name": d.name, "kind": "stateful", "sources": list(d.sources), "priority": d.priority,
                   "target_staleness": d.target, "key": ["key"], "increment": d.sql, "fold": dict(STATE_FOLD)}
                  for d in self.derived if d.stateful),
            ],
            "scheduler": {"tracks": tracks, "policy": policy, "partitioner": partitioner,
                          "overdue_periods": OVERDUE_PERIODS},
            "spark": {"master": master, "conf": dict(SPARK_CONF)},
        }


@cache
def build(tables: int = 15, seed: int = SPEC_SEED) -> Spec:
    """The warehouse of `tables` tables: a fifth of them (rounded) derived, the rest base tables.
    The first twelve streams and three derived tables are today's (15 tables: today's warehouse
    exactly); every further stream draws its period, priority, rate and burst from today's twelve,
    every further derived table takes the next of the three shapes with its priority and target,
    over sources drawn from the seed (a band join over two streams that do not burst, as today)."""
    if tables < 15:
        raise ValueError(f"--tables must be at least 15 (today's warehouse), not {tables}")
    rng = random.Random(seed)
    n_derived = round(tables / 5)
    rows = [*_P, *(rng.choice(_P) for _ in range(tables - n_derived - len(_P)))]
    streams = tuple(Stream(f"s{i:02d}", f"b{i:02d}", float(p), float(prio), float(rate), burst)
                    for i, (p, prio, rate, burst) in enumerate(rows))
    calm = [s.table for s in streams if not s.bursts]
    derived: list[Derived] = []
    for i in range(n_derived):
        name, prio, g, target = _SHAPES[i if i < 3 else i % 4]
        stateful = name == "d_state"
        join = g is None and not stateful
        if i < 3:  # today's three
            sources = {0: ("b04",), 1: ("b01", "b02"), 2: ("b03",)}[i]
        else:
            name = f"{name}_{i:03d}"
            sources = tuple(rng.sample(calm, 2)) if join else (rng.choice(streams).table,)
        sql = _band(*sources) if join else _state(sources[0]) if stateful else _bucket(int(g), sources[0])  # type: ignore[arg-type]
        derived.append(Derived(name, sources, prio, g, 30.0 if join else 0.0, target, sql, stateful))
    return Spec(streams, tuple(derived))


def from_env() -> Spec:
    """The warehouse a contestant's own process builds: `$BENCH_TABLES` tables (default 15), as
    scripts/bench_live.py sets it for every contestant it starts."""
    return build(int(os.environ.get("BENCH_TABLES", "15")))


DEFAULT = build()


# The trace kinds: `bulk` — only the bulk streams burst (`Stream.bursts`); `hot` — the
# highest-priority stream bursts with them, so a scheduler cannot keep the valuable table fresh
# merely because its jobs are small.
TRACE_KINDS = ("bulk", "hot")
HOT_STREAMS = ("s00",)


def bursting(stream: Stream, kind: str = "bulk") -> bool:
    """Whether `stream` sends the burst's factor of rows during the burst in a `kind` trace."""
    if kind not in TRACE_KINDS:
        raise ValueError(f"unknown trace kind {kind!r}; known: {', '.join(TRACE_KINDS)}")
    return stream.bursts or (kind == "hot" and stream.name in HOT_STREAMS)


# Freshet's aging bound (scheduler.overdue_periods): a table 5 of its periods without getting fresher
# goes first, at most two at a time on 4 tracks — the starvation target (3 periods plus the burst's
# 60 s: 9 periods of a 10-s stream, the tables the quick shape's window can starve) in the config,
# with room for the wait in the overdue queue. Chosen in the twin over the 60- and 240-table traces
# of b366746 (docs/benchmarks.md § Results: the aging bound counted from the last fresher commit).
# 3 periods + 35 s (overdue_slack), better in the twin on a faster machine's traces, starved 20
# tables live at 240 on a slower machine (c90ed91); 5 starved 0–1 a trace in the twin of that run.
OVERDUE_PERIODS = 5.0

# The Spark settings every contestant runs with (plus Freshet's session defaults, which the peers
# get too: warehouse.lake.session.DEFAULT_CONF).
SPARK_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
