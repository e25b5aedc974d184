"""An executor killed under a running daemon on a Spark standalone cluster: Spark
relaunches it (and retries its tasks) or the job fails and Freshet retries it after its back-off;
the daemon serves throughout and every partition is loaded exactly once.

The cluster (a master and a worker on loopback) is tests/helpers_cluster.py's, shared with
tests/test_daemon_cluster.py.
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
from conftest import MINUTE, T0, make_config, warehouse_dict, write_minutes

from tests.helpers_live import free_port, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("cluster")]  # one cluster (helpers_cluster)

ROOT = Path(__file__).resolve().parents[1]


def executors() -> list[int]:
    """Executor JVMs on this machine (the worker's CoarseGrainedExecutorBackend children)."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "CoarseGrainedExecutorBackend" in cmd and "java" in cmd:
                out.append(int(p))
    return out


def test_an_executor_killed_mid_run_loses_nothing_and_loads_nothing_twice(spark_cluster, tmp_path):
    master, _state_url, env = spark_cluster
    data = warehouse_dict(tmp_path, tracks=1)
    data["spark"] = {"master": master, "conf": {
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.executor.memory": "1g",
        "spark.cores.max": "2", "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}}
    data["scheduler"]["retry_backoff"] = "1s"
    data["scheduler"]["retry_backoff_max"] = "4s"
    (tmp_path / "freshet.yaml").write_text(yaml.safe_dump(data))
    cfg = make_config(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    before = set(executors())
    write_minutes(cfg, "m", 0, 3)
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(tmp_path / "freshet.yaml"),
                             "--listen", f"127.0.0.1:{port}", "--poll", "0.3", "--log-format", "json"],
                            cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        def fresh(minutes: int) -> bool:
            assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            return httpx.get(f"{url}/v1/tables/m_raw", timeout=5).json()["freshness"] == T0 + minutes * MINUTE

        wait_for("the first loads on the cluster", lambda: fresh(3), timeout=300)
        mine = wait_for("this daemon's executor", lambda: sorted(set(executors()) - before), timeout=60)
        # more partitions, then the executor is killed while their jobs run
        write_minutes(cfg, "m", 3, 6)
        wait_for("a job running", lambda: httpx.get(f"{url}/v1/tables/m_raw", timeout=5).json()["state"]
                 == "running" or fresh(9), timeout=60, every=0.05)
        for pid in mine:
            os.kill(pid, signal.SIGKILL)
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        wait_for("everything loaded after the executor died", lambda: fresh(9), timeout=300)
        assert proc.poll() is None
        wait_for("a new executor", lambda: set(executors()) - before - set(mine), timeout=60)
        from deltalake import DeltaTable

        ids = DeltaTable(str(tmp_path / "data" / "m_raw")).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
        assert len(ids) == len(set(ids)) == 9 * 4  # nine partitions of four rows, each once
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        log.close()
