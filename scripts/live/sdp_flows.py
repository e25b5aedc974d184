"""The benchmark warehouse as a Spark Declarative Pipeline (pyspark.pipelines, Spark 4.1+).

`scripts/live/pipelines.py` copies this file into the pipeline's `transformations/` folder; the
`spark-pipelines` runner imports it. The base tables are streaming tables reading each stream's
landing folder with the file source; the derived tables are materialized views with the same
queries as Freshet's SQL (bucketed roll-ups, the band join; a stateful table's state as one
aggregate by key over its whole source), recomputed by every pipeline update
(the open-source runner has no incremental refresh of materialized views). Streaming tables
for them were tried first: a streaming flow with `withWatermark` on another dataset of the
pipeline fails to register over Spark Connect (`[TABLE_OR_VIEW_NOT_FOUND] The table or view
`b04` cannot be found` — the Connect planner analyses `withWatermark` eagerly, before the
pipeline's datasets exist), so the watermarked aggregation and join cannot be declared.
No `format="delta"` in the decorators: with it, the second `spark-pipelines run` fails on
every existing table with `[DELTA_CANNOT_CHANGE_PROVIDER] 'provider' is a reserved table
property, and cannot be altered`; the server's `spark.sql.sources.default=delta` makes them
Delta tables without it.
Paths come from the environment (`BENCH_LANDING`; `BENCH_TABLES`, the warehouse's size), the tables live in the catalog's warehouse
directory (`spark.sql.warehouse.dir` = the contestant's root, so table T is at `<root>/T`).
"""

import os

from pyspark import pipelines as dp
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from scripts.live.spec import SCHEMA, from_env, state_of

spark = SparkSession.active()
LANDING = os.environ["BENCH_LANDING"]
DDL = ", ".join(f"`{c}` {t}" for c, t in SCHEMA.items())


def _base(stream: str, table: str) -> None:
    @dp.table(name=table, partition_cols=["date"])
    def _load():
        return (spark.readStream.schema(DDL).parquet(f"{LANDING}/{stream}/*")
                .select("ts", "key", "value", F.to_date("ts").alias("date")))


def _rollup(name: str, source: str, seconds: float) -> None:
    @dp.materialized_view(name=name, partition_cols=["date"])
    def _agg():
        us = int(seconds * 1_000_000)
        end = F.timestamp_seconds(F.ceil(F.unix_micros("ts") / F.lit(float(us))).cast("bigint") * F.lit(int(seconds)))
        return (spark.read.table(source).groupBy(end.alias("ts"), F.col("key"))
                .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
                .select("ts", "key", "n", "total", F.to_date("ts").alias("date")))


def _join(name: str, left: str, right: str) -> None:
    @dp.materialized_view(name=name, partition_cols=["date"])
    def _j():
        a = spark.read.table(left).alias("a")
        b = spark.read.table(right).alias("b")
        return (a.join(b, F.expr("a.key = b.key AND b.ts > a.ts - INTERVAL 30 SECONDS AND b.ts <= a.ts"))
                .select(F.col("a.ts").alias("ts"), F.col("a.key").alias("key"), F.col("a.value").alias("a_value"),
                        F.col("b.ts").alias("b_ts"), F.col("b.value").alias("b_value"),
                        F.to_date(F.col("a.ts")).alias("date")))


def _state(name: str, source: str) -> None:
    @dp.materialized_view(name=name)
    def _s():
        return state_of(spark.read.table(source))


SPEC = from_env()
for _s in SPEC.streams:
    _base(_s.name, _s.table)
for _d in SPEC.derived:
    if _d.stateful:
        _state(_d.name, _d.sources[0])
    elif _d.shape == "join":
        _join(_d.name, *_d.sources)
    else:
        _rollup(_d.name, _d.sources[0], _d.granularity)
