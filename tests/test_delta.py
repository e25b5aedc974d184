"""Base and derived appends on real Spark and Delta Lake, driven by the real Scheduler (§4.4, §5).

One session-scoped SparkSession (tests/conftest.py); each test gets its own warehouse in a tmp dir.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import MINUTE, T0, make_config, rows_for, warehouse_dict, write_minutes

from tests.helpers_ops import job_group, run_until_idle
from warehouse.config import parse_config
from warehouse.events import JobFailed, JobFinished, PartitionArrived, StartJob
from warehouse.lake.delta import append_idempotent, ms, table_path, utc
from warehouse.lake.executor import Executor
from warehouse.lake.recovery import LocalLog, SparkLog, delta_version, read_table_state, recover
from warehouse.landing.intake import Intake
from warehouse.sqltext import bind_window

pytestmark = pytest.mark.spark


def table_rows(spark: Any, cfg: Any, name: str, cols: list[str]) -> list[tuple]:
    df = spark.read.format("delta").load(table_path(cfg, name))
    return sorted(tuple(r) for r in df.select(*cols).collect())


def sql_over_full_sources(spark: Any, cfg: Any, name: str, upto: float) -> tuple[list[str], list[tuple]]:
    """The derived table's SQL over its *whole* sources (no windows), rows with ts ≤ upto."""
    tc = cfg.table(name)
    session = spark.newSession()
    for src in tc.sources:
        session.read.format("delta").load(table_path(cfg, src)).createOrReplaceTempView(src)
    df = session.sql(bind_window(tc.sql, 0.0, upto))
    df = df.where(df.ts <= utc(upto))
    return df.columns, sorted(tuple(r) for r in df.collect())


def last_commit_info(cfg: Any, name: str) -> dict[str, Any]:
    path = Path(table_path(cfg, name)) / "_delta_log" / f"{delta_version(table_path(cfg, name)):020d}.json"
    for line in path.read_text().splitlines():
        a = json.loads(line)
        if "commitInfo" in a:
            return a["commitInfo"]
    raise AssertionError("no commitInfo")


def expected_base(stream: str, minutes: range, cols: list[str], seed: int = 0) -> list[tuple]:
    out = []
    for i in minutes:
        c = rows_for(stream, T0 + i * MINUTE, T0 + (i + 1) * MINUTE, seed)
        out += list(zip(*(c[k] for k in cols), strict=True))
    return sorted(out)


def test_end_to_end_base_and_derived(spark, tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 12)
    write_minutes(cfg, "a", 0, 12)
    report, sched = run_until_idle(cfg, spark)
    assert report.failed == 0 and report.jobs >= 6

    # base tables hold every row exactly once
    assert table_rows(spark, cfg, "m_raw", ["id", "k", "v"]) == expected_base("m", range(12), ["id", "k", "v"])
    assert len(table_rows(spark, cfg, "a_raw", ["id"])) == 48

    # the Delta log alone gives back freshness, safe freshness, txn version and the loaded ids
    state = recover(cfg)
    m = state.tables["m_raw"]
    assert m.freshness == T0 + 12 * MINUTE and m.safe_freshness == T0 + 12 * MINUTE
    assert m.txn_version == ms(T0 + 12 * MINUTE)
    assert sorted(m.partitions) == [f"m-{i:04d}" for i in range(12)]
    assert state.loaded["m"] == m.partitions
    assert m.origin == T0
    # each partition's (start, end], for the intake's overlap check after a restart (defect 3)
    assert m.windows == {f"m-{i:04d}": (T0 + i * MINUTE, T0 + (i + 1) * MINUTE) for i in range(12)}
    meta = json.loads(last_commit_info(cfg, "m_raw")["userMetadata"])
    assert meta["kind"] == "base" and meta["freshness"] == T0 + 12 * MINUTE and meta["partitions"]
    assert sched.stats(T0).tables  # the Scheduler ran on these outcomes

    # derived tables: equal to their SQL over the full sources, up to their freshness
    f5 = state.tables["m_5m"].freshness
    assert f5 == T0 + 10 * MINUTE  # floored to the 5-minute granularity
    for name in ("m_5m", "a_m"):
        f = state.tables[name].freshness
        cols, expected = sql_over_full_sources(spark, cfg, name, f)
        assert expected, name
        assert table_rows(spark, cfg, name, cols) == expected, name
        # never past the safe trailing edge of its sources
        edge = min(state.tables[s].safe_freshness for s in cfg.table(name).sources)
        assert f <= edge
        top = spark.read.format("delta").load(table_path(cfg, name)).selectExpr("max(unix_micros(ts))").first()[0]
        assert top <= round(f * 1e6)
    meta = json.loads(last_commit_info(cfg, "a_m")["userMetadata"])
    assert meta["kind"] == "derived" and set(meta["sources"]) == {"a_raw", "m_raw"}
    assert meta["window"][1] == state.tables["a_m"].freshness
    assert all(isinstance(v, int) for v in meta["sources"].values())

    # loaded partitions are archived out of the landing zone
    landing = Path(cfg.warehouse.landing)
    assert sorted(p.name for p in (landing / "_loaded" / "m").iterdir()) == [f"m-{i:04d}" for i in range(12)]
    assert not any((landing / "m").iterdir())

    # a second run (a restart: everything recovered from the log) loads only what is new
    write_minutes(cfg, "m", 12, 3)
    write_minutes(cfg, "a", 12, 3)
    report, _ = run_until_idle(cfg, spark)
    assert report.failed == 0
    assert table_rows(spark, cfg, "m_raw", ["id", "k", "v"]) == expected_base("m", range(15), ["id", "k", "v"])
    state = recover(cfg)
    assert state.tables["m_5m"].freshness == T0 + 15 * MINUTE
    for name in ("m_5m", "a_m"):
        cols, expected = sql_over_full_sources(spark, cfg, name, state.tables[name].freshness)
        assert table_rows(spark, cfg, name, cols) == expected, name

    # the log read through Spark (a URI root, or Spark Connect) says exactly what the files say
    through_spark = SparkLog(spark)
    spark_state = recover(cfg, through_spark)
    differ = {(name, f.name): (getattr(ts, f.name), getattr(spark_state.tables[name], f.name))
              for name, ts in state.tables.items() for f in dataclasses.fields(ts)
              if getattr(ts, f.name) != getattr(spark_state.tables[name], f.name)}
    assert not differ and spark_state == state, differ
    for name in ("m_raw", "a_m"):
        path = table_path(cfg, name)
        st = state.tables[name]
        assert through_spark.version(path) == LocalLog().version(path) == st.delta_version
        assert through_spark.commit_metrics(path, name, st.txn_version) == LocalLog().commit_metrics(
            path, name, st.txn_version)
    assert through_spark.table_state(str(tmp_path / "nothing"), "x") == LocalLog().table_state(
        str(tmp_path / "nothing"), "x")
    assert through_spark.version(str(tmp_path / "nothing")) is None


def base_job(job_id: int, arrivals: list[PartitionArrived], start: float, end: float) -> StartJob:
    return StartJob(job_id=job_id, table="m_raw", track=0, kind="base", start=start, end=end,
                    new_freshness=end, new_safe_freshness=end, arrivals=tuple(arrivals))


def test_a_job_runs_in_the_pool_of_its_priority_and_a_bulk_job_in_the_bulk_pool(spark, tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """The session schedules FAIR; a job's Spark work runs in the pool weighted by its table's
    inherited priority relative to the warehouse's least (policies.bulk: 50 / 1 → freshet-04-p64), a
    bulk job in freshet-bulk; the thread's pool is reset after. A bulk job, and a job that is not
    bulk but reads a big file, read with short splits."""
    import dataclasses

    assert spark.sparkContext.getConf().get("spark.scheduler.mode") == "FAIR"
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 3)
    arrivals = Intake(cfg).scan()
    seen: list[str | None] = []
    splits: list[tuple[bool, str]] = []  # (read in the daemon's own session?, its split size)
    import warehouse.lake.base as base_mod
    import warehouse.lake.executor as executor_mod

    run_base, read = base_mod.run_base, base_mod.read_partitions

    def spy(lake, job, tc, t0):  # noqa: ANN001, ANN202 — records the pool the job's Spark work runs in
        seen.append(lake.spark.sparkContext.getLocalProperty("spark.scheduler.pool"))
        return run_base(lake, job, tc, t0)

    def reads(config, session, stream, files):  # noqa: ANN001, ANN202 — records the session that reads
        splits.append((session is spark, session.conf.get("spark.sql.files.maxPartitionBytes")))
        return read(config, session, stream, files)

    monkeypatch.setattr(executor_mod, "run_base", spy)  # the base pipeline (lake.base), as the executor picks it
    monkeypatch.setattr(base_mod, "read_partitions", reads)
    ex = Executor(cfg, spark)
    least = min(t.priority for t in cfg.tables)
    first = dataclasses.replace(base_job(1, arrivals[:1], T0, T0 + MINUTE), priority=50 * least)
    out = ex.run(first)
    assert out.committed and out.event().cold  # m_raw's first commit in this session: a cold start (§2.4)
    bulk = dataclasses.replace(base_job(2, arrivals[1:2], T0 + MINUTE, T0 + 2 * MINUTE), priority=50 * least,
                               bulk=True)
    out = ex.run(bulk)
    assert out.committed and not out.event().cold
    assert seen == ["freshet-04-p64", "freshet-bulk"]
    # not bulk, but its one file holds BIG_FILE_ROWS rows (lowered to this partition's 4)
    (big,) = arrivals[2:]
    assert big.rows == 4 and len(big.files) == 1
    monkeypatch.setattr(base_mod, "BIG_FILE_ROWS", big.rows)
    out = ex.run(dataclasses.replace(base_job(3, [big], T0 + 2 * MINUTE, T0 + 3 * MINUTE), priority=50 * least))
    assert out.committed and seen[-1] == "freshet-04-p64"
    # a bulk job, and one reading a big file, read in a session of their own with short splits
    # (lake.session.read_session); the daemon's session keeps Spark's default
    from warehouse.lake.session import BULK_SPLIT_BYTES

    shared = spark.conf.get("spark.sql.files.maxPartitionBytes")
    assert shared != BULK_SPLIT_BYTES
    assert splits == [(True, shared), (False, BULK_SPLIT_BYTES), (False, BULK_SPLIT_BYTES)], splits
    assert len(table_rows(spark, cfg, "m_raw", ["id"])) == 12  # all three appended
    assert spark.sparkContext._jsc.sc().getPoolForName("freshet-04-p64").get().weight() == 64
    assert spark.sparkContext.getLocalProperty("spark.scheduler.pool") is None


def test_rerunning_a_committed_job_appends_nothing(spark, tmp_path: Path, monkeypatch) -> None:
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 2)
    intake = Intake(cfg)
    arrivals = intake.scan()
    ex = Executor(cfg, spark)
    job = base_job(1, arrivals, T0, T0 + 2 * MINUTE)
    first = ex.run(job)
    assert first.committed and first.rows == 8 and first.txn_version == ms(T0 + 120)
    again = ex.run(job)
    assert not again.committed and again.rows == 0
    assert again.event().committed is False  # a no-op does not train the cost model (§2.4)
    # a fresh process (state from the log only) recognises it too
    assert not Executor(cfg, spark, recover(cfg)).run(job).committed

    # Delta itself skips a replayed (txnAppId, txnVersion): the version does not move
    path = table_path(cfg, "m_raw")
    v = delta_version(path)
    df = spark.read.format("delta").load(path)
    append_idempotent(df, path, table="m_raw", txn_version=first.txn_version, metadata={"x": 1}, partition_by="hour")
    assert delta_version(path) == v
    assert len(table_rows(spark, cfg, "m_raw", ["id"])) == 8

    # unknown outcome: the commit happens, then the job fails before reporting it
    write_minutes(cfg, "m", 2, 1)
    job2 = base_job(2, intake.scan(), T0 + 120, T0 + 180)
    import warehouse.lake.recovery as recovery_mod

    real = recovery_mod.commit_metrics
    calls = {"n": 0}

    def flaky(*a: Any, **k: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("connection reset after the commit")
        return real(*a, **k)

    monkeypatch.setattr(recovery_mod, "commit_metrics", flaky)
    ev = ex.execute(job2)
    assert isinstance(ev, JobFailed) and "connection reset" in ev.reason
    ev = ex.execute(job2)  # the retry re-reads the watermark: already committed → a no-op
    assert isinstance(ev, JobFinished) and ev.rows == 0 and not ev.committed
    assert len(table_rows(spark, cfg, "m_raw", ["id"])) == 12
    assert read_table_state(path, "m_raw").freshness == T0 + 180


def test_late_and_empty_partitions(spark, tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 1)
    write_minutes(cfg, "m", 2, 1)  # minute 1 is missing: it comes late
    run_until_idle(cfg, spark)
    path = table_path(cfg, "m_raw")
    before = read_table_state(path, "m_raw")
    assert before.freshness == T0 + 180
    # an empty partition is valid and advances freshness
    d = Path(cfg.warehouse.landing) / "m" / "m-0003"
    d.mkdir(parents=True)
    (d / "_partition.json").write_text(json.dumps({"start": T0 + 180, "end": T0 + 240, "files": [], "rows": 0}))
    run_until_idle(cfg, spark)
    mid = read_table_state(path, "m_raw")
    assert mid.freshness == T0 + 240 and mid.txn_version == ms(T0 + 240)
    assert len(table_rows(spark, cfg, "m_raw", ["id"])) == 8
    # a late partition (its interval is already below F', in a gap: it overlaps nothing loaded) is
    # still loaded; F does not move and the txn version goes one above the last
    write_minutes(cfg, "m", 1, 1, seed=7, pid_prefix="late-")
    # a loaded window re-sent under a new id is quarantined, not loaded twice (defect 3)
    write_minutes(cfg, "m", 2, 1, pid_prefix="again-")
    report, sched = run_until_idle(cfg, spark)
    after = read_table_state(path, "m_raw")
    assert after.freshness == T0 + 240 and after.txn_version == mid.txn_version + 1
    assert "late-m-0001" in after.partitions and "again-m-0002" not in after.partitions
    assert len(table_rows(spark, cfg, "m_raw", ["id"])) == 12
    assert sched.late_partitions == 1
    reason = (Path(cfg.warehouse.landing) / "_quarantine" / "m" / "again-m-0002" / "reason").read_text()
    assert reason.startswith("overlaps partition m-0002 (")


def test_failing_derived_sql_does_not_stop_base_tables(spark, tmp_path: Path) -> None:
    extra = [{"name": "bad", "sources": ["m_raw"], "sql": "SELECT ts, no_such_column FROM m_raw"},
             {"name": "no_ts", "sources": ["m_raw"], "sql": "SELECT k, count(*) AS n FROM m_raw GROUP BY k"}]
    cfg = parse_config(warehouse_dict(tmp_path, extra_tables=extra))
    write_minutes(cfg, "m", 0, 5)
    write_minutes(cfg, "a", 0, 5)
    failures: list[JobFailed] = []
    report, sched = run_until_idle(cfg, spark, on_event=lambda e: failures.append(e) if isinstance(e, JobFailed) else None)
    assert report.failed >= 2
    text = " ".join(f.reason for f in failures)
    assert "no_such_column" in text
    assert "must output a 'ts' column" in text
    failing = {t.name: t for t in sched.stats(T0).tables if t.name in ("bad", "no_ts")}
    assert all(t.jobs_failed >= 1 and t.jobs_completed == 0 for t in failing.values())
    state = recover(cfg)
    assert state.tables["m_raw"].freshness == T0 + 5 * MINUTE
    assert state.tables["a_raw"].freshness == T0 + 5 * MINUTE
    assert state.tables["m_5m"].freshness == T0 + 5 * MINUTE
    assert state.tables["bad"].freshness is None and state.tables["no_ts"].freshness is None
    assert len(table_rows(spark, cfg, "m_raw", ["id"])) == 20


def test_sql_of_every_derived_table_analyses(spark, tmp_path: Path) -> None:
    """The embedded netmon example's SQL analyses against its schemas (no Spark job runs);
    broken SQL is reported per table."""
    from warehouse.config import load_config
    from warehouse.lake.evolution import analyze_derived

    netmon = load_config(Path(__file__).resolve().parents[1] / "examples" / "netmon.yaml")
    assert analyze_derived(netmon, spark) == {}
    extra = [{"name": "bad", "sources": ["m_raw"], "sql": "SELECT ts, no_such_column FROM m_raw"},
             {"name": "no_ts", "sources": ["m_raw"], "sql": "SELECT k, count(*) AS n FROM m_raw GROUP BY k"},
             {"name": "over_bad", "sources": ["bad"], "sql": "SELECT * FROM bad"}]
    problems = analyze_derived(parse_config(warehouse_dict(tmp_path, extra_tables=extra)), spark)
    assert set(problems) == {"bad", "no_ts", "over_bad"}
    assert "no_such_column" in problems["bad"] and "'ts'" in problems["no_ts"]


def test_a_backfill_is_loaded_in_time_slices_each_a_delta_commit(spark, tmp_path: Path) -> None:
    """Time-sliced loading on real Delta: the Scheduler (chop: auto, jobs observed to run
    three times slower than estimated) cuts a 10-minute partition of a 1-minute stream into slices
    of c·P = 3 minutes; each is its own idempotent commit with its own watermark, a replayed slice
    is a no-op, a restart resumes from the log, and every row lands exactly once."""
    import pyarrow as pa

    from ops.demo import write_partition
    from warehouse.landing.intake import _arrow_type
    from warehouse.scheduler import Recovered, Scheduler

    data = warehouse_dict(tmp_path, chop="auto")
    data["tables"] = data["tables"][:1]  # m_raw alone
    data["streams"] = data["streams"][:1]
    cfg = parse_config(data)
    sc = cfg.stream("m")
    cols = rows_for("m", T0, T0 + 10 * MINUTE, 0, n=40)
    schema = pa.schema([(c, _arrow_type(t)) for c, t in sc.schema_.items()])
    write_partition(cfg.warehouse.landing, "m", "backfill", T0, T0 + 10 * MINUTE,
                    pa.table({c: cols[c] for c in sc.schema_}, schema=schema))
    expected = sorted(zip(cols["id"], cols["k"], cols["v"], strict=True))

    def slowed(recovered: dict | None = None) -> Scheduler:
        s = Scheduler(cfg, now=T0, recovered=recovered, initial_freshness=None if recovered else T0)
        s._pace.now = 3.0  # a transient slowdown observed: chopping pays (policies.chopping.chop_pays)
        return s

    intake, ex, sched = Intake(cfg), Executor(cfg, spark), slowed()
    (arrival,) = intake.scan()
    (job,) = sched.handle(arrival, T0 + 10 * MINUTE)
    assert (job.start, job.end, job.partitions, job.chopped) == (T0, T0 + 3 * MINUTE, ("backfill",), True)
    first = ex.run(job)
    assert first.committed and first.txn_version == ms(T0 + 3 * MINUTE)
    assert not ex.run(job).committed  # a replayed slice appends nothing
    intake.archive(job)
    assert (Path(cfg.warehouse.landing) / "m" / "backfill").is_dir()  # not archived before its last slice
    path = table_path(cfg, "m_raw")
    st = read_table_state(path, "m_raw")
    assert st.freshness == T0 + 3 * MINUTE and st.slices == {"backfill": T0 + 3 * MINUTE} and not st.partitions
    (job,) = sched.handle(JobFinished(job_id=job.job_id, duration=first.duration), T0 + 11 * MINUTE)
    assert (job.start, job.end) == (T0 + 3 * MINUTE, T0 + 6 * MINUTE)
    assert ex.run(job).committed

    # a restart: the Scheduler starts from the log's watermark; the landing zone re-delivers the
    # partition, and the executor loads only the rows past the slices already committed
    state = recover(cfg)
    assert state.tables["m_raw"].slices == {"backfill": T0 + 6 * MINUTE}
    rec = {n: Recovered(freshness=s.freshness, safe_freshness=s.safe_freshness, origin=s.origin)
           for n, s in state.tables.items()}
    intake, ex, sched = Intake(cfg), Executor(cfg, spark, state), slowed(rec)
    (arrival,) = intake.scan()
    (job,) = sched.handle(arrival, T0 + 12 * MINUTE)
    while job is not None:
        out = ex.run(job)
        intake.archive(job)
        started = sched.handle(JobFinished(job_id=job.job_id, duration=out.duration, committed=out.committed),
                               T0 + 13 * MINUTE)
        job = started[0] if started else None
    assert table_rows(spark, cfg, "m_raw", ["id", "k", "v"]) == expected  # exactly once
    st = read_table_state(path, "m_raw")
    assert st.freshness == T0 + 10 * MINUTE and "backfill" in st.partitions and not st.slices
    assert not (Path(cfg.warehouse.landing) / "m" / "backfill").exists()  # archived after its last slice


def test_a_warm_snapshot_spares_the_next_job_spark_work(spark, tmp_path: Path) -> None:
    """lake.warm: after a commit the executor computes the table's new snapshot state in the
    background (Delta 4.4 reads a txn's version from a state reconstruction of the log, not from
    the checksum file); the next job of the table then runs fewer Spark jobs than with the warmer
    off, and commits the same. A path that is no Delta table is a logged no-op."""
    from warehouse.lake.warm import SnapshotWarmer

    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 4)
    arrivals = sorted(Intake(cfg).scan(), key=lambda a: a.partition_id)

    def spark_jobs(ex: Executor, job: StartJob) -> int:
        with job_group(spark, f"warm-{job.job_id}") as jobs:
            assert ex.run(job).committed
        assert ex.warmer.idle(60)
        return len(jobs())

    class Off(SnapshotWarmer):
        def warm(self, path: str, pool: str | None) -> None:
            pass

    ex = Executor(cfg, spark)
    cold = Executor(cfg, spark)
    cold.warmer = Off(lambda: spark)
    spark_jobs(ex, base_job(1, arrivals[:1], T0, T0 + MINUTE))  # warmed after its commit
    warm = spark_jobs(ex, base_job(2, arrivals[1:2], T0 + MINUTE, T0 + 2 * MINUTE))
    assert ex.warmer.warmed == 2
    cold.refresh("m_raw")
    spark_jobs(cold, base_job(3, arrivals[2:3], T0 + 2 * MINUTE, T0 + 3 * MINUTE))  # not warmed after
    unwarmed = spark_jobs(cold, base_job(4, arrivals[3:4], T0 + 3 * MINUTE, T0 + 4 * MINUTE))
    assert warm < unwarmed, (warm, unwarmed)
    assert len(table_rows(spark, cfg, "m_raw", ["id"])) == 16

    ex.warmer.warm(str(tmp_path / "no-table"), None)
    assert ex.warmer.idle(60) and ex.warmer.warmed == 2


def test_a_job_of_a_shape_run_before_compiles_no_code_again(spark, tmp_path: Path) -> None:
    """lake.session: Spark's cache of the classes it generates for queries holds more than the
    code of a round of a warehouse's jobs. A base load run again after 150 other generated
    classes compiles nothing; with Spark's default cache (100 classes) it compiled its code again,
    Janino's work and then the JIT's (docs/benchmarks.md § Fixed cost)."""
    from pyspark.sql import functions as F

    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 3)
    arrivals = sorted(Intake(cfg).scan(), key=lambda a: a.partition_id)
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    ex = Executor(cfg, spark)

    def compiles(i: int) -> int:
        before = compiled.getCount()
        assert ex.run(base_job(i + 1, arrivals[i:i + 1], T0 + i * MINUTE, T0 + (i + 1) * MINUTE)).committed
        assert ex.warmer.idle(60)  # the snapshot warm-up after the commit counts too
        return compiled.getCount() - before

    compiles(0)  # creates the table
    compiles(1)  # the first append: its code, and the warm-up's, compiled and cached
    before = compiled.getCount()
    for i in range(150):  # other queries' code: each Filter's literal makes a class of its own
        spark.range(1).where(F.col("id") > i)._jdf.queryExecution().executedPlan().execute()
    assert compiled.getCount() - before >= 150
    assert compiles(2) == 0
    assert len(table_rows(spark, cfg, "m_raw", ["id"])) == 12


def test_local_tables_are_written_without_hadoop_checksum_files(spark, tmp_path: Path) -> None:
    """lake.session: a commit writes no `.<name>.crc` sidecar beside its Parquet and log files
    (each was one more create and rename and a `chmod` child process); Delta's own `<version>.crc`
    is still written, the local file system keeps its type (S3A's upload buffer casts it to
    `LocalFileSystem`), and the table reads back whole."""
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 2)
    arrivals = sorted(Intake(cfg).scan(), key=lambda a: a.partition_id)
    ex = Executor(cfg, spark)
    for i, a in enumerate(arrivals):
        assert ex.run(base_job(i + 1, [a], T0 + i * MINUTE, T0 + (i + 1) * MINUTE)).committed
    assert ex.warmer.idle(60)
    root = Path(table_path(cfg, "m_raw"))
    files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    assert [f for f in files if f.endswith(".parquet")], files
    assert not [f for f in files if Path(f).name.startswith(".") and f.endswith(".crc")], files
    assert "_delta_log/00000000000000000001.crc" in files, files
    jvm = spark.sparkContext._jvm
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark.sparkContext._jsc.hadoopConfiguration())
    kinds, cls = [], local.getClass()
    while cls is not None:  # ProxyLocalFileSystem (Spark's Hive jars) is a LocalFileSystem too
        kinds.append(cls.getName())
        cls = cls.getSuperclass()
    assert "org.apache.hadoop.fs.LocalFileSystem" in kinds, kinds
    assert sorted(table_rows(spark, cfg, "m_raw", ["id"])) == expected_base("m", range(2), ["id"])


def test_job_ids_do_not_repeat_in_the_commits_after_a_restart(spark, tmp_path: Path) -> None:
    """A restarted daemon (`ops.reload.start_parts`) numbers its jobs above every `job_id` its Delta
    logs record, so the ids in the commits' metadata never repeat across restarts (read back by
    delta-rs, an independent reader)."""
    from deltalake import DeltaTable

    from ops.liveness import SparkWatch
    from ops.reload import start_parts

    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 2)
    write_minutes(cfg, "a", 0, 2)
    run_until_idle(cfg, spark)  # the first daemon

    def job_ids() -> list[int]:
        ids = []
        for t in cfg.tables:
            if not (Path(table_path(cfg, t.name)) / "_delta_log").is_dir():
                continue  # no job committed to it yet
            for c in DeltaTable(table_path(cfg, t.name)).history():
                meta = json.loads(c.get("userMetadata") or "{}")
                if "job_id" in meta:
                    ids.append(meta["job_id"])
        return ids

    before = job_ids()
    assert before
    for restart in range(2):  # the daemon restarted, twice
        watch = SparkWatch(cfg.spark, connected=lambda up: None, lost=lambda: None, ready=lambda up, why: None,
                           serving=lambda: True, stopping=lambda: False, helper=lambda pid: None)
        parts = start_parts(cfg, watch)
        assert parts is not None
        write_minutes(cfg, "m", 2 + 2 * restart, 2)
        run_until_idle(cfg, spark, intake=parts.intake, executor=parts.executor, scheduler=parts.sched)
    after = job_ids()
    assert len(after) > len(before)
    assert len(after) == len(set(after)), sorted(after)
    assert recover(cfg).next_job_id == max(after) + 1
