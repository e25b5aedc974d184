"""The `structured-streaming` contestant: the warehouse as a Spark user would write it with
Structured Streaming — one Spark application, one streaming query per table.

    python -m scripts.live.streaming --config freshet.yaml --ready FILE --work DIR

- **Base tables**: a file-source query per stream over `landing/<stream>/*/` (parquet, the
  stream's declared schema; the producer renames each data file into place, so no half-written
  file is read), adding the `date` partition column, appended to the Delta table
  `<root>/<table>` partitioned by `date`.
- **Derived tables** read their sources as Delta streams:
  `d_rollup` / `d_agg` — `window(ts, 1 minute | 30 seconds)` aggregations with a watermark, in
  append mode (a bucket is written once the watermark passes its end; the bucket's end is its
  `ts`); `d_join` — a stream-stream inner join of `b01` with the `b02` rows of the same key in the
  30 s before each `b01` row, both sides with watermarks so the join state is bounded;
  `d_state_*` — a streaming aggregation by key (count, sum, newest `ts`) in update mode, each
  micro-batch's updated keys upserted into the Delta table with a `MERGE` in `foreachBatch` (Delta's
  documented upsert from a streaming aggregation).
- **Settings a user would pick**: `trigger(processingTime="2 seconds")` for every query (the
  default trigger, "as fast as possible", re-lists every source about every 10 ms when idle —
  15 queries doing that starve 2 cores); watermark delay = the streams' declared lateness (0 s:
  the sources are in order, as Freshet's config says too); checkpoints under `--work`; the same
  Spark settings as every contestant (`warehouse.lake.session`, local[2], 2 shuffle partitions).
  Concurrency is not a setting here: each query runs its micro-batches in its own thread, so up
  to 15 Spark jobs run at once (on the same 2 cores).
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.live.spec import from_env, state_of
from warehouse.config import FreshetConfig, load_config
from warehouse.lake.delta import spark_schema_ddl

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["SETTINGS", "TRIGGER", "QueryPlan", "main", "peer_args", "serve", "settings", "start_queries"]

TRIGGER = "2 seconds"
# What this contestant runs with, for the benchmark's JSON: the default-settings peer.
SETTINGS: dict[str, Any] = {"trigger": TRIGGER, "pool": "default (one FIFO pool for all queries)",
                            "maxFilesPerTrigger": None, "spark_conf": {}}


def settings(config: FreshetConfig) -> dict[str, Any]:  # noqa: ARG001 — the same for every config
    return dict(SETTINGS)


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """How one table's query runs: its trigger, its fair-scheduler pool (None: the default pool)
    and, for a file source, the most landing files one micro-batch takes (None: all there are)."""

    trigger: str = TRIGGER
    pool: str | None = None
    max_files: int | None = None


def peer_args(doc: str | None, argv: list[str] | None) -> tuple[FreshetConfig, str, Path]:
    """A streaming peer's command line (`--config --ready --work`, as the benchmark starts it): the
    config, the file to touch once ready, the work directory (checkpoints go under it)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--work", required=True, help="checkpoints (and a peer's allocation file) go here")
    args = ap.parse_args(argv)
    return load_config(args.config), args.ready, Path(args.work).resolve()


def main(argv: list[str] | None = None) -> int:
    config, ready, work = peer_args(__doc__, argv)

    from warehouse.lake.session import get_spark

    spark = get_spark(config.spark)
    return serve(start_queries(spark, config, work / "checkpoints", lambda _table: QueryPlan()), ready)


def start_queries(spark: SparkSession, config: FreshetConfig, ckpt: Path,
                  plan: Callable[[str], QueryPlan], *, bases: bool = True) -> list[StreamingQuery]:
    """Start one streaming query per table (the module docstring), each as `plan(table)` says;
    with `bases` False, only the derived tables' (the base tables are created, empty)."""
    from pyspark.sql import functions as F

    root = Path(config.warehouse.root).resolve()
    landing = Path(config.warehouse.landing).resolve()
    spec = from_env()
    lateness = {s.name: config.stream(s.name).lateness for s in spec.streams}
    ddl = spark_schema_ddl(config.stream(spec.streams[0].name).schema_)
    sc = spark.sparkContext

    # the derived queries stream from the base tables: they must exist (empty) before they start
    empty = spark.createDataFrame([], ddl).withColumn("date", F.to_date("ts"))
    for s in spec.streams:
        empty.write.format("delta").partitionBy("date").mode("ignore").save(str(root / s.table))

    def sink(df, table: str):  # noqa: ANN001, ANN202
        p = plan(table)
        # a query's jobs run in the pool set on the thread that starts it (Spark's job-scheduling
        # docs, "Fair Scheduler Pools"; the query's thread inherits the local properties)
        sc.setLocalProperty("spark.scheduler.pool", p.pool)  # type: ignore[arg-type]
        try:
            return (df.withColumn("date", F.to_date("ts")).writeStream.format("delta").outputMode("append")
                    .partitionBy("date").option("checkpointLocation", str(ckpt / table))
                    .trigger(processingTime=p.trigger).queryName(table).start(str(root / table)))
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]

    def upsert(df, table: str):  # noqa: ANN001, ANN202
        p, path = plan(table), str(root / table)
        spark.createDataFrame([], "key int, n bigint, total double, ts timestamp").write.format("delta").mode(
            "ignore").save(path)

        def merge(batch, _batch_id: int) -> None:  # noqa: ANN001 — the keys updated, with their totals
            batch.createOrReplaceTempView(f"updates_{table}")
            batch.sparkSession.sql(f"MERGE INTO delta.`{path}` t USING updates_{table} s ON t.key = s.key "
                                   "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")

        sc.setLocalProperty("spark.scheduler.pool", p.pool)  # type: ignore[arg-type]
        try:
            return (df.writeStream.outputMode("update").foreachBatch(merge)
                    .option("checkpointLocation", str(ckpt / table)).trigger(processingTime=p.trigger)
                    .queryName(table).start())
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]

    def delta(table: str, delay: float):  # noqa: ANN202
        return spark.readStream.format("delta").load(str(root / table)).withWatermark("ts", f"{delay:g} seconds")

    queries = []
    for s in spec.streams if bases else ():
        (landing / s.name).mkdir(parents=True, exist_ok=True)
        reader = spark.readStream.schema(ddl)
        max_files = plan(s.table).max_files
        if max_files is not None:
            reader = reader.option("maxFilesPerTrigger", max_files)
        queries.append(sink(reader.parquet(str(landing / s.name / "*")), s.table))
    lag = {s.table: lateness[s.name] for s in spec.streams}
    for d in spec.derived:
        if d.stateful:
            (src_table,) = d.sources
            queries.append(upsert(state_of(delta(src_table, lag[src_table])), d.name))
            continue
        if d.shape == "join":
            left, right = d.sources
            a = delta(left, lag[left]).alias("a")
            b = delta(right, lag[right]).alias("b")
            out = a.join(b, F.expr("a.key = b.key AND b.ts > a.ts - INTERVAL 30 SECONDS AND b.ts <= a.ts")).select(
                F.col("a.ts").alias("ts"), F.col("a.key").alias("key"), F.col("a.value").alias("a_value"),
                F.col("b.ts").alias("b_ts"), F.col("b.value").alias("b_value"))
        else:
            (src_table,) = d.sources
            out = (delta(src_table, lag[src_table])
                   .groupBy(F.window("ts", f"{d.granularity:g} seconds"), F.col("key"))
                   .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
                   .select(F.col("window.end").alias("ts"), "key", "n", "total"))
        queries.append(sink(out, d.name))
    return queries


def serve(queries: list[StreamingQuery], ready: str) -> int:
    """Touch `ready`, watch the queries until SIGTERM/SIGINT (or one fails), stop them."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    Path(ready).touch()
    while not stop.wait(1.0):
        for q in queries:
            if not q.isActive and q.exception() is not None:
                print(f"query {q.name} failed: {q.exception()}", flush=True)
                stop.set()
    for q in queries:
        q.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
