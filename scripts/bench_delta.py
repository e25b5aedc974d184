#!/usr/bin/env python3
"""Freshet's overhead over bare Delta appends (issue 4, "Speed"; DESIGN.md §5).

Loads the same partitions (default 200 × 10,000 rows, over 4 streams / 4 base tables) twice in
one process and one SparkSession:

  (a) through Freshet: intake (validation, fingerprints) → Scheduler (4 tracks, chop = 1 so
      every partition is its own job, as in (b)) → Executor (idempotent Delta appends, commit
      metadata, archiving), one worker thread per track;
  (b) a bare loop: 4 threads, each appending its table's partitions to Delta one by one.

Prints both wall times, the ratio (a)/(b) (target ≤ 1.10) and the α, β the Scheduler learned.

    .venv/bin/python scripts/bench_delta.py [--partitions 200] [--rows 10000] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from warehouse.config import parse_config  # noqa: E402

T0 = 1_764_000_000.0
PERIOD = 60.0
SCHEMA = {"ts": "timestamp", "router": "string", "cpu_pct": "double", "seq": "long"}


def config_dict(base: Path, tables: int, tracks: int, master: str) -> dict:
    return {
        "warehouse": {"root": str(base / "freshet"), "landing": str(base / "landing")},
        "streams": [{"name": f"s{i}", "period": PERIOD, "schema": SCHEMA} for i in range(tables)],
        "tables": [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 1.0, "beta": 0.01}} for i in range(tables)],
        "scheduler": {"tracks": tracks, "partitioner": "global", "chop": 1.0},
        "spark": {"master": master, "conf": {"spark.ui.enabled": "false"}},
    }


def write_partitions(cfg, per_table: int, rows: int) -> list[tuple[str, list[str]]]:
    """Write the partitions; returns (table, files) per table for the bare loop."""
    import pyarrow as pa

    from warehouse.demo import write_partition
    from warehouse.intake import _arrow_type

    schema = pa.schema([(c, _arrow_type(t)) for c, t in SCHEMA.items()])
    out = []
    for s in cfg.streams:
        rng = random.Random(s.name)
        files: list[str] = []
        for j in range(per_table):
            start, end = T0 + j * PERIOD, T0 + (j + 1) * PERIOD
            base_us = int(start * 1e6)
            ts = sorted(base_us + rng.randint(1, int(PERIOD * 1e6)) for _ in range(rows))
            table = pa.table({
                "ts": [dt.datetime.fromtimestamp(t / 1e6, dt.UTC) for t in ts],
                "router": [f"r{rng.randint(0, 99)}" for _ in range(rows)],
                "cpu_pct": [rng.random() * 100 for _ in range(rows)],
                "seq": list(range(j * rows, (j + 1) * rows)),
            }, schema=schema)
            d = write_partition(cfg.warehouse.landing, s.name, f"p{j:05d}", start, end, table)
            files.append(str(d / "part-0.parquet"))
        out.append((s.name.replace("s", "t", 1), files))
    return out


def bare(spark, base: Path, work: list[tuple[str, list[str]]]) -> float:
    """4 threads, each appending its partitions to its own Delta table, one append per partition."""
    from pyspark.sql import functions as F

    from warehouse.delta import spark_schema_ddl

    ddl = spark_schema_ddl(SCHEMA)
    errors: list[BaseException] = []

    def loop(table: str, files: list[str]) -> None:
        try:
            for f in files:
                df = spark.read.schema(ddl).parquet(f).withColumn("date", F.to_date("ts"))
                df.write.format("delta").mode("append").partitionBy("date").save(str(base / "bare" / table))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=loop, args=w) for w in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0


def warm_up(spark, base: Path) -> None:
    """JIT and Delta code paths warm before either side is timed."""
    from pyspark.sql import functions as F

    df = spark.range(1000).withColumn("ts", F.timestamp_seconds(F.col("id") + T0)).withColumn("date", F.to_date("ts"))
    for _ in range(4):
        df.write.format("delta").mode("append").partitionBy("date").save(str(base / "warmup"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=200, help="total partitions (default 200)")
    ap.add_argument("--rows", type=int, default=10_000, help="rows per partition (default 10,000)")
    ap.add_argument("--tables", type=int, default=4, help="streams/base tables (default 4)")
    ap.add_argument("--tracks", type=int, default=4, help="Freshet tracks = bare threads (default 4)")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--out", default=None, help="keep the tables here (default: a temp dir, removed)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    from warehouse.executor import run_until_idle
    from warehouse.spark_session import get_spark

    base = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="freshet-bench-"))
    try:
        cfg = parse_config(config_dict(base, args.tables, args.tracks, args.master))
        per_table = args.partitions // args.tables
        t = time.perf_counter()
        work = write_partitions(cfg, per_table, args.rows)
        print(f"wrote {per_table * args.tables} partitions × {args.rows} rows in {time.perf_counter() - t:.1f}s",
              file=sys.stderr)
        spark = get_spark(cfg.spark)
        warm_up(spark, base)
        bare_wall = bare(spark, base, work)
        print(f"bare loop: {bare_wall:.1f}s", file=sys.stderr)
        report, sched = run_until_idle(cfg, spark)
        if report.failed:
            print(f"freshet: {report.failed} job(s) failed", file=sys.stderr)
            return 1
        stats = sched.stats(time.time())
        rows_a = sum(spark.read.format("delta").load(str(base / "freshet" / f"t{i}")).count() for i in range(args.tables))
        rows_b = sum(spark.read.format("delta").load(str(base / "bare" / f"t{i}")).count() for i in range(args.tables))
        assert rows_a == rows_b == per_table * args.tables * args.rows, (rows_a, rows_b)
        ratio = report.wall / bare_wall
        result = {
            "partitions": per_table * args.tables, "rows_per_partition": args.rows, "tracks": args.tracks,
            "freshet_wall_s": round(report.wall, 2), "bare_wall_s": round(bare_wall, 2), "ratio": round(ratio, 3),
            "freshet_jobs": report.jobs,
            "learned": {t.name: {"alpha_s": round(t.alpha, 3), "beta": round(t.beta, 5)} for t in stats.tables},
        }
        if args.json:
            print(json.dumps(result))
        else:
            print(f"{result['partitions']} partitions × {args.rows} rows, {args.tracks} tracks/threads")
            print(f"  through Freshet: {report.wall:7.1f} s  ({report.jobs} jobs)")
            print(f"  bare Delta loop: {bare_wall:7.1f} s")
            print(f"  ratio          : {ratio:7.3f}  (target ≤ 1.10)")
            for name, ab in result["learned"].items():
                print(f"  learned {name}: α = {ab['alpha_s']:.3f} s, β = {ab['beta']:.5f} s per s of data")
        return 0
    finally:
        if not args.out:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
