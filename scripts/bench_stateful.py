#!/usr/bin/env python3
"""A stateful table's update cost as history grows (Programming Bulk-Incremental Dataflows §3, §5).

For each history length H (default 10 and 100 increments), in one process and one SparkSession:
a base Delta table holds H increments of `--rows` rows over `--keys` keys; a stateful table has
folded all of them. Then, `--repeat` times, one more increment lands in the base table and is

  (a) folded by the stateful job (lake.stateful: the increment SQL over the new window, one MERGE
      with its Delta txn) — cost in the increment and the keys it touches, not in the history;
  (b) recomputed in full: the same aggregates by key over every base row, overwriting a table —
      what a derived table with a global GROUP BY does each job (refresh_mode full).

Prints the median seconds of (a) and (b) per H side by side, and (a) and (b) at the largest H
over the smallest (target for (a): within 1.5×).

    .venv/bin/python scripts/bench_stateful.py [--history 10 100] [--rows 20000] [--keys 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PERIOD = 60.0
T0 = 1_764_000_000.0
INCREMENT = ("SELECT k, count(*) AS n, sum(v) AS v_sum, max(v) AS v_max, max(ts) AS ts FROM m_raw "
             "WHERE ts > :window_start AND ts <= :window_end GROUP BY k")


def _config(root: Path):  # noqa: ANN202
    from warehouse.config import parse_config

    return parse_config({
        "warehouse": {"root": str(root / "data"), "landing": str(root / "landing")},
        "streams": [{"name": "m", "period": PERIOD, "schema": {"ts": "timestamp", "k": "string", "v": "double"}}],
        "tables": [{"name": "m_raw", "stream": "m", "partition_by": "hour"},
                   {"name": "state", "kind": "stateful", "sources": ["m_raw"], "key": ["k"], "increment": INCREMENT,
                    "fold": {"n": "count", "v_sum": "sum", "v_max": "max", "ts": "max"}}],
        "spark": {"master": "local[2]"},
    })


def _append(spark, cfg, first: int, count: int, rows: int, keys: int) -> None:  # noqa: ANN001
    """Base rows for increments first .. first+count-1 (rows each, keys spread), one Delta append."""
    from pyspark.sql import functions as F

    from warehouse.lake.delta import table_path

    n = count * rows
    df = (spark.range(n)
          .withColumn("ts", F.timestamp_seconds(F.lit(T0 + first * PERIOD)
                                                + (F.col("id") + 1) * F.lit(count * PERIOD / n)))
          .withColumn("k", F.concat(F.lit("k"), (F.col("id") * 7919 % keys).cast("string")))
          .withColumn("v", (F.col("id") * 31 % 1000).cast("double"))
          .withColumn("hour", F.date_format("ts", "yyyy-MM-dd-HH"))
          .drop("id"))
    (df.write.format("delta").mode("append").partitionBy("hour")
     .option("delta.enableChangeDataFeed", "true").save(table_path(cfg, "m_raw")))


def _fold(ex, job_id: int, start: float, end: float) -> float:  # noqa: ANN001
    from warehouse.events import StartJob

    t = time.perf_counter()
    out = ex.run(StartJob(job_id=job_id, table="state", track=0, kind="derived", start=start, end=end,
                          new_freshness=end, new_safe_freshness=end, sources=("m_raw",)))
    assert out.committed, out.note
    return time.perf_counter() - t


def _recompute(spark, cfg, end: float, scratch: str) -> float:  # noqa: ANN001
    from warehouse.lake.delta import table_path
    from warehouse.sqltext import bind_window

    t = time.perf_counter()
    session = spark.newSession()
    session.read.format("delta").load(table_path(cfg, "m_raw")).createOrReplaceTempView("m_raw")
    session.sql(bind_window(INCREMENT, T0, end)).write.format("delta").mode("overwrite").save(scratch)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--rows", type=int, default=20_000, help="rows per increment")
    ap.add_argument("--keys", type=int, default=2_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    from warehouse.config import SparkConfig
    from warehouse.lake.executor import Executor
    from warehouse.lake.session import get_spark

    spark = get_spark(SparkConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                           "spark.ui.enabled": "false"}))
    results: dict[int, tuple[float, float]] = {}
    for h in args.history:
        root = Path(tempfile.mkdtemp(prefix=f"bench-stateful-{h}-"))
        cfg = _config(root)
        _append(spark, cfg, 0, h, args.rows, args.keys)
        ex = Executor(cfg, spark)
        _fold(ex, 1, T0, T0 + h * PERIOD)  # the state as of the history: one job over all of it
        folds, recomputes = [], []
        for i in range(args.repeat):
            _append(spark, cfg, h + i, 1, args.rows, args.keys)
            start, end = T0 + (h + i) * PERIOD, T0 + (h + i + 1) * PERIOD
            folds.append(_fold(ex, 2 + i, start, end))
            recomputes.append(_recompute(spark, cfg, end, str(root / "recomputed")))
        results[h] = (statistics.median(folds), statistics.median(recomputes))
        print(f"history {h:4d}× increment ({h * args.rows:,} base rows, {args.keys:,} keys): "
              f"stateful MERGE {results[h][0]:6.2f} s   full recompute {results[h][1]:6.2f} s", flush=True)
    lo, hi = min(results), max(results)
    print(f"{hi}× over {lo}×: stateful {results[hi][0] / results[lo][0]:.2f}×, "
          f"recompute {results[hi][1] / results[lo][1]:.2f}×  (at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
