"""The benchmark warehouse: 12 streams with periods 10 s – 5 min, priorities 1 – 100, and
three derived tables — a windowed roll-up (`d_rollup`, 1-minute buckets of `b04`), a two-source
band join (`d_join`: each `b01` row with the `b02` rows of its key in the 30 s before it) and a
second roll-up (`d_agg`, 30-second buckets of `b03`).

Every contestant builds the same tables (names and schemas) from these definitions: Freshet and
`cron` read the YAML config made by `freshet_config`; `structured-streaming` and
`declarative-pipelines` write the same queries with the streaming DataFrame API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["DERIVED", "HOT_STREAMS", "KEYS", "SCHEMA", "SPARK_CONF", "STREAMS", "TRACE_KINDS", "Derived", "Stream",
           "alignment", "bursting", "freshet_config", "periods", "priorities", "targets"]

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
    granularity: float | None
    lookback: float
    target: float
    sql: str


_P = [(10, 100, 20, False), (10, 60, 2, False), (15, 30, 20, False), (20, 10, 50, True),
      (30, 8, 50, True), (30, 5, 50, True), (45, 3, 50, True), (60, 2, 50, True),
      (60, 1, 50, True), (120, 2, 50, True), (180, 1, 50, True), (300, 1, 50, True)]
STREAMS: tuple[Stream, ...] = tuple(
    Stream(f"s{i:02d}", f"b{i:02d}", float(p), float(prio), float(rate), burst)
    for i, (p, prio, rate, burst) in enumerate(_P))


def _bucket(seconds: int, src: str) -> str:
    # (start, end] buckets labelled by their end, like the partitions (docs/warehouse.md)
    return (f"SELECT timestamp_seconds(CAST(ceil(unix_micros(ts) / {seconds * 1_000_000}.0) AS BIGINT) * {seconds})"
            f" AS ts, key, count(*) AS n, sum(value) AS total FROM {src} GROUP BY 1, 2")


DERIVED: tuple[Derived, ...] = (
    Derived("d_rollup", ("b04",), 40.0, 60.0, 0.0, 120.0, _bucket(60, "b04")),
    Derived("d_join", ("b01", "b02"), 50.0, None, 30.0, 60.0,
            "SELECT a.ts, a.key, a.value AS a_value, b.ts AS b_ts, b.value AS b_value "
            "FROM b01 a JOIN b02 b ON a.key = b.key AND b.ts > a.ts - INTERVAL 30 SECONDS AND b.ts <= a.ts "
            "WHERE a.ts > :window_start AND a.ts <= :window_end"),
    Derived("d_agg", ("b03",), 20.0, 30.0, 0.0, 90.0, _bucket(30, "b03")),
)


def alignment() -> float:
    """Seconds every contestant's t0 is a multiple of: the least common multiple of the derived
    tables' bucket lengths (scripts/bench_live.start_time), so buckets start at the same instant
    of every replay."""
    out = 1
    for d in DERIVED:
        if d.granularity:
            out = math.lcm(out, int(d.granularity))
    return float(out)


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


# The Spark settings every contestant runs with (plus Freshet's session defaults, which the peers
# get too: warehouse.lake.session.DEFAULT_CONF).
SPARK_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}


def priorities() -> dict[str, float]:
    return {**{s.table: s.priority for s in STREAMS}, **{d.name: d.priority for d in DERIVED}}


def targets() -> dict[str, float]:
    return {**{s.table: s.target for s in STREAMS}, **{d.name: d.target for d in DERIVED}}


def periods() -> dict[str, float]:
    """How often a table can advance at best: a base table's stream period; a derived table's
    granularity or its slowest source's period, whichever is longer (the unit of starvation)."""
    base = {s.table: s.period for s in STREAMS}
    return {**base, **{d.name: max(d.granularity or 0.0, *(base[s] for s in d.sources)) for d in DERIVED}}


def freshet_config(root: str, landing: str, *, master: str = "local[2]", tracks: int = 4,
                   policy: str = "auto", partitioner: str = "auto", listen: str = "127.0.0.1:9464",
                   trace: str | None = None) -> dict[str, Any]:
    """The warehouse as a Freshet config (docs/warehouse.md): Freshet's defaults apart from the
    tracks (the benchmark's concurrency), the policy/partitioner (the ablation) and Spark."""
    return {
        "version": 1,
        "warehouse": {"root": root, "landing": landing, **({"trace": trace} if trace else {})},
        "listen": listen,
        "streams": [{"name": s.name, "period": s.period, "lateness": 0, "time_column": "ts", "format": "parquet",
                     "schema": dict(SCHEMA)} for s in STREAMS],
        "tables": [
            *({"name": s.table, "stream": s.name, "priority": s.priority, "target_staleness": s.target}
              for s in STREAMS),
            *({"name": d.name, "sources": list(d.sources), "priority": d.priority, "sql": d.sql,
               "target_staleness": d.target, "lookback": d.lookback,
               **({"granularity": d.granularity} if d.granularity else {})} for d in DERIVED),
        ],
        "scheduler": {"tracks": tracks, "policy": policy, "partitioner": partitioner},
        "spark": {"master": master, "conf": dict(SPARK_CONF)},
    }
