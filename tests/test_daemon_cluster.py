"""`freshet run` against a real Spark standalone cluster on loopback — the path a user takes when
one machine is not enough (`spark.master: spark://host:7077`, ops/README.md).

A master and a worker (tests/helpers_cluster.py, shared with tests/test_reliability_executor.py); the daemon runs
the demo config with `--demo` and the tables fill, with the work done by the cluster's executor.
Then the driver JVM is killed: the daemon must exit non-zero so its supervisor restarts it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.helpers_live import free_port, wait_for
from warehouse.config import load_config
from warehouse.lake.recovery import recover

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("cluster")]  # one cluster (helpers_cluster)

ROOT = Path(__file__).resolve().parents[1]


def test_daemon_on_a_standalone_cluster_fills_the_tables(spark_cluster, tmp_path):
    master, state_url, env = spark_cluster
    port = free_port()
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

        wait_for("the base tables to fill on the cluster", filled, timeout=300, every=1.0)
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
