#!/usr/bin/env python3
"""The time to load a partition on object storage against local disk, side by side in one run.

The same partitions (default 4 × 10,000 rows, one stream, one base table) are loaded through
Freshet — intake → Scheduler (chop 1: one partition per job) → Executor (idempotent Delta append)
— into a local `warehouse.root` and into `s3a://freshet-bench/wh…` on a loopback S3 API (moto's
server, as in the tests: tests/helpers_s3.py) through the Hadoop S3A connector, in one process
and one SparkSession, alternating local/S3, S3/local over the rounds so warm-up and background
load favour neither. Each job's duration is the Executor's (read the partition, append, commit).

Prints the median job duration of each, their ratio (the goal for object storage: ≤ 2) and the
machine's load average before and after. moto keeps the bucket in memory: the figure is the S3A
connector's and Delta's S3 log store's costs over HTTP, not a real bucket's latency.

    .venv/bin/python scripts/bench_s3.py [--partitions 4] [--rows 10000] [--rounds 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from warehouse.config import parse_config  # noqa: E402

BUCKET = "freshet-bench"


def config_dict(root: str, landing: Path, endpoint: str | None) -> dict:
    from scripts.bench_delta import PERIOD, SCHEMA

    warehouse: dict = {"root": root, "landing": str(landing)}
    if root.startswith("s3a://"):
        warehouse["s3"] = {"endpoint": endpoint, "path_style": True, "credentials": "env"}
    return {
        "warehouse": warehouse,
        "streams": [{"name": "s0", "period": PERIOD, "schema": SCHEMA}],
        "tables": [{"name": "t0", "stream": "s0", "cost": {"alpha": 1.0, "beta": 0.01}}],
        "scheduler": {"tracks": 1, "partitioner": "global", "chop": 1.0},
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false"}},
    }


def load(cfg, spark) -> list[float]:
    """Every partition in `cfg`'s landing zone loaded; the committed jobs' durations."""
    from tests.helpers_ops import run_until_idle
    from warehouse.events import JobFinished

    durations: list[float] = []
    report, _ = run_until_idle(cfg, spark, on_event=lambda e: durations.append(e.duration)
                               if isinstance(e, JobFinished) and e.committed else None)
    if report.failed:
        raise SystemExit(f"bench_s3: {report.failed} job(s) failed loading into {cfg.warehouse.root}")
    return durations


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the session (e.g. spark.hadoop.fs.s3a.create.performance=true)")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the text")
    args = ap.parse_args()

    from scripts.bench_delta import write_partitions
    from tests.helpers_s3 import CREDENTIALS, start_s3, stop_s3
    from warehouse.lake.s3a import spark_config
    from warehouse.lake.session import get_spark, stop_spark

    load_before = os.getloadavg()
    base = Path(tempfile.mkdtemp(prefix="freshet-bench-s3-"))
    os.environ.update(CREDENTIALS)  # the S3A provider reads them in the driver JVM, started below
    server = start_s3(base / "moto.log", bucket=BUCKET)
    try:
        source = parse_config(config_dict(str(base / "unused"), base / "source", None))
        write_partitions(source, args.partitions, args.rows)
        warm = parse_config(config_dict(str(base / "unused"), base / "warm-source", None))
        write_partitions(warm, 2, args.rows)
        s3_cfg = parse_config(config_dict(f"s3a://{BUCKET}/warm", base / "warm-s3", server.endpoint))
        sc = spark_config(s3_cfg)  # the S3A connector's jars and settings; a local root works too
        extra = dict(kv.split("=", 1) for kv in args.conf)
        spark = get_spark(sc.model_copy(update={"conf": {**sc.conf, **extra}}))
        durations: dict[str, list[float]] = {"local": [], "s3a": []}
        walls: dict[str, float] = {"local": 0.0, "s3a": 0.0}
        # warm-up: two partitions each way (JIT, the S3A client's first connections)
        for side, root in (("local", str(base / "warm-local")), ("s3a", f"s3a://{BUCKET}/warm")):
            cfg = parse_config(config_dict(root, base / f"warm-{side}", server.endpoint))
            shutil.copytree(warm.warehouse.landing, cfg.warehouse.landing, dirs_exist_ok=True)
            load(cfg, spark)
        for r in range(args.rounds):
            for side in ("local", "s3a") if r % 2 == 0 else ("s3a", "local"):
                root = str(base / f"local{r}") if side == "local" else f"s3a://{BUCKET}/wh{r}"
                cfg = parse_config(config_dict(root, base / f"landing-{side}{r}", server.endpoint))
                shutil.copytree(source.warehouse.landing, cfg.warehouse.landing)
                t = time.perf_counter()
                got = load(cfg, spark)
                walls[side] += time.perf_counter() - t
                assert len(got) == args.partitions, (side, len(got))
                rows = spark.read.format("delta").load(root.rstrip("/") + "/t0").count()
                assert rows == args.partitions * args.rows, (side, rows)
                durations[side] += got
        stop_spark()
    finally:
        stop_s3(server)
        shutil.rmtree(base, ignore_errors=True)
    load_after = os.getloadavg()
    med = {side: statistics.median(d) for side, d in durations.items()}
    result = {"partitions": args.partitions, "rows": args.rows, "rounds": args.rounds, "conf": args.conf,
              "median_load_s": {k: round(v, 3) for k, v in med.items()},
              "wall_s": {k: round(v, 1) for k, v in walls.items()},
              "ratio": round(med["s3a"] / med["local"], 2),
              "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in load_after]}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.partitions} partitions × {args.rows} rows, {args.rounds} round(s) each way, one SparkSession "
              f"(local[2]){', ' + ' '.join(args.conf) if args.conf else ''}")
        print(f"  local root   : median {med['local']:.3f} s per partition  (all rounds {walls['local']:.1f} s)")
        print(f"  s3a:// (moto): median {med['s3a']:.3f} s per partition  (all rounds {walls['s3a']:.1f} s)")
        print(f"  ratio s3a/local: {result['ratio']:.2f}  (goal ≤ 2)")
        print(f"  load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
              f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
