"""`freshet run` with `spark.remote`: every Spark job over Spark Connect.

A real Spark Connect server with Delta runs on loopback, started and stopped by this module
(scripts/connect_server.py, the operators' way too). The daemon loads good and bad partitions
into base and derived tables through it; during the run the daemon is SIGKILLed once and
restarted, and the Connect server is killed and restarted once under the running daemon
(/readyz reports the lost connection, a metric counts it, the daemon lives on). At the end,
row by row: every good partition's rows are in their base table exactly once, no bad
partition's, and each derived table equals its SQL over its full sources.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import MINUTE, T0, rows_for, warehouse_dict, write_minutes
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers_live import free_port
from tests.helpers_live import wait_for as _wait_for
from warehouse.config import parse_config
from warehouse.lake.delta import table_path, utc
from warehouse.lake.session import job_session
from warehouse.sqltext import bind_window

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import connect_server  # noqa: E402

# three phases of STEP minutes of both streams (good data up to END; m_5m's trailing edge at
# ROLLUP_END), each with jobs under way when the daemon or the server is killed
STEP = 4
END = 3 * STEP
ROLLUP_END = END // 5 * 5


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 300.0, every: float = 1.0) -> Any:
    return _wait_for(what, fn, timeout, every)  # a Connect server under load is slower to answer


class Server:
    """A loopback Spark Connect server with Delta, restartable on the same port."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.remote = f"sc://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = (self.tmp / f"connect-{self.starts}.log").open("w")
        self.proc = connect_server.start("127.0.0.1", self.port, master="local[2]",
                                         conf={"spark.sql.shuffle.partitions": "2"}, driver_memory="1g", log=log,
                                         cwd=self.tmp)
        connect_server.wait_ready("127.0.0.1", self.port, timeout=300, proc=self.proc)

    def log_tail(self, lines: int = 60) -> str:
        """The last ERROR and WARN lines of the current server's log."""
        text = (self.tmp / f"connect-{self.starts}.log").read_text(errors="replace").splitlines()
        return "\n".join([line for line in text if " ERROR " in line or " WARN " in line][-lines:])

    def kill(self) -> None:
        if self.proc is not None:
            connect_server.stop(self.proc, kill=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("connect"))
    s.start()
    try:
        yield s
    finally:
        if s.proc is not None:
            connect_server.stop(s.proc)


class Daemon:
    def __init__(self, tmp: Path, config_path: Path, port: int) -> None:
        self.tmp, self.config_path, self.port = tmp, config_path, port
        self.url = f"http://127.0.0.1:{port}"
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.runs += 1
        log = (self.tmp / f"daemon-{self.runs}.log").open("w")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(self.config_path),
                                      "--grace", "30", "--poll", "0.5"],
                                     cwd=self.tmp, env=env, stdout=log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return "\n".join((self.tmp / f"daemon-{i}.log").read_text() for i in range(1, self.runs + 1))

    def alive(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log()[-4000:]
        return True

    def tables(self) -> dict[str, Any]:
        self.alive()
        return {t["name"]: t for t in httpx.get(f"{self.url}/v1/tables", timeout=10).json()["tables"]}

    def freshness(self, name: str) -> float:
        f = self.tables()[name]["freshness"]
        return 0.0 if f is None else float(f)

    def ready(self) -> httpx.Response:
        self.alive()
        return httpx.get(f"{self.url}/readyz", timeout=10)

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)


def write_bad(cfg: Any, stream: str, pid: str, minute: int) -> None:
    """A partition whose rows lie outside its (start, end]: quarantined, never loaded."""
    import pyarrow as pa

    from ops.demo import write_partition
    from warehouse.landing.intake import _arrow_type as arrow_type

    sc = cfg.stream(stream)
    schema = pa.schema([(c, arrow_type(t)) for c, t in sc.schema_.items()])
    start, end = T0 + minute * MINUTE, T0 + (minute + 1) * MINUTE
    cols = rows_for(stream, start + 3600, end + 3600, seed=99)  # an hour off
    write_partition(cfg.warehouse.landing, stream, pid, start, end,
                    pa.table({c: cols[c] for c in sc.schema_}, schema=schema))


def test_daemon_over_spark_connect_survives_kills_and_loses_nothing(server, tmp_path: Path, monkeypatch) -> None:
    # our own Connect client below switches this process to Spark Connect mode
    # (SPARK_CONNECT_MODE_ENABLED=1 in os.environ); the daemons and the classic local sessions
    # of the tests after this one must not inherit it: setenv records the original, so the
    # teardown restores it (removes it)
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED")
    raw = warehouse_dict(tmp_path, tracks=3, chop=2.0)
    raw["spark"] = {"remote": server.remote, "conf": {"spark.sql.shuffle.partitions": "2"}}
    raw["listen"] = f"127.0.0.1:{free_port()}"
    raw["scheduler"]["retry_backoff"] = "1s"
    raw["scheduler"]["retry_backoff_max"] = "5s"
    cfg_path = tmp_path / "freshet.yaml"
    cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = parse_config(raw)
    daemon = Daemon(tmp_path, cfg_path, int(raw["listen"].rsplit(":", 1)[1]))

    # 1. good partitions and bad ones, the daemon over Connect
    write_minutes(cfg, "m", 0, STEP)
    write_minutes(cfg, "a", 0, STEP)
    write_bad(cfg, "m", "bad-m", STEP)
    daemon.start()
    try:
        wait_for("the base tables over Connect", lambda: daemon.freshness("m_raw") >= T0 + STEP * MINUTE
                 and daemon.freshness("a_raw") >= T0 + STEP * MINUTE, timeout=600)
        assert (Path(cfg.warehouse.landing) / "_quarantine" / "m" / "bad-m" / "reason").read_text().startswith("rows")

        # 2. more data; the daemon is SIGKILLed while it loads, then restarted (recovery through Spark)
        write_minutes(cfg, "m", STEP, STEP)
        write_minutes(cfg, "a", STEP, STEP)
        wait_for("a job on the new data", lambda: daemon.freshness("m_raw") > T0 + STEP * MINUTE
                 or daemon.freshness("a_raw") > T0 + STEP * MINUTE or daemon.freshness("m_5m") > 0, timeout=600,
                 every=0.2)
        daemon.stop(signal.SIGKILL, timeout=30)
        daemon.start()
        wait_for("the restarted daemon to be ready", lambda: daemon.ready().status_code == 200, timeout=600)
        assert "recovered table" in daemon.log()

        # 3. the Connect server dies under the running daemon and comes back on the same port
        write_minutes(cfg, "m", 2 * STEP, STEP)
        write_minutes(cfg, "a", 2 * STEP, STEP)
        write_bad(cfg, "a", "bad-a", END)
        server.kill()
        r = wait_for("/readyz to report the lost connection", lambda: (r := daemon.ready()).status_code == 503 and r,
                     timeout=120)
        assert "Spark Connect" in r.json()["error"], r.json()
        server.start()
        wait_for("/readyz after the server is back", lambda: daemon.ready().status_code == 200, timeout=300)
        assert daemon.metric("freshet_spark_connection_lost_total") >= 1
        assert daemon.metric("freshet_spark_connected") == 1

        # 4. everything arrives: base tables at T0+END, derived ones at their trailing edge
        want = {"m_raw": T0 + END * MINUTE, "a_raw": T0 + END * MINUTE, "m_5m": T0 + ROLLUP_END * MINUTE,
                "a_m": T0 + END * MINUTE}
        try:
            wait_for("all tables loaded", lambda: all(daemon.freshness(t) == f for t, f in want.items()), timeout=900)
        except AssertionError as err:  # what the daemon was doing, for the one who reads the failure
            got = {t: daemon.freshness(t) - T0 for t in want}
            raise AssertionError(f"{err}; freshness - T0 {got}; the daemon's log ends:\n{daemon.log()[-8000:]}\n"
                                 f"the server's log ends:\n{server.log_tail()}") from None
        assert daemon.stop() == 0
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait(30)
    log = daemon.log()
    assert "lost the Spark Connect server" in log and "Spark Connect server reachable again" in log
    # the servers' JIT stayed on (a full code cache turns it off and breaks new call sites: conftest.py)
    for i in range(1, server.starts + 1):
        assert "CodeCache is full" not in (server.tmp / f"connect-{i}.log").read_text(errors="replace"), i

    # 5. row by row, through a Connect session of our own
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(server.remote).create()
    try:
        def rows(name: str, cols: list[str]) -> list[tuple]:
            return sorted(tuple(r) for r in spark.read.format("delta").load(table_path(cfg, name)).select(*cols).collect())

        for stream, table, cols in (("m", "m_raw", ["id", "k", "v"]), ("a", "a_raw", ["id", "k", "sev"])):
            want = []
            for i in range(END):
                c = rows_for(stream, T0 + i * MINUTE, T0 + (i + 1) * MINUTE, 0)
                want += list(zip(*(c[k] for k in cols), strict=True))
            got = rows(table, cols)
            assert len(got) == len(set(got)), f"{table}: a row loaded twice"
            assert got == sorted(want), f"{table}: rows lost or foreign rows loaded"
        for name in ("m_5m", "a_m"):
            tc = cfg.table(name)
            upto = T0 + (ROLLUP_END if name == "m_5m" else END) * MINUTE
            with job_session(spark) as session:  # a clone of our session, released after
                for src in tc.sources:
                    session.read.format("delta").load(table_path(cfg, src)).createOrReplaceTempView(src)
                want_df = session.sql(bind_window(tc.sql, 0.0, upto))
                want_df = want_df.where(want_df.ts <= utc(upto))
                cols = want_df.columns
                want = sorted(tuple(r) for r in want_df.collect())
            assert want, name
            got = rows(name, cols)
            assert len(got) == len(set(got)), f"{name}: a window appended twice"
            assert got == want, name
    finally:
        spark.stop()
