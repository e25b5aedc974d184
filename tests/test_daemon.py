"""`freshet run` end to end: one daemon subprocess on the demo config (examples/netmon.yaml) with
real Spark and Delta, checked through its real HTTP API, its /metrics (prometheus_client's
parser), systemd notifications, signals, its trace file — and a real Prometheus server scraping it.

One daemon is shared by the tests of this module (starting Spark is the slow part), but no test
depends on another: each asks for the state it needs (`base_loaded`), assertions are relative to
what this daemon was sent, and a test that stops the daemon (SIGTERM) leaves the next test a fresh
one. So every test runs alone with `-k` and in any order. Kept lean: a few partitions, two streams.
The demo restart test runs its own daemon, twice, in one directory.
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
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ops.demo import generate, partition_id, write_partition
from sim.trace import read_trace
from tests.helpers_live import free_port, wait_for
from tests.test_deploy import METRIC, PENDING_METRICS, dashboard_queries
from warehouse.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "test-token-123"
GRACE = 90.0




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
        # a derived table whose SQL analyses but cannot run: its jobs fail and are retried after a
        # back-off (a SQL naming a missing column is refused at start, warehouse.sqlcheck)
        raw["tables"].append({"name": "broken_cpu", "sources": ["cpu_raw"], "priority": 1,
                              "sql": "SELECT ts, CAST(raise_error('broken on purpose') AS STRING) AS boom "
                                     "FROM cpu_raw"})
        # a derived table whose jobs take a few seconds (the JVM sleeps once per job): SIGTERM can
        # be sent while one of them is certainly running
        raw["tables"].append({"name": "slow_cpu", "sources": ["cpu_raw"], "priority": 1, "sql": SLOW_SQL})
        raw["scheduler"]["retry_backoff"] = "2s"
        # OPTIMIZE after every commit of alerts_raw: the maintenance series have data for the
        # dashboard's panels (test_real_prometheus_scrapes_the_daemon)
        next(t for t in raw["tables"] if t["name"] == "alerts_raw")["maintenance"] = {"optimize_every": 1}
        self.raw = raw
        self.config_path = tmp / "freshet.yaml"
        self.config_path.write_text(yaml.safe_dump(raw, sort_keys=False))
        self.config = load_config(self.config_path)
        self.log_path = tmp / "daemon.log"  # stderr: the log
        self.out_path = tmp / "daemon.out"  # stdout: nothing expected
        self.notify = NotifySocket(tmp / "notify.sock")
        env = {**os.environ, "FRESHET_API_TOKEN": TOKEN, "NOTIFY_SOCKET": str(self.notify.path),
               "WATCHDOG_USEC": "1000000", "PYTHONUNBUFFERED": "1"}
        env.pop("WATCHDOG_PID", None)
        self.log_fh = self.log_path.open("w")
        self.out_fh = self.out_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "run", "--config", str(self.config_path), "--log-format", "json",
             "--grace", str(GRACE), "--poll", "0.5"],
            cwd=tmp, env=env, stdout=self.out_fh, stderr=self.log_fh)
        self.client = httpx.Client(base_url=self.url, timeout=10)
        self.readyz_seen: list[int] = []
        self.started_with = {t.name for t in self.config.tables}
        # what this daemon was sent (tests assert relative to it, never to another test's work)
        self.loaded_rows: dict[str, dict[str, int]] = {"cpu_raw": {}, "alerts_raw": {}}
        self.cpu_end = 0.0  # the newest router_cpu partition's end landed so far
        self.posts: list[httpx.Response] = []  # base_loaded's POST and its duplicate

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
        self.out_fh.close()


class Daemons:
    """The module's daemon: started on first use, started again if a test stopped it."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.current: Daemon | None = None

    def get(self) -> Daemon:
        if self.current is not None and self.current.proc.poll() is None:
            return self.current
        if self.current is not None:
            self.current.close()
        d = self.current = Daemon(self.factory.mktemp("daemon"))

        def ready() -> bool:
            d.alive()
            code = d.client.get("/readyz").status_code
            d.readyz_seen.append(code)
            return code == 200

        wait_for("/readyz", ready, timeout=240, every=0.2)
        return d

    def close(self) -> None:
        if self.current is not None:
            self.current.close()


@pytest.fixture(scope="module")
def daemons(tmp_path_factory):
    pool = Daemons(tmp_path_factory)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def daemon(daemons) -> Daemon:
    return daemons.get()


# times of the partitions the tests push: recent, aligned to the streams' periods
NOW = time.time()
T = math.floor(NOW / 300) * 300 - 900  # room for three more 5-minute partitions, none in the future
SLOW_SQL = ("SELECT ts, n, reflect('java.lang.Thread', 'sleep', CAST(4000 AS BIGINT)) AS slept "
            "FROM (SELECT max(ts) AS ts, count(*) AS n FROM cpu_raw) WHERE n > 0")


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


def seconds(text: str) -> float | None:
    """`freshet status`'s durations back to seconds: 12.3s, 4m05s, 2h03m, 3d04h; `-` is None."""
    if text == "-":
        return None
    import re

    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(float(v) * units[u] for v, u in re.findall(r"([\d.]+)([dhms])", text))


def land_cpu(d: Daemon, seed: int) -> tuple[str, int]:
    """The next five minutes of router_cpu after what this daemon was sent."""
    start = d.cpu_end or T - 300
    pid, rows = land(d, "router_cpu", start, start + 300, seed=seed)
    d.loaded_rows["cpu_raw"][pid] = rows
    d.cpu_end = start + 300
    return pid, rows


def base_loaded(d: Daemon) -> None:
    """cpu_raw and alerts_raw hold a partition each (one from the landing zone, one POSTed and
    POSTed again): done once per daemon, whichever test asks first."""
    if not d.posts:
        land_cpu(d, seed=1)
        apid, arows = stage_files(d, "link_alerts", T - 60, T, seed=2)
        manifest = {"id": apid, "start": iso(T - 60), "end": iso(T), "files": ["part-0.parquet"], "rows": arows}
        for _ in range(2):  # the same manifest again is an exact duplicate: a no-op
            d.posts.append(d.client.post("/v1/streams/link_alerts/partitions", json=manifest,
                                         headers={"Authorization": f"Bearer {TOKEN}"}))
        d.loaded_rows["alerts_raw"][apid] = arows

    def loaded() -> bool:
        d.alive()
        t = d.tables()
        return t["cpu_raw"]["freshness"] == d.cpu_end and t["alerts_raw"]["freshness"] == T

    wait_for("cpu_raw and alerts_raw loaded", loaded, timeout=180)


def test_ready_notifies_systemd_and_pings_watchdog(daemon):
    # /readyz said 503 while recovering and starting Spark (the API listens from the start)
    assert 503 in daemon.readyz_seen and daemon.readyz_seen[-1] == 200
    wait_for("READY=1", lambda: any("READY=1" in m for m in daemon.notify.messages), timeout=10)
    n = sum("WATCHDOG=1" in m for m in daemon.notify.messages)
    wait_for("two more WATCHDOG=1", lambda: sum("WATCHDOG=1" in m for m in daemon.notify.messages) >= n + 2,
             timeout=10)
    assert daemon.client.get("/healthz").json()["status"] == "ok"
    assert set(daemon.tables()) == {t.name for t in daemon.config.tables}  # SIGHUP may have added one
    recovered = {e["table"]: e for e in daemon.logs() if e["msg"] == "recovered table"}
    assert set(recovered) == daemon.started_with
    assert all(e["freshness"] is None for e in recovered.values())  # it started on a fresh warehouse


def test_every_series_exists_from_the_first_scrape(daemon):
    """Counters of every configured stream and table are exported at 0 before their first event."""
    m = daemon.metrics()
    for s in daemon.config.streams:
        lab = (("stream", s.name),)
        for name in ("freshet_partitions_quarantined_total", "freshet_partitions_duplicate_total",
                     "freshet_partitions_arrived_total"):
            assert lab in m[name], (name, s.name)
    assert m["freshet_partitions_quarantined_total"][(("stream", "syslog"),)] == 0  # no test quarantines syslog
    for t in daemon.config.tables:
        lab = (("table", t.name),)
        for name in ("freshet_rows_loaded_total", "freshet_table_backlog_seconds",
                     "freshet_table_pending_partitions", "freshet_jobs_released_total"):
            assert lab in m[name], (name, t.name)
    assert m["freshet_loop_errors_total"][(("loop", "intake_scan"),)] == 0


def test_partitions_from_landing_zone_and_api_load(daemon):
    base_loaded(daemon)
    first, again = daemon.posts
    assert first.status_code == 202, first.text
    assert first.json()["partition"] in daemon.loaded_rows["alerts_raw"]
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    wait_for("duplicate counted", lambda: daemon.metrics()["freshet_partitions_duplicate_total"][
        (("stream", "link_alerts"),)] == 1)
    t1 = daemon.tables()["cpu_raw"]
    time.sleep(1.1)
    t2 = daemon.tables()["cpu_raw"]
    assert t2["staleness"] > t1["staleness"] > 0  # staleness keeps rising between loads (Fig. 2)
    assert t2["last_result"] == "ok" and t2["jobs_completed"] >= 1
    assert t2["target_staleness"] == 600


def test_freshet_status_shows_the_tables_most_over_target_first(daemon):
    base_loaded(daemon)
    r = subprocess.run([sys.executable, "-m", "ops.cli", "status", "--url", daemon.url], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["TABLE", "KIND", "PRIO"] and lines[0].split()[-2:] == ["BACKLOG", "LAST"]
    table = lines[1:lines.index("")]  # the table; then backfills, suspensions, maintenance, a summary
    rows = {ln.split()[0]: ln for ln in table}
    assert set(rows) == {t.name for t in daemon.config.tables}
    assert any(ln.startswith("  alerts_raw: ") for ln in lines[lines.index(""):])  # its OPTIMIZE settings
    # the order, read back from the printed columns (so it cannot race with a later request)
    cols = {n: ln.split() for n, ln in rows.items()}
    staleness = {n: seconds(c[3]) for n, c in cols.items()}
    over = {n: staleness[n] is not None and c[4] != "-" and staleness[n] > seconds(c[4]) for n, c in cols.items()}
    shown = list(rows)
    never = [n for n in shown if staleness[n] is None]
    assert shown[len(shown) - len(never):] == never  # tables never loaded come last
    first = [n for n in shown if over[n]]
    assert shown[:len(first)] == first  # tables over target come first
    loaded = [n for n in shown[len(first):] if staleness[n] is not None]
    assert [staleness[n] for n in loaded] == sorted((staleness[n] for n in loaded), reverse=True)  # then stalest
    assert rows["cpu_raw"].rstrip().endswith(" ok")


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
    wait_for("quarantine counted", lambda: daemon.metrics()["freshet_partitions_quarantined_total"][
        (("stream", "link_alerts"),)] >= 1)


def test_metrics_show_freshness_and_staleness(daemon):
    base_loaded(daemon)
    m1 = daemon.metrics()
    cpu = (("table", "cpu_raw"),)
    assert m1["freshet_table_freshness_timestamp_seconds"][cpu] == daemon.cpu_end
    assert m1["freshet_table_staleness_target_seconds"][cpu] == 600
    assert m1["freshet_rows_loaded_total"][cpu] == sum(daemon.loaded_rows["cpu_raw"].values())
    assert m1["freshet_job_duration_seconds_count"][(("kind", "base"), ("table", "cpu_raw"))] >= 1
    assert m1["freshet_jobs_completed_total"][(("status", "ok"), ("table", "cpu_raw"))] >= 1
    assert m1["freshet_ready"][()] == 1
    time.sleep(1.0)
    m2 = daemon.metrics()
    assert m2["freshet_table_staleness_seconds"][cpu] > m1["freshet_table_staleness_seconds"][cpu]
    assert m2["freshet_table_staleness_seconds"][cpu] == pytest.approx(time.time() - daemon.cpu_end, abs=5)


def test_real_prometheus_scrapes_the_daemon(daemon, tmp_path):
    base_loaded(daemon)
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
        assert float(sample["value"][1]) == pytest.approx(time.time() - daemon.cpu_end, abs=15)
        up = httpx.get(api, params={"query": 'up{job="freshet"}'}, timeout=5).json()["data"]["result"]
        assert up[0]["value"][1] == "1"
        # the recording rule works on the real series
        ratio = wait_for("recording rule", lambda: httpx.get(api, params={
            "query": 'freshet:table_staleness_over_target:ratio{table="cpu_raw"}'}, timeout=5).json()["data"]["result"],
            timeout=30)
        assert float(ratio[0]["value"][1]) == pytest.approx((time.time() - daemon.cpu_end) / 600, abs=0.05)
        # every query of every dashboard panel returns data from this Prometheus
        wait_for("alerts_raw's OPTIMIZE", lambda: daemon.alive() or (
            daemon.tables()["alerts_raw"]["maintenance"] or {}).get("last_optimize"), timeout=120)
        exported = set(daemon.metrics())

        def answers(expr: str) -> list[dict[str, Any]]:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            r = httpx.get(api, params={"query": expr}, timeout=5).json()
            assert r["status"] == "success", (expr, r)
            # a quantile of a histogram with no observation in its rate window is NaN (no job in the
            # last 5 minutes: the daemon's jobs ran before this Prometheus started); its series exist
            nan_ok = "histogram_quantile" in expr
            return [s for s in r["data"]["result"] if nan_ok or math.isfinite(float(s["value"][1]))]

        queries = dashboard_queries()
        assert len(queries) >= 50
        for title, expr in queries:
            pending = [m for m in METRIC.findall(expr) if m not in exported]
            if pending:  # another change adds it; nothing else may be missing
                assert set(pending) <= set(PENDING_METRICS), (title, pending)
                continue
            wait_for(f"data for panel {title!r}: {expr}", lambda e=expr: answers(e), timeout=60, every=1)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_sighup_reload_adds_a_table_and_rejects_a_bad_config(daemon):
    reloads = daemon.metrics()["freshet_config_reloads_total"]
    rejected, ok = reloads[(("result", "rejected"),)], reloads[(("result", "ok"),)]
    # an invalid config: logged, counted, and the old one stays
    good_text = daemon.config_path.read_text()
    daemon.config_path.write_text(good_text.replace("priority: 100", "priority: -1"))
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for("reload rejected", lambda: daemon.metrics()["freshet_config_reloads_total"][
        (("result", "rejected"),)] == rejected + 1, timeout=20)
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
    daemon.raw, daemon.config = raw, load_config(daemon.config_path)
    assert t["priority"] == 7 and t["target_staleness"] == 1200 and t["freshness"] is None
    assert daemon.metrics()["freshet_config_reloads_total"][(("result", "ok"),)] == ok + 1
    assert any(e["msg"] == "config reloaded" and e.get("added") == ["cpu_copy"] for e in daemon.logs())
    _pid, rows = land_cpu(daemon, seed=5)
    wait_for("cpu_copy and cpu_raw load the new partition", lambda: daemon.alive() or all(
        daemon.tables()[n]["freshness"] == daemon.cpu_end for n in ("cpu_copy", "cpu_raw")), timeout=120)
    assert delta_rows(Path(daemon.config.warehouse.root) / "cpu_copy") == rows


def test_a_failing_table_backs_off_retries_and_others_carry_on(daemon):
    base_loaded(daemon)

    def failed_twice() -> dict[str, Any] | None:
        t = daemon.tables()["broken_cpu"]
        return t if t["consecutive_failures"] >= 2 else None

    t = wait_for("broken_cpu to fail twice (retry after the back-off)", failed_twice, timeout=120)
    assert t["last_result"].startswith("failed") and "broken on purpose" in t["last_result"]
    assert t["freshness"] is None
    m = daemon.metrics()
    assert m["freshet_jobs_completed_total"][(("status", "failed"), ("table", "broken_cpu"))] >= 2
    assert m["freshet_table_consecutive_failures"][(("table", "broken_cpu"),)] >= 2
    failed = [e for e in daemon.logs() if e["msg"] == "job failed" and e["table"] == "broken_cpu"]
    assert len(failed) >= 2 and "broken on purpose" in failed[0]["reason"]
    assert daemon.tables()["cpu_raw"]["last_result"] == "ok"


def test_logs_name_table_job_track_duration_rows_freshness(daemon):
    base_loaded(daemon)
    done = [e for e in daemon.logs() if e["msg"] == "job finished"]
    assert done
    for e in done:
        for key in ("table", "job", "track", "duration", "rows", "freshness"):
            assert key in e, (key, e)


def test_trace_file_replays_in_the_simulator(daemon):
    base_loaded(daemon)
    trace = read_trace(daemon.config.warehouse.trace)
    ids = {a.partition for a in trace.arrivals.get("router_cpu", [])}
    assert set(daemon.loaded_rows["cpu_raw"]) <= ids
    jobs = [j for j in trace.jobs if j.table == "cpu_raw" and j.status == "ok"]
    assert jobs and all(j.duration > 0 for j in jobs)
    first = min(daemon.loaded_rows["cpu_raw"])  # ids are end times: (T − 5m, T], loaded alone
    assert any(j.end == T and j.rows == daemon.loaded_rows["cpu_raw"][first] for j in jobs)
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


def test_spark_stderr_goes_through_the_json_log_format(daemon):
    """Spark's JVM writes log4j lines straight to fd 2: with --log-format json they are JSON
    objects too, like every other line on stderr; stdout stays empty."""
    text = daemon.log_path.read_text()
    lines = text[:text.rfind("\n") + 1].splitlines()  # complete lines only
    recs = [json.loads(line) for line in lines]  # every line is one JSON object
    spark = [r for r in recs if r["logger"] == "spark"]
    assert spark and all(r["level"] in ("warning", "error", "critical", "info") and r.get("source") for r in spark)
    # the JVM's own non-log4j line at start-up
    assert any(r["logger"] == "stderr" and "default log level" in r["msg"] for r in recs), recs[:10]
    assert daemon.out_path.read_text() == ""


def test_sigterm_lets_the_running_job_finish_and_exits_zero(daemon):
    """SIGTERM while a job runs — proven from the daemon's own log: the job started, had not
    finished when the daemon began to stop (its `running` list names it), finished afterwards,
    and only then did the daemon exit 0."""
    from warehouse.lake.recovery import recover

    base_loaded(daemon)
    before = {e["job"] for e in daemon.logs() if e["msg"] == "job started"}
    land_cpu(daemon, seed=4)

    def slow_job_running() -> dict[str, Any] | None:
        logs = daemon.logs()
        ended = {e["job"] for e in logs if e["msg"] in ("job finished", "job failed")}
        running = [e for e in logs if e["msg"] == "job started" and e["table"] == "slow_cpu"
                   and e["job"] not in before and e["job"] not in ended]
        return running[-1] if running else None

    job = wait_for("a slow_cpu job to start after the new partition loads", slow_job_running, timeout=120,
                   every=0.1)
    t0 = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    rc = daemon.proc.wait(GRACE + 30)
    elapsed = time.monotonic() - t0
    assert rc == 0, daemon.tail()
    assert elapsed < GRACE
    assert any("STOPPING=1" in m for m in daemon.notify.messages)
    logs = daemon.logs()
    at = {e["msg"]: i for i, e in reversed(list(enumerate(logs)))}  # first index of each message
    stopping = at["stopping: no new jobs; waiting for running ones"]
    assert "slow_cpu" in logs[stopping]["running"], logs[stopping]
    (finished,) = [i for i, e in enumerate(logs) if e["msg"] == "job finished" and e["job"] == job["job"]]
    assert stopping < finished < at["stopped: no job running"], daemon.tail()
    # the running job was allowed to finish, and nothing is half-loaded: every committed partition
    # is in the table completely, and the table holds nothing else
    state = recover(load_config(daemon.config_path))
    assert iso(state.tables["slow_cpu"].freshness) == job["freshness"]
    cpu = state.tables["cpu_raw"]
    assert cpu.freshness == daemon.cpu_end
    assert set(cpu.partitions) == set(daemon.loaded_rows["cpu_raw"])
    assert delta_rows(Path(daemon.config.warehouse.root) / "cpu_raw") == sum(daemon.loaded_rows["cpu_raw"].values())
    alerts = state.tables["alerts_raw"]
    assert delta_rows(Path(daemon.config.warehouse.root) / "alerts_raw") == sum(
        daemon.loaded_rows["alerts_raw"][p] for p in alerts.partitions)


def test_demo_restarted_in_the_same_directory_continues_and_quarantines_nothing(tmp_path):
    """`freshet run --demo` stopped and started again in one directory: each stream continues right
    after what the first run produced (the Delta log and the landing zone), nothing is quarantined,
    and `freshet status` shows LAST `ok (recovered)` for a table loaded only before the restart.

    Which long feed loads only before the restart depends on the wall clock: the daily feed's next
    dump is due at midnight UTC, so a run within half an hour of it may load one in run 2 too. A
    second feed every 25 hours (its dumps at other hours, near midnight about one day in 25) keeps
    one such table on every other run."""
    from warehouse.lake.recovery import recover

    raw = yaml.safe_load((ROOT / "examples" / "netmon.yaml").read_text())
    keep_streams, keep_tables = {"router_cpu", "link_alerts", "inventory"}, {"cpu_raw", "alerts_raw", "inventory_raw"}
    raw["streams"] = [s for s in raw["streams"] if s["name"] in keep_streams]
    raw["tables"] = [t for t in raw["tables"] if t["name"] in keep_tables]
    inventory = next(s for s in raw["streams"] if s["name"] == "inventory")
    raw["streams"].append({**inventory, "name": "inventory_25h", "period": "25h"})
    raw["tables"].append({**next(t for t in raw["tables"] if t["name"] == "inventory_raw"), "name": "inventory_25h_raw",
                          "stream": "inventory_25h"})
    keep_streams, keep_tables = keep_streams | {"inventory_25h"}, keep_tables | {"inventory_25h_raw"}
    raw["warehouse"] = {"root": str(tmp_path / "data"), "landing": str(tmp_path / "landing"),
                        "trace": str(tmp_path / "trace.jsonl")}
    port = free_port()
    raw["listen"] = f"127.0.0.1:{port}"
    cfg_path = tmp_path / "demo.yaml"
    cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    url = f"http://127.0.0.1:{port}"

    def start(n: int) -> tuple[subprocess.Popen, Path]:
        log = tmp_path / f"run{n}.log"
        with log.open("w") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ops.cli", "run", "--config", str(cfg_path), "--demo", "--demo-speed", "120",
                 "--demo-backfill", "30m", "--log-format", "json", "--poll", "0.5", "--grace", "60"],
                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=fh)
        return proc, log

    def tables() -> dict[str, dict[str, Any]]:
        return {t["name"]: t for t in httpx.get(f"{url}/v1/tables", timeout=5).json()["tables"]}

    def records(log: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]

    def stop(proc: subprocess.Popen, log: Path) -> None:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, log.read_text()[-3000:]

    proc, log1 = start(1)
    try:
        def first_loads() -> bool:
            assert proc.poll() is None, log1.read_text()[-3000:]
            t = tables()
            return all(t[n]["freshness"] is not None for n in keep_tables) and t["alerts_raw"]["jobs_completed"] >= 2

        wait_for("run 1 to load every table", first_loads, timeout=240)
        stop(proc, log1)
        before = recover(load_config(cfg_path))
        proc, log2 = start(2)

        def loaded_after_restart() -> bool:
            assert proc.poll() is None, log2.read_text()[-3000:]
            t = tables()
            # alerts_raw's stream has a 1-minute period: run 2 produces within a minute (router_cpu's
            # 5-minute period could take longer than the wait, depending on the wall clock)
            return t["alerts_raw"]["freshness"] is not None and t["alerts_raw"]["freshness"] > before.tables[
                "alerts_raw"].freshness

        wait_for("run 2 to load new demo partitions", loaded_after_restart, timeout=240)
        status = subprocess.run([sys.executable, "-m", "ops.cli", "status", "--url", url], capture_output=True,
                                text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        now = tables()
        quiet = [n for n in ("inventory_raw", "inventory_25h_raw") if now[n]["jobs_completed"] == 0]
        assert quiet, (now, status.stdout)  # a long feed with nothing new in run 2 (see the docstring)
        for name in quiet:  # loaded in run 1 only
            row = next(ln for ln in status.stdout.splitlines() if ln.startswith(f"{name} "))
            assert row.rstrip().endswith("ok (recovered)"), status.stdout
        metrics = {}
        for fam in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=5).text):
            for smp in fam.samples:
                metrics.setdefault(smp.name, {})[tuple(sorted(smp.labels.items()))] = smp.value
        quarantined = metrics["freshet_partitions_quarantined_total"]
        assert set(quarantined) == {(("stream", s),) for s in keep_streams} and sum(quarantined.values()) == 0
        stop(proc, log2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert not (tmp_path / "landing" / "_quarantine").exists()
    for log in (log1, log2):
        assert not [r for r in records(log) if r["msg"].startswith("quarantined")]
    started = [r for r in records(log2) if r["msg"] == "demo producer started"]
    assert started and set(started[0]["resume"]) == keep_streams
    # each stream is one unbroken sequence across both runs: every partition starts where the one
    # before it ended, under a new id
    trace = read_trace(str(tmp_path / "trace.jsonl"))
    for stream, table in (("router_cpu", "cpu_raw"), ("link_alerts", "alerts_raw")):
        # a partition still pending at the restart is announced again by run 2: same id, same window
        by_id = {a.partition: (a.start, a.end) for a in trace.arrivals[stream]}
        assert len(set(by_id.values())) == len(by_id)
        windows = sorted(by_id.values(), key=lambda w: w[1])
        assert all(b[0] == a[1] for a, b in zip(windows, windows[1:], strict=False)), stream
        assert windows[-1][1] >= before.tables[table].freshness  # nothing produced in run 1 is lost
    assert max(a.end for a in trace.arrivals["link_alerts"]) > before.tables["alerts_raw"].freshness  # run 2 produced more
