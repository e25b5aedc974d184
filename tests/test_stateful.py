"""A stateful table on Spark and Delta (issue 21, seed 003 §3): increments folded by one MERGE
per job, exactly once — a late partition is folded with the next increment, a replayed job (the
same Delta txn) folds nothing twice — audited key by key with delta-rs and plain Python over
every base row."""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MINUTE, T0, warehouse_dict, write_minutes

from ops.testing import run_until_idle
from warehouse.config import parse_config
from warehouse.events import Backfill, StartJob, Tick
from warehouse.lake.delta import ms, table_path
from warehouse.lake.executor import Executor
from warehouse.lake.recovery import SparkLog, delta_version, recover
from warehouse.lake.stateful import at_column
from warehouse.scheduler import Scheduler

pytestmark = pytest.mark.spark

INCREMENT = (
    "SELECT k, count(*) AS n, sum(v) AS v_sum, min(v) AS v_min, max(v) AS v_max, max_by(v, ts) AS last_v, "
    "min_by(v, ts) AS first_v, max(ts) AS ts FROM m_raw WHERE ts > :window_start AND ts <= :window_end GROUP BY k"
)
FOLD = {"n": "count", "v_sum": "sum", "v_min": "min", "v_max": "max", "last_v": "last", "first_v": "first",
        "ts": "max"}


def _data(tmp: Path) -> dict[str, Any]:
    data = warehouse_dict(tmp)
    data["streams"] = [s for s in data["streams"] if s["name"] == "m"]
    data["tables"] = [t for t in data["tables"] if t["name"] == "m_raw"] + [
        {"name": "state", "kind": "stateful", "sources": ["m_raw"], "key": ["k"], "increment": INCREMENT,
         "fold": FOLD, "priority": 5, "cost": {"alpha": 1, "beta": 0.01}}]
    return data


def _config(tmp: Path) -> Any:
    return parse_config(_data(tmp))


def _rows(path: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table().to_pylist()


def _expected(base: list[dict[str, Any]], upto: float) -> dict[str, dict[str, Any]]:
    """The state computed independently: plain Python aggregates over every base row ≤ upto."""
    cut = dt.datetime.fromtimestamp(upto, dt.UTC)
    out: dict[str, dict[str, Any]] = {}
    for r in sorted((r for r in base if r["ts"] <= cut), key=lambda r: r["ts"]):
        e = out.setdefault(r["k"], {"n": 0, "v_sum": 0.0, "v_min": r["v"], "v_max": r["v"], "first_v": r["v"]})
        e["n"] += 1
        e["v_sum"] += r["v"]
        e["v_min"], e["v_max"] = min(e["v_min"], r["v"]), max(e["v_max"], r["v"])
        e["last_v"], e["ts"] = r["v"], r["ts"]
    return out


def _audit(cfg: Any, upto: float) -> None:
    state = {r["k"]: r for r in _rows(table_path(cfg, "state"))}
    expected = _expected(_rows(table_path(cfg, "m_raw")), upto)
    assert len(_rows(table_path(cfg, "state"))) == len(state)  # one row per key
    assert sorted(state) == sorted(expected)
    for k, e in expected.items():
        got = state[k]
        assert got["n"] == e["n"], (k, got, e)  # a key folded twice would count its rows twice
        assert math.isclose(got["v_sum"], e["v_sum"], rel_tol=1e-9), (k, got, e)
        assert (got["v_min"], got["v_max"], got["last_v"], got["first_v"], got["ts"]) == (
            e["v_min"], e["v_max"], e["last_v"], e["first_v"], e["ts"]), (k, got, e)


def _metas(cfg: Any) -> list[dict[str, Any]]:
    """The userMetadata of every Freshet commit of the state."""
    out = []
    for f in sorted((Path(table_path(cfg, "state")) / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            if line.startswith('{"commitInfo"') and "userMetadata" in (info := json.loads(line)["commitInfo"]):
                out.append(json.loads(info["userMetadata"]))
    return out


def _last_meta(cfg: Any) -> dict[str, Any]:
    path = Path(table_path(cfg, "state")) / "_delta_log" / f"{delta_version(table_path(cfg, 'state')):020d}.json"
    actions = [json.loads(line) for line in path.read_text().splitlines()]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    txn = next(a["txn"] for a in actions if "txn" in a)
    return {**json.loads(info["userMetadata"]), "operation": info["operation"], "txn_action": txn}


def test_increments_fold_by_one_merge_each_exactly_once(spark, tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    write_minutes(cfg, "m", 0, 2, n=6)
    write_minutes(cfg, "m", 3, 3, n=6)  # minute 2 is held back: it arrives late, below the state's freshness
    report, _ = run_until_idle(cfg, spark)
    assert report.failed == 0
    f1 = recover(cfg).tables["state"].freshness
    assert f1 == T0 + 6 * MINUTE
    _audit(cfg, f1)

    write_minutes(cfg, "m", 2, 1, n=6)  # late: folded as part of the next increment, never a rewrite
    write_minutes(cfg, "m", 6, 3, n=6)
    write_minutes(cfg, "m", 9, 3, n=0)  # empty minutes: an empty increment still commits its window
    report, _ = run_until_idle(cfg, spark)
    assert report.failed == 0
    rec = recover(cfg)
    f2 = rec.tables["state"].freshness
    assert f2 == T0 + 12 * MINUTE and rec.tables["state"].txn_version == ms(f2)  # recovery reads it from the log
    _audit(cfg, f2)
    late = [m for m in _metas(cfg) if "late_from" in m]
    assert len(late) == 1 and late[0]["late_from"] <= T0 + 3 * MINUTE and late[0]["window"][0] == f1
    assert recover(cfg, SparkLog(spark)).tables["state"].freshness == f2  # the log read through Spark (Connect)
    meta = _last_meta(cfg)
    assert meta["operation"] == "MERGE" and meta["kind"] == "stateful"
    assert (meta["txn_action"]["appId"], meta["txn_action"]["version"], meta["txn"]) == (
        "freshet/state", ms(f2), ms(f2))  # Delta's idempotent-DML pair, in the MERGE
    w0, w1 = meta["window"]
    assert w1 == f2 and w0 < w1 and set(meta["sources"]) == {"m_raw"}
    assert at_column("last_v") in _rows(table_path(cfg, "state"))[0]

    # the last job replayed by a worker whose memory is one commit behind (a retry after an unknown
    # outcome): it plans the same window and txn, runs the MERGE, and Delta skips it
    behind = rec.tables["state"]
    behind.freshness, behind.txn_version = w0, ms(w0)
    version = delta_version(table_path(cfg, "state"))
    replay = StartJob(job_id=999, table="state", track=0, kind="derived", start=w0, end=w1,
                      new_freshness=w1, new_safe_freshness=w1, sources=("m_raw",))
    out = Executor(cfg, spark, rec).run(replay)
    assert not out.committed and "already folded" in out.note
    assert delta_version(table_path(cfg, "state")) == version
    _audit(cfg, f2)  # nothing folded twice
    # and replayed by one that knows the log: planned as a no-op before Spark is asked
    assert not Executor(cfg, spark, recover(cfg)).run(replay).committed
    _audit(cfg, f2)

    # a rebuild (a backfill of a stateful table), after another writer spoilt the state: chunk by
    # chunk (c·P = 3 minutes) from the base table, the process restarted between two chunks
    spark.sql(f"UPDATE delta.`{table_path(cfg, 'state')}` SET n = n + 100")
    sched = Scheduler(cfg, now=time.time(), recovered=recover(cfg).recovered)
    jobs = sched.handle(Backfill(table="state", start=T0, end=T0 + MINUTE), time.time())
    _drive(sched, Executor(cfg, spark, recover(cfg)), jobs, stop_after=2)
    assert recover(cfg).recovered["state"].rebuild == (T0 + 6 * MINUTE, f2)  # its progress, from the log
    sched = Scheduler(cfg, now=time.time(), recovered=recover(cfg).recovered)
    done = _drive(sched, Executor(cfg, spark, recover(cfg)), sched.handle(Tick(), time.time()))
    assert [(j.start, j.end) for j in done] == [(T0 + 6 * MINUTE, T0 + 9 * MINUTE), (T0 + 9 * MINUTE, f2)]
    rec = recover(cfg)
    assert rec.tables["state"].freshness == f2 and rec.recovered["state"].rebuild is None
    chunks = [m for m in _metas(cfg) if "rebuild" in m]
    assert [tuple(m["window"]) for m in chunks] == [(T0 + i * 3 * MINUTE, T0 + (i + 1) * 3 * MINUTE) for i in range(4)]
    _audit(cfg, f2)  # the spoilt counts are gone: the state is folded again from every base row


def _drive(sched: Any, ex: Executor, jobs: list[StartJob], stop_after: int | None = None) -> list[StartJob]:
    """Run `jobs` and what follows, one at a time (a worker per job); stop after `stop_after`."""
    from warehouse.events import JobFinished

    done: list[StartJob] = []
    while jobs and (stop_after is None or len(done) < stop_after):
        job = jobs.pop(0)
        event = ex.execute(job)
        assert isinstance(event, JobFinished) and event.committed, event
        done.append(job)
        jobs += sched.handle(event, time.time())
    return done


CHILD = """
import json, sys
import warehouse.lake.stateful as stateful
from warehouse.config import parse_config
from ops.testing import run_until_idle
from warehouse.lake.session import get_spark
merge = stateful.merge_sql
def announced(*a, **kw):  # the parent kills the process while this MERGE runs
    print("MERGE", flush=True)
    return merge(*a, **kw)
stateful.merge_sql = announced
cfg = parse_config(json.loads(sys.argv[1]))
spark = get_spark(cfg.spark)
print("READY", flush=True)
report, _ = run_until_idle(cfg, spark, retry_failed=True, timeout=120)
print("DONE", report.jobs, report.failed, flush=True)
"""


def _files(path: str) -> set[Path]:
    """The data files under a Delta table (committed or not)."""
    return {p for p in Path(path).rglob("*.parquet") if "_delta_log" not in p.parts}


def test_sigkill_during_the_merge_then_late_data_and_a_restart_fold_everything_once(tmp_path: Path) -> None:
    """A loader process SIGKILLed twice while a stateful MERGE runs (once as it starts, once when
    its data files are written — the commit in flight), late minutes delivered while it is down,
    then restarted from the Delta logs alone: the state is the aggregates over every base row."""
    import signal

    from tests.helpers_live import start_child, wait_line

    data = _data(tmp_path)
    data["scheduler"]["chop"] = 1.0  # one minute per job: many MERGEs to kill
    cfg = parse_config(data)
    spath = table_path(cfg, "state")
    log = tmp_path / "child.log"
    write_minutes(cfg, "m", 0, 2, n=6)
    write_minutes(cfg, "m", 3, 2, n=6)  # minute 2 held back: late
    in_flight = 0
    for kill, later in enumerate(([(2, 1), (5, 1)], [(6, 1)])):
        child = start_child(data, log, CHILD)
        assert wait_line(child, "READY", 120) is not None, log.read_text()[-3000:]
        for _ in range(3 if kill == 0 else 1):  # the 3rd MERGE folds (3, 4]: minute 2 then comes late
            assert wait_line(child, "MERGE", 120) is not None, log.read_text()[-3000:]
        version, files = delta_version(spath), _files(spath)
        if kill == 0:
            time.sleep(0.05)  # the MERGE has begun: its join, its writes and its commit are ahead
        else:  # the MERGE's files are written: its commit is in flight (or just done)
            deadline = time.monotonic() + 30
            while not (_files(spath) - files) and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        child.wait()
        in_flight += delta_version(spath) == version  # killed before the MERGE committed
        for first, count in later:  # arriving while the loader is down (minute 2 late)
            write_minutes(cfg, "m", first, count, n=6)
    assert in_flight >= 1  # at least one MERGE died mid-flight (the first one always does)
    child = start_child(data, log, CHILD)
    done = wait_line(child, "DONE", 240)
    child.wait(timeout=60)
    assert done is not None and child.returncode == 0, log.read_text()[-3000:]

    rec = recover(cfg)
    f = rec.tables["state"].freshness
    assert f == T0 + 7 * MINUTE and rec.tables["state"].txn_version == ms(f)
    _audit(cfg, f)  # key by key against plain Python over every base row: nothing lost, nothing twice
    windows = sorted(tuple(m["window"]) for m in _metas(cfg))
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:], strict=False))  # no window folded twice
    assert windows[-1][1] == f and any("late_from" in m for m in _metas(cfg))
