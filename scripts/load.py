#!/usr/bin/env python3
"""Load: 1,000 tables and a 20,000-partition backlog drained with flat memory; and
`--soak`: the real daemon running its demo for a while, resident memory and open files sampled.

**Drain** (default). A generated warehouse of `--tables` tables: `--streams` base tables, one per
stream, and the rest derived (each over two base tables, a 5-minute granularity). `--partitions`
tiny Parquet partitions (one-minute windows, 2 rows) are written into a real landing zone. Then,
in this process, with the daemon's own pieces:

- the real `Intake` scans the landing zone (the one validator: manifest parsed, Parquet footer
  and statistics read, files hashed): intake throughput, partitions/s;
- the real `Scheduler` takes every `PartitionArrived`, then drains the backlog: each `StartJob` is
  run by an **executor stand-in** (no Spark: a job "takes" α + β·Δ seconds of simulated time and
  reports `JobFinished`), and each finished base job is archived by the real intake (its
  directory moves to `landing/_loaded/`). Every `Scheduler.handle` call is timed: the decision
  p50/p99/max;
- resident memory (RSS, /proc/self/statm) is sampled every `--sample-every` events and plotted
  against events handled (PNG), with the partitions still pending.

Real Spark is not used for any table in this mode: Spark's own memory and job latency are what
`--soak` and scripts/bench_delta.py measure.

**Soak** (`--soak`). `freshet run --demo --demo-speed 60` (the netmon demo, real Spark, a fresh
directory) for `--minutes` minutes; every `--sample-every-s` seconds the RSS of the daemon and of
its Spark JVM, and the daemon's open file descriptors, are sampled and plotted (PNG).

    python scripts/load.py [--tables 1000 --streams 800 --partitions 20000] [--png F] [--json F]
    python scripts/load.py --soak --minutes 30 [--png F] [--json F]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib(pid: int | str = "self") -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


# ---------------------------------------------------------------- drain
def config_dict(work: Path, tables: int, streams: int) -> dict[str, Any]:
    schema = {"ts": "timestamp", "k": "string", "v": "double"}
    out: dict[str, Any] = {
        "warehouse": {"root": str(work / "data"), "landing": str(work / "landing")},
        "streams": [{"name": f"s{i:04d}", "period": "1m", "schema": schema} for i in range(streams)],
        "tables": [{"name": f"b{i:04d}", "stream": f"s{i:04d}", "priority": 1 + i % 7,
                    "cost": {"alpha": 1, "beta": 0.01}} for i in range(streams)],
        "scheduler": {"tracks": 8, "chop": 3},
    }
    rng = random.Random(7)
    for j in range(tables - streams):
        a, b = rng.sample(range(streams), 2)
        out["tables"].append({"name": f"d{j:04d}", "sources": [f"b{a:04d}", f"b{b:04d}"], "granularity": "5m",
                              "priority": 1 + j % 5, "cost": {"alpha": 1, "beta": 0.01},
                              "sql": f"SELECT ts, k, v FROM b{a:04d} UNION ALL SELECT ts, k, v FROM b{b:04d}"})
    return out


def write_backlog(config: Any, partitions: int, t0: float) -> float:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ops.demo import write_partition

    streams = [s.name for s in config.streams]
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("k", pa.string()), ("v", pa.float64())])
    started = time.perf_counter()
    for n in range(partitions):
        s = streams[n % len(streams)]
        i = n // len(streams)
        start, end = t0 + 60 * i, t0 + 60 * (i + 1)
        tbl = pa.table({"ts": pa.array([int((start + 10) * 1e6), int((start + 50) * 1e6)], pa.int64())
                        .cast(pa.timestamp("us", tz="UTC")), "k": ["a", "b"], "v": [1.0, 2.0]}, schema=schema)
        write_partition(config.warehouse.landing, s, f"p{i:05d}", start, end, tbl)
    _ = pq
    return time.perf_counter() - started


def drain(args: argparse.Namespace) -> dict[str, Any]:
    from warehouse.config import parse_config
    from warehouse.events import JobFinished
    from warehouse.landing.intake import Intake
    from warehouse.scheduler import Scheduler

    work = Path(args.workdir or tempfile.mkdtemp(prefix="freshet-load-"))
    cfg = parse_config(config_dict(work, args.tables, args.streams))
    t0 = 1_764_000_000.0
    write_s = write_backlog(cfg, args.partitions, t0)
    print(f"wrote {args.partitions} partitions for {args.streams} streams in {write_s:.1f} s", flush=True)
    rss = [(0, rss_mib(), args.partitions)]
    intake = Intake(cfg, clock=lambda: t0 + 86400 * 30)
    t = time.perf_counter()
    arrivals = intake.scan()
    scan_s = time.perf_counter() - t
    assert len(arrivals) == args.partitions, (len(arrivals), intake.quarantined)
    print(f"intake: {len(arrivals)} partitions validated in {scan_s:.1f} s = {len(arrivals) / scan_s:.0f}/s",
          flush=True)

    now = t0 + 86400
    sched = Scheduler(cfg, now=now)
    decisions: list[float] = []
    running: list[tuple[float, int, Any, float]] = []  # (finish time, seq, job, duration): the stand-in's jobs
    seq = 0
    events = 0
    jobs = 0

    def handle(ev: Any) -> None:
        nonlocal events, seq
        t1 = time.perf_counter()
        started = sched.handle(ev, now)
        decisions.append(time.perf_counter() - t1)
        events += 1
        for job in started:
            seq += 1
            cost = 1.0 + 0.01 * (job.end - job.start)  # α + β·Δ: simulated seconds
            heapq.heappush(running, (now + cost, seq, job, cost))
        if events % args.sample_every == 0:
            rss.append((events, rss_mib(), len(intake.pending())))

    for ev in arrivals:
        handle(ev)
    del arrivals
    drain_t = time.perf_counter()
    while running:
        finish, _, job, cost = heapq.heappop(running)
        now = max(now, finish)
        if job.kind == "base":
            intake.archive(job)
        jobs += 1
        handle(JobFinished(job_id=job.job_id, duration=cost, rows=2 * len(job.arrivals)))
    drain_s = time.perf_counter() - drain_t
    rss.append((events, rss_mib(), len(intake.pending())))
    stats = sched.stats(now)
    loaded = sum(1 for t in stats.tables if t.freshness is not None)
    left = sum(t.pending_partitions for t in stats.tables)
    result = {
        "tables": args.tables, "streams": args.streams, "partitions": args.partitions,
        "intake_partitions_per_s": round(args.partitions / scan_s, 1), "intake_seconds": round(scan_s, 2),
        "events": events, "jobs": jobs, "drain_wall_seconds": round(drain_s, 2),
        "decision_us": {"median": round(statistics.median(decisions) * 1e6, 1),
                        "p99": round(pct(decisions, 99) * 1e6, 1), "max": round(max(decisions) * 1e6, 1)},
        "rss_mib": {"start": round(rss[0][1], 1), "peak": round(max(r[1] for r in rss), 1),
                    "end": round(rss[-1][1], 1), "after_intake": round(rss[1][1], 1) if len(rss) > 1 else None},
        "tables_loaded": loaded, "partitions_left": left,
        "archived": sum(1 for _ in (work / "landing" / "_loaded").rglob("_partition.json")),
        "executor": "stand-in (no Spark): a job takes α + β·Δ simulated seconds",
        "load_average": os.getloadavg(),
    }
    if args.png:
        plot(args.png, "drain: 1,000 tables, 20,000-partition backlog (executor stand-in)",
             [r[0] for r in rss], {"RSS MiB": [r[1] for r in rss]}, {"pending partitions": [r[2] for r in rss]},
             "events handled")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def plot(path: str, title: str, x: list[float], left: dict[str, list[float]], right: dict[str, list[float]],
         xlabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for label, ys in left.items():
        ax.plot(x, ys, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(" / ".join(left))
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    for label, ys in right.items():
        ax2.plot(x, ys, "--", color="tab:gray", label=label)
    ax2.set_ylabel(" / ".join(right))
    ax2.set_ylim(bottom=0)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper right")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- soak
def soak(args: argparse.Namespace) -> dict[str, Any]:
    import yaml

    work = Path(args.workdir or tempfile.mkdtemp(prefix="freshet-soak-"))
    raw = yaml.safe_load((ROOT / "examples" / "netmon.yaml").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    raw["warehouse"] = {"root": str(work / "data"), "landing": str(work / "landing")}
    raw["listen"] = f"127.0.0.1:{port}"
    raw["spark"] = {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}}
    raw["scheduler"]["tracks"] = 2
    (work / "freshet.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    log = (work / "daemon.log").open("w")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(work / "freshet.yaml"),
                             "--demo", "--demo-speed", str(args.speed), "--log-format", "json",
                             "--trace", str(work / "trace.jsonl")],
                            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    samples: list[tuple[float, float, float, int]] = []  # (minutes, daemon RSS, JVM RSS, daemon fds)
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < args.minutes * 60 and proc.poll() is None:
            jvm = _children(proc.pid)
            samples.append(((time.monotonic() - t0) / 60, rss_mib(proc.pid), sum(rss_mib(p) for p in jvm),
                            open_fds(proc.pid)))
            time.sleep(args.sample_every_s)
    finally:
        status = _tables(port)
        exited = proc.poll()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    steady = [s for s in samples if s[0] >= min(5.0, args.minutes / 3)]
    result = {
        "minutes": round((time.monotonic() - t0) / 60, 2), "speed": args.speed, "samples": len(samples),
        "exited_early": exited,
        "daemon_rss_mib": {"first": samples[0][1] if samples else None, "max": max(s[1] for s in samples),
                           "last": samples[-1][1]} if samples else {},
        "jvm_rss_mib": {"first": samples[0][2], "max": max(s[2] for s in samples), "last": samples[-1][2]}
        if samples else {},
        "fds": {"first": samples[0][3], "max": max(s[3] for s in samples), "last": samples[-1][3]} if samples else {},
        "steady_daemon_rss_growth_mib": round(steady[-1][1] - steady[0][1], 1) if len(steady) > 1 else None,
        "steady_fd_growth": steady[-1][3] - steady[0][3] if len(steady) > 1 else None,
        "tables": status, "workdir": str(work), "load_average": os.getloadavg(),
    }
    if args.png and samples:
        plot(args.png, f"soak: netmon demo at {args.speed:g}×, {result['minutes']} min (real Spark, local[2])",
             [s[0] for s in samples], {"daemon RSS MiB": [s[1] for s in samples],
                                       "Spark JVM RSS MiB": [s[2] for s in samples]},
             {"daemon open fds": [s[3] for s in samples]}, "minutes")
    return result


def _children(pid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = Path(f"/proc/{p}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                out.append(int(p))
    return out


def _tables(port: int) -> dict[str, Any]:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/tables", timeout=5) as r:
            body = json.loads(r.read())
        return {t["name"]: {"staleness": t["staleness"], "jobs_completed": t["jobs_completed"],
                            "jobs_failed": t["jobs_failed"]} for t in body["tables"]}
    except (OSError, ValueError, KeyError):
        return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=800)
    ap.add_argument("--partitions", type=int, default=20000)
    ap.add_argument("--sample-every", type=int, default=500, help="drain: events between RSS samples")
    ap.add_argument("--soak", action="store_true")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--sample-every-s", type=float, default=10.0)
    ap.add_argument("--workdir")
    ap.add_argument("--keep", action="store_true", help="drain: keep the work directory")
    ap.add_argument("--png")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()}", flush=True)
    result = soak(args) if args.soak else drain(args)
    print(json.dumps(result, indent=1, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
