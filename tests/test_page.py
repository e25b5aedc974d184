"""The status page at `/` (`ops.page`, `ops.history`).

Fast tests: the staleness curve drawn from freshness steps, the history's bounds, the renderer on
hand-built stats, the quarantine listing, and the route on a real uvicorn server with a real HTTP
client. Then the page as a person sees it: a real `freshet run` (Spark, Delta), opened in a real
headless Chromium (Debian's `chromium` + `chromium-driver`, via Selenium); its numbers are checked
against `/v1/tables` fetched with httpx, and its screenshot is saved (`FRESHET_SCREENSHOT=path`
keeps it; docs/figures/status_page.png was made from `freshet run --demo`, docs/operations.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import conftest
import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry

from ops.api import ApiServer, create_app, table_view
from ops.history import History, staleness_points
from ops.metrics import SnapshotHolder
from ops.page import quarantined, render
from ops.status import fmt_backlog, fmt_duration, order
from ops.workers import JobResult
from tests.helpers_live import free_port, wait_for
from tests.helpers_ops import make_stats, make_table
from warehouse.events import JobFailed, JobFinished, StartJob

ROOT = Path(__file__).resolve().parents[1]
NOW = 1_800_000_000.0


# ---------------------------------------------------------------- the staleness curve and the history
def test_staleness_points_draw_the_sawtooth_exactly():
    # F = 50 from the start (60), 180 from τ = 200; now 300: S rises 10 → 150, drops to 20, rises to 120
    pts = staleness_points(((100.0, 50.0), (200.0, 180.0)), 180.0, since=60.0, t0=0.0, now=300.0)
    assert pts == [(60.0, 10.0), (200.0, 150.0), (200.0, 20.0), (300.0, 120.0)]
    # the hour's window cuts the first span; a latest snapshot that moved F (a reload) adds a step
    pts = staleness_points(((100.0, 50.0), (200.0, 180.0)), 250.0, since=60.0, t0=150.0, now=300.0)
    assert pts == [(150.0, 100.0), (200.0, 150.0), (200.0, 20.0), (300.0, 120.0), (300.0, 50.0)]
    # never loaded: nothing to draw; loaded only now: one point pair from `since`
    assert staleness_points((), None, since=0.0, t0=0.0, now=10.0) == []
    assert staleness_points((), 4.0, since=5.0, t0=0.0, now=10.0) == [(5.0, 1.0), (10.0, 6.0)]


def _job(job_id: int, table: str, new_f: float, kind: str = "base", track: int = 0) -> StartJob:
    return StartJob(job_id=job_id, table=table, track=track, kind=kind, start=new_f - 60, end=new_f,
                    new_freshness=new_f, new_safe_freshness=new_f)


def _result(job: StartJob, began: float, ended: float, ok: bool = True, reason: str = "boom") -> JobResult:
    ev = JobFinished(job_id=job.job_id, duration=ended - began) if ok else JobFailed(job_id=job.job_id, reason=reason)
    return JobResult(job, ev, began, ended)


def test_history_steps_jobs_and_bounds():
    h = History(window=600.0, max_jobs=3, since=NOW - 1000)
    snap = make_stats(NOW - 900, [make_table("a", freshness=NOW - 2000), make_table("b", freshness=None)])
    h.record(_result(_job(1, "a", NOW - 1500), NOW - 880, NOW - 870), snap, NOW - 870)
    h.record(_result(_job(2, "a", NOW - 1500, kind="optimize"), NOW - 860, NOW - 850), snap, NOW - 850)  # F unchanged
    h.record(_result(_job(3, "b", NOW - 800), NOW - 500, NOW - 400, ok=False, reason="no such column"), snap, NOW - 400)
    v = h.view()
    assert v.steps["a"] == ((NOW - 900, NOW - 2000), (NOW - 870, NOW - 1500))  # seeded, then one step
    assert v.steps["b"] == ((NOW - 900, None),)  # a failed job moves nothing
    assert [(j.job_id, j.ok, j.reason) for j in v.jobs] == [(1, True, ""), (2, True, ""), (3, False, "no such column")]
    assert v.jobs[0].duration == 10.0
    h.record(_result(_job(4, "a", NOW - 100), NOW - 20, NOW), snap, NOW)
    v = h.view()
    # older than the window: dropped, but the last step before the cut stays (F at the window's start)
    assert v.steps["a"] == ((NOW - 870, NOW - 1500), (NOW, NOW - 100))
    assert [j.job_id for j in v.jobs] == [3, 4]


# ---------------------------------------------------------------- the renderer on constructed stats
class Page(HTMLParser):
    """The parts of the page a test reads: elements by id, table rows by data-table, SVG shapes."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []  # the tables section's rows: attributes + cell texts
        self.ids: dict[str, str] = {}
        self.jobs: list[dict[str, Any]] = []
        self.polylines: list[str] = []
        self.meta: dict[str, str] = {}
        self.scripts = 0
        self._stack: list[tuple[str, dict[str, Any]]] = []
        self._in_tables = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table" and a.get("id") == "tables":
            self._in_tables = True
        if tag == "tr" and self._in_tables and "data-table" in a:
            self.rows.append({**a, "cells": []})
        if tag == "td" and self._in_tables and self.rows:
            self.rows[-1]["cells"].append("")
        if tag == "g" and "job" in a.get("class", "").split():
            self.jobs.append({**a, "title": ""})
        if tag == "polyline" and self._in_tables:
            self.polylines.append(a["points"])
        if tag == "meta" and a.get("http-equiv"):
            self.meta[a["http-equiv"]] = a["content"]
        if tag == "script":
            self.scripts += 1
        self._stack.append((tag, a))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_tables = False
        while self._stack:
            t, _ = self._stack.pop()
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        for _t, a in self._stack:
            if "id" in a:
                self.ids[a["id"]] = self.ids.get(a["id"], "") + data
        if self._in_tables and self.rows and self.rows[-1]["cells"] and any(t == "td" for t, _ in self._stack) \
                and not any(t == "svg" for t, _ in self._stack):
            self.rows[-1]["cells"][-1] += data
        if self._stack and self._stack[-1][0] == "title" and self.jobs and any(
                t == "g" and "job" in a.get("class", "") for t, a in self._stack):
            self.jobs[-1]["title"] += data


def _bodies(tables: list, actions: dict[str, dict] | None = None) -> tuple[dict, dict]:
    snap = make_stats(NOW, tables)
    rows = [table_view(t, snap.now, NOW, (actions or {}).get(t.name)) for t in snap.tables]
    body = {"now": NOW, "snapshot_time": NOW, "weighted_staleness": 12.0, "tables": rows}
    tracks = {"tracks": [{"track": t.track, "running_job": t.running_job, "running_table": t.running_table,
                          "busy_time": t.busy_time, "clusters": list(t.clusters), "free": t.free} for t in snap.tracks],
              "plan": {"partitioner": "proportional", "tracks": 2, "utilization": 0.5},
              "pending_jobs": snap.pending_jobs, "running_jobs": snap.running_jobs}
    return body, tracks


def test_render_orders_tables_draws_history_and_lists_every_section(tmp_path):
    tables = [
        make_table("fresh", freshness=NOW - 30, target_staleness=600),
        make_table("late", freshness=NOW - 900, target_staleness=300, backlog=840.0, pending_partitions=14,
                   state="pending", last_result="failed: boom", consecutive_failures=3, jobs_failed=3),
        make_table("later", kind="derived", freshness=NOW - 700, target_staleness=100, priority=2,
                   inherited_priority=7, state="running", running_job=41, running_track=1,
                   windows_old_sql=4, recompute_pending=1200.0, sql_version="v2", refresh_mode="incremental"),
        make_table("never"),
        make_table("paused", freshness=NOW - 50, suspended=True),
    ]
    body, tracks = _bodies(tables, {"paused": {"suspended_since": NOW - 400, "suspend_reason": "<b>migrating</b>",
                                               "backfills": []}})
    h = History(since=NOW - 1800)
    snap = make_stats(NOW - 1700, [make_table("late", freshness=NOW - 2400)])
    h.record(_result(_job(7, "late", NOW - 1300), NOW - 1250, NOW - 1200), snap, NOW - 1200)
    h.record(_result(_job(8, "late", NOW - 900), NOW - 320, NOW - 300, ok=False, reason="<script>x</script>"),
             snap, NOW - 300)
    h.record(_result(_job(9, "fresh", NOW - 30, kind="derived", track=1), NOW - 60, NOW - 35), snap, NOW - 35)
    qdir = tmp_path / "_quarantine" / "m" / "bad-1"
    qdir.mkdir(parents=True)
    (qdir / "reason").write_text("file part-0.parquet: missing\n")
    html = render(body, tracks, h.view(), quarantined(tmp_path), minutes=30, refresh=7)
    page = Page(html)

    names = [r["data-table"] for r in page.rows]
    assert names == [r["name"] for r in sorted(body["tables"], key=order)]
    assert names == ["later", "late", "paused", "fresh", "never"]  # 7×, 3× over target; stalest; never loaded
    row = {r["data-table"]: r for r in page.rows}
    assert row["later"]["cells"][3] == fmt_duration(700.0) and row["later"]["cells"][5] == "7.0×"
    assert row["later"]["cells"][2].startswith("7") and "*" in row["later"]["cells"][2]  # inherited priority
    assert row["late"]["cells"][8] == fmt_backlog(next(r for r in body["tables"] if r["name"] == "late")) == "14m00s/14"
    assert "failed ×3" in row["late"]["cells"][10]
    assert page.ids["over-count"] == "2" and page.ids["table-count"] == "5"
    assert page.meta == {"refresh": "7"} and page.scripts == 0

    # the sparkline of `late`: the curve of ops.history over the hour, in the SVG's coordinates
    late_line = page.polylines[2 * names.index("late")]  # two polylines per row with a target (below/above)
    xs = [float(p.split(",")[0]) for p in late_line.split()]
    pts = staleness_points(h.view().steps["late"], NOW - 900, NOW - 1800, NOW - 3600, NOW)
    assert xs == [round((t - (NOW - 1800)) / 1800 * 180, 1) for t, _ in pts]  # since the start: 30 min
    assert pts == [(NOW - 1800, 600.0), (NOW - 1200, 1200.0), (NOW - 1200, 100.0), (NOW, 1300.0), (NOW, 900.0)]

    # the timeline: three jobs by track, the failed one marked and explained, escaped
    assert [(j["data-table"], j["data-kind"], "failed" in j["class"]) for j in page.jobs] == [
        ("late", "base", False), ("late", "base", True), ("fresh", "derived", False)]
    assert "FAILED: <script>x</script>" in page.jobs[1]["title"]
    assert "<script>x</script>" not in html and "&lt;script&gt;" in html
    assert "track 1 runs later (job 41)." in " ".join(page.ids["running"].split())

    assert "bad-1" in page.ids["quarantine"] and "part-0.parquet: missing" in page.ids["quarantine"]
    assert "later" in page.ids["rewrite"] and "v2" in page.ids["rewrite"]
    assert "paused" in page.ids["suspended"] and "<b>migrating</b>" in page.ids["suspended"]
    assert "late" in page.ids["backlog"]
    # a 10-minute timeline leaves out what ended before
    assert len(Page(render(body, tracks, h.view(), minutes=10)).jobs) == 2
    assert len(Page(render(body, tracks, h.view(), minutes=3)).jobs) == 1


def test_a_landing_zone_in_a_bucket_says_where_its_quarantine_is_not_none():
    """A landing zone in a bucket is not listed on every page load: the page names where the
    quarantined partitions are instead of a green "None." that hid four of them in a trial."""
    body, tracks = _bodies([make_table("t", freshness=NOW - 30)], {})
    where = "s3a://lake/landing/_quarantine"
    page = Page(render(body, tracks, quarantine_elsewhere=where))
    assert where in page.ids["quarantine"] and "None." not in page.ids["quarantine"]
    assert "None." in Page(render(body, tracks)).ids["quarantine"]  # a local zone with nothing quarantined


def test_quarantine_lists_the_newest_with_their_reasons(tmp_path):
    assert quarantined(tmp_path) == ([], 0)
    for i in range(5):
        d = tmp_path / "_quarantine" / ("s" if i % 2 else "t") / f"p{i}"
        d.mkdir(parents=True)
        (d / "reason").write_text(f"reason {i}\n")
        os.utime(d / "reason", (NOW + i, NOW + i))
    (tmp_path / "_quarantine" / "t" / "no-reason").mkdir()  # being moved in: not listed yet
    shown, total = quarantined(tmp_path, limit=3)
    assert total == 5
    assert [(q.stream, q.partition, q.reason, q.time) for q in shown] == [
        ("t", "p4", "reason 4", NOW + 4), ("s", "p3", "reason 3", NOW + 3), ("t", "p2", "reason 2", NOW + 2)]


# ---------------------------------------------------------------- the route, on a real server
class Backend:
    def __init__(self, landing: Path) -> None:
        self.holder = SnapshotHolder()
        self.history = History(since=NOW - 600)

        class Intake:
            pass

        self.intake = Intake()
        self.intake.landing = landing

    def snapshot(self):
        return self.holder.get()

    def ready(self):
        return self.holder.ready()

    def standby(self):
        return self.holder.standby()

    def streams(self):
        return []

    def actions_view(self, table):
        return None


def test_route_serves_the_page_a_starting_page_and_clear_errors(tmp_path):
    backend = Backend(tmp_path)
    srv = ApiServer(create_app(backend, CollectorRegistry(), clock=lambda: NOW), "127.0.0.1", 0)
    port = srv.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as c:
            r = c.get("/")
            assert r.status_code == 503 and r.headers["content-type"].startswith("text/html")
            assert "not published its state yet" in r.text and 'http-equiv="refresh"' in r.text
            backend.holder.publish(make_stats(NOW, [make_table("cpu_raw", freshness=NOW - 42, target_staleness=30)]))
            r = c.get("/", params={"minutes": 15, "refresh": 0})
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
            page = Page(r.text)
            assert [row["data-table"] for row in page.rows] == ["cpu_raw"]
            assert float(page.rows[0]["data-staleness"]) == c.get("/v1/tables").json()["tables"][0]["staleness"] == 42.0
            assert page.meta == {} and "jobs of the last 15 minutes" in r.text
            for params, what in (({"minutes": 0}, "minutes"), ({"minutes": 61}, "minutes"), ({"refresh": -1}, "refresh")):
                r = c.get("/", params=params)
                assert r.status_code == 422 and r.json()["error"].startswith(what + ":"), r.text
            assert c.get("/docs").status_code == 200 and "swagger" in c.get("/docs").text.lower()
            assert "/" not in c.get("/openapi.json").json()["paths"]  # a page, not an API endpoint
    finally:
        srv.stop()


# ---------------------------------------------------------------- a real daemon in a real browser
# a SQL that analyses (so `freshet run` accepts it, warehouse.sqlcheck) and fails every job that reads a row
BROKEN_SQL = "SELECT ts, CAST(raise_error('broken on purpose') AS STRING) AS boom FROM m_raw"


def _chrome() -> Any:
    from selenium import webdriver  # the `test` extra
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver):
        pytest.fail("Debian's chromium and chromium-driver are needed: scripts/system_deps.sh installs them")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", "--hide-scrollbars"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # the DevTools events: page loads
    return webdriver.Chrome(options=opts, service=Service(driver))


@pytest.mark.spark
@pytest.mark.slow
def test_the_page_of_a_running_daemon_in_headless_chromium(tmp_path):
    from selenium.webdriver.common.by import By

    port = free_port()
    raw = conftest.warehouse_dict(tmp_path, extra_tables=[
        {"name": "broken", "sources": ["m_raw"], "priority": 1, "sql": BROKEN_SQL}])
    raw["listen"] = f"127.0.0.1:{port}"
    raw["scheduler"]["retry_backoff"] = 2
    for t in raw["tables"]:  # targets: the old test partitions leave every loaded table far over them
        t["target_staleness"] = {"m_raw": "1h", "a_raw": "1d", "m_5m": "30d"}.get(t["name"])
        if t["target_staleness"] is None:
            del t["target_staleness"]
    cfg_path = tmp_path / "freshet.yaml"
    cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    config = conftest.make_config(tmp_path)
    conftest.write_minutes(config, "m", 0, 6)
    conftest.write_minutes(config, "a", 0, 3)
    bad = tmp_path / "landing" / "m" / "bad-0099"
    bad.mkdir(parents=True)
    (bad / "_partition.json").write_text(json.dumps({"start": conftest.T0 + 99 * 60, "end": conftest.T0 + 100 * 60,
                                                      "files": ["missing.parquet"], "rows": 1}))
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(cfg_path), "--poll", "0.5"],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    client = httpx.Client(base_url=url, timeout=10)
    driver = None
    try:
        wait_for("/readyz", lambda: client.get("/readyz").status_code == 200, timeout=240)

        def settled() -> bool:
            rows = {r["name"]: r for r in client.get("/v1/tables").json()["tables"]}
            return (rows["m_5m"]["jobs_completed"] >= 1 and rows["a_m"]["jobs_completed"] >= 1
                    and rows["broken"]["jobs_failed"] >= 1 and rows["m_raw"]["backlog"] == 0
                    and all(r["state"] != "running" for r in rows.values()))

        wait_for("jobs done, the broken table failed", settled, timeout=300)
        # the broken table, suspended: no new job, so the page and /v1/tables see the same jobs
        r = client.post("/v1/tables/broken/suspend", json={"reason": "SQL under repair"})
        assert r.status_code == 202, r.text

        def suspended() -> bool:
            t = next(t for t in client.get("/v1/tables").json()["tables"] if t["name"] == "broken")
            return t["suspended"] and t["state"] != "running"

        wait_for("broken suspended", suspended)

        driver = _chrome()
        # read a page that does not reload itself: a reload while a row is read loses the element
        # (NoSuchElementException, or Chromium's "unhandled inspector error")
        driver.get(url + "/?refresh=0")
        assert "Freshet" in driver.title
        assert not driver.find_elements(By.CSS_SELECTOR, "meta[http-equiv='refresh']")
        page_now = float(driver.find_element(By.ID, "now").get_attribute("data-now"))
        shown = [{"name": tr.get_attribute("data-table"), "staleness": tr.get_attribute("data-staleness"),
                  "cells": [td.text for td in tr.find_elements(By.TAG_NAME, "td")]}
                 for tr in driver.find_elements(By.CSS_SELECTOR, "#tables tbody tr")]
        api = client.get("/v1/tables").json()  # a real HTTP client, right after the browser
        rows = {r["name"]: r for r in api["tables"]}

        assert [s["name"] for s in shown] == [r["name"] for r in sorted(api["tables"], key=order)]
        for s in shown:
            r = rows[s["name"]]
            cells = s["cells"]
            assert cells[0] == r["name"] and cells[1] == r["kind"]
            assert cells[9] == (r["freshness_iso"] or "-")
            assert cells[8] == fmt_backlog(r)
            assert cells[4] == fmt_duration(r["target_staleness"])
            if r["staleness"] is None:
                assert s["staleness"] == "" and cells[3] == "-"
            else:  # the same S = τ − F, at the page's instant and at the API's
                assert float(s["staleness"]) - page_now == pytest.approx(r["staleness"] - api["now"], abs=1e-6)
                assert cells[3] == fmt_duration(float(s["staleness"]))
        over = [r["name"] for r in api["tables"] if r["within_target"] is False]
        assert set(over) >= {"m_raw", "m_5m"}
        assert driver.find_element(By.ID, "over-count").text == str(len(over))
        assert driver.find_element(By.ID, "table-count").text == str(len(rows))

        # the timeline: every job of this daemon, by table, the failed ones marked
        def bars(table: str, failed: bool) -> int:
            sel = f"#timeline g.job{'.failed' if failed else ':not(.failed)'}[data-table='{table}']"
            return len(driver.find_elements(By.CSS_SELECTOR, sel))

        for name, r in rows.items():
            assert bars(name, False) == r["jobs_completed"], name
            assert bars(name, True) == r["jobs_failed"], name
        assert rows["broken"]["jobs_failed"] >= 1
        failures = driver.find_element(By.ID, "failures").text
        assert "broken" in failures and "broken on purpose" in failures
        # the sparkline of a loaded table is drawn; quarantine, suspension shown with their reasons
        assert driver.find_elements(By.CSS_SELECTOR, "tr[data-table='m_raw'] svg.spark polyline")
        reason = (tmp_path / "landing" / "_quarantine" / "m" / "bad-0099" / "reason").read_text().strip()
        quarantine = driver.find_element(By.ID, "quarantine").text
        assert "bad-0099" in quarantine and reason[:60] in quarantine
        assert "SQL under repair" in driver.find_element(By.ID, "suspended").text
        assert not driver.find_elements(By.TAG_NAME, "script")  # readable without JavaScript
        # everything above was read from one load of the page: it did not reload under the reads
        assert float(driver.find_element(By.ID, "now").get_attribute("data-now")) == page_now

        # the real page refreshes itself, without any script: its meta refresh, read from the bytes
        # the browser gets (not from a page that may be reloading while it is read)
        real = Page(client.get("/").text)
        assert real.meta == {"refresh": "10"} and real.scripts == 0
        assert Page(client.get("/?refresh=3").text).meta == {"refresh": "3"}
        # and Chromium follows it: the DevTools log (not the page, which is between two loads at
        # times) records the document requested again
        driver.get(url + "/?refresh=1&minutes=5")
        loads: list[str] = []

        def reloaded() -> bool:
            for entry in driver.get_log("performance"):  # the entries since the last call
                m = json.loads(entry["message"])["message"]
                if m["method"] == "Network.requestWillBeSent" and m["params"].get("type") == "Document" \
                        and m["params"]["request"]["url"].endswith("/?refresh=1&minutes=5"):
                    loads.append(m["params"]["request"]["url"])
            return len(loads) >= 2

        wait_for("Chromium to reload the page by its meta refresh", reloaded, timeout=20, every=0.5)
        driver.get(url + "/?refresh=0")

        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1280, height + 20)
        out = Path(os.environ.get("FRESHET_SCREENSHOT") or tmp_path / "status_page.png")
        assert driver.save_screenshot(str(out)) and out.stat().st_size > 10_000
        assert client.get("/docs").status_code == 200  # the OpenAPI UI stays
    finally:
        if driver is not None:
            driver.quit()
        client.close()
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    assert proc.returncode == 0, (tmp_path / "daemon.log").read_text()[-3000:]



def test_system_deps_install_chromium_and_its_driver(tmp_path):
    from tests.test_deploy import _deps

    r, calls = _deps(tmp_path, missing=("chromium", "chromedriver"), uid=0)
    assert r.returncode == 0, r.stderr
    assert calls == ["apt-get update -qq", "apt-get install -y -qq --no-install-recommends chromium chromium-driver"]
