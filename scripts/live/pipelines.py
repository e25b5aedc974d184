"""The `declarative-pipelines` contestant: the warehouse as a Spark Declarative Pipeline
(`pyspark.pipelines`, `scripts/live/sdp_flows.py`), run by pyspark's `spark-pipelines` runner.

    python -m scripts.live.pipelines --config freshet.yaml --ready FILE --work DIR

How it runs here (found out for issue 11):
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

from scripts import connect_server
from scripts.live.spec import SPARK_CONF
from warehouse.config import load_config
from warehouse.lake.session import SESSION_CONF

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--work", required=True)
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
            "spark.sql.sources.default": "delta",
            "spark.sql.pipelines.execution.maxConcurrentFlows": str(config.scheduler.tracks)}
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
    try:
        connect_server.wait_ready("127.0.0.1", port, proc=server)
        n = 0
        while not stop.is_set():
            t = time.time()
            proc = subprocess.Popen(cmd, env=env, cwd=pipeline, stdout=runs, stderr=subprocess.STDOUT)
            while proc.poll() is None:
                if stop.wait(0.5):
                    proc.terminate()
                    proc.wait(30)
            runs.write(f"=== run {n}: exit {proc.returncode} after {time.time() - t:.1f} s\n")
            runs.flush()
            print(f"run {n}: exit {proc.returncode} after {time.time() - t:.1f} s", flush=True)
            if n == 0:
                if proc.returncode != 0:
                    print("the first pipeline run failed: see runs.log", flush=True)
                    return 1
                Path(args.ready).touch()  # the tables exist and the flows are set up
            n += 1
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
