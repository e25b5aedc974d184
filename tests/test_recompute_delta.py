"""Recompute jobs on real Spark and Delta Lake: late data, a changed SQL, bounded skew,
full refresh — every derived table ends equal to its SQL over its final sources."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import BAND_SQL, BUCKET_SQL, MINUTE, T0, warehouse_dict, write_minutes
from test_delta import sql_over_full_sources, table_rows

from tests.helpers_ops import run_until_idle
from warehouse.config import parse_config
from warehouse.events import JobFailed, Reconfigure
from warehouse.lake.delta import table_path
from warehouse.lake.executor import Executor
from warehouse.lake.recovery import recover
from warehouse.landing.intake import Intake
from warehouse.scheduler import Scheduler
from warehouse.sqltext import sql_version

pytestmark = pytest.mark.spark

TOTAL_SQL = "SELECT max(ts) AS ts, count(*) AS n, round(sum(v), 6) AS v_sum FROM m_raw"


class Warehouse:
    """One Scheduler, intake and executor over a config, as one daemon run keeps them."""

    def __init__(self, cfg: Any, spark: Any) -> None:
        self.cfg, self.spark = cfg, spark
        state = recover(cfg)
        self.intake = Intake(cfg, state)
        self.executor = Executor(cfg, spark, state)
        self.sched = Scheduler(cfg, now=time.time(), recovered=state.recovered)
        self.events: list[Any] = []

    def run(self, retry: bool = False) -> Any:
        report, _ = run_until_idle(self.cfg, self.spark, scheduler=self.sched, intake=self.intake,
                                   executor=self.executor, on_event=self.events.append,
                                   retry_failed=retry, timeout=120)
        return report

    def reload(self, cfg: Any) -> None:
        state = recover(cfg)
        self.cfg = cfg
        self.intake.reconfigure(cfg, state)
        self.executor.reconfigure(cfg, state)
        todo = self.sched.handle(Reconfigure(config=cfg, recovered=state.recovered), time.time())
        while todo:  # what the reload starts (one at a time here; the daemon hands them to its tracks)
            job = todo.pop(0)
            self.events.append(ev := self.executor.execute(job))
            todo += self.sched.handle(ev, time.time())


def commits(cfg: Any, name: str) -> list[dict[str, Any]]:
    log = Path(table_path(cfg, name)) / "_delta_log"
    out = []
    for f in sorted(log.glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "commitInfo" in a and a["commitInfo"].get("userMetadata"):
                out.append(json.loads(a["commitInfo"]["userMetadata"]))
    return out


def assert_equal_to_sql(spark: Any, cfg: Any, names: list[str]) -> None:
    state = recover(cfg)
    for name in names:
        f = state.tables[name].freshness
        cols, expected = sql_over_full_sources(spark, cfg, name, f)
        assert expected, name
        assert table_rows(spark, cfg, name, cols) == expected, name


def test_late_data_skew_and_full_refresh(spark, tmp_path: Path) -> None:
    skew = {"name": "a_m_skew", "sources": ["a_raw", "m_raw"], "granularity": "1m", "lookback": "2m",
            "sql": BAND_SQL, "max_skew": "3m", "cost": {"alpha": 1, "beta": 0.01}}
    total = {"name": "m_total", "sources": ["m_raw"], "sql": TOTAL_SQL, "cost": {"alpha": 1, "beta": 0.01}}
    cfg = parse_config(warehouse_dict(tmp_path, extra_tables=[skew, total], chop=None))
    w = Warehouse(cfg, spark)
    write_minutes(cfg, "m", 0, 3)
    write_minutes(cfg, "m", 4, 4)  # minute 3 is held back
    write_minutes(cfg, "a", 0, 10)  # alerts run 2 minutes ahead of the measurements
    assert w.run().failed == 0
    st = {t.name: t for t in w.sched.stats(time.time()).tables}
    assert st["a_m"].freshness == T0 + 8 * MINUTE  # the trailing edge
    assert st["a_m_skew"].freshness == T0 + 10 * MINUTE  # ahead by ≤ max_skew (Olston, Modeling and Scheduling Asynchronous Incremental Workflows)
    assert st["a_m_skew"].safe_freshness == T0 + 8 * MINUTE  # final only up to the trailing edge
    assert st["m_total"].refresh_mode == "full" and st["m_5m"].refresh_mode == "incremental"

    # minute 3 arrives after (T0, T0+5m] of m_5m was aggregated; minutes 8, 9 catch m up
    write_minutes(cfg, "m", 3, 1)
    write_minutes(cfg, "m", 8, 2)
    assert w.run().failed == 0
    assert_equal_to_sql(spark, cfg, ["m_5m", "a_m", "a_m_skew", "m_total"])
    st = {t.name: t for t in w.sched.stats(time.time()).tables}
    assert st["m_5m"].windows_recomputed >= 1 and st["m_5m"].recompute_pending == 0
    rec = [c for c in commits(cfg, "m_5m") if c["kind"] == "recompute"]
    assert [(c["window"], c["late"], c["reasons"]) for c in rec] == [
        ([T0, T0 + 5 * MINUTE], ["m-0003"], ["late"])]
    assert rec[0]["freshness"] >= rec[0]["window"][1] and rec[0]["txn"] % 1000 != 0  # F unmoved: txn = last + 1
    assert any(c["kind"] == "recompute" and "m-0003" in c["late"] for c in commits(cfg, "a_m"))
    assert all(c.get("full") for c in commits(cfg, "m_total"))
    assert len(table_rows(spark, cfg, "m_total", ["n"])) == 1  # overwritten, not appended


def test_sql_change_additive_then_refused_then_rebuilt(spark, tmp_path: Path) -> None:
    base = warehouse_dict(tmp_path, chop=1)
    cfg = parse_config(base)
    w = Warehouse(cfg, spark)
    write_minutes(cfg, "m", 0, 10)
    write_minutes(cfg, "a", 0, 10)
    assert w.run().failed == 0
    v1 = sql_version(BUCKET_SQL)
    assert recover(cfg).tables["m_5m"].versions.tuples() == ((T0, T0 + 10 * MINUTE, v1),)

    # additive: a new column; data keeps arriving; new windows at once, old ones rewritten
    added = BUCKET_SQL.replace("count(*) AS n,", "count(*) AS n, max(v) AS v_max,")
    base["tables"][2]["sql"] = added
    cfg2 = parse_config(base)
    w.reload(cfg2)
    write_minutes(cfg2, "m", 10, 5)
    write_minutes(cfg2, "a", 10, 5)
    assert w.run().failed == 0
    assert_equal_to_sql(spark, cfg2, ["m_5m", "a_m"])
    v2 = sql_version(added)
    assert recover(cfg2).tables["m_5m"].versions.tuples() == ((T0, T0 + 15 * MINUTE, v2),)
    kinds = [(c["kind"], c["window"][0], c.get("reasons")) for c in commits(cfg2, "m_5m") if c["sql_version"] == v2]
    assert ("derived", T0 + 10 * MINUTE, None) in kinds  # new windows by the new SQL (no pause)
    # the old ones rewritten, for the SQL change: one full pass or 5-minute pieces newest first —
    # which, the learned α, β decide (recompute.full_pays; both shapes: test_recompute.py)
    rewrites = [(c["window"], c["reasons"], bool(c.get("full"))) for c in commits(cfg2, "m_5m")
                if c["kind"] == "recompute"]
    full = [r for r in rewrites if r[2]]
    if full:
        assert [w_ for w_, _, _ in full][-1][0] == T0 and all(r == ["sql"] for _, r, _ in full), rewrites
    else:
        assert rewrites == [([T0 + 5 * MINUTE, T0 + 10 * MINUTE], ["sql"], False),
                            ([T0, T0 + 5 * MINUTE], ["sql"], False)], rewrites
    m5 = next(t for t in w.sched.stats(time.time()).tables if t.name == "m_5m")
    assert m5.windows_old_sql == 0 and m5.sql_version == v2

    # not additive (drops n): refused with a clear error, the rest of the warehouse goes on
    dropped = added.replace("count(*) AS n, ", "")
    base["tables"][2]["sql"] = dropped
    cfg3 = parse_config(base)
    problems = w.executor.evolution_problems(cfg3)
    assert problems and "m_5m" in problems[0] and "drops column(s) n" in problems[0] and "rebuild" in problems[0]
    w.reload(cfg3)
    write_minutes(cfg3, "m", 15, 5)
    report = w.run()
    failed = [e for e in w.events if isinstance(e, JobFailed)]
    assert report.failed >= 1 and all("not an additive schema change" in e.reason for e in failed)
    assert recover(cfg3).tables["m_raw"].freshness == T0 + 20 * MINUTE

    # rebuild: true rewrites the whole table with the new schema, in one full job
    base["tables"][2]["rebuild"] = True
    cfg4 = parse_config(base)
    assert w.executor.evolution_problems(cfg4) == []
    w.reload(cfg4)
    w.events.clear()
    w.run(retry=True)  # the table waits out its back-off, then rebuilds
    assert not [e for e in w.events if isinstance(e, JobFailed)]
    assert_equal_to_sql(spark, cfg4, ["m_5m"])
    assert "n" not in spark.read.format("delta").load(table_path(cfg4, "m_5m")).columns
    assert any(c["kind"] == "recompute" and c.get("full") for c in commits(cfg4, "m_5m"))
