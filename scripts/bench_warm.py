#!/usr/bin/env python3
"""The snapshot warmer (warehouse/lake/warm.py) side by side: what it saves a job, what it costs.

Two copies of the test warehouse (tests/conftest.py: two one-minute streams, a roll-up and a band
join `a_m`) in one SparkSession, the warmer on in one and off in the other. Each round appends one
partition to `m_raw` and to `a_raw` and runs the join over that minute, on one side then the
other, the order alternated round by round (ABBA). The warm-ups run in their background thread;
between jobs the script waits for them to finish (as the seconds between a table's jobs allow in
a daemon), so a job's latency below is its own.

Prints, per side, the median and mean latency of a base append and of the join (start to commit),
and the JVM's CPU-seconds per round (warm-ups included), the first two rounds left out (warm-up).

    .venv/bin/python scripts/bench_warm.py [--rounds 16]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from conftest import MINUTE, SPARK_CONF, T0, make_config, write_minutes  # noqa: E402

from warehouse.config import SparkConfig  # noqa: E402
from warehouse.events import StartJob  # noqa: E402
from warehouse.lake.executor import Executor  # noqa: E402
from warehouse.lake.session import get_spark, stop_spark  # noqa: E402
from warehouse.landing.intake import Intake  # noqa: E402


class _Off:
    """The warmer, off."""

    def warm(self, path: str, pool: str | None) -> None:
        pass

    def idle(self, timeout: float) -> bool:
        return True


def _jvm_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _job(job_id: int, table: str, kind: str, i: int, arrivals: tuple[Any, ...] = ()) -> StartJob:
    start, end = T0 + i * MINUTE, T0 + (i + 1) * MINUTE
    return StartJob(job_id=job_id, table=table, track=0, kind=kind, start=start, end=end,
                    new_freshness=end, new_safe_freshness=end, arrivals=arrivals)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=16)
    args = ap.parse_args(argv)
    n = args.rounds
    spark = get_spark(SparkConfig(master="local[2]", conf={**SPARK_CONF,
                                                           "spark.databricks.delta.snapshotPartitions": "2"}))
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    sides: dict[str, tuple[Executor, list[Any]]] = {}
    for side in ("on", "off"):
        cfg = make_config(Path(tempfile.mkdtemp(prefix=f"bench-warm-{side}-")))
        write_minutes(cfg, "m", 0, n)
        write_minutes(cfg, "a", 0, n)
        ex = Executor(cfg, spark)
        if side == "off":
            ex.warmer = _Off()  # type: ignore[assignment]
        sides[side] = (ex, Intake(cfg).scan())
    latency: dict[tuple[str, str], list[float]] = {}
    cpu = {"on": 0.0, "off": 0.0}
    job_id = 0
    for i in range(n):
        for side in ("on", "off") if i % 2 == 0 else ("off", "on"):
            ex, arrivals = sides[side]
            c0 = _jvm_cpu(pid)
            jobs = [_job(0, table, "base", i, tuple(a for a in arrivals if a.stream == stream
                                                    and a.partition_id.endswith(f"-{i:04d}")))
                    for stream, table in (("m", "m_raw"), ("a", "a_raw"))] + [_job(0, "a_m", "derived", i)]
            for job in jobs:
                job_id += 1
                t = time.perf_counter()
                if not ex.run(dataclasses.replace(job, job_id=job_id)).committed:
                    raise SystemExit(f"round {i}: {job.table} did not commit")
                took = time.perf_counter() - t
                ex.warmer.idle(120)
                if i >= 2:
                    latency.setdefault((side, job.kind), []).append(took)
            if i >= 2:
                cpu[side] += _jvm_cpu(pid) - c0
        print(f"round {i + 1}/{n}", file=sys.stderr, flush=True)
    rounds = n - 2
    print(f"{'warmer':8s} {'base median':>12s} {'base mean':>10s} {'join median':>12s} {'join mean':>10s} "
          f"{'JVM CPU-s/round':>16s}")
    for side in ("on", "off"):
        b, d = latency[(side, "base")], latency[(side, "derived")]
        print(f"{side:8s} {statistics.median(b):12.3f} {statistics.mean(b):10.3f} {statistics.median(d):12.3f} "
              f"{statistics.mean(d):10.3f} {cpu[side] / rounds:16.3f}")
    stop_spark()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
