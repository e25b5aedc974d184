"""`freshet run` end to end: one daemon subprocess on the demo config (examples/netmon.yaml) with
real Spark and Delta, checked through its real HTTP API, its /metrics (prometheus_client's
parser), systemd notifications, signals, its trace file — and a real Prometheus server scraping it.

The daemon is started once for the module and the checks run in file order; the last one stops it
with SIGTERM. Kept lean: a few partitions, two streams.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ops.demo import generate, partition_id, write_partition
from sim.trace import read_trace
from warehouse.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "test-token-123"
GRACE = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 120.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except (httpx.HTTPError, OSError, ValueError, KeyError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class NotifySocket:
    """A stand-in for systemd's NOTIFY_SOCKET: collects sd_notify datagrams."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[str] = []
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue
            except OSError:
                return

    def close(self) -> None:
        self._stop = True
        self._t.join(2)
        self.sock.close()


class Daemon:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        raw = yaml.safe_load((ROOT / "examples" / "netmon.yaml").read_text())
        raw["warehouse"] = {"root": str(tmp / "data"), "landing": str(tmp / "landing"),
                            "trace": str(tmp / "trace.jsonl")}
        raw["listen"] = f"127.0.0.1:{self.port}"
        # a derived table whose SQL cannot run: its jobs fail and are retried after a back-off
        raw["tables"].append({"name": "broken_cpu", "sources": ["cpu_raw"], "priority": 1,
                              "sql": "SELECT ts, no_such_column FROM cpu_raw"})
        raw["scheduler"]["retry_backoff"] = "2s"
        self.raw = raw
        self.config_path = tmp / "freshet.yaml"
        self.config_path.write_text(yaml.safe_dump(raw, sort_keys=False))
        self.config = load_config(self.config_path)
        self.log_path = tmp / "daemon.log"
        self.notify = NotifySocket(tmp / "notify.sock")
        env = {**os.environ, "FRESHET_API_TOKEN": TOKEN, "NOTIFY_SOCKET": str(self.notify.path),
               "WATCHDOG_USEC": "1000000", "PYTHONUNBUFFERED": "1"}
        env.pop("WATCHDOG_PID", None)
        self.log_fh = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "run", "--config", str(self.config_path), "--log-format", "json",
             "--grace", str(GRACE), "--poll", "0.5"],
            cwd=tmp, env=env, stdout=self.log_fh, stderr=subprocess.STDOUT)
        self.client = httpx.Client(base_url=self.url, timeout=10)

    def logs(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def tables(self) -> dict[str, dict[str, Any]]:
        r = self.client.get("/v1/tables")
        r.raise_for_status()
        return {t["name"]: t for t in r.json()["tables"]}

    def metrics(self) -> dict[str, dict[tuple, float]]:
        out: dict[str, dict[tuple, float]] = {}
        for fam in text_string_to_metric_families(self.client.get("/metrics").text):
            for s in fam.samples:
                out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
        return out

    def alive(self) -> None:
        assert self.proc.poll() is None, f"daemon exited with {self.proc.returncode}:\n{self.tail()}"

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text().splitlines()[-n:])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.client.close()
        self.notify.close()
        self.log_fh.close()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("daemon"))
    d.readyz_seen = []

    def ready() -> bool:
        d.alive()
        code = d.client.get("/readyz").status_code
        d.readyz_seen.append(code)
        return code == 200

    try:
        wait_for("/readyz", ready, timeout=240, every=0.2)
        yield d
    finally:
        d.close()


# times of the partitions the tests push: recent, aligned to the streams' periods
NOW = time.time()
T = math.floor(NOW / 300) * 300 - 600  # every window ends in the past: future-dated ones are quarantined
LOADED_ROWS: dict[str, dict[str, int]] = {"cpu_raw": {}, "alerts_raw": {}}


def land(d: Daemon, stream: str, start: float, end: float, seed: int) -> tuple[str, int]:
    """A producer's partition in the landing zone (files, then the manifest last)."""
    table = generate(d.config.stream(stream), start, end, random.Random(seed))
    pid = partition_id(end)
    write_partition(d.config.warehouse.landing, stream, pid, start, end, table)
    return pid, table.num_rows


def stage_files(d: Daemon, stream: str, start: float, end: float, seed: int) -> tuple[str, int]:
    """Data files only (no manifest): the manifest is POSTed to the API."""
    import pyarrow.parquet as pq

    table = generate(d.config.stream(stream), start, end, random.Random(seed))
    pid = partition_id(end)
    directory = Path(d.config.warehouse.landing) / stream / pid
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / "part-0.parquet", coerce_timestamps="us")
    return pid, table.num_rows


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def test_ready_notifies_systemd_and_pings_watchdog(daemon):
    # /readyz said 503 while recovering and starting Spark (the API listens from the start)
    assert 503 in daemon.readyz_seen and daemon.readyz_seen[-1] == 200
    wait_for("READY=1", lambda: any("READY=1" in m for m in daemon.notify.messages), timeout=10)
    wait_for("two WATCHDOG=1", lambda: sum("WATCHDOG=1" in m for m in daemon.notify.messages) >= 2, timeout=10)
    assert daemon.client.get("/healthz").json()["status"] == "ok"
    tables = daemon.tables()
    assert set(tables) == {t.name for t in daemon.config.tables}
    assert all(t["freshness"] is None for t in tables.values())  # a fresh warehouse


def test_partitions_from_landing_zone_and_api_load(daemon):
    pid, rows = land(daemon, "router_cpu", T - 300, T, seed=1)
    LOADED_ROWS["cpu_raw"][pid] = rows
    apid, arows = stage_files(daemon, "link_alerts", T - 60, T, seed=2)
    manifest = {"id": apid, "start": iso(T - 60), "end": iso(T), "files": ["part-0.parquet"], "rows": arows}
    r = daemon.client.post("/v1/streams/link_alerts/partitions", json=manifest,
                           headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 202, r.text
    assert r.json()["partition"] == apid
    LOADED_ROWS["alerts_raw"][apid] = arows
    # the same manifest again is an exact duplicate: a no-op
    r = daemon.client.post("/v1/streams/link_alerts/partitions", json=manifest,
                           headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and r.json()["status"] == "duplicate"
    dup = wait_for("duplicate counted", lambda: daemon.metrics().get("freshet_partitions_duplicate_total"))
    assert dup[(("stream", "link_alerts"),)] == 1

    def loaded() -> bool:
        daemon.alive()
        t = daemon.tables()
        return t["cpu_raw"]["freshness"] == T and t["alerts_raw"]["freshness"] == T

    wait_for("cpu_raw and alerts_raw loaded", loaded, timeout=180)
    t1 = daemon.tables()["cpu_raw"]
    time.sleep(1.1)
    t2 = daemon.tables()["cpu_raw"]
    assert t2["staleness"] > t1["staleness"] > 0  # staleness keeps rising between loads (Fig. 2)
    assert t2["last_result"] == "ok" and t2["jobs_completed"] >= 1
    assert t2["target_staleness"] == 600


def test_freshet_status_shows_the_tables_stalest_first(daemon):
    r = subprocess.run([sys.executable, "-m", "ops.cli", "status", "--url", daemon.url], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["TABLE", "KIND", "PRIO"]
    shown = [ln.split()[0] for ln in lines[1:] if ln.strip() and not ln.startswith(tuple("0123456789"))]
    assert {"cpu_raw", "alerts_raw"} <= set(shown[:2])  # the only tables with a staleness come first
    assert "inventory_raw" in shown and "[" in lines[1]


def test_bad_requests_get_4xx_and_the_daemon_carries_on(daemon):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    url = "/v1/streams/link_alerts/partitions"
    c = daemon.client
    good = {"id": "x1", "start": iso(T), "end": iso(T + 60), "files": ["part-0.parquet"], "rows": 1}
    r = c.post(url, content=b"{nope", headers={**auth, "content-type": "application/json"})
    assert r.status_code == 400 and "malformed JSON" in r.json()["error"]
    r = c.post("/v1/streams/no_such_stream/partitions", json=good, headers=auth)
    assert r.status_code == 404 and "no_such_stream" in r.json()["error"]
    r = c.post(url, json=good)
    assert r.status_code == 401 and "bearer token" in r.json()["error"]
    r = c.post(url, json=good, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 403
    r = c.post(url, content=b"{" + b" " * (70 * 1024) + b"}", headers={**auth, "content-type": "application/json"})
    assert r.status_code == 413
    # a manifest whose declared rows do not match its file: rejected by intake and quarantined
    pid, rows = stage_files(daemon, "link_alerts", T, T + 60, seed=3)
    bad = {"id": pid, "start": iso(T), "end": iso(T + 60), "files": ["part-0.parquet"], "rows": rows + 5}
    r = c.post(url, json=bad, headers=auth)
    assert r.status_code == 422 and "row count" in r.json()["error"], r.text
    assert (Path(daemon.config.warehouse.landing) / "_quarantine" / "link_alerts" / pid / "reason").exists()
    daemon.alive()
    assert c.get("/healthz").status_code == 200
    m = wait_for("quarantine counted", lambda: daemon.metrics().get("freshet_partitions_quarantined_total"))
    assert m[(("stream", "link_alerts"),)] >= 1


def test_metrics_show_freshness_and_staleness(daemon):
    m1 = daemon.metrics()
    cpu = (("table", "cpu_raw"),)
    assert m1["freshet_table_freshness_timestamp_seconds"][cpu] == T
    assert m1["freshet_table_staleness_target_seconds"][cpu] == 600
    assert m1["freshet_rows_loaded_total"][cpu] == sum(LOADED_ROWS["cpu_raw"].values())
    assert m1["freshet_job_duration_seconds_count"][(("kind", "base"), ("table", "cpu_raw"))] >= 1
    assert m1["freshet_jobs_completed_total"][(("status", "ok"), ("table", "cpu_raw"))] >= 1
    assert m1["freshet_ready"][()] == 1
    time.sleep(1.0)
    m2 = daemon.metrics()
    assert m2["freshet_table_staleness_seconds"][cpu] > m1["freshet_table_staleness_seconds"][cpu]
    assert m2["freshet_table_staleness_seconds"][cpu] == pytest.approx(time.time() - T, abs=5)


def test_real_prometheus_scrapes_the_daemon(daemon, tmp_path):
    prometheus = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not Path(prometheus).exists():
        pytest.fail("prometheus not found: install Debian's 'prometheus' package (apt-get install prometheus)")
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ROOT / "ops" / "prometheus" / "rules.yml")],
        "scrape_configs": [{"job_name": "freshet", "static_configs": [{"targets": [f"127.0.0.1:{daemon.port}"]}]}],
    }))
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen([prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        api = f"http://127.0.0.1:{port}/api/v1/query"

        def query() -> list[dict[str, Any]]:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            r = httpx.get(api, params={"query": 'freshet_table_staleness_seconds{table="cpu_raw"}'}, timeout=5)
            return r.json()["data"]["result"]

        (sample,) = wait_for("Prometheus to scrape the daemon", query, timeout=60)
        assert sample["metric"]["job"] == "freshet" and sample["metric"]["table"] == "cpu_raw"
        assert float(sample["value"][1]) == pytest.approx(time.time() - T, abs=15)
        up = httpx.get(api, params={"query": 'up{job="freshet"}'}, timeout=5).json()["data"]["result"]
        assert up[0]["value"][1] == "1"
        # the recording rule works on the real series
        ratio = wait_for("recording rule", lambda: httpx.get(api, params={
            "query": 'freshet:table_staleness_over_target:ratio{table="cpu_raw"}'}, timeout=5).json()["data"]["result"],
            timeout=30)
        assert float(ratio[0]["value"][1]) == pytest.approx((time.time() - T) / 600, abs=0.05)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_sighup_reload_adds_a_table_and_rejects_a_bad_config(daemon):
    # an invalid config: logged, counted, and the old one stays
    good_text = daemon.config_path.read_text()
    daemon.config_path.write_text(good_text.replace("priority: 100", "priority: -1"))
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for("reload rejected", lambda: daemon.metrics()["freshet_config_reloads_total"][(("result", "rejected"),)] == 1,
             timeout=20)
    assert any(e["msg"].startswith("config reload rejected") and "priority" in e.get("reason", "")
               for e in daemon.logs())
    daemon.alive()
    assert "alerts_raw" in daemon.tables()
    # a valid config adding a base table on an existing stream: it loads what arrives from now on
    raw = dict(daemon.raw)
    raw["tables"] = [*raw["tables"], {"name": "cpu_copy", "stream": "router_cpu", "priority": 7,
                                      "target_staleness": "20m"}]
    daemon.config_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    daemon.proc.send_signal(signal.SIGHUP)
    t = wait_for("cpu_copy appears", lambda: daemon.tables().get("cpu_copy"), timeout=30)
    assert t["priority"] == 7 and t["target_staleness"] == 1200 and t["freshness"] is None
    assert daemon.metrics()["freshet_config_reloads_total"][(("result", "ok"),)] == 1
    assert any(e["msg"] == "config reloaded" and e.get("added") == ["cpu_copy"] for e in daemon.logs())
    pid, rows = land(daemon, "router_cpu", T, T + 300, seed=5)
    LOADED_ROWS["cpu_raw"][pid] = rows
    wait_for("cpu_copy and cpu_raw load the new partition", lambda: daemon.alive() or all(
        daemon.tables()[n]["freshness"] == T + 300 for n in ("cpu_copy", "cpu_raw")), timeout=120)
    assert delta_rows(Path(daemon.config.warehouse.root) / "cpu_copy") == rows


def test_a_failing_table_backs_off_retries_and_others_carry_on(daemon):
    def failed_twice() -> dict[str, Any] | None:
        t = daemon.tables()["broken_cpu"]
        return t if t["consecutive_failures"] >= 2 else None

    t = wait_for("broken_cpu to fail twice (retry after the back-off)", failed_twice, timeout=120)
    assert t["last_result"].startswith("failed") and "no_such_column" in t["last_result"]
    assert t["freshness"] is None
    m = daemon.metrics()
    assert m["freshet_jobs_completed_total"][(("status", "failed"), ("table", "broken_cpu"))] >= 2
    assert m["freshet_table_consecutive_failures"][(("table", "broken_cpu"),)] >= 2
    failed = [e for e in daemon.logs() if e["msg"] == "job failed" and e["table"] == "broken_cpu"]
    assert len(failed) >= 2 and "no_such_column" in failed[0]["reason"]
    assert daemon.tables()["cpu_raw"]["last_result"] == "ok"


def test_logs_name_table_job_track_duration_rows_freshness(daemon):
    done = [e for e in daemon.logs() if e["msg"] == "job finished"]
    assert done
    for e in done:
        for key in ("table", "job", "track", "duration", "rows", "freshness"):
            assert key in e, (key, e)


def test_trace_file_replays_in_the_simulator(daemon):
    trace = read_trace(daemon.config.warehouse.trace)
    ids = {a.partition for a in trace.arrivals.get("router_cpu", [])}
    assert set(LOADED_ROWS["cpu_raw"]) <= ids
    jobs = [j for j in trace.jobs if j.table == "cpu_raw" and j.status == "ok"]
    assert jobs and all(j.duration > 0 for j in jobs)
    first = min(LOADED_ROWS["cpu_raw"], key=lambda p: p)
    assert jobs[0].end == T and jobs[0].rows == LOADED_ROWS["cpu_raw"][first]
    # and the simulator replays it (docs/simulator.md)
    r = subprocess.run([sys.executable, "-m", "ops.cli", "sim", "run", "--config", str(daemon.config_path),
                        "--trace", daemon.config.warehouse.trace, "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["events"] > 0 and out["per_table"]["cpu_raw"]["jobs"] >= 1


def delta_rows(table_dir: Path) -> int:
    """Rows in the Delta table's current snapshot, from the log's add/remove actions (stats)."""
    live: dict[str, int] = {}
    for f in sorted((table_dir / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = json.loads(action["add"]["stats"])["numRecords"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return sum(live.values())


def test_sigterm_lets_the_running_job_finish_and_exits_zero(daemon):
    from warehouse.lake.delta import recover

    # a job is running when SIGTERM arrives
    pid, rows = land(daemon, "router_cpu", T + 300, T + 600, seed=4)
    LOADED_ROWS["cpu_raw"][pid] = rows
    wait_for("the cpu_raw job to start", lambda: any(
        e["msg"] == "job started" and e.get("table") == "cpu_raw" and e.get("freshness") == iso(T + 600)
        for e in daemon.logs()), timeout=60, every=0.2)
    t0 = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    rc = daemon.proc.wait(GRACE + 30)
    elapsed = time.monotonic() - t0
    assert rc == 0, daemon.tail()
    assert elapsed < GRACE
    assert any("STOPPING=1" in m for m in daemon.notify.messages)
    logs = daemon.logs()
    assert any(e["msg"] == "stopped: no job running" for e in logs), daemon.tail()
    # the running job was allowed to finish, and nothing is half-loaded: every committed partition
    # is in the table completely, and the table holds nothing else
    state = recover(load_config(daemon.config_path))
    cpu = state.tables["cpu_raw"]
    assert cpu.freshness == T + 600
    assert set(cpu.partitions) == set(LOADED_ROWS["cpu_raw"])
    assert delta_rows(Path(daemon.config.warehouse.root) / "cpu_raw") == sum(LOADED_ROWS["cpu_raw"].values())
    alerts = state.tables["alerts_raw"]
    assert delta_rows(Path(daemon.config.warehouse.root) / "alerts_raw") == sum(
        LOADED_ROWS["alerts_raw"][p] for p in alerts.partitions)
