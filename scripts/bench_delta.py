#!/usr/bin/env python3
"""Freshet's overhead over bare Delta appends ("Speed"; docs/warehouse.md §2).

Loads the same partitions (default 200 × 10,000 rows, over 4 streams / 4 base tables) twice in
one process and one SparkSession:

  (a) through Freshet: intake (validation, fingerprints) → Scheduler (4 tracks, chop = 1 so
      every partition is its own job, as in (b)) → Executor (idempotent Delta appends, commit
      metadata, archiving), one worker thread per track;
  (b) a bare loop: 4 threads, each appending its table's partitions to Delta one by one, with
      the same Delta options (txnAppId, txnVersion, userMetadata) — the same appends.

`--plain` also times (b) without the idempotent-write options: Delta computes the snapshot's
set transactions (small Spark jobs) on every append that carries txnAppId.

`--connect` runs both sides over Spark Connect: a loopback Connect server with Delta is started
for the run (scripts/connect_server.py, `--master` is then the server's) and the daemon's session
is `spark.remote: sc://127.0.0.1:PORT`. `--conf KEY=VALUE` overrides a session setting (e.g.
`spark.sql.shuffle.partitions`), to measure the defaults in warehouse/lake/session.py.

Prints both wall times, the ratio (a)/(b) (target ≤ 1.10) and the α, β the Scheduler learned.

    .venv/bin/python scripts/bench_delta.py [--partitions 200] [--rows 10000] [--out DIR] [--connect]
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

from sim.progress import ProgressReporter  # noqa: E402
from warehouse.config import parse_config  # noqa: E402

T0 = 1_764_000_000.0
PERIOD = 60.0
SCHEMA = {"ts": "timestamp", "router": "string", "cpu_pct": "double", "seq": "long"}


def config_dict(base: Path, tables: int, tracks: int, master: str, round_: int = 0,
                remote: str | None = None, conf: dict[str, str] | None = None) -> dict:
    spark = {"remote": remote} if remote else {"master": master}
    return {
        "warehouse": {"root": str(base / f"freshet{round_}"), "landing": str(base / f"landing{round_}")},
        "streams": [{"name": f"s{i}", "period": PERIOD, "schema": SCHEMA} for i in range(tables)],
        "tables": [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 1.0, "beta": 0.01}} for i in range(tables)],
        "scheduler": {"tracks": tracks, "partitioner": "global", "chop": 1.0},
        "spark": {**spark, "conf": {"spark.ui.enabled": "false", **(conf or {})}},
    }


def write_partitions(cfg, per_table: int, rows: int) -> list[tuple[str, list[str]]]:
    """Write the partitions; returns (table, files) per table for the bare loop."""
    import pyarrow as pa

    from ops.demo import write_partition
    from warehouse.landing.intake import _arrow_type

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


def bare(spark, base: Path, work: list[tuple[str, list[str]]], *, idempotent: bool = True, name: str = "bare") -> float:
    """4 threads, each appending its partitions to its own Delta table, one append per partition.

    With `idempotent`, every append carries the same Delta options as Freshet's (txnAppId,
    txnVersion, userMetadata): the same appends, without intake, Scheduler or executor.
    """
    from pyspark.sql import functions as F

    from warehouse.lake.delta import spark_schema_ddl

    ddl = spark_schema_ddl(SCHEMA)
    errors: list[BaseException] = []

    def loop(table: str, files: list[str]) -> None:
        try:
            for j, f in enumerate(files):
                df = spark.read.schema(ddl).parquet(f).withColumn("date", F.to_date("ts"))
                w = df.write.format("delta").mode("append").partitionBy("date")
                if idempotent:
                    end = T0 + (j + 1) * PERIOD
                    w = (w.option("txnAppId", f"bare/{table}").option("txnVersion", str(int(end * 1000)))
                         .option("userMetadata", json.dumps({"partitions": {f"p{j:05d}": "x"}, "freshness": end})))
                w.save(str(base / name / table))
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


def warm_up(spark, base: Path, work: list[tuple[str, list[str]]]) -> None:
    """JIT and Delta code paths warm (the same idempotent appends, untimed) before either side."""
    bare(spark, base, [(t, files[:3]) for t, files in work], name="warmup")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=200, help="total partitions (default 200)")
    ap.add_argument("--rows", type=int, default=10_000, help="rows per partition (default 10,000)")
    ap.add_argument("--tables", type=int, default=4, help="streams/base tables (default 4)")
    ap.add_argument("--tracks", type=int, default=4, help="Freshet tracks = bare threads (default 4)")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--out", default=None, help="keep the tables here (default: a temp dir, removed)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--rounds", type=int, default=2, help="ABBA rounds of both sides (default 2)")
    ap.add_argument("--plain", action="store_true",
                    help="also time plain appends (no txnAppId/txnVersion): the cost of Delta's idempotency check")
    ap.add_argument("--connect", action="store_true",
                    help="over Spark Connect: start a loopback Connect server (with --master) for the run")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a session setting")
    args = ap.parse_args()
    conf = dict(kv.split("=", 1) for kv in args.conf)
    server = None
    remote = None
    if args.connect:
        sys.path.insert(0, str(ROOT / "scripts"))
        import connect_server

        port = _free_port()
        log = tempfile.NamedTemporaryFile("w", prefix="freshet-bench-connect-", suffix=".log", delete=False)  # noqa: SIM115
        print(f"starting a Spark Connect server on 127.0.0.1:{port} (log: {log.name})", file=sys.stderr)
        server = connect_server.start("127.0.0.1", port, master=args.master, log=log)
        try:
            connect_server.wait_ready("127.0.0.1", port, proc=server)
        except RuntimeError:
            connect_server.stop(server)
            raise
        remote = f"sc://127.0.0.1:{port}"
    try:
        return run(args, remote, conf)
    finally:
        if server is not None:
            from warehouse.lake.session import stop_spark

            stop_spark()
            connect_server.stop(server)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(args: argparse.Namespace, remote: str | None, conf: dict[str, str]) -> int:

    from tests.helpers_ops import run_until_idle
    from warehouse.lake.session import get_spark

    base = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="freshet-bench-"))
    try:
        src = config_dict(base, args.tables, args.tracks, args.master, remote=remote, conf=conf)
        src["warehouse"]["landing"] = str(base / "source")  # written once; each Freshet round gets a copy
        cfg = parse_config(src)
        per_table = args.partitions // args.tables
        t = time.perf_counter()
        work = write_partitions(cfg, per_table, args.rows)
        print(f"wrote {per_table * args.tables} partitions × {args.rows} rows in {time.perf_counter() - t:.1f}s",
              file=sys.stderr)
        spark = get_spark(cfg.spark)
        warm_up(spark, base, work)
        plain_wall = bare(spark, base, work, idempotent=False, name="plain") if args.plain else None
        # ABBA order over rounds so warm-up and background load favour neither side
        bare_walls: list[float] = []
        freshet_walls: list[float] = []
        report = sched = None
        progress = ProgressReporter("bench_delta rounds").start()  # a bar with an ETA on a terminal
        progress.begin(2 * args.rounds)
        for r in range(args.rounds):
            order = ("bare", "freshet") if r % 2 == 0 else ("freshet", "bare")
            for side in order:
                if side == "bare":
                    bare_walls.append(bare(spark, base, work, name=f"bare{r}"))
                    progress.step(len(bare_walls) + len(freshet_walls), 2 * args.rounds,
                                  f"round {r}: bare loop {bare_walls[-1]:.1f}s")
                else:
                    rcfg = parse_config(config_dict(base, args.tables, args.tracks, args.master, round_=r,
                                                    remote=remote, conf=conf))
                    shutil.copytree(cfg.warehouse.landing, rcfg.warehouse.landing)
                    report, sched = run_until_idle(rcfg, spark)
                    if report.failed:
                        print(f"freshet: {report.failed} job(s) failed", file=sys.stderr)
                        return 1
                    freshet_walls.append(report.wall)
                    progress.step(len(bare_walls) + len(freshet_walls), 2 * args.rounds,
                                  f"round {r}: freshet {report.wall:.1f}s")
                    rows_a = sum(spark.read.format("delta").load(str(Path(rcfg.warehouse.root) / f"t{i}")).count()
                                 for i in range(args.tables))
                    assert rows_a == per_table * args.tables * args.rows, rows_a
            rows_b = sum(spark.read.format("delta").load(str(base / f"bare{r}" / f"t{i}")).count()
                         for i in range(args.tables))
            assert rows_b == per_table * args.tables * args.rows, rows_b
        progress.stop()
        assert report is not None and sched is not None
        stats = sched.stats(time.time())
        bare_wall, freshet_wall = sum(bare_walls), sum(freshet_walls)
        ratio = freshet_wall / bare_wall
        alphas = [t.alpha for t in stats.tables]
        betas = [t.beta for t in stats.tables]
        result = {
            "spark": spark.version, "mode": f"connect (server {args.master})" if remote else args.master,
            "conf": conf, "per_round_s": {"freshet": [round(w, 2) for w in freshet_walls],
                                          "bare": [round(w, 2) for w in bare_walls]},
            "alpha_mean_s": round(sum(alphas) / len(alphas), 3), "beta_mean": round(sum(betas) / len(betas), 5),
            "partitions": per_table * args.tables, "rows_per_partition": args.rows, "tracks": args.tracks,
            "rounds": args.rounds, "freshet_wall_s": round(freshet_wall, 2), "bare_wall_s": round(bare_wall, 2), "ratio": round(ratio, 3),
            "freshet_jobs": report.jobs,
            "plain_wall_s": None if plain_wall is None else round(plain_wall, 2),
            "learned": {t.name: {"alpha_s": round(t.alpha, 3), "beta": round(t.beta, 5)} for t in stats.tables},
        }
        if args.json:
            print(json.dumps(result))
        else:
            print(f"Spark {result['spark']}, {result['mode']}{', ' + str(conf) if conf else ''}: "
                  f"{result['partitions']} partitions × {args.rows} rows, {args.tracks} tracks/threads")
            print(f"  through Freshet: {freshet_wall:7.1f} s  ({report.jobs} jobs per round, {args.rounds} round(s))")
            print(f"  bare Delta loop: {bare_wall:7.1f} s")
            print(f"  ratio          : {ratio:7.3f}  (target ≤ 1.10)")
            if plain_wall is not None:
                per_round = bare_wall / args.rounds
                print(f"  plain appends  : {plain_wall:7.1f} s  (one round, no txnAppId/txnVersion: Delta's "
                      f"idempotency check costs ×{per_round / plain_wall:.2f})")
            for name, ab in result["learned"].items():
                print(f"  learned {name}: α = {ab['alpha_s']:.3f} s, β = {ab['beta']:.5f} s per s of data")
            print(f"  learned mean : α = {result['alpha_mean_s']:.3f} s, β = {result['beta_mean']:.5f}")
        return 0
    finally:
        if not args.out:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
