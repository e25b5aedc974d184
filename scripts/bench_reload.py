#!/usr/bin/env python3
"""The scheduler loop's longest stall during a SIGHUP reload at 10,000 tables. Not a test: it
prints figures.

    python scripts/bench_reload.py                      # this tree
    python scripts/bench_reload.py --against 98e438b    # and REV's tree, in the same run

A warehouse is written under --dir (kept and reused): `--tables` tables (nine in ten base tables,
each on its own stream, one in ten a derived roll-up of one of them), each with `--commits` Freshet
commits in its Delta log (JSON commits as Delta writes them: commitInfo with Freshet's metadata,
txn, add), an empty landing directory per stream. The reload adds 1% more tables on new streams,
each with a partition waiting in the landing zone, and changes the priority of every other table.

The daemon's loop runs for real (`ops.daemon.Daemon._loop` in a thread, the real Scheduler,
intake, Delta logs read from their files) with a stand-in executor: no Spark; its reload check —
Spark analysing the changed SQL — is `--analysis` seconds of waiting. Each tree runs in a fresh
process. Measured from SIGHUP until two seconds after the switch:

* the loop's longest turn: the time between two calls of `events.get` (the time it served no event),
  and the loop thread's CPU time in it (`time.thread_time`: less sensitive to the machine's load);
* the switch's turn (the one that served `ReloadReady`), wall and CPU; `--turns` prints the eight
  longest turns, each with what it served;
* the longest an event waited in the queue (a probe put every 50 ms);
* the longest gap between two WATCHDOG=1 (WatchdogSec=2 s: a ping due every second);
* how long the reload took, SIGHUP to switched.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

T0 = 1_764_000_000.0
PERIOD = 300.0
SQL = "SELECT ts, v FROM {src}"


def config_dict(root: Path, n: int, added: int = 0, priority: int = 1) -> dict[str, Any]:
    """`n` tables (every tenth derived), `added` more base tables on streams of their own."""
    streams, tables = [], []
    for i in range(n + added):
        if i < n and i % 10 == 9:
            tables.append({"name": f"t{i}", "sources": [f"t{i - 1}"], "granularity": "5m",
                           "sql": SQL.format(src=f"t{i - 1}"), "priority": priority if i % 2 else 2,
                           "cost": {"alpha": 1, "beta": 0.01}})
        else:
            streams.append({"name": f"s{i}", "period": "5m"})
            tables.append({"name": f"t{i}", "stream": f"s{i}", "priority": priority if i % 2 else 2,
                           "cost": {"alpha": 1, "beta": 0.01}})
    return {"warehouse": {"root": str(root / "data"), "landing": str(root / "landing")},
            "streams": streams, "tables": tables, "scheduler": {"tracks": 8, "autotune": "off"},
            "spark": {"master": "local[2]"}}


def build(root: Path, n: int, commits: int) -> None:
    """The warehouse, once (`root/built` says it is complete)."""
    import yaml

    if (root / "built").exists():
        return
    print(f"writing {n} tables' Delta logs and landing directories under {root} …", flush=True)
    for i in range(n):
        derived = i % 10 == 9
        log = root / "data" / f"t{i}" / "_delta_log"
        log.mkdir(parents=True, exist_ok=True)
        for v in range(commits):
            end = T0 + PERIOD * (v + 1)
            if derived:
                meta = {"freshet": 1, "kind": "derived", "job_id": v + 1, "partitions": {}, "freshness": end,
                        "safe_freshness": end, "window": [end - PERIOD, end], "sql_version": "x",
                        "sources": {f"t{i - 1}": v}, "txn": int(end * 1000)}
            else:
                meta = {"freshet": 1, "kind": "base", "job_id": v + 1, "partitions": {f"p{v}": "fp"},
                        "freshness": end, "safe_freshness": end, "window": [end - PERIOD, end],
                        "windows": {f"p{v}": [end - PERIOD, end]}, "txn": int(end * 1000)}
            lines = [{"commitInfo": {"timestamp": int(end * 1000), "operation": "WRITE",
                                     "userMetadata": json.dumps(meta, sort_keys=True)}},
                     {"txn": {"appId": f"freshet/t{i}", "version": int(end * 1000)}},
                     {"add": {"path": f"part-{v}.parquet", "size": 1000, "modificationTime": int(end * 1000),
                              "dataChange": True, "stats": "{\"numRecords\":10}"}}]
            (log / f"{v:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
        if not derived:
            (root / "landing" / f"s{i}").mkdir(parents=True, exist_ok=True)
    (root / "freshet.yaml").write_text(yaml.safe_dump(config_dict(root, n)))
    (root / "built").write_text("")


class Probe:
    """An item the loop takes off its queue and ignores: how long it waited there."""

    __slots__ = ("put",)

    def __init__(self) -> None:
        self.put = time.perf_counter()


def measure(root: Path, n: int, analysis: float) -> dict[str, Any]:
    """One reload in this process, with whatever `ops` and `warehouse` are on the path."""
    import yaml

    from ops.daemon import Daemon, Options
    from ops.demo import write_partition
    from ops.reload import Parts
    from warehouse.config import FreshetConfig, load_config
    from warehouse.lake.recovery import LocalLog, recover
    from warehouse.landing.intake import Intake
    from warehouse.scheduler import Scheduler

    class StandIn:  # the executor's part in a reload, without Spark
        def __init__(self, config: FreshetConfig) -> None:
            self.config, self.log = config, LocalLog()

        def evolution_problems(self, new: FreshetConfig) -> list[str]:
            time.sleep(analysis)  # Spark analysing the changed SQL (the driver's JVM does the work)
            return []

        def reconfigure(self, config: FreshetConfig, state: Any = None) -> None:
            self.config = config

        def execute(self, job: Any) -> Any:  # the added tables' partitions: loaded at once
            from warehouse.events import JobFinished

            return JobFinished(job_id=job.job_id, duration=0.01, rows=1)

    turns: list[tuple[float, float, float, str]] = []  # (a turn's start, its end, its CPU seconds, what it served)
    waits: list[tuple[float, float]] = []  # (taken at, waited)
    pings: list[float] = []
    last = [time.perf_counter(), time.thread_time(), "none"]  # the turn under way: its start, CPU, item

    class Timed(queue.Queue):  # the loop's queue, its turns timed (wall, and the loop thread's CPU)
        def get(self, block: bool = True, timeout: float | None = None) -> Any:
            called, cpu = time.perf_counter(), time.thread_time()
            turns.append((last[0], called, cpu - last[1], last[2]))
            item = None
            try:
                item = super().get(block, timeout)
            finally:
                last[0], last[1], last[2] = time.perf_counter(), time.thread_time(), type(item).__name__
            if isinstance(item, Probe):
                waits.append((last[0], last[0] - item.put))
            return item

    sock_path = root / f"notify-{os.getpid()}.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(0.05)
    os.environ.update(NOTIFY_SOCKET=str(sock_path), WATCHDOG_USEC="2000000")
    os.environ.pop("WATCHDOG_PID", None)
    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            try:
                if sock.recv(4096).startswith(b"WATCHDOG=1"):
                    pings.append(time.perf_counter())
            except TimeoutError:
                continue

    threading.Thread(target=listen, daemon=True).start()

    path = root / "freshet.yaml"
    t = time.perf_counter()
    cfg = load_config(path)
    d = Daemon(cfg, Options(config_path=str(path)))
    state = recover(cfg)
    d.parts = Parts(state, Intake(cfg, state), StandIn(cfg), Scheduler(cfg, now=time.time(), recovered=state.recovered))
    d.holder.publish(d.sched.stats(time.time()))
    d.accepting = True
    if hasattr(d, "_settle"):  # what Daemon.run does before READY, in the trees that do it
        d._settle()
    started = time.perf_counter() - t
    d.events.__class__ = Timed  # the same queue (the workers hold its put), its get timed
    loop = threading.Thread(target=d._loop, name="loop", daemon=True)
    last[0] = time.perf_counter()
    loop.start()

    def probe() -> None:
        while not done.is_set():
            d.events.put(Probe())
            time.sleep(0.05)

    threading.Thread(target=probe, daemon=True).start()
    added = max(1, n // 100)
    new = config_dict(root, n, added=added, priority=3)
    import pyarrow as pa

    for i in range(n, n + added):  # partitions waiting for the tables the reload adds
        write_partition(root / "landing", f"s{i}", "p0", T0, T0 + PERIOD,
                        pa.table({"ts": pa.array([int((T0 + 1) * 1e6)], pa.timestamp("us", tz="UTC")),
                                  "v": [1.0]}))
    path.write_text(yaml.safe_dump(new))
    settled = time.perf_counter() + 1.0
    time.sleep(5.0)  # the loop's turns before the reload: from 1 s after it started
    base_turn = max((b - a for a, b, *_ in turns if a >= settled), default=0.0)
    hup = time.perf_counter()
    d._hup = True
    while d.reloader.last is None and time.perf_counter() - hup < 600:
        time.sleep(0.005)
    switched = time.perf_counter()
    time.sleep(2.0)
    end = time.perf_counter()
    d._term = signal.SIGTERM
    loop.join(30)
    done.set()
    path.write_text(yaml.safe_dump(config_dict(root, n)))
    for i in range(n, n + added):
        import shutil

        shutil.rmtree(root / "landing" / f"s{i}", ignore_errors=True)
        shutil.rmtree(root / "landing" / "_loaded" / f"s{i}", ignore_errors=True)
    sock.close()
    sock_path.unlink(missing_ok=True)
    window = [turn for turn in turns if turn[1] >= hup and turn[0] <= end]
    longest = max(window, key=lambda turn: turn[1] - turn[0])
    switch = next((turn for turn in window if turn[3] == "ReloadReady"), (0.0, 0.0, 0.0, ""))
    gaps = [b - a for a, b in zip(pings, pings[1:], strict=False) if b >= hup and a <= end]
    return {
        "tables": n, "result": d.reloader.last.result if d.reloader.last else None,
        "added": len(d.reloader.last.added) if d.reloader.last else 0,
        "start_seconds": round(started, 2), "reload_seconds": round(switched - hup, 2),
        "longest_turn_ms": round((longest[1] - longest[0]) * 1000, 1),
        "longest_turn_at_s": round(longest[0] - hup, 2),
        "longest_turn_cpu_ms": round(longest[2] * 1000, 1),
        "switch_turn_ms": round((switch[1] - switch[0]) * 1000, 1),
        "switch_turn_cpu_ms": round(switch[2] * 1000, 1),
        "longest_wait_ms": round(max((w for at, w in waits if hup <= at <= end), default=0.0) * 1000, 1),
        "longest_watchdog_gap_s": round(max(gaps, default=float("nan")), 2),
        "turn_before_reload_ms": round(base_turn * 1000, 1),
        "top_turns": [(round(a - hup, 2), round((b - a) * 1000, 1), round(cpu * 1000, 1), what)
                      for a, b, cpu, what in sorted(window, key=lambda turn: turn[0] - turn[1])[:8]],
    }


def run_tree(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure", "--dir", str(args.dir),
                        "--tables", str(args.tables), "--analysis", str(args.analysis)],
                       env=env, cwd=tree, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"the measurement on {tree} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tables", type=int, default=10_000)
    p.add_argument("--commits", type=int, default=5)
    p.add_argument("--analysis", type=float, default=2.0, help="seconds Spark takes to analyse the changed SQL")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "freshet-bench-reload")
    p.add_argument("--against", help="also measure this revision's tree (git archive), in the same run")
    p.add_argument("--turns", action="store_true", help="also print each tree's eight longest turns")
    p.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    root = args.dir / f"t{args.tables}"
    if args.measure:
        print(json.dumps(measure(root, args.tables, args.analysis)))
        return
    build(root, args.tables, args.commits)
    here = Path(__file__).resolve().parents[1]
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True).stdout.strip()
    trees = [(f"this tree ({rev})", here)]
    if args.against:
        old = Path(tempfile.mkdtemp(prefix="freshet-against-"))
        archive = subprocess.run(["git", "archive", args.against], cwd=here, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        trees.insert(0, (args.against, old))
    load = os.getloadavg()
    try:
        rows = [(name, run_tree(tree, args)) for name, tree in trees]
    finally:
        if args.against:
            import shutil

            shutil.rmtree(trees[0][1], ignore_errors=True)
    print(f"reload at {args.tables} tables ({args.commits} commits each), Spark's analysis {args.analysis:g} s, "
          f"load average {load[0]:.1f} on {os.cpu_count()} cores")
    cols = ("reload_seconds", "longest_turn_ms", "longest_turn_at_s", "longest_turn_cpu_ms", "switch_turn_ms",
            "switch_turn_cpu_ms", "longest_wait_ms",
            "longest_watchdog_gap_s", "turn_before_reload_ms", "result", "added")
    print(f"{'tree':24s} " + " ".join(f"{c:>22s}" for c in cols))
    for name, r in rows:
        print(f"{name:24s} " + " ".join(f"{r[c]!s:>22s}" for c in cols))
    for name, r in rows if args.turns else ():
        print(f"{name}: longest turns (seconds after SIGHUP, wall ms, CPU ms, the item it served)")
        for turn in r["top_turns"]:
            print("   ", *turn)


if __name__ == "__main__":
    main()
