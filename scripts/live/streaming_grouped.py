"""The `structured-streaming-grouped` contestant: the tuned streaming peer restructured as a Spark
engineer would for a warehouse of hundreds of tables, where one query per table means hundreds
of trigger loops and driver threads in one application.

    python -m scripts.live.streaming_grouped --config freshet.yaml --ready FILE --work DIR

- **Base tables: two queries, not one per stream.** One file-source query reads the landing
  folders of every valuable stream (a glob `landing/{s00,s01,…}/*`), another those of every bulk
  stream; each micro-batch is split by the folder its files came from (`input_file_name`) and
  appended to each stream's table in `foreachBatch`, idempotently (Delta's `txnAppId` per query
  and table, `txnVersion` = the batch id), only for the streams present in the batch, up to
  `WRITERS` tables at once (the benchmark's concurrency: one after the other, a batch of many
  streams takes a Delta commit's fixed cost as many times in a row).
- **Triggers, pools, splits as the tuned peer** (`scripts/live/streaming_tuned.py`): the valuable
  group in the top pool (minShare = the cores) with a 1 s trigger; the bulk group in the FIFO bulk
  pool with a 5 s trigger and at most one landing file per bulk stream per micro-batch on average
  (`maxFilesPerTrigger` = the number of bulk streams: a burst is committed in steps, not at its
  end); 16 MB file splits.
- **Derived tables: one query each**, exactly as the tuned peer's (pools by inherited priority):
  a stream-stream join and a watermarked aggregation cannot share a `foreachBatch`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.live import streaming_tuned, tuning
from scripts.live.spec import from_env
from scripts.live.streaming import peer_args, serve, start_queries
from warehouse.config import FreshetConfig
from warehouse.lake.delta import spark_schema_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["WRITERS", "groups", "main", "settings"]

WRITERS = 4  # tables one micro-batch appends to at once


def groups(config: FreshetConfig) -> dict[str, dict[str, Any]]:
    """The two base-table queries: `valuable` and `bulk`, each with its streams (stream → table),
    trigger, pool and maxFilesPerTrigger."""
    valuable = tuning.is_valuable(config)
    names = streaming_tuned.pool_names(config)
    top = next(iter(names.values()))
    out: dict[str, dict[str, Any]] = {}
    for group, want in (("valuable", True), ("bulk", False)):
        streams = {t.stream: t.name for t in config.tables if t.is_base and valuable[t.name] is want}
        if streams:
            out[group] = {"streams": streams,
                          "trigger": streaming_tuned.VALUABLE_TRIGGER if want else streaming_tuned.BULK_TRIGGER,
                          "pool": top if want else streaming_tuned.BULK_POOL,
                          "max_files": None if want else len(streams)}
    return out


def settings(config: FreshetConfig) -> dict[str, Any]:
    """What this contestant runs with, for the benchmark's JSON."""
    derived = {t: p for t, p in streaming_tuned.plans(config).items() if not config.table(t).is_base}
    return {"spark_conf": streaming_tuned.spark_conf(), "pools": tuning.pools_settings(streaming_tuned.pools(config)),
            "base_queries": {g: {**v, "streams": sorted(v["streams"])} for g, v in groups(config).items()},
            "derived_queries": {t: {"trigger": p.trigger, "pool": p.pool} for t, p in derived.items()}}


def _append_each(root: Path, tables: dict[str, str], app: str, pool: str):  # noqa: ANN202 — for foreachBatch
    """Append the rows of each stream present in a micro-batch to its table, idempotently, up to
    WRITERS at once (each writer thread in the group's pool)."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.sql import functions as F

    def write(batch: DataFrame, batch_id: int) -> None:
        df = batch.persist()
        sc = df.sparkSession.sparkContext

        def one(stream: str) -> None:
            sc.setLocalProperty("spark.scheduler.pool", pool)
            (df.filter(F.col("_stream") == stream).drop("_stream").withColumn("date", F.to_date("ts"))
             .write.format("delta").mode("append").partitionBy("date")
             .option("txnAppId", f"{app}-{stream}").option("txnVersion", batch_id)
             .save(str(root / tables[stream])))

        try:
            present = [r[0] for r in df.select("_stream").distinct().collect()]
            with ThreadPoolExecutor(WRITERS, thread_name_prefix=app) as pool_:
                list(pool_.map(one, present))  # raises the first failure: the batch is retried
        finally:
            df.unpersist()

    return write


def start_groups(spark: SparkSession, config: FreshetConfig, ckpt: Path) -> list[StreamingQuery]:
    from pyspark.sql import functions as F

    root = Path(config.warehouse.root).resolve()
    landing = Path(config.warehouse.landing).resolve()
    ddl = spark_schema_ddl(config.stream(from_env().streams[0].name).schema_)
    sc = spark.sparkContext
    queries = []
    for group, g in groups(config).items():
        for s in g["streams"]:
            (landing / s).mkdir(parents=True, exist_ok=True)
        reader = spark.readStream.schema(ddl)
        if g["max_files"] is not None:
            reader = reader.option("maxFilesPerTrigger", g["max_files"])
        glob = str(landing / ("{" + ",".join(g["streams"]) + "}") / "*")
        df = reader.parquet(glob).withColumn("_stream", F.regexp_extract(F.input_file_name(), r"/([^/]+)/[^/]+/[^/]+$", 1))
        sc.setLocalProperty("spark.scheduler.pool", g["pool"])
        try:
            queries.append(df.writeStream.foreachBatch(_append_each(root, g["streams"], f"freshet-bench-{group}", g["pool"]))
                           .option("checkpointLocation", str(ckpt / f"base-{group}"))
                           .trigger(processingTime=g["trigger"]).queryName(f"base-{group}").start())
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
    return queries


def main(argv: list[str] | None = None) -> int:
    config, ready, work = peer_args(__doc__, argv)
    config = streaming_tuned.tuned_config(config, work)

    from warehouse.lake.session import get_spark

    spark = get_spark(config.spark)
    derived = start_queries(spark, config, work / "checkpoints", streaming_tuned.plans(config).__getitem__, bases=False)
    return serve([*start_groups(spark, config, work / "checkpoints"), *derived], ready)


if __name__ == "__main__":
    raise SystemExit(main())
