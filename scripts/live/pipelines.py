"""The `declarative-pipelines` contestant: the warehouse as a Spark Declarative Pipeline
(`pyspark.pipelines`, `scripts/live/sdp_flows.py`), run by pyspark's `spark-pipelines` runner.

    python -m scripts.live.pipelines --config freshet.yaml --ready FILE --work DIR

How it runs here (found out for):
- `spark-pipelines` is a Spark Connect client. Run with `--master`, it starts its own local
  Connect server but does not pass `--conf spark.jars`/`--jars` on to it, so Delta is missing
  (`[DATA_SOURCE_NOT_FOUND] Failed to find the data source: delta`). It works with `--remote`
  against a Connect server that has Delta: this starts one with `scripts/connect_server.py`
  (same Spark settings as every contestant; `spark.sql.warehouse.dir` = the contestant's root,
  so table T is the Delta table `<root>/T`; `spark.sql.pipelines.execution.maxConcurrentFlows`
  = 4, the benchmark's concurrency).
- pyspark 4.2's runner has one command for data, `run`: one update of the whole graph, every
  streaming flow processing what is available, then exit. There is no continuous mode in the
  open-source runner, so fresh data means running updates back to back: this loops
  `spark-pipelines run --spec …` until it is stopped (each run is a new client process
  and a new pipeline update on the long-lived server; the flows keep their checkpoints in
  the pipeline's `storage`).
- What a user who wants the valuable tables fresh does with that (`--schedule split`,
  the default): `spark-pipelines run --refresh <datasets>` updates only the datasets named.
  The first run updates the whole graph (it creates the tables); then two loops run side by
  side against the same server, each starting its next update as soon as the last one ends:
  one refreshes the `fast` datasets (`b00`, `b01`, `b02` and `d_join`: the valuable tables whose
  update is cheap — three small streaming tables and a join of two of them, 240 of the Σp = 333),
  the other everything else (the bulk streams, `b03`/`b04` and the roll-ups over them, which a
  materialized view recomputes over the whole source each time). The valuable tables are then
  never queued behind a bulk load's update. `--schedule full` is the issue-11 setting: one loop
  of whole-graph updates.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from scripts import connect_server
from scripts.live.spec import SPARK_CONF, Spec, from_env
from warehouse.config import FreshetConfig, load_config
from warehouse.lake.session import SESSION_CONF

__all__ = ["fast", "main", "settings"]

ROOT = Path(__file__).resolve().parents[2]

def fast(spec: Spec) -> list[str]:
    """The datasets refreshed by a loop of their own (`--schedule split`): the base tables of the
    streams that do not burst and the derived tables over them alone (b00, b01, b02 and d_join in
    today's warehouse)."""
    calm = {s.table for s in spec.streams if not s.bursts}
    return [*(s.table for s in spec.streams if s.table in calm),
            *(d.name for d in spec.derived if set(d.sources) <= calm)]


def _split(config: FreshetConfig) -> dict[str, list[str]]:
    quick = fast(from_env())
    return {"fast": quick, "rest": [t.name for t in config.tables if t.name not in quick]}


def _max_flows(config: FreshetConfig, max_flows: int | None) -> dict[str, str]:
    """`spark.sql.pipelines.execution.maxConcurrentFlows`: the benchmark's concurrency (the
    config's tracks) unless `max_flows` says otherwise; 0 leaves Spark's default (16)."""
    flows = config.scheduler.tracks if max_flows is None else max_flows
    return {"spark.sql.pipelines.execution.maxConcurrentFlows": str(flows)} if flows else {}


def settings(config: FreshetConfig, schedule: str = "split", max_flows: int | None = None) -> dict[str, Any]:
    """What this contestant runs with, for the benchmark's JSON."""
    loops = _split(config) if schedule == "split" else {"all": [t.name for t in config.tables]}
    return {"schedule": schedule, "loops": {k: {"refresh": v, "pause_seconds": 0} for k, v in loops.items()},
            "first_run": "the whole graph (creates the tables)",
            "spark_conf": {**_max_flows(config, max_flows), "spark.sql.sources.default": "delta"},
            "derived": "materialized views (recomputed in full by every update that refreshes them)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--schedule", choices=("split", "full"), default="split",
                    help="split: the fast datasets and the rest in two loops of updates; full: whole-graph updates")
    ap.add_argument("--max-flows", type=int, default=None,
                    help="spark.sql.pipelines.execution.maxConcurrentFlows (default: the config's tracks; 0: "
                         "Spark's own default, 16)")
    args = ap.parse_args(argv)
    config = load_config(args.config)
    work = Path(args.work).resolve()
    pipeline = work / "pipeline"
    (pipeline / "transformations").mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__).with_name("sdp_flows.py"), pipeline / "transformations" / "flows.py")
    root = Path(config.warehouse.root).resolve()
    (pipeline / "spark-pipeline.yml").write_text(
        "name: freshet_bench\n"
        f"storage: file://{work / 'storage'}\n"
        "libraries:\n  - glob:\n      include: transformations/**\n")
    port = _free_port()
    conf = {**SESSION_CONF, **SPARK_CONF, **config.spark.conf, "spark.sql.warehouse.dir": str(root),
            "spark.sql.sources.default": "delta", **_max_flows(config, args.max_flows)}
    log = open(work / "connect-server.log", "w")  # noqa: SIM115 — lives as long as the server
    server = connect_server.start(port=port, master=config.spark.master or "local[2]", conf=conf, log=log, cwd=work)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    env = {**os.environ, "BENCH_LANDING": str(Path(config.warehouse.landing).resolve()),
           "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    runner = str(Path(sys.executable).with_name("spark-pipelines"))
    cmd = [runner, "run", "--spec", str(pipeline / "spark-pipeline.yml"), "--remote", f"sc://127.0.0.1:{port}"]
    runs = open(work / "runs.log", "w")  # noqa: SIM115
    runs_lock = threading.Lock()

    def update(label: str, n: int, refresh: list[str] | None) -> int:
        """One `spark-pipelines run` (of `refresh` only, if given); its exit status."""
        t = time.time()
        with runs_lock:
            runs.write(f"=== {label} run {n} ({','.join(refresh) if refresh else 'all'}) starts\n")
            runs.flush()
        proc = subprocess.Popen([*cmd, *(["--refresh", ",".join(refresh)] if refresh else [])], env=env,
                                cwd=pipeline, stdout=runs, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            if stop.wait(0.5):
                proc.terminate()
                proc.wait(30)
        with runs_lock:
            runs.write(f"=== {label} run {n}: exit {proc.returncode} after {time.time() - t:.1f} s\n")
            runs.flush()
        print(f"{label} run {n}: exit {proc.returncode} after {time.time() - t:.1f} s", flush=True)
        return proc.returncode

    def loop(label: str, refresh: list[str] | None) -> None:
        n = 1
        while not stop.is_set():
            update(label, n, refresh)
            n += 1

    try:
        connect_server.wait_ready("127.0.0.1", port, proc=server)
        if update("first", 0, None) != 0:
            print("the first pipeline run failed: see runs.log", flush=True)
            return 1
        Path(args.ready).touch()  # the tables exist and the flows are set up
        loops = _split(config) if args.schedule == "split" else {"all": None}
        threads = [threading.Thread(target=loop, args=(k, v), name=f"sdp-{k}") for k, v in loops.items()]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        connect_server.stop(server)
        log.close()
        runs.close()
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    raise SystemExit(main())
