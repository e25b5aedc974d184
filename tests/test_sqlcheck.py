"""A derived SQL naming a column its sources do not have is refused before anything runs
(warehouse.sqlcheck): by `freshet validate`, by `freshet run` at start (it exits with the error)
and by a SIGHUP (the reload is refused, the old config keeps running). No Spark: the columns come
from the streams' declared schemas and the SQL read by sqlglot."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from conftest import warehouse_dict

from tests.helpers_live import wait_for
from warehouse.config import parse_config
from warehouse.sqlcheck import column_problems

ROOT = Path(__file__).resolve().parents[1]
NETMON = ROOT / "examples" / "netmon.yaml"


def netmon(**sql: str) -> dict[str, Any]:
    """examples/netmon.yaml with some tables' `sql` (or a stateful table's `increment`) replaced."""
    raw = yaml.safe_load(NETMON.read_text())
    for t in raw["tables"]:
        if t["name"] in sql:
            t["increment" if t.get("kind") == "stateful" else "sql"] = sql[t["name"]]
    return raw


def table_sql(name: str) -> str:
    return next(t.get("sql") or t["increment"] for t in netmon()["tables"] if t["name"] == name)


def test_the_shipped_example_and_the_test_warehouse_have_no_problem(tmp_path):
    assert column_problems(parse_config(netmon())) == []
    assert column_problems(parse_config(warehouse_dict(tmp_path))) == []


def test_a_missing_column_is_named_with_its_table_and_the_columns_there_are():
    cfg = parse_config(netmon(cpu_15min=table_sql("cpu_15min").replace("avg(mem_pct)", "avg(mem_pc)")))
    assert column_problems(cfg) == [
        "tables[cpu_15min].sql: column 'mem_pc' does not exist in its sources (cpu_raw: ts, router, cpu_pct, "
        "mem_pct, load_1m, date) — did you mean 'mem_pct'?"]


def test_a_text_that_is_no_query_is_named_not_a_crash():
    """A derived SQL of "0" (found by the mutated-config property test: sqlglot parses it to a literal,
    and reading its output columns raised AttributeError out of `freshet validate`)."""
    for text in ("0", "a_raw.k + 1"):
        assert column_problems(parse_config(netmon(cpu_15min=text))) == [
            f"tables[cpu_15min].sql: not a query (a SELECT, or WITH … SELECT): {text!r}"]


def test_joins_ctes_derived_sources_and_increments_are_checked():
    cfg = parse_config(netmon(
        alert_cpu=table_sql("alert_cpu").replace("max(c.cpu_pct)", "max(c.cpu_pcct)"),  # an alias of a join
        router_health_hourly=table_sql("router_health_hourly").replace("cpu.cpu_max,", "cpu.cpu_maxx,"),  # a CTE
        router_state=table_sql("router_state").replace("max_by(program, ts)", "max_by(progam, ts)")))
    problems = sorted(column_problems(cfg))
    assert [p.split(":")[0] for p in problems] == ["tables[alert_cpu].sql", "tables[router_health_hourly].sql",
                                                    "tables[router_state].increment"]
    assert "'cpu_pcct'" in problems[0] and "'cpu_maxx'" in problems[1] and "'progam'" in problems[2]
    # router_health_hourly reads derived tables: their output columns, read from their SQL
    assert "(cpu_15min: ts, router, cpu_avg, cpu_max, mem_avg, samples, date; syslog_5min:" in problems[1]


def test_only_what_is_known_is_refused(tmp_path):
    """No declared schema, a `*` over it, or Spark's name for a generator's output: not refused."""
    d = warehouse_dict(tmp_path, extra_tables=[
        {"name": "exploded", "sources": ["m_raw"], "sql": "SELECT ts, col FROM (SELECT ts, explode(array(v)) FROM m_raw)"},
        {"name": "star", "sources": ["m_raw"], "sql": "SELECT *, count(*) OVER (PARTITION BY k) FROM m_raw"},
        {"name": "over_star", "sources": ["star"], "sql": "SELECT ts, `count(1) OVER (PARTITION BY k)` FROM star"},
        {"name": "struct", "sources": ["m_raw"], "sql": "SELECT ts, named_struct('x', v) AS s FROM m_raw"},
        {"name": "over_struct", "sources": ["struct"], "sql": "SELECT ts, s.x AS x FROM struct"}])
    assert column_problems(parse_config(d)) == []
    d["streams"][0].pop("schema")
    d["tables"].append({"name": "m_typo", "sources": ["m_raw"], "sql": "SELECT ts, vv FROM m_raw"})
    assert column_problems(parse_config(d)) == []  # m's columns are not declared: Spark judges it


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "ops.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def _typo_config(tmp_path: Path) -> Path:
    raw = netmon(cpu_15min=table_sql("cpu_15min").replace("avg(mem_pct)", "avg(mem_pc)"))
    raw["warehouse"] = {"root": str(tmp_path / "data"), "landing": str(tmp_path / "landing")}
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_validate_refuses_it_naming_file_table_and_column(tmp_path):
    path = _typo_config(tmp_path)
    r = _cli("validate", "--config", str(path), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}: tables[cpu_15min].sql: column 'mem_pc' does not exist" in r.stderr
    assert "invalid configuration" in r.stderr and "valid" not in r.stdout


def test_the_daemon_exits_with_it_at_start_before_anything_runs(tmp_path):
    path = _typo_config(tmp_path)
    began = time.monotonic()
    r = _cli("run", "--config", str(path), "--log-format", "json", "--listen", "127.0.0.1:0", cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert time.monotonic() - began < 60  # no Spark started
    (line,) = [json.loads(ln) for ln in r.stderr.splitlines() if ln.startswith("{")
               and json.loads(ln).get("msg") == "invalid configuration"]
    assert line["config"] == str(path)
    assert any("tables[cpu_15min].sql: column 'mem_pc' does not exist" in p for p in line["problems"])
    assert not (tmp_path / "data").exists()  # no lease, no table, nothing written


def test_a_sighup_with_it_is_refused_and_the_old_config_keeps_running(tmp_path, caplog):
    from test_daemon_loop import Running, offline_daemon, samples

    path = tmp_path / "freshet.yaml"
    src = warehouse_dict(tmp_path)
    path.write_text(yaml.safe_dump(src, sort_keys=False))
    d = offline_daemon(path)
    old = d.config
    loop = Running(d)
    try:
        src["tables"].append({"name": "m_typo", "sources": ["m_raw"], "sql": "SELECT ts, kk FROM m_raw"})
        path.write_text(yaml.safe_dump(src, sort_keys=False))
        caplog.set_level(logging.INFO, logger="freshet")
        d._hup = True  # what the SIGHUP handler sets
        wait_for("the reload counted", lambda: samples(d, "freshet_config_reloads").get(
            (("result", "rejected"),)) == 1, timeout=10, every=0.05)
        assert loop.alive(), loop.result
        assert d.config is old and "m_typo" not in {t.name for t in d.sched.stats(time.time()).tables}
        (rec,) = [r for r in caplog.records if r.getMessage().startswith("config reload rejected")]
        assert f"{path}: tables[m_typo].sql: column 'kk' does not exist in its sources (m_raw: ts, k, v, id, hour)" \
               in rec.reason and "did you mean 'k'?" in rec.reason
    finally:
        assert loop.stop() == 0


def test_the_check_is_linear_in_the_tables(monkeypatch) -> None:
    """At 10,000 tables a SIGHUP runs this check: it compares no two tables' configs (list.remove
    did, field by field, for every table taken before one not yet ready: O(n²), seconds holding
    the reload thread) and looks each stream up by name (config.stream() scans)."""
    from warehouse.config import FreshetConfig, TableConfig

    streams = [{"name": f"s{i}", "period": "5m", "schema": {"ts": "timestamp", "v": "double"}} for i in range(50)]
    tables = [{"name": "d", "sources": ["t49"], "granularity": "5m", "sql": "SELECT ts, w FROM t49"}]
    tables += [{"name": f"t{i}", "stream": f"s{i}"} for i in range(50)]  # d waits for its source, declared after it
    cfg = parse_config({"streams": streams, "tables": tables})

    def refused(*_: Any) -> Any:
        raise AssertionError("compared two configs / scanned the streams")

    monkeypatch.setattr(TableConfig, "__eq__", refused)
    monkeypatch.setattr(FreshetConfig, "stream", refused)
    (problem,) = column_problems(cfg)
    assert "'w'" in problem
