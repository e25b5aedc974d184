#!/usr/bin/env python3
"""The fixed cost of one update, before and after, side by side in one run (docs/benchmarks.md
§ Fixed cost).

A small warehouse as a new user would write it — two 5-s streams (`m`, `a`) of 200-row
partitions, a roll-up `m_roll` of `m_raw`, a band join `a_m` of `a_raw` with the two minutes of
`m_raw` before each row, and a stateful fold `m_state` of `m_raw` by key — is updated round
after round, one 5-s window a round: the two base appends, the roll-up, the band join, the fold,
each run alone (`Executor.run`, start to commit) and each followed by a pause until Spark is idle
again (the warm-ups a commit leaves behind run there, as in the seconds between a daemon's jobs).
Each round also times the floor: a bare Delta append of the same 200 rows with nothing else.

Two code trees run it, each in a worker process of its own (its own Spark driver, `local[2]`):
`--before` (a git revision, extracted with `git archive`; default 98e438b) and this tree. The
rounds alternate between them (ABBA), so load and warm-up favour neither. Per kind of update it
prints the median wall time, and the Spark jobs and stages of the update itself (its job group,
counted with Spark's status tracker) and of the background work after it (the warm-ups), the
CPU-seconds the worker (its Python and its Spark JVM) spent from the update's start until Spark was
idle again, and the classes Spark compiled for generated code in that time (its `CodegenMetrics`),
the first `--skip` rounds left out (JIT and first reads).

    .venv/bin/python scripts/bench_fixed_cost.py [--rounds 14] [--skip 3] [--before 98e438b] [--json OUT]

`--live SECONDS` instead tries it as a new user would: the same config under `freshet run`, for
each tree in turn, fed in real time (a partition of each stream every 5 s, written by this script
into the landing zone), and prints the median duration of each table's jobs from the daemon's own
log (`job finished`), the first 30 s left out; `--without-fold` runs it on the streams, the
roll-up and the band join alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARK = "FIXEDCOST "
T0 = 1_764_000_000.0  # 2025-11-24T16:00:00Z
PERIOD = 5.0
ROWS = 200
KINDS = ("base", "roll-up", "band join", "fold", "floor")
TABLE_OF = {"base": "m_raw", "roll-up": "m_roll", "band join": "a_m", "fold": "m_state"}
SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}

ROLL_SQL = ("SELECT timestamp_seconds(CAST(ceil(unix_micros(ts) / 5000000.0) AS BIGINT) * 5) AS ts, k, "
            "count(*) AS n, sum(v) AS v_sum, max(v) AS v_max FROM m_raw GROUP BY 1, 2")
BAND_SQL = ("SELECT a.ts, a.k, a.id, count(m.id) AS m_rows, avg(m.v) AS m_avg FROM a_raw a "
            "LEFT JOIN m_raw m ON m.k = a.k AND m.ts > a.ts - INTERVAL 2 MINUTES AND m.ts <= a.ts "
            "WHERE a.ts > :window_start AND a.ts <= :window_end GROUP BY a.ts, a.k, a.id")
FOLD_SQL = ("SELECT k, count(*) AS n, sum(v) AS v_sum, max(ts) AS ts FROM m_raw "
            "WHERE ts > :window_start AND ts <= :window_end GROUP BY k")


def config_dict(base: Path, fold: bool = True) -> dict[str, Any]:
    """The small config (the same for both trees); without the fold with `fold=False`."""
    schema_m = {"ts": "timestamp", "k": "string", "v": "double", "id": "long"}
    schema_a = {"ts": "timestamp", "k": "string", "sev": "int", "id": "long"}
    cost = {"alpha": 1, "beta": 0.01}
    tables: list[dict[str, Any]] = [
        {"name": "m_raw", "stream": "m", "priority": 1, "cost": cost},
        {"name": "a_raw", "stream": "a", "priority": 10, "cost": cost},
        {"name": "m_roll", "sources": ["m_raw"], "granularity": "5s", "sql": ROLL_SQL, "cost": cost},
        {"name": "a_m", "sources": ["a_raw", "m_raw"], "granularity": "5s", "lookback": "2m",
         "sql": BAND_SQL, "priority": 5, "cost": cost},
    ]
    if fold:
        tables.append({"name": "m_state", "kind": "stateful", "sources": ["m_raw"], "key": ["k"],
                       "increment": FOLD_SQL, "fold": {"n": "count", "v_sum": "sum", "ts": "max"}, "cost": cost})
    return {
        "warehouse": {"root": str(base / "data"), "landing": str(base / "landing")},
        "streams": [{"name": "m", "period": "5s", "lateness": 0, "schema": schema_m},
                    {"name": "a", "period": "5s", "lateness": 0, "schema": schema_a}],
        "tables": tables,
        "scheduler": {"tracks": 2},
        "spark": {"master": "local[2]", "conf": SPARK_CONF},
    }


# ---- the worker: one code tree, one Spark driver ------------------------------------------------------
def _write(cfg: Any, stream: str, i: int, t0: float = T0) -> None:
    import datetime as dt
    import random

    import pyarrow as pa

    from ops.demo import write_partition
    from warehouse.landing.intake import _arrow_type

    sc = cfg.stream(stream)
    start, end = t0 + i * PERIOD, t0 + (i + 1) * PERIOD
    rng = random.Random(f"{stream}-{i}")
    ts = sorted(start + rng.randint(1, int(PERIOD * 1000)) / 1000.0 for _ in range(ROWS))
    cols: dict[str, list[Any]] = {"ts": [dt.datetime.fromtimestamp(t, dt.UTC) for t in ts],
                                  "k": [f"r{rng.randint(0, 19)}" for _ in range(ROWS)],
                                  "id": [i * ROWS + j for j in range(ROWS)],
                                  "v": [rng.uniform(0, 100) for _ in range(ROWS)],
                                  "sev": [rng.randint(1, 4) for _ in range(ROWS)]}
    schema = pa.schema([(c, _arrow_type(t)) for c, t in sc.schema_.items()])
    write_partition(cfg.warehouse.landing, stream, f"{stream}-{i:05d}", start, end,
                    pa.table({c: cols[c] for c in sc.schema_}, schema=schema))


class Counter:
    """Spark jobs and stages by job group, with Spark's status tracker (no UI needed); the CPU time
    of this process and its Spark JVM; the classes Spark compiled for generated code."""

    def __init__(self, sc: Any) -> None:
        import psutil

        self.sc = sc
        self.tracker = sc.statusTracker()
        self.seen = set(self.tracker.getJobIdsForGroup(None))  # jobs of no group: background work
        me = psutil.Process()
        self.procs = [me, *(p for p in me.children(recursive=True) if p.name() == "java")]
        self.compiled = sc._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def mark(self) -> tuple[float, int]:
        return sum(p.cpu_times().user + p.cpu_times().system for p in self.procs), self.compiled.getCount()

    def since(self, mark: tuple[float, int]) -> dict[str, float]:
        """CPU-seconds and classes compiled since `mark`."""
        cpu, compiled = self.mark()
        return {"cpu": cpu - mark[0], "compiled": compiled - mark[1]}

    def idle(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while (self.tracker.getActiveJobsIds() or self.tracker.getActiveStageIds()) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _stages(self, jobs: list[int]) -> tuple[int, list[str]]:
        run, names = 0, []
        for j in jobs:
            info = self.tracker.getJobInfo(j)
            for s in info.stageIds if info else []:
                st = self.tracker.getStageInfo(s)
                if st is not None and st.numCompletedTasks > 0:
                    run += 1
                    names.append(st.name)
        return run, names

    def group(self, name: str) -> dict[str, Any]:
        jobs = sorted(self.tracker.getJobIdsForGroup(name))
        stages, names = self._stages(jobs)
        return {"jobs": len(jobs), "stages": stages, "names": names}

    def background(self) -> dict[str, Any]:
        now = set(self.tracker.getJobIdsForGroup(None))
        new = sorted(now - self.seen)
        self.seen = now
        stages, names = self._stages(new)
        return {"jobs": len(new), "stages": stages, "names": names}


def worker(code: str, rounds: int) -> int:
    """Serve `round I` requests on stdin for the tree at `code`; one JSON line each on stdout."""
    sys.path.insert(0, code)
    import dataclasses

    import warehouse
    from warehouse.config import parse_config
    from warehouse.events import StartJob
    from warehouse.lake.delta import spark_schema_ddl
    from warehouse.lake.executor import Executor
    from warehouse.lake.session import get_spark, stop_spark
    from warehouse.landing.intake import Intake

    assert warehouse.__file__.startswith(code), (warehouse.__file__, code)
    base = Path(tempfile.mkdtemp(prefix="freshet-fixedcost-"))
    try:
        cfg = parse_config(config_dict(base))
        for i in range(rounds):
            _write(cfg, "m", i)
            _write(cfg, "a", i)
        arrivals = Intake(cfg).scan()
        spark = get_spark(cfg.spark)
        sc = spark.sparkContext
        ex = Executor(cfg, spark)
        counter = Counter(sc)
        ddl = spark_schema_ddl(cfg.stream("m").schema_)
        print(MARK + json.dumps({"ready": True, "warehouse": warehouse.__file__}), flush=True)
        job_id = 0
        for line in sys.stdin:
            cmd = line.split()
            if not cmd or cmd[0] != "round":
                break
            i = int(cmd[1])
            start, end = T0 + i * PERIOD, T0 + (i + 1) * PERIOD
            out: dict[str, Any] = {}

            def job(table: str, kind: str, arr: tuple[Any, ...] = (), start: float = start,
                    end: float = end) -> StartJob:
                return StartJob(job_id=0, table=table, track=0, kind=kind, start=start, end=end,
                                new_freshness=end, new_safe_freshness=end, arrivals=arr)

            plan = [("base", job("m_raw", "base", tuple(a for a in arrivals if a.partition_id == f"m-{i:05d}"))),
                    ("base a", job("a_raw", "base", tuple(a for a in arrivals if a.partition_id == f"a-{i:05d}"))),
                    ("roll-up", job("m_roll", "derived")), ("band join", job("a_m", "derived")),
                    ("fold", job("m_state", "derived"))]
            for kind, j in plan:
                job_id += 1
                group = f"fc-{i}-{kind}"
                sc.setJobGroup(group, group)
                mark = counter.mark()
                t = time.perf_counter()
                outcome = ex.run(dataclasses.replace(j, job_id=job_id))
                wall = time.perf_counter() - t
                sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
                if not outcome.committed:
                    raise SystemExit(f"round {i}: {kind} did not commit")
                t = time.perf_counter()
                ex.warmer.idle(120)
                counter.idle()
                out[kind] = {"wall": wall, **counter.group(group),
                             "bg": {"wall": time.perf_counter() - t, **counter.background()}, **counter.since(mark)}
            # the floor: the same 200 rows appended to a Delta table of their own, nothing else
            group = f"fc-{i}-floor"
            files = [f for a in arrivals if a.partition_id == f"m-{i:05d}" for f in a.files]
            sc.setJobGroup(group, group)
            mark = counter.mark()
            t = time.perf_counter()
            spark.read.schema(ddl).parquet(*files).write.format("delta").mode("append").save(str(base / "floor"))
            wall = time.perf_counter() - t
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            t = time.perf_counter()
            counter.idle()
            out["floor"] = {"wall": wall, **counter.group(group),
                            "bg": {"wall": time.perf_counter() - t, **counter.background()}, **counter.since(mark)}
            print(MARK + json.dumps(out), flush=True)
        stop_spark()
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- live: the daemon itself, fed in real time -------------------------------------------------------
def live(code: Path, seconds: float, warmup: float = 30.0, fold: bool = True) -> dict[str, Any]:
    """Run `freshet run` of the tree at `code` on the small config (`fold=False`: without the fold)
    for `seconds`, a partition of each stream every 5 s; each table's job durations from its log."""
    import signal
    import socket

    import yaml

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = Path(tempfile.mkdtemp(prefix="freshet-fixedcost-live-"))
    cfg_dict = config_dict(base, fold)
    cfg_dict["listen"] = f"127.0.0.1:{port}"
    (base / "freshet.yaml").write_text(yaml.safe_dump(cfg_dict))
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(code)}
    log_path = base / "daemon.log"
    feeder = None
    with log_path.open("w") as out:
        daemon = subprocess.Popen([sys.executable, "-c", "import sys; from ops.cli import main; sys.exit(main())",
                                   "run", "--config", str(base / "freshet.yaml"), "--log-format", "json"],
                                  env=env, cwd=str(code), stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300  # Spark's start: a minute on a loaded machine
            while '"recovery done"' not in log_path.read_text() and time.monotonic() < deadline:
                if daemon.poll() is not None:
                    raise SystemExit(f"the daemon ended: {log_path.read_text()[-2000:]}")
                time.sleep(0.5)
            feeder = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--feed",
                                       str(base / "freshet.yaml"), "--seconds", str(seconds + 5)], env=env,
                                      cwd=str(code))
            t0 = time.time()
            time.sleep(seconds)
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(90)
            except subprocess.TimeoutExpired:
                daemon.kill()
            if feeder is not None:
                feeder.terminate()
                feeder.wait(30)
    durations: dict[str, list[float]] = {}
    for line in log_path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("msg") == "job finished" and rec.get("kind") != "optimize":
            at = rec.get("ts") or rec.get("time")
            if isinstance(at, str):
                import datetime as dt

                at = dt.datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
            if at is None or at - t0 >= warmup:
                durations.setdefault(rec["table"], []).append(float(rec["duration"]))
    shutil.rmtree(base, ignore_errors=True)
    return {t: {"jobs": len(d), "median_s": round(statistics.median(d), 3)} for t, d in sorted(durations.items())}


def feed(config: str, seconds: float) -> int:
    """Write a partition of each stream every 5 s (its window ending now) for `seconds`."""
    from warehouse.config import load_config

    cfg = load_config(config)
    end = time.time() + seconds
    while time.time() < end:
        now = time.time()
        i = int(now // PERIOD) - 1  # the last complete 5-s window: its end is at or before now
        for stream in ("m", "a"):
            _write(cfg, stream, i, t0=0.0)
        time.sleep(max(0.0, (i + 2) * PERIOD - time.time() + 0.05))
    return 0


# ---- the orchestrator ---------------------------------------------------------------------------------
class Side:
    def __init__(self, name: str, code: Path, rounds: int) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.name = name
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", str(code),
                                      "--rounds", str(rounds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, cwd=str(code))
        self.results: list[dict[str, Any]] = []
        self.info: dict[str, Any] | None = None  # `ready()` reads it: both sides start at once

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
        raise SystemExit(f"{self.name}: the worker ended (exit {self.proc.wait()})")

    def ready(self) -> None:
        self.info = self.read()

    def round(self, i: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"round {i}\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _tree(rev: str) -> Path:
    dest = Path(tempfile.mkdtemp(prefix=f"freshet-{rev}-"))
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def _head() -> str:
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return rev + ("+dirty" if dirty else "")


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("base", "base a", "roll-up", "band join", "fold", "floor"):
        rows = [r[kind] for r in results]
        out[kind] = {
            "median_s": round(statistics.median(r["wall"] for r in rows), 3),
            "mean_s": round(statistics.mean(r["wall"] for r in rows), 3),
            "jobs": statistics.median(r["jobs"] for r in rows), "stages": statistics.median(r["stages"] for r in rows),
            "max_jobs": max(r["jobs"] for r in rows),
            "bg_median_s": round(statistics.median(r["bg"]["wall"] for r in rows), 3),
            "bg_jobs": statistics.median(r["bg"]["jobs"] for r in rows),
            "bg_stages": statistics.median(r["bg"]["stages"] for r in rows),
            "cpu_median_s": round(statistics.median(r["cpu"] for r in rows), 3),
            "compiled": statistics.median(r["compiled"] for r in rows),
            "stage_names": rows[-1]["names"], "bg_stage_names": rows[-1]["bg"]["names"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=14)
    ap.add_argument("--skip", type=int, default=3, help="first rounds left out (default 3)")
    ap.add_argument("--before", default="98e438b", help="the git revision to compare with (default 98e438b)")
    ap.add_argument("--only", choices=("before", "after"), help="run one side only")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="stop after the round that passes this many seconds (default 420)")
    ap.add_argument("--names", action="store_true", help="print the stage names of the last round")
    ap.add_argument("--live", type=float, metavar="SECONDS", help="run the daemon on each tree, fed in real time")
    ap.add_argument("--without-fold", action="store_true",
                    help="--live on the streams, the roll-up and the band join only (no stateful table)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--feed", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=60.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.rounds)
    if args.feed:
        return feed(args.feed, args.seconds)
    if args.live:
        return main_live(args)
    if args.without_fold:
        ap.error("--without-fold shapes the --live run: give --live SECONDS with it")
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    trees = {"before": _tree(args.before), "after": ROOT}
    names = {"before": args.before, "after": _head()}
    wanted = [args.only] if args.only else ["before", "after"]
    sides: dict[str, Side] = {}
    t = time.perf_counter()
    try:
        for s in wanted:
            sides[s] = Side(s, trees[s], args.rounds)
        for side in sides.values():
            side.ready()
        for i in range(args.rounds):
            for s in wanted if i % 2 == 0 else wanted[::-1]:
                sides[s].results.append(sides[s].round(i))
            print(f"round {i + 1}/{args.rounds} ({time.perf_counter() - t:.0f} s)", file=sys.stderr, flush=True)
            if time.perf_counter() - t > args.budget and i + 1 > args.skip:
                print(f"stopping after round {i + 1}: over the budget of {args.budget:g} s", file=sys.stderr)
                break
    finally:
        for side in sides.values():
            side.close()
        if "before" in trees:
            shutil.rmtree(trees["before"], ignore_errors=True)
    load1 = Path("/proc/loadavg").read_text().split()[:3]
    figures = {s: summarize(sides[s].results[args.skip:]) for s in wanted}
    done = min(len(sides[s].results) for s in wanted)
    report = {"before": names["before"], "after": names["after"], "rounds": done, "skip": args.skip,
              "loadavg_start": load0, "loadavg_end": load1, "wall_s": round(time.perf_counter() - t, 1),
              "figures": figures}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    print(f"fixed cost of one update, {done - args.skip} rounds (of {done}); "
          f"load average {' '.join(load0)} -> {' '.join(load1)}")
    head = f"{'update':10s}" + "".join(f" | {names[s] + ' median':>16s} {'jobs':>4s} {'stg':>4s} {'bg j/s':>7s} "
                                       f"{'bg s':>6s} {'cpu s':>6s} {'cls':>4s}" for s in wanted)
    print(head)
    for kind in ("base", "base a", "roll-up", "band join", "fold", "floor"):
        line = f"{kind:10s}"
        for s in wanted:
            f = figures[s][kind]
            line += (f" | {f['median_s']:15.3f}s {f['jobs']:4g} {f['stages']:4g} "
                     f"{str(f['bg_jobs']) + '/' + str(f['bg_stages']):>7s} {f['bg_median_s']:6.2f} "
                     f"{f['cpu_median_s']:6.2f} {f['compiled']:4g}")
        print(line)
    if args.names:
        for s in wanted:
            for kind in ("base", "roll-up", "band join", "fold", "floor"):
                f = figures[s][kind]
                print(f"{names[s]} {kind}: {f['stage_names']} | background: {f['bg_stage_names']}")
    return 0


def main_live(args: argparse.Namespace) -> int:
    trees = {"before": _tree(args.before), "after": ROOT}
    names = {"before": args.before, "after": _head()}
    wanted = [args.only] if args.only else ["before", "after"]
    out: dict[str, Any] = {}
    try:
        for s in wanted:
            load = Path("/proc/loadavg").read_text().split()[:3]
            out[s] = {"loadavg_start": load, "tables": live(trees[s], args.live, fold=not args.without_fold)}
            print(f"{names[s]}: load average {' '.join(load)} at the start", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(trees["before"], ignore_errors=True)
    shape = "without the fold" if args.without_fold else "every table"
    print(f"the daemon fed in real time for {args.live:g} s a tree, {shape} (the first 30 s left out): "
          "median job duration")
    for s in wanted:
        print(f"  {names[s]} (load {' '.join(out[s]['loadavg_start'])}): " + ", ".join(
            f"{t} {f['median_s']:.2f} s ({f['jobs']} jobs)" for t, f in out[s]["tables"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"names": names, "fold": not args.without_fold, **out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
