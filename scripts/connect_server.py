#!/usr/bin/env python3
"""Start a Spark Connect server with Delta Lake, from the installed pyspark (docs/warehouse.md §2).

The daemon reaches a remote Spark through Spark Connect when its config says
`spark: {remote: "sc://host:port"}`. This starts such a server on this machine, the same Spark
and Delta versions as the daemon's client: pyspark's own `spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer` (the pyspark wheel ships the server,
not Spark's `sbin/start-connect-server.sh`), with Delta's SQL extension and catalog and the Delta
jars from Freshet's cache (`scripts/fetch_jars.py`; without a cache, Ivy fetches
`io.delta:delta-spark_4.2_2.13:<version>` from Maven Central into it first).

    .venv/bin/python scripts/connect_server.py [--host 127.0.0.1] [--port 15002] [--master 'local[*]']
        [--conf KEY=VALUE ...] [--driver-memory 2g] [--print-command]

It runs in the foreground until SIGTERM/SIGINT (run it under systemd, a container, or `&`); it
prints `ready sc://HOST:PORT` on stderr once the gRPC port accepts connections. The tests use
`start()` / `wait_ready()` / `stop()` from here (tests/test_connect.py).

The server reads and writes the Delta tables itself: `warehouse.root` and the landing zone's data
files must be at the same paths for it as for the daemon (one machine, a shared file system, or
object storage). Bind it to loopback unless the network in between is trusted: Spark Connect has
no authentication of its own (put it behind a proxy or a Kubernetes NetworkPolicy).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from warehouse.lake.session import (  # noqa: E402
    STATIC_CONF,
    _cached_jars,
    delta_package,
    jar_cache_dir,
    package_cache_dir,
)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default


def spark_home() -> Path:
    """The installed pyspark package folder: its `bin/spark-submit` and `jars/` are a Spark."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def command(host: str = "127.0.0.1", port: int = DEFAULT_PORT, master: str = "local[*]",
            conf: dict[str, str] | None = None, driver_memory: str | None = None) -> list[str]:
    """The spark-submit command line of a Connect server with Delta (cached jars when there are)."""
    package = delta_package()
    cache = package_cache_dir(jar_cache_dir(conf), package)
    jars = _cached_jars(cache, package)
    settings = {k: v for k, v in STATIC_CONF.items() if k != "spark.driver.memory"}
    settings.update({
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
    })
    settings.update(conf or {})
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", master,
           "--name", "freshet-spark-connect",
           "--driver-memory", driver_memory or STATIC_CONF["spark.driver.memory"]]
    if jars:
        cmd += ["--jars", ",".join(jars)]
    else:
        cmd += ["--packages", package, "--conf", f"spark.jars.ivy={cache}"]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd


def environment(host: str) -> dict[str, str]:
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable}
    if host in ("127.0.0.1", "localhost"):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def start(host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, master: str = "local[2]",
          conf: dict[str, str] | None = None, driver_memory: str | None = None,
          log: IO[str] | None = None, cwd: str | Path | None = None) -> subprocess.Popen[bytes]:
    """Start a server in the background (its own process group, so `stop` ends its JVM too).
    `cwd`: its working directory (Spark puts `spark-warehouse/` and `metastore_db/` there)."""
    return subprocess.Popen(command(host, port, master, conf, driver_memory), env=environment(host),
                            stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
                            cwd=cwd)


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_ready(host: str, port: int, timeout: float = 180.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Until the gRPC port accepts connections; RuntimeError if `proc` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the Spark Connect server exited with {proc.returncode} before it listened")
        if port_open(host, port):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the Spark Connect server did not listen on {host}:{port} within {timeout:.0f}s")


def stop(proc: subprocess.Popen[bytes], *, kill: bool = False, timeout: float = 60.0) -> None:
    """SIGTERM (or SIGKILL) to the server's process group, then wait for it."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", help="address to bind the gRPC port to (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"gRPC port (default {DEFAULT_PORT})")
    ap.add_argument("--master", default="local[*]",
                    help="where the server runs the work: local[*] (default), spark://host:7077, k8s://…")
    ap.add_argument("--driver-memory", default=None, help=f"default {STATIC_CONF['spark.driver.memory']}")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="more Spark settings")
    ap.add_argument("--print-command", action="store_true", help="print the spark-submit command and exit")
    args = ap.parse_args()
    conf = {}
    for kv in args.conf:
        k, sep, v = kv.partition("=")
        if not sep:
            ap.error(f"--conf {kv!r}: expected KEY=VALUE")
        conf[k] = v
    cmd = command(args.host, args.port, args.master, conf, args.driver_memory)
    if args.print_command:
        print(" ".join(cmd))
        return 0
    proc = subprocess.Popen(cmd, env=environment(args.host), start_new_session=True)

    def forward(signum: int, _frame: object) -> None:
        stop(proc)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        wait_ready(args.host if args.host != "0.0.0.0" else "127.0.0.1", args.port, proc=proc)
        print(f"ready sc://{args.host}:{args.port}", file=sys.stderr, flush=True)
    except RuntimeError as e:
        print(f"connect_server: {e}", file=sys.stderr)
        stop(proc)
        return 1
    return proc.wait()


if __name__ == "__main__":
    raise SystemExit(main())
