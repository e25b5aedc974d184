"""A stateful table on Spark and Delta (Programming Bulk-Incremental Dataflows §3): increments folded by one MERGE
per job, exactly once — a late partition is folded with the next increment, a replayed job (the
same Delta txn) folds nothing twice — audited key by key with delta-rs and plain Python over
every base row."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MINUTE, T0, warehouse_dict, write_minutes

from tests.helpers_ops import job_group, run_until_idle
from warehouse.config import parse_config
from warehouse.events import Backfill, StartJob, Tick
from warehouse.lake.delta import ms, table_path
from warehouse.lake.executor import Executor
from warehouse.lake.recovery import SparkLog, delta_version, recover, shadow_path
from warehouse.lake.stateful import at_column
from warehouse.scheduler import Scheduler

pytestmark = pytest.mark.spark

INCREMENT = (
    "SELECT k, count(*) AS n, sum(v) AS v_sum, min(v) AS v_min, max(v) AS v_max, max_by(v, ts) AS last_v, "
    "min_by(v, ts) AS first_v, min(ts) AS first_ts, max(ts) AS ts FROM m_raw "
    "WHERE ts > :window_start AND ts <= :window_end GROUP BY k"
)
FOLD = {"n": "count", "v_sum": "sum", "v_min": "min", "v_max": "max", "last_v": "last", "first_v": "first",
        "first_ts": "min", "ts": "max"}
ORDER = {"first_v": "first_ts"}  # a first by the earliest time, a last by the latest


def _data(tmp: Path) -> dict[str, Any]:
    data = warehouse_dict(tmp)
    data["streams"] = [s for s in data["streams"] if s["name"] == "m"]
    data["tables"] = [t for t in data["tables"] if t["name"] == "m_raw"] + [
        {"name": "state", "kind": "stateful", "sources": ["m_raw"], "key": ["k"], "increment": INCREMENT,
         "fold": FOLD, "order": ORDER, "priority": 5, "cost": {"alpha": 1, "beta": 0.01}}]
    return data


def _config(tmp: Path) -> Any:
    return parse_config(_data(tmp))


def _rows(path: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table().to_pylist()


def _expected(base: list[dict[str, Any]], upto: float, scale: float = 1.0) -> dict[str, dict[str, Any]]:
    """The state computed independently: plain Python aggregates over every base row ≤ upto
    (`scale`: the v_sum of an increment that sums v·scale)."""
    cut = dt.datetime.fromtimestamp(upto, dt.UTC)
    out: dict[str, dict[str, Any]] = {}
    for r in sorted((r for r in base if r["ts"] <= cut), key=lambda r: r["ts"]):
        e = out.setdefault(r["k"], {"n": 0, "v_sum": 0.0, "v_min": r["v"], "v_max": r["v"], "first_v": r["v"],
                                    "first_ts": r["ts"]})
        e["n"] += 1
        e["v_sum"] += r["v"] * scale
        e["v_min"], e["v_max"] = min(e["v_min"], r["v"]), max(e["v_max"], r["v"])
        e["last_v"], e["ts"] = r["v"], r["ts"]
    return out


def _audit(cfg: Any, upto: float, scale: float = 1.0) -> None:
    state = {r["k"]: r for r in _rows(table_path(cfg, "state"))}
    expected = _expected(_rows(table_path(cfg, "m_raw")), upto, scale)
    assert len(_rows(table_path(cfg, "state"))) == len(state)  # one row per key
    assert sorted(state) == sorted(expected)
    for k, e in expected.items():
        got = state[k]
        assert got["n"] == e["n"], (k, got, e)  # a key folded twice would count its rows twice
        assert math.isclose(got["v_sum"], e["v_sum"], rel_tol=1e-9), (k, got, e)
        assert (got["v_min"], got["v_max"], got["last_v"], got["first_v"], got["first_ts"], got["ts"]) == (
            e["v_min"], e["v_max"], e["last_v"], e["first_v"], e["first_ts"], e["ts"]), (k, got, e)


def _metas(cfg: Any, path: str | None = None) -> list[dict[str, Any]]:
    """The userMetadata of every Freshet commit of the state (or of the table at `path`)."""
    out = []
    for f in sorted((Path(path or table_path(cfg, "state")) / "_delta_log").glob("*.json")):
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
    assert len(late) == 1 and late[0]["late_from"] <= T0 + 3 * MINUTE and late[0].get("window", [f1])[0] == f1
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
    assert recover(cfg).recovered["state"].rebuild == (T0 + 6 * MINUTE, f2)  # its progress, from the shadow's log
    spoilt = {r["k"]: r["n"] for r in _rows(table_path(cfg, "state"))}  # readers still see the whole old state
    assert spoilt == {k: e["n"] + 100 for k, e in _expected(_rows(table_path(cfg, "m_raw")), f2).items()}
    assert all(m["sources"] == m["rebuild"]["versions"] for m in _metas(cfg, shadow_path(cfg, "state")))
    sched = Scheduler(cfg, now=time.time(), recovered=recover(cfg).recovered)
    done = _drive(sched, Executor(cfg, spark, recover(cfg)), sched.handle(Tick(), time.time()))
    assert [(j.start, j.end) for j in done] == [(T0 + 6 * MINUTE, T0 + 9 * MINUTE), (T0 + 9 * MINUTE, f2)]
    rec = recover(cfg)
    assert rec.tables["state"].freshness == f2 and rec.recovered["state"].rebuild is None
    assert rec.tables["state"].txn_version == ms(f2) + 1  # the swap: one commit, one txn version
    (swap,) = [m for m in _metas(cfg) if "rebuild" in m]
    assert swap["rebuild"]["swapped"] and swap["window"] == [T0, f2] and swap["sources"] == swap["read"]
    assert not Path(shadow_path(cfg, "state")).exists()  # the shadow's files are removed after the swap
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



def _write_rows(cfg: Any, minute: int, rows: list[tuple[str, float]], pid: str) -> None:
    """One partition of stream m for `minute` after T0 holding `rows` (key, v), in time order."""
    import pyarrow as pa

    from ops.demo import write_partition

    start = T0 + minute * MINUTE
    ts = [dt.datetime.fromtimestamp(start + 1 + i, dt.UTC) for i in range(len(rows))]
    table = pa.table({"ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "k": [k for k, _ in rows],
                      "v": [v for _, v in rows], "id": [int(start) * 100 + 90 + i for i in range(len(rows))]})
    write_partition(cfg.warehouse.landing, "m", pid, start, start + MINUTE, table)


def test_a_late_load_alone_is_folded_at_once_first_values_included(spark, tmp_path: Path) -> None:
    """A late partition and no on-time data after it: the Scheduler releases a late fold of its rows
    (no job waits for the sources' edge to move); a late row earlier than a key's first value
    replaces it (the first orders by its own column, min(ts)); a key only the late rows hold appears."""
    cfg = _config(tmp_path)
    write_minutes(cfg, "m", 1, 4, n=6)
    report, _ = run_until_idle(cfg, spark)
    assert report.failed == 0
    f = recover(cfg).tables["state"].freshness
    assert f == T0 + 5 * MINUTE
    _write_rows(cfg, 0, [("r1", 1000.5), ("late-only", 7.25)], "m-late-0")  # below F, before every first
    report, sched = run_until_idle(cfg, spark)
    assert report.failed == 0
    rec = recover(cfg)
    assert rec.tables["state"].freshness == f
    state = {r["k"]: r for r in _rows(table_path(cfg, "state"))}
    assert state["r1"]["first_v"] == 1000.5 and state["late-only"]["n"] == 1
    _audit(cfg, f)  # every base row folded once, the late ones included
    (fold,) = [m for m in _metas(cfg) if "late_from" in m]
    assert fold["late_from"] < T0 + MINUTE and fold["reasons"] == ["late"] and fold["late"] == ["m-late-0"]
    assert fold["sources"] == fold["read"] == {"m_raw": rec.tables["m_raw"].delta_version}
    assert next(t for t in sched.stats(time.time()).tables if t.name == "state").late_rows_unfolded == 0


def test_an_update_folds_after_the_txn_version_crept_past_its_window(spark, tmp_path: Path) -> None:
    """Late folds and rebuild swaps take one txn version each above ms(F): once the recorded
    version is past ms(end) of the next window, that update job still folds it (one above the
    recorded) — it is not a no-op the Scheduler would count as folded."""
    from warehouse.lake.delta import commit_message

    cfg = _config(tmp_path)
    write_minutes(cfg, "m", 0, 2, n=6)
    assert run_until_idle(cfg, spark)[0].failed == 0
    st = recover(cfg).tables["state"]
    path = table_path(cfg, "state")
    crept = ms(st.freshness) + 10 * 60_000  # many versions above ms(F): past the next windows' ends
    meta = {"kind": "stateful", "partitions": {}, "freshness": st.freshness, "safe_freshness": st.freshness,
            "sources": st.read, "read": st.read}
    (spark.read.format("delta").load(path).limit(0).write.format("delta").mode("append")
     .option("txnAppId", "freshet/state").option("txnVersion", str(crept))
     .option("userMetadata", commit_message(meta, crept)).save(path))
    write_minutes(cfg, "m", 2, 1, n=6)
    assert run_until_idle(cfg, spark)[0].failed == 0
    rec = recover(cfg).tables["state"]
    assert rec.freshness == T0 + 3 * MINUTE and rec.txn_version == crept + 1
    _audit(cfg, rec.freshness)


# Spark jobs of one fold update whose source gained on-time rows only, every snapshot warm: the
# MERGE's own — the source read from the files its log names, no change-feed read (13 at a3b351d)
ON_TIME_FOLD_JOBS = 10


def _minute(job_id: int, table: str, i: int, arrivals: tuple[Any, ...] = (), late: tuple[str, ...] = ()) -> StartJob:
    """The job of `table` for minute `i` after T0: a base load of `arrivals`, or a fold of m_raw."""
    start, end = T0 + i * MINUTE, T0 + (i + 1) * MINUTE
    return StartJob(job_id=job_id, table=table, track=0, kind="base" if arrivals else "stateful", start=start,
                    end=end, new_freshness=end, new_safe_freshness=end, arrivals=arrivals,
                    sources=() if arrivals else ("m_raw",), late=late)


def test_an_on_time_fold_runs_no_delta_scan_and_no_change_feed_read(spark, tmp_path: Path, monkeypatch) -> None:
    """A fold update reads its source from the files the source's log names, and leaves out the
    change-feed read for late rows when the commits since the version it last read only append files
    whose statistics put every row above F: its Spark jobs are the MERGE's (ON_TIME_FOLD_JOBS: 10; 13
    at a3b351d). A late partition below F brings the change-feed read back, and its rows
    are folded. After every fold the state is plain Python's over every base row up to F."""
    import warehouse.lake.stateful as stateful
    from warehouse.landing.intake import Intake

    cfg = _config(tmp_path)
    write_minutes(cfg, "m", 1, 4, n=6)  # minute 0 comes late, below F
    arrivals = {a.partition_id: a for a in Intake(cfg).scan()}
    ex = Executor(cfg, spark)
    feeds: list[tuple[int, int]] = []  # (since, version) of each change-feed read
    real = stateful._late

    def spy(session: Any, path: str, tcol: str, since: int, version: int, upto: float) -> Any:
        feeds.append((since, version))
        return real(session, path, tcol, since, version, upto)

    monkeypatch.setattr(stateful, "_late", spy)
    job_id = 0

    def run(job: StartJob) -> int:
        """Run `job` (a fold: in a job group of its own); its Spark jobs, the warm-up it leaves
        behind done."""
        group = job_group(spark, f"fold-{job.job_id}") if job.table == "state" else contextlib.nullcontext(list)
        with group as jobs:
            out = ex.run(job)
        assert out.committed, out.note
        assert ex.warmer.idle(60)
        return len(jobs())

    counts = []
    for i in (1, 2, 3):
        job_id += 1
        run(_minute(job_id, "m_raw", i, (arrivals[f"m-{i:04d}"],)))
        job_id += 1
        counts.append(run(_minute(job_id, "state", i)))
        _audit(cfg, T0 + (i + 1) * MINUTE)
    on_time_feeds = list(feeds)
    # a late partition (minute 0, below F), then minute 4: the fold reads the change feed for them
    _write_rows(cfg, 0, [("r1", 1000.5), ("late-only", 7.25)], "m-late-0")
    late = {a.partition_id: a for a in Intake(cfg, recover(cfg)).scan()}["m-late-0"]
    read = ex.table_state("state").read["m_raw"]
    job_id += 1
    run(_minute(job_id, "m_raw", 0, (late,), ("m-late-0",)))
    job_id += 1
    run(_minute(job_id, "m_raw", 4, (arrivals["m-0004"],)))
    job_id += 1
    counts.append(run(_minute(job_id, "state", 4)))
    _audit(cfg, T0 + 5 * MINUTE)  # the late rows folded once, with the increment of minute 4
    assert _metas(cfg)[-1]["late_from"] < T0 + MINUTE
    assert max(counts[1:3]) <= ON_TIME_FOLD_JOBS < counts[3], counts  # the first fold creates the state
    assert on_time_feeds == []  # every version read since was an on-time append
    assert feeds == [(read, read + 2)]  # the late partition's and minute 3's


def test_a_folds_rows_are_its_merged_keys_through_either_reader_of_the_log(spark, tmp_path: Path) -> None:
    """The rows a fold reports are the keys its MERGE inserted and updated — not the unchanged rows
    it copied into the file it rewrote — read from its commit by the reader the warehouse root
    needs: `SparkLog` (an s3a:// root, Spark Connect: the executor has no local log files and reads
    its sources through Delta) as `LocalLog`. The fold used to read its commit's local file only:
    0 rows on an s3a:// root; and `SparkLog` counted the copied rows too."""
    from warehouse.lake.recovery import LocalLog
    from warehouse.landing.intake import Intake

    cfg = _config(tmp_path)
    write_minutes(cfg, "m", 0, 1, n=6)
    assert run_until_idle(cfg, spark)[0].failed == 0
    path = table_path(cfg, "state")
    spark.sql(f"OPTIMIZE delta.`{path}`").collect()  # the state in one file: the MERGE rewrites it
    _write_rows(cfg, 1, [("r1", 1.5), ("new", 2.5)], "m-0001")  # one key updated, one inserted
    rec = recover(cfg)
    (arrival,) = Intake(cfg, rec).scan()
    ex = Executor(cfg, spark, rec)
    ex.log, ex.files = SparkLog(spark), None  # the executor of an s3a:// root (lake.recovery.delta_log)
    assert ex.run(_minute(10, "m_raw", 1, (arrival,))).committed
    out = ex.run(_minute(11, "state", 1))
    assert out.committed
    m = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").select("version", "operation",
                                                                     "operationMetrics").first()
    metrics = m["operationMetrics"]
    assert (m["version"], m["operation"]) == (out.delta_version, "MERGE")
    merged = int(metrics["numTargetRowsInserted"]) + int(metrics["numTargetRowsUpdated"])
    assert int(metrics["numOutputRows"]) > merged == 2  # the rows of the other keys, copied: not the fold's
    assert out.rows == 2
    assert SparkLog(spark).commit_metrics(path, "state", out.txn_version) == (out.delta_version, 2)
    assert LocalLog().commit_metrics(path, "state", out.txn_version) == (out.delta_version, 2)
    _audit(cfg, T0 + 2 * MINUTE)


DEP_SQL = "SELECT ts, k, n FROM state WHERE ts > :window_start AND ts <= :window_end"


def test_a_rebuild_while_data_arrives_is_never_read_partial(spark, tmp_path: Path) -> None:
    """A changed increment with `rebuild: true` (a SIGHUP) while minutes keep arriving, and a derived
    table over the state: after every job the live state holds every key with its count over all
    base rows up to its F — readers and the dependent's jobs never see a partial state; the rebuilt
    state is swapped in once, caught up with the update folded meanwhile; the dependent is then
    recomputed over the whole state. Each commit's sources agree with what the job reports read."""
    import copy

    from warehouse.events import JobFinished
    from warehouse.landing.intake import Intake

    data = _data(tmp_path)
    data["scheduler"].update(chop=2.0, policy="fifo")  # chunks of 2 minutes; a due update job goes first
    data["tables"].append({"name": "dep", "sources": ["state"], "granularity": "1m", "sql": DEP_SQL,
                           "cost": {"alpha": 1, "beta": 0.01}})
    cfg = parse_config(data)
    write_minutes(cfg, "m", 0, 4, n=6)
    assert run_until_idle(cfg, spark)[0].failed == 0
    changed = copy.deepcopy(data)
    changed["tables"][1].update(increment=INCREMENT.replace("sum(v) AS", "sum(v * 2) AS"), rebuild=True)
    cfg = parse_config(changed)
    rec = recover(cfg)
    sched = Scheduler(cfg, now=time.time(), recovered=rec.recovered)
    ex, intake = Executor(cfg, spark, rec), Intake(cfg, rec)
    path, spath = table_path(cfg, "state"), shadow_path(cfg, "state")
    kinds: list[tuple[str, str, bool]] = []

    def step(job: StartJob, meanwhile: Any = None) -> list[StartJob]:
        """Run `job`, check what its commit says it read, and (after `meanwhile`) hand its end
        to the Scheduler; then read the live state as any reader would: it must be whole."""
        event = ex.execute(job)
        assert isinstance(event, JobFinished), event
        kinds.append((job.table, job.kind, "rebuild" in job.reasons))
        if job.kind == "base":
            intake.archive(job)
        if job.table == "state" and event.committed:  # what the commit says it read is what the job read
            last = _metas(cfg, spath)[-1] if job.kind == "recompute" and Path(spath).exists() else _metas(cfg)[-1]
            assert last["sources"] == dict(event.read), (last, event)
            if "rebuild" in last and not last["rebuild"].get("swapped"):
                assert last["sources"] == last["rebuild"]["versions"]
        if meanwhile is not None:
            meanwhile()
        out = sched.handle(event, time.time())
        f = recover(cfg).tables["state"].freshness
        live = {r["k"]: r["n"] for r in _rows(path)}  # a reader of the state, now
        assert live == {k: e["n"] for k, e in _expected(_rows(table_path(cfg, "m_raw")), f).items()}, (job, f)
        return out

    def arrive() -> None:  # two minutes arrive and are loaded while the rebuild's first chunk runs
        write_minutes(cfg, "m", 4, 2, n=6)
        more = [j for a in intake.scan() for j in sched.handle(a, time.time())]
        while more:
            more += step(more.pop(0))

    jobs = sched.handle(Tick(), time.time())
    assert [(j.table, j.kind, j.full) for j in jobs] == [("state", "recompute", True)]
    while jobs:
        job = jobs.pop(0)
        jobs += step(job, arrive if job.full else None)
    f = recover(cfg).tables["state"].freshness
    assert f == T0 + 6 * MINUTE and ("state", "stateful", False) in kinds  # its own kind, not derived
    assert kinds.index(("state", "stateful", False)) < max(i for i, k in enumerate(kinds) if k[2])  # mid-rebuild
    _audit(cfg, f, scale=2.0)  # the new increment over every base row, the minutes folded meanwhile too
    (swap,) = [m for m in _metas(cfg) if "rebuild" in m]
    assert swap["rebuild"]["swapped"] and swap["rebuild"]["to"] == T0 + 4 * MINUTE and swap["freshness"] == f
    dep = sorted((r["k"], r["n"]) for r in _rows(table_path(cfg, "dep")))
    assert dep == sorted((r["k"], r["n"]) for r in _rows(path))  # the dependent recomputed over the new state


CHILD = """
import json, sys
import warehouse.lake.stateful as stateful
from warehouse.config import parse_config
from tests.helpers_ops import run_until_idle
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
