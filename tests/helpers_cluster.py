"""A Spark standalone cluster on loopback for the tests: a master and a worker started with the
pyspark distribution's `spark-class`, once per pytest process (`spark_cluster`, in
tests/conftest.py) and shared by the tests that run a daemon on it, which `xdist_group("cluster")`
keeps in one worker (tests/test_daemon_cluster.py, tests/test_reliability_executor.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers_live import free_port, wait_for

Cluster = tuple[str, str, dict[str, str]]  # master URL, the master's JSON state URL, the env to run a driver in


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp), "SPARK_WORKER_DIR": str(tmp / "work"), "PYSPARK_PYTHON": sys.executable}
    spark_class = str(spark_home / "bin" / "spark-class")
    port, ui = free_port(), free_port()
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
             "--memory", "2g", "--webui-port", str(free_port())], env=env, stdout=wlog, stderr=subprocess.STDOUT))
        state_url = f"http://127.0.0.1:{ui}/json/"
        wait_for("a worker to register with the master",
                 lambda: httpx.get(state_url, timeout=5).json()["aliveworkers"] >= 1, timeout=120, every=1.0)
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
