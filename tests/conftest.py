"""Shared fixtures: one SparkSession (with Delta) for the whole test session, and a small warehouse.

The session is built by `warehouse.lake.session.get_spark` — the same code path as the daemon —
with `local[2]` and two shuffle partitions, so every Spark test in the process shares it.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers_cds import JVM_OPTS
from tests.helpers_cluster import spark_cluster  # noqa: F401 — a fixture: the process's standalone cluster
from tests.helpers_s3 import s3, s3_server  # noqa: F401 — fixtures: a bucket per test on the process's moto server
from warehouse.config import FreshetConfig, SparkConfig, parse_config

# The tests' JVMs: a C1-only JIT, the serial collector (tests/helpers_cds.py's JVM_OPTS says why)
os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTS)

# The property and model tests (tests/test_properties.py, tests/test_model.py) run a few hundred
# examples each in `make test`; `HYPOTHESIS_PROFILE=long` runs 5,000 each (`HYPOTHESIS_EXAMPLES=N`:
# N), outside `make test` (docs/simulator.md § Property tests). Each test asks `examples(n)`.
settings.register_profile("long", max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "5000")), deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def saturated_config(n: int, tracks: int, seed: int, **scheduler: Any) -> tuple[FreshetConfig, list[float]]:
    """`n` base tables (periods 10 s to 5 min and priorities 1-100 drawn from `seed`, chop auto: a
    partition longer than its chop bound loads in time slices), a derived table over t0 and t1, and
    the streams' periods; `scheduler`: settings over these."""
    rng = random.Random(seed)
    periods = [rng.choice([10.0, 60.0, 300.0]) for _ in range(n)]
    streams = [{"name": f"s{i}", "period": periods[i]} for i in range(n)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "priority": rng.choice([1, 5, 100]),
               "cost": {"alpha": 2, "beta": 0.3}} for i in range(n)]
    tables.append({"name": "d", "sources": ["t0", "t1"], "sql": "SELECT 1", "priority": 3, "granularity": 60})
    return parse_config({"streams": streams, "tables": tables,
                         "scheduler": {"tracks": tracks, "learn_costs": False, "chop": "auto", **scheduler}}), periods


def examples(n: int) -> int:
    """`n` examples in `make test`; the profile's count where it asks more (`HYPOTHESIS_PROFILE=long`)."""
    return max(n, settings.default.max_examples)


@pytest.fixture(autouse=True)
def _spark_class_archive(request: pytest.FixtureRequest) -> None:
    """Before this process's first Spark test, its JVMs get Spark's classes from a shared archive
    (tests/helpers_cds.py: trained once per machine, ~25 s; then ~6 s less per JVM start)."""
    if request.node.get_closest_marker("spark"):
        from tests.helpers_cds import use

        use()


@pytest.fixture(autouse=True)
def _xdist_group_kept(request: pytest.FixtureRequest) -> None:
    """Under `--dist loadgroup` xdist reads a test's group from the node id it wrote (`…@spark`):
    a grouped test without one would be shared out over the workers unseen, so it fails instead."""
    if getattr(request.config.option, "loadgroup", False) and request.node.get_closest_marker("xdist_group") \
            and "@" not in request.node.nodeid:
        pytest.fail("--dist loadgroup lost this test's group, so the workers share it out: xdist read the "
                    f"tests before they were marked, or pytest {pytest.__version__} ignores xdist's node id "
                    "(9.2: pytest-dev/pytest-xdist#1386)")


@pytest.hookimpl(tryfirst=True)  # this conftest is loaded before xdist's worker: ahead of its hook
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With `-n 2 --dist loadgroup` (make test) the Spark tests that share the SparkSession (the
    `spark` fixture) run in one worker, one after another, so one JVM serves them all; the rest,
    those that start a daemon or program with its own Spark among them, spread over both workers."""
    for item in items:
        if item.get_closest_marker("spark") and "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))


SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "1g",
}

MINUTE = 60.0
T0 = 1_764_000_000.0  # 2025-11-24T16:00:00Z, a multiple of 5 minutes

BUCKET_SQL = (
    "SELECT timestamp_seconds(CAST(ceil(unix_micros(ts) / 300000000.0) AS BIGINT) * 300) AS ts, k, "
    "count(*) AS n, round(sum(v), 6) AS v_sum FROM m_raw GROUP BY 1, 2"
)
BAND_SQL = (
    "SELECT a.ts, a.k, a.id, count(m.id) AS m_rows, round(sum(m.v), 6) AS m_v FROM a_raw a "
    "LEFT JOIN m_raw m ON m.k = a.k AND m.ts > a.ts - INTERVAL 2 MINUTES AND m.ts <= a.ts "
    "WHERE a.ts > :window_start AND a.ts <= :window_end GROUP BY a.ts, a.k, a.id"
)


@pytest.fixture(scope="session")
def spark() -> Any:
    """The process's SparkSession (Delta enabled); stopped at the end of the test session."""
    from tests.helpers_cds import use
    from warehouse.lake.session import get_spark, stop_spark

    use()  # (session fixtures start before the autouse one)
    session = get_spark(SparkConfig(master="local[2]", conf=SPARK_CONF))
    yield session
    stop_spark()


def warehouse_dict(tmp: Path, *, extra_tables: list[dict[str, Any]] | None = None,
                   tracks: int = 2, chop: float | None = 3.0, lateness: float = 0.0) -> dict[str, Any]:
    """Two one-minute streams: `m` (measurements) and `a` (alerts); a roll-up and a band join."""
    return {
        "warehouse": {"root": str(tmp / "data"), "landing": str(tmp / "landing")},
        "streams": [
            {"name": "m", "period": "1m", "lateness": lateness,
             "schema": {"ts": "timestamp", "k": "string", "v": "double", "id": "long"}},
            {"name": "a", "period": "1m", "lateness": 0,
             "schema": {"ts": "timestamp", "k": "string", "sev": "int", "id": "long"}},
        ],
        "tables": [
            {"name": "m_raw", "stream": "m", "priority": 1, "partition_by": "hour",
             "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "a_raw", "stream": "a", "priority": 10, "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "m_5m", "sources": ["m_raw"], "granularity": "5m", "sql": BUCKET_SQL,
             "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "a_m", "sources": ["a_raw", "m_raw"], "granularity": "1m", "lookback": "2m",
             "sql": BAND_SQL, "priority": 5, "cost": {"alpha": 1, "beta": 0.01}},
            *(extra_tables or []),
        ],
        "scheduler": {"tracks": tracks, "chop": chop, "retry_backoff": 0.2},
        "spark": {"master": "local[2]", "conf": SPARK_CONF},
    }


def make_config(tmp: Path, **kw: Any) -> FreshetConfig:
    return parse_config(warehouse_dict(tmp, **kw))


def rows_for(stream: str, start: float, end: float, seed: int, n: int = 4) -> dict[str, list[Any]]:
    """Deterministic rows with event times in (start, end] and ids unique per (stream, start)."""
    import datetime as dt

    rng = random.Random(f"{stream}-{start}-{seed}")
    base_id = int(start) * 100
    ts = sorted(start + rng.randint(1, int((end - start) * 1000)) / 1000.0 for _ in range(n))
    cols: dict[str, list[Any]] = {
        "ts": [dt.datetime.fromtimestamp(t, dt.UTC) for t in ts],
        "k": [rng.choice(["r1", "r2", "r3"]) for _ in range(n)],
        "id": [base_id + i for i in range(n)],
    }
    if stream == "m":
        cols["v"] = [round(rng.uniform(0, 100), 3) for _ in range(n)]
    else:
        cols["sev"] = [rng.randint(1, 4) for _ in range(n)]
    return cols


def write_minutes(config: FreshetConfig, stream: str, first: int, count: int, *, seed: int = 0,
                  n: int = 4, pid_prefix: str = "") -> list[str]:
    """Write `count` one-minute partitions of `stream` starting at minute `first` after T0."""
    import pyarrow as pa

    from ops.demo import write_partition
    from warehouse.landing.intake import _arrow_type

    sc = config.stream(stream)
    schema = pa.schema([(c, _arrow_type(t)) for c, t in sc.schema_.items()])
    ids = []
    for i in range(first, first + count):
        start, end = T0 + i * MINUTE, T0 + (i + 1) * MINUTE
        cols = rows_for(stream, start, end, seed, n)
        table = pa.table({c: cols[c] for c in sc.schema_}, schema=schema)
        pid = f"{pid_prefix}{stream}-{i:04d}"
        write_partition(config.warehouse.landing, stream, pid, start, end, table)
        ids.append(pid)
    return ids


@pytest.fixture()
def held_validation(monkeypatch):
    """The intake's validator, held: it signals `entered` and waits for `release` (set at the
    latest on teardown) before validating — to look at the daemon while a partition is checked."""
    import threading

    import warehouse.landing.intake as intake_mod

    entered, release = threading.Event(), threading.Event()
    real = intake_mod.validate_partition

    def held(*args, **kw):
        entered.set()
        release.wait(10)
        return real(*args, **kw)

    monkeypatch.setattr(intake_mod, "validate_partition", held)
    yield entered, release
    release.set()
