"""The end-to-end test of months of operation in one daemon run (`freshet run`, a subprocess).

Holds back a partition and delivers it after its window was aggregated; changes a roll-up's SQL by
SIGHUP while data keeps arriving; lets compaction run (OPTIMIZE every 3 commits of a table); an
operator suspends a base table (`freshet suspend`), data arrives, resumes it, and backfills a range
of the roll-up; then checks every derived window against its SQL over the final base tables, with
Spark.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import BUCKET_SQL, MINUTE, T0, warehouse_dict, write_minutes
from prometheus_client.parser import text_string_to_metric_families
from test_delta import sql_over_full_sources, table_rows

from ops.cli import main as freshet_cli
from tests.helpers_live import free_port, wait_for
from warehouse.config import load_config
from warehouse.lake.delta import table_path
from warehouse.lake.recovery import recover
from warehouse.sqltext import sql_version

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ADDED_SQL = BUCKET_SQL.replace("count(*) AS n,", "count(*) AS n, max(v) AS v_max,")


def let_compaction_run(tables: Any) -> None:
    """Wait for OPTIMIZE (`maintenance: {optimize_every: 3}`) of a base and a derived table. The
    checks after it must still hold: compaction rewrites files, never rows."""
    def optimized(name: str) -> bool:
        m = tables()[name]["maintenance"]
        return m is not None and m["last_optimize"] is not None

    wait_for("m_raw and m_5m compacted", lambda: optimized("m_raw") and optimized("m_5m"), timeout=300)


def metrics(client: httpx.Client) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(client.get("/metrics").text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_late_partition_and_sql_change_in_one_daemon_run(spark, tmp_path: Path) -> None:
    port = free_port()
    raw = warehouse_dict(tmp_path)
    raw["listen"] = f"127.0.0.1:{port}"
    raw["scheduler"]["retry_backoff"] = "1s"
    raw["maintenance"] = {"optimize_every": 3}
    config_path = tmp_path / "freshet.yaml"
    config_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = load_config(config_path)
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(config_path), "--poll", "0.3",
                             "--log-format", "json"], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)

    def tables() -> dict[str, dict[str, Any]]:
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        return {t["name"]: t for t in client.get("/v1/tables").json()["tables"]}

    try:
        wait_for("/readyz", lambda: proc.poll() is None and client.get("/readyz").status_code == 200, timeout=240)
        # 1. minute 3 of m is held back; the window (T0, T0+5m] of m_5m is aggregated without it
        write_minutes(cfg, "m", 0, 3)
        write_minutes(cfg, "m", 4, 6)
        write_minutes(cfg, "a", 0, 10)
        wait_for("m_5m and a_m computed", lambda: tables()["m_5m"]["freshness"] == T0 + 10 * MINUTE
                 and tables()["a_m"]["freshness"] == T0 + 10 * MINUTE, timeout=300)
        write_minutes(cfg, "m", 3, 1)  # delivered late
        # 2. the roll-up's SQL changes (an added column) by SIGHUP, while data keeps arriving
        raw["tables"][2]["sql"] = ADDED_SQL
        config_path.write_text(yaml.safe_dump(raw, sort_keys=False))
        proc.send_signal(signal.SIGHUP)
        write_minutes(cfg, "m", 10, 5)
        write_minutes(cfg, "a", 10, 5)
        let_compaction_run(tables)

        def settled() -> bool:
            t = tables()
            return (t["m_5m"]["freshness"] == t["a_m"]["freshness"] == T0 + 15 * MINUTE
                    and t["m_5m"]["sql_version"] == sql_version(ADDED_SQL)
                    and all(x["state"] == "idle" for x in t.values())
                    and all(x["windows_old_sql"] == 0 and x["recompute_pending"] == 0
                            for x in t.values() if x["kind"] == "derived"))

        wait_for("everything loaded, recomputed and rewritten", settled, timeout=400)
        # 3. operator actions (ops.actions), through the real CLI and API
        url = f"http://127.0.0.1:{port}"
        assert freshet_cli(["suspend", "a_raw", "--url", url, "--reason", "e2e"]) == 0
        wait_for("a_raw suspended", lambda: tables()["a_raw"]["suspended"], timeout=30)
        write_minutes(cfg, "a", 15, 2)
        wait_for("the arrivals taken", lambda: tables()["a_raw"]["pending_partitions"] == 2, timeout=60)
        assert tables()["a_raw"]["freshness"] == T0 + 15 * MINUTE  # no job while suspended
        assert freshet_cli(["resume", "a_raw", "--url", url]) == 0
        wait_for("a_raw resumed and loaded", lambda: tables()["a_raw"]["freshness"] == T0 + 17 * MINUTE, timeout=120)
        before = metrics(client)["freshet_windows_recomputed_total"][(("table", "m_5m"),)]
        r = client.post("/v1/tables/m_5m/refresh", json={"from": T0, "to": T0 + 10 * MINUTE, "reason": "e2e"})
        assert r.status_code == 202 and r.json()["action"] == "backfill", r.text
        wait_for("the backfill recomputed", lambda: not tables()["m_5m"]["backfills"]
                 and metrics(client)["freshet_windows_recomputed_total"][(("table", "m_5m"),)] >= before + 2,
                 timeout=200)
        m = metrics(client)
        assert m["freshet_config_reloads_total"][(("result", "ok"),)] == 1
        assert m["freshet_late_rows_total"][(("table", "m_raw"),)] == 4  # minute 3's rows
        assert m["freshet_late_rows_total"][(("table", "a_raw"),)] == 0
        assert m["freshet_windows_recomputed_total"][(("table", "m_5m"),)] >= 2  # the late window + 2 rewrites
        assert m["freshet_windows_recomputed_total"][(("table", "a_m"),)] >= 1
        assert m["freshet_table_windows_old_sql"][(("table", "m_5m"),)] == 0
        for name in ("m_raw", "m_5m"):
            assert m["freshet_maintenance_jobs_total"][(("kind", "optimize"), ("status", "ok"), ("table", name))] >= 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        client.close()
        log.close()

    # 4. every derived window equals its SQL over the final base tables
    final = load_config(config_path)
    state = recover(final)
    for name in ("m_5m", "a_m"):
        cols, expected = sql_over_full_sources(spark, final, name, state.tables[name].freshness)
        assert expected and table_rows(spark, final, name, cols) == expected, name
    assert state.tables["m_5m"].versions.tuples() == ((T0, T0 + 15 * MINUTE, sql_version(ADDED_SQL)),)
    metas = []
    for f in sorted((Path(table_path(final, "m_5m")) / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "userMetadata" in a.get("commitInfo", {}):  # OPTIMIZE's commits carry none
                metas.append(json.loads(a["commitInfo"]["userMetadata"]))
    # the late partition's window (T0, T0+5m] was rewritten naming it (alone, or in a full pass)
    late = [x for x in metas if x["kind"] == "recompute" and "m-0003" in x["late"]]
    assert late and all(x["window"][0] <= T0 + 3 * MINUTE and x["window"][1] >= T0 + 4 * MINUTE for x in late)
    assert any(x["kind"] == "recompute" and "sql" in x["reasons"] for x in metas)  # the old windows rewritten
