"""`freshet run` against a real Spark standalone cluster on loopback — the path a user takes when
one machine is not enough (`spark.master: spark://host:7077`, ops/README.md).

A master and a worker are started with the pyspark distribution's `spark-class`; the daemon runs
the demo config with `--demo` and the tables fill, with the work done by the cluster's executor.
Then the driver JVM is killed: the daemon must exit non-zero so its supervisor restarts it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyspark
import pytest
import yaml

from warehouse.config import load_config
from warehouse.lake.recovery import recover

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SPARK_HOME = Path(pyspark.__file__).parent


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what, fn, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (httpx.HTTPError, OSError, ValueError, KeyError) as e:
            last = e
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp), "SPARK_WORKER_DIR": str(tmp / "work"), "PYSPARK_PYTHON": sys.executable}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, ui = _port(), _port()
    logs = []
    procs = []
    try:
        mlog = (tmp / "master.log").open("w")
        logs.append(mlog)
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env=env, stdout=mlog, stderr=subprocess.STDOUT))
        master = f"spark://127.0.0.1:{port}"
        wlog = (tmp / "worker.log").open("w")
        logs.append(wlog)
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1", "--cores", "2",
             "--memory", "2g", "--webui-port", str(_port())], env=env, stdout=wlog, stderr=subprocess.STDOUT))
        state_url = f"http://127.0.0.1:{ui}/json/"
        _wait("a worker to register with the master",
              lambda: httpx.get(state_url, timeout=5).json()["aliveworkers"] >= 1, timeout=120)
        yield master, state_url, env
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs:
            f.close()


def test_daemon_on_a_standalone_cluster_fills_the_tables(cluster, tmp_path):
    master, state_url, env = cluster
    port = _port()
    raw = yaml.safe_load((ROOT / "examples" / "netmon.yaml").read_text())
    raw["warehouse"] = {"root": str(tmp_path / "data"), "landing": str(tmp_path / "landing")}
    raw["listen"] = f"127.0.0.1:{port}"
    raw["spark"]["master"] = master
    raw["spark"]["conf"].update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                                 "spark.executor.memory": "1g", "spark.cores.max": "2"})
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(cfg), "--demo",
                             "--demo-backfill", "15m", "--demo-speed", "60", "--grace", "60"],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        def filled() -> bool:
            assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            tables = {t["name"]: t for t in httpx.get(f"{url}/v1/tables", timeout=5).json()["tables"]}
            return all(tables[n]["freshness"] is not None for n in ("cpu_raw", "alerts_raw", "syslog_raw"))

        _wait("the base tables to fill on the cluster", filled, timeout=300)
        # the work ran on the cluster: the master lists the daemon as a running application
        # with cores (its executor) granted
        apps = httpx.get(state_url, timeout=5).json()["activeapps"]
        assert any(a["name"] == raw["spark"].get("app_name", "freshet") and a["cores"] >= 1 for a in apps), apps
        state = recover(load_config(cfg))
        assert state.tables["cpu_raw"].freshness is not None and state.tables["cpu_raw"].partitions
        # if the driver JVM dies, the daemon exits non-zero (so systemd / Kubernetes restart it)
        # instead of living on with every job failing
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        jvm = [int(c) for c in children if "java" in Path(f"/proc/{c}/cmdline").read_bytes().decode(errors="replace")]
        assert jvm, children
        os.kill(jvm[0], signal.SIGKILL)
        assert proc.wait(60) == 1
        assert "the Spark driver JVM is gone" in (tmp_path / "daemon.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        log.close()
