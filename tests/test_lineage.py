"""OpenLineage events (ops.lineage): config, event content checked against the
OpenLineage JSON schema, a real HTTP receiver on loopback (up, failing, hanging, down), the file
transport, and — with Spark — the Delta versions a real job read and wrote."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openlineage.client.serde import Serde
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from referencing import Registry, Resource

from ops.lineage import FACET_SCHEMA, LineageEmitter, dataset_id, run_event
from tests.conftest import MINUTE, T0, warehouse_dict
from tests.lineage_schema import FACETS, RUN_EVENT
from warehouse.config import parse_config
from warehouse.errors import ConfigError
from warehouse.events import JobFailed, JobFinished, PartitionArrived, StartJob
from warehouse.lake.delta import table_path

FRESHET_FACET = {"allOf": [{"$ref": "urn:freshet:lineage:1#/$defs/FreshetRunFacet"},
                            {"type": "object", "required": ["_producer", "_schemaURL"]}]}
REGISTRY = Registry().with_resource(FACET_SCHEMA["$id"], Resource.from_contents(FACET_SCHEMA))


def validate(event: dict[str, Any]) -> None:
    """The event against the RunEvent's shape, and every facet in it against its own schema."""
    def check(schema: dict[str, Any], doc: Any) -> None:
        Draft202012Validator(schema, registry=REGISTRY,
                             format_checker=Draft202012Validator.FORMAT_CHECKER).validate(doc)

    check(RUN_EVENT, event)
    groups = [event["run"].get("facets", {}), event["job"].get("facets", {})]
    for ds in event.get("inputs", []) + event.get("outputs", []):
        groups += [ds.get(k, {}) for k in ("facets", "inputFacets", "outputFacets")]
    for facets in groups:
        for key, value in facets.items():
            schema = FRESHET_FACET if key == "freshet" else FACETS.get(key)
            assert schema is not None, f"facet {key!r} has no schema to check it against"
            check(schema, value)


# ------------------------------------------------------------------------------ a loopback receiver
class Receiver:
    """A real HTTP server on 127.0.0.1: keeps the JSON bodies POSTed to /api/v1/lineage;
    answers 503 to the first `fail` requests; with `hang`, holds every request until `release`."""

    def __init__(self, *, fail: int = 0, hang: bool = False) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.requests = 0
        self.fail, self.hang = fail, hang
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests += 1
                if outer.hang:  # held until released, then answered like any other
                    outer.release.wait(300)
                if self.path != "/api/v1/lineage" or outer.requests <= outer.fail:
                    self.send_response(503 if self.path == "/api/v1/lineage" else 404)
                    self.end_headers()
                    return
                outer.bodies.append(json.loads(body))
                outer.headers.append(dict(self.headers))
                self.send_response(201)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def receiver():
    made: list[Receiver] = []

    def make(**kw: Any) -> Receiver:
        made.append(Receiver(**kw))
        return made[-1]

    yield make
    for r in made:
        r.close()


def config(tmp: Path, lineage: dict[str, Any] | None) -> Any:
    d = warehouse_dict(tmp)
    d["tables"][2]["maintenance"] = {"optimize_every": 5}
    if lineage is not None:
        d["lineage"] = lineage
    return parse_config(d)


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample read back through prometheus-client's exposition parser."""
    return metric_of(generate_latest(registry).decode(), name, **labels)


# ------------------------------------------------------------------------------ the jobs of every kind
def arrival(pid: str, i: int, rows: int = 4) -> PartitionArrived:
    return PartitionArrived(stream="m", partition_id=pid, start=T0 + i * MINUTE, end=T0 + (i + 1) * MINUTE, rows=rows)


def jobs() -> list[StartJob]:
    a0, a1 = arrival("m-0000", 0), arrival("m-0001", 1)
    slab = PartitionArrived(stream="a", partition_id="backfill", start=T0, end=T0 + 10 * MINUTE, rows=400)
    w = dict(track=0, estimate=3.0)
    return [
        StartJob(job_id=1, table="m_raw", kind="base", start=T0, end=T0 + 2 * MINUTE, new_freshness=T0 + 2 * MINUTE,
                 new_safe_freshness=T0 + 2 * MINUTE, arrivals=(a0, a1), delta_f=2 * MINUTE, **w),
        StartJob(job_id=2, table="a_raw", kind="base", start=T0, end=T0 + 2 * MINUTE, new_freshness=T0 + 2 * MINUTE,
                 new_safe_freshness=T0 + 2 * MINUTE, arrivals=(slab,), delta_f=2 * MINUTE, chopped=True, **w),
        StartJob(job_id=3, table="m_5m", kind="derived", start=T0, end=T0 + 5 * MINUTE, new_freshness=T0 + 5 * MINUTE,
                 new_safe_freshness=T0 + 5 * MINUTE, sources=("m_raw",), delta_f=5 * MINUTE, sql_version="v1", **w),
        StartJob(job_id=4, table="a_m", kind="recompute", start=T0, end=T0 + 5 * MINUTE, new_freshness=T0 + 9 * MINUTE,
                 new_safe_freshness=T0 + 9 * MINUTE, sources=("a_raw", "m_raw"), reasons=("sql",), **w),
        StartJob(job_id=5, table="m_5m", kind="optimize", start=T0, end=T0 + 5 * MINUTE, new_freshness=T0 + 5 * MINUTE,
                 new_safe_freshness=T0 + 5 * MINUTE, **w),
        StartJob(job_id=6, table="m_5m", kind="vacuum", start=T0 + 5 * MINUTE, end=T0 + 5 * MINUTE,
                 new_freshness=T0 + 5 * MINUTE, new_safe_freshness=T0 + 5 * MINUTE, **w),
    ]


OUTCOMES: dict[int, JobFinished | JobFailed] = {
    1: JobFinished(job_id=1, duration=2.0, rows=8, version=3),
    2: JobFinished(job_id=2, duration=2.0, rows=80, version=1),
    3: JobFinished(job_id=3, duration=4.0, rows=6, version=7, read=(("m_raw", 3),)),
    4: JobFailed(job_id=4, reason="AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] a_raw"),
    5: JobFinished(job_id=5, duration=1.0, version=8, files=1),
    6: JobFinished(job_id=6, duration=1.0, version=8, files=1, bytes_reclaimed=1234),
}


def by_run(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        out.setdefault(e["run"]["facets"]["freshet"]["jobId"], []).append(e)
    return out


# ------------------------------------------------------------------------------ tests
def test_lineage_is_off_unless_configured(tmp_path):
    cfg = config(tmp_path, None)
    em = LineageEmitter(cfg, CollectorRegistry())
    assert cfg.lineage is None and not em.enabled and em._thread is None
    em.started(jobs()[0], T0)  # a no-op, no error
    em.close()


@pytest.mark.parametrize(("section", "says"), [
    ({"transport": "http"}, "lineage: transport http needs `url`"),
    ({"transport": "http", "url": "marquez:5000"}, "http(s)://"),
    ({"transport": "kafka", "url": "x"}, "lineage.transport: Input should be 'http', 'file' or 'console'"),
    ({"transport": "file"}, "transport file needs `url`, the path"),
    ({"transport": "console", "url": "http://x"}, "transport console takes no `url`"),
    ({"transport": "file", "url": "/tmp/x", "api_key_env": "K"}, "api_key_env is for transport http only"),
    ({"transport": "http", "url": "http://m:5000", "api_key_env": "my key"}, "must name an environment variable"),
    ({"transport": "http", "url": "http://m:5000", "buffer": 0}, "lineage.buffer"),
    ({"transport": "http", "url": "http://m:5000", "colour": 1}, "lineage.colour"),
])
def test_a_bad_lineage_section_is_a_clear_config_error(tmp_path, section, says):
    with pytest.raises(ConfigError) as err:
        config(tmp_path, section)
    assert says in str(err.value)


def test_an_unset_api_key_variable_stops_the_start_with_its_name(tmp_path, monkeypatch):
    monkeypatch.delenv("FRESHET_TEST_OL_KEY", raising=False)
    cfg = config(tmp_path, {"transport": "http", "url": "http://127.0.0.1:9", "api_key_env": "FRESHET_TEST_OL_KEY"})
    with pytest.raises(ConfigError, match="FRESHET_TEST_OL_KEY is not set"):
        LineageEmitter(cfg, CollectorRegistry())


def test_dataset_names_follow_openlineage_naming():
    assert dataset_id("/data/wh/m_raw") == ("file", "/data/wh/m_raw")
    assert dataset_id("file:///data/wh/m_raw") == ("file", "/data/wh/m_raw")
    assert dataset_id("s3a://bucket/wh/m_raw") == ("s3://bucket", "wh/m_raw")
    assert dataset_id("abfss://c@acct.dfs.core.windows.net/wh/t") == ("abfss://c@acct.dfs.core.windows.net", "wh/t")


def test_every_kind_of_job_over_http_is_valid_openlineage_with_its_lineage(tmp_path, receiver, monkeypatch):
    rx = receiver()
    monkeypatch.setenv("FRESHET_TEST_OL_KEY", "s3cret")
    cfg = config(tmp_path, {"transport": "http", "url": rx.url, "namespace": "netmon",
                            "api_key_env": "FRESHET_TEST_OL_KEY"})
    reg = CollectorRegistry()
    em = LineageEmitter(cfg, reg)
    started = T0 + 10 * MINUTE
    for job in jobs():
        em.started(job, started)
    for job in jobs():
        ev = OUTCOMES[job.job_id]
        (em.finished if isinstance(ev, JobFinished) else em.failed)(job, ev, started + 5)
    assert em.flush(10)
    em.close()

    assert len(rx.bodies) == 12 and metric(reg, "freshet_lineage_events_sent_total") == 12
    assert {h["Authorization"] for h in rx.headers} == {"Bearer s3cret"}
    for body in rx.bodies:
        validate(body)
    runs = by_run(rx.bodies)
    for job_id, (start, end) in runs.items():
        assert start["eventType"] == "START" and start["run"]["runId"] == end["run"]["runId"]
        assert end["eventType"] == ("FAIL" if job_id == 4 else "COMPLETE")
        assert start["job"]["namespace"] == "netmon"
    assert len({e["run"]["runId"] for e in rx.bodies}) == 6
    wh = str(tmp_path / "data")

    # a base job: the stream's landing directory, the partitions it loaded with their ids
    start, end = runs[1]
    assert end["job"]["name"] == "m_raw"
    [inp] = end["inputs"]
    assert (inp["namespace"], inp["name"]) == ("file", str(tmp_path / "landing" / "m"))
    parts = inp["inputFacets"]["subset"]["inputCondition"]["partitions"]
    assert [p["identifier"] for p in parts] == ["m-0000", "m-0001"]
    assert parts[0]["dimensions"] == {"start": "2025-11-24T16:00:00Z", "end": "2025-11-24T16:01:00Z", "rows": 4}
    [out] = end["outputs"]
    assert (out["namespace"], out["name"]) == ("file", f"{wh}/m_raw")
    assert out["facets"]["version"]["datasetVersion"] == "3"
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 8
    assert "version" not in start["outputs"][0].get("facets", {})  # not known before it commits
    nominal = end["run"]["facets"]["nominalTime"]
    assert nominal == {**nominal, "nominalStartTime": "2025-11-24T16:00:00.000Z",
                       "nominalEndTime": "2025-11-24T16:02:00.000Z"}
    fr = end["run"]["facets"]["freshet"]
    assert fr["kind"] == "base" and fr["priority"] == 1 and not fr["timeSlice"]
    assert fr["stalenessBeforeSeconds"] == 10 * MINUTE  # F was T0, the job started at T0 + 10 min
    assert fr["expectedStalenessAfterSeconds"] == 8 * MINUTE + 3.0  # τ + E(n) − F_new
    assert runs[2][0]["run"]["facets"]["freshet"]["timeSlice"] is True

    # a derived window: each source at the exact version read, the SQL
    end = runs[3][1]
    [inp] = end["inputs"]
    assert (inp["name"], inp["facets"]["version"]["datasetVersion"]) == (f"{wh}/m_raw", "3")
    assert end["outputs"][0]["facets"]["version"]["datasetVersion"] == "7"
    assert "SELECT" in end["job"]["facets"]["sql"]["query"]
    assert end["job"]["facets"]["jobType"]["jobType"] == "DERIVED"

    # a failed SQL-change rewrite: FAIL with the error, the sources it would have read
    end = runs[4][1]
    assert end["run"]["facets"]["errorMessage"]["message"].startswith("AnalysisException")
    assert end["run"]["facets"]["freshet"]["reasons"] == ["sql"]
    assert sorted(i["name"] for i in end["inputs"]) == [f"{wh}/a_raw", f"{wh}/m_raw"]
    assert "outputStatistics" not in end["outputs"][0].get("outputFacets", {})

    # OPTIMIZE and VACUUM: runs of the table's job, its new version as the output
    for job_id, kind in ((5, "optimize"), (6, "vacuum")):
        end = runs[job_id][1]
        assert end["run"]["facets"]["freshet"]["kind"] == kind and end["inputs"] == []
        assert end["outputs"][0]["facets"]["version"]["datasetVersion"] == "8"


def test_a_failing_endpoint_is_retried_in_order(tmp_path, receiver):
    rx = receiver(fail=3)
    cfg = config(tmp_path, {"transport": "http", "url": rx.url, "retries": 5})
    reg = CollectorRegistry()
    em = LineageEmitter(cfg, reg)
    job = jobs()[0]
    em.started(job, T0)
    em.finished(job, OUTCOMES[1], T0 + 2)
    assert em.flush(15)
    em.close()
    assert rx.requests == 5  # three 503s, then both events
    assert [b["eventType"] for b in rx.bodies] == ["START", "COMPLETE"]
    assert metric(reg, "freshet_lineage_events_dropped_total", reason="undeliverable") == 0


def test_an_endpoint_that_stays_down_drops_after_the_retries_and_counts(tmp_path, receiver):
    rx = receiver()
    url = rx.url
    rx.close()  # nothing listens there any more: connection refused
    cfg = config(tmp_path, {"transport": "http", "url": url, "retries": 1})
    reg = CollectorRegistry()
    em = LineageEmitter(cfg, reg)
    em.started(jobs()[0], T0)
    em.started(jobs()[2], T0)
    assert em.flush(10)
    em.close()
    assert metric(reg, "freshet_lineage_events_dropped_total", reason="undeliverable") == 2
    assert metric(reg, "freshet_lineage_events_sent_total") == 0


def test_a_hanging_endpoint_never_delays_the_caller(tmp_path, receiver):
    """The scheduler loop's calls return at once while the receiver holds every request: the
    buffer fills, what does not fit is dropped and counted, and the sender stops promptly."""
    rx = receiver(hang=True)
    cfg = config(tmp_path, {"transport": "http", "url": rx.url, "timeout": "20s", "buffer": 10, "retries": 0})
    reg = CollectorRegistry()
    em = LineageEmitter(cfg, reg)
    job = jobs()[2]
    slowest = 0.0
    t0 = time.perf_counter()
    for i in range(500):
        t = time.perf_counter()
        em.started(job, T0 + i)
        em.finished(job, OUTCOMES[3], T0 + i + 1)
        slowest = max(slowest, time.perf_counter() - t)
    total = time.perf_counter() - t0
    deadline = time.time() + 5
    while rx.requests == 0 and time.time() < deadline:
        time.sleep(0.01)
    assert rx.requests == 1  # the one in flight, held by the receiver
    # a call that waited on the receiver would take its 20-s timeout; a loaded machine may pause any call briefly
    assert slowest < 2.0 and total < 10.0, (slowest, total)
    dropped = metric(reg, "freshet_lineage_events_dropped_total", reason="buffer_full")
    assert 1000 - 10 - 1 <= dropped <= 1000 - 10
    t = time.perf_counter()
    em.close(timeout=0.2)
    assert time.perf_counter() - t < 2.0


def test_the_file_transport_appends_one_valid_event_per_line(tmp_path):
    path = tmp_path / "lineage.jsonl"
    cfg = config(tmp_path, {"transport": "file", "url": str(path)})
    em = LineageEmitter(cfg, CollectorRegistry())
    for job in jobs():
        em.started(job, T0)
    assert em.flush(10)
    em.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 6
    for line in lines:
        validate(json.loads(line))


def test_run_event_is_the_one_builder(tmp_path):
    """The schema check itself can fail: a broken event does not pass `validate`."""
    cfg = config(tmp_path, {"transport": "console"})
    assert cfg.lineage is not None
    ev = json.loads(Serde.to_json(run_event(cfg, cfg.lineage, jobs()[0], "0190e7b4-4b6a-7f3c-9a5e-1d2c3b4a5f60",
                                            T0, T0)))
    validate(ev)
    ev["run"]["facets"]["nominalTime"].pop("nominalStartTime")
    with pytest.raises(Exception, match="nominalStartTime"):
        validate(ev)


@pytest.mark.spark
def test_a_real_job_reports_the_delta_versions_it_read_and_wrote(spark, tmp_path):
    """Base and derived jobs through the real Scheduler and Executor: each COMPLETE names the
    version its commit made in the Delta log, and a derived job the source version it pinned."""
    from tests.conftest import write_minutes
    from tests.helpers_ops import run_until_idle
    from warehouse.lake.executor import Executor
    from warehouse.lake.recovery import delta_log, recover
    from warehouse.landing.intake import Intake
    from warehouse.scheduler import Scheduler

    path = tmp_path / "lineage.jsonl"
    cfg = config(tmp_path, {"transport": "file", "url": str(path)})
    write_minutes(cfg, "m", 0, 6)
    write_minutes(cfg, "a", 0, 6)
    em = LineageEmitter(cfg, CollectorRegistry())

    class Emitting(Executor):
        def execute(self, job: StartJob) -> JobFinished | JobFailed:
            em.started(job, time.time())
            ev = super().execute(job)
            (em.finished if isinstance(ev, JobFinished) else em.failed)(job, ev)  # type: ignore[arg-type]
            return ev

    state = recover(cfg, delta_log(cfg, spark))
    report, _ = run_until_idle(cfg, spark, intake=Intake(cfg, state), executor=Emitting(cfg, spark, state),
                               scheduler=Scheduler(cfg, now=time.time(), recovered=state.recovered))
    assert report.failed == 0 and em.flush(10)
    em.close()
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for e in events:
        validate(e)
    done = [e for e in events if e["eventType"] == "COMPLETE"]
    assert len(done) == report.jobs and len(events) == 2 * report.jobs

    def commit(table: str, version: str) -> dict[str, Any]:
        log = Path(table_path(cfg, table)) / "_delta_log" / f"{int(version):020d}.json"
        info = next(json.loads(x)["commitInfo"] for x in log.read_text().splitlines() if "commitInfo" in x)
        return json.loads(info["userMetadata"])

    derived = 0
    for e in done:
        table, fr = e["job"]["name"], e["run"]["facets"]["freshet"]
        meta = commit(table, e["outputs"][0]["facets"]["version"]["datasetVersion"])
        assert meta["job_id"] == fr["jobId"]  # the version named is the one this job committed
        if fr["kind"] == "derived":
            derived += 1
            for inp in e["inputs"]:
                src = Path(inp["name"]).name
                assert int(inp["facets"]["version"]["datasetVersion"]) == meta["sources"][src]
        else:
            ids = [p["identifier"] for p in e["inputs"][0]["inputFacets"]["subset"]["inputCondition"]["partitions"]]
            assert ids and set(ids) <= set(meta["partitions"])
    assert derived >= 2


@pytest.mark.spark
@pytest.mark.slow
def test_the_daemon_loads_while_the_lineage_endpoint_hangs_and_reports_once_it_answers(tmp_path, receiver):
    """`freshet run` with a lineage endpoint that holds every request: partitions are loaded as
    without lineage, the events that do not fit the buffer are dropped and counted on /metrics;
    once the endpoint answers, the held and queued events arrive and new jobs are reported."""
    import os
    import random
    import signal
    import subprocess
    import sys

    import httpx
    import yaml

    from ops.demo import generate, partition_id, write_partition
    from tests.helpers_live import free_port, wait_for
    from warehouse.config import load_config

    root = Path(__file__).resolve().parents[1]
    rx = receiver(hang=True)
    port = free_port()
    raw = yaml.safe_load((root / "examples" / "netmon.yaml").read_text())
    raw["warehouse"] = {"root": str(tmp_path / "data"), "landing": str(tmp_path / "landing")}
    raw["listen"] = f"127.0.0.1:{port}"
    raw["lineage"] = {"transport": "http", "url": rx.url, "namespace": "e2e", "buffer": 1, "timeout": "5m",
                      "retries": 2}
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = load_config(path)
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(path), "--log-format", "json",
                             "--poll", "0.5"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)},
                            stdout=log, stderr=log)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)

    def alive() -> None:
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]

    def fresh(table: str, end: float) -> bool:
        alive()
        return {t["name"]: t for t in client.get("/v1/tables").json()["tables"]}[table]["freshness"] == end

    def dropped() -> float:
        return metric_of(client.get("/metrics").text, "freshet_lineage_events_dropped_total", reason="buffer_full")

    def land(stream: str, start: float, end: float) -> str:
        table = generate(cfg.stream(stream), start, end, random.Random(int(end)))
        pid = partition_id(end)
        write_partition(cfg.warehouse.landing, stream, pid, start, end, table)
        return pid

    try:
        wait_for("/readyz", lambda: (alive(), client.get("/readyz").status_code == 200)[1], timeout=300, every=0.5)
        t = (time.time() // 300) * 300 - 600
        land("router_cpu", t - 300, t)
        land("link_alerts", t - 60, t)
        began = time.monotonic()
        wait_for("both base tables loaded", lambda: fresh("cpu_raw", t) and fresh("alerts_raw", t), timeout=240)
        loaded_in = time.monotonic() - began
        assert rx.requests == 1 and not rx.bodies  # the first START, held by the endpoint
        assert dropped() >= 2  # 2 jobs = 4 events at least: one held, one queued, the rest dropped

        rx.release.set()  # the endpoint answers again: the held and the queued event arrive
        wait_for("the held events", lambda: len(rx.bodies) >= 2, timeout=60)
        pid = land("router_cpu", t, t + 300)

        def loads_pid(b: dict) -> bool:  # the COMPLETE of the cpu_raw job that loaded `pid`
            return (b["eventType"] == "COMPLETE" and b["job"]["name"] == "cpu_raw"
                    and b["run"]["facets"]["freshet"]["jobId"] > 0 and bool(b["inputs"])
                    and pid in [p["identifier"] for p in b["inputs"][0]["inputFacets"]["subset"]["inputCondition"]
                                ["partitions"]])

        wait_for("the next cpu_raw job reported", lambda: any(loads_pid(b) for b in list(rx.bodies)), timeout=240)
        sent = metric_of(client.get("/metrics").text, "freshet_lineage_events_sent_total")
        assert 2 <= sent <= len(rx.bodies)  # (a burst of jobs at once may still overflow a buffer of 1)
        for b in list(rx.bodies):
            validate(b)
            assert b["job"]["namespace"] == "e2e"
        # (not the first cpu_raw COMPLETE that got through: the queued event may be the table's first
        # load, Delta version 0 — which event the full buffer kept is a matter of timing)
        done = next(b for b in list(rx.bodies) if loads_pid(b))
        assert int(done["outputs"][0]["facets"]["version"]["datasetVersion"]) >= 1  # cpu_raw had committed before
        assert done["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] > 0
        print(f"base tables loaded in {loaded_in:.1f} s with the lineage endpoint hanging")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        client.close()
        log.close()


def metric_of(text: str, name: str, **labels: str) -> float:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise AssertionError(f"no sample {name} {labels}")


def test_a_stateful_job_carries_its_increment_as_the_sql_facet(tmp_path):
    """A stateful table's jobs run its `increment` (lake.stateful): the SQL facet shows it."""
    inc = "SELECT k, count(*) AS n FROM m_raw WHERE ts > :window_start AND ts <= :window_end GROUP BY k"
    d = warehouse_dict(tmp_path)
    d["tables"].append({"name": "state", "kind": "stateful", "sources": ["m_raw"], "key": ["k"], "increment": inc,
                        "fold": {"n": "count"}})
    d["lineage"] = {"transport": "console"}
    cfg = parse_config(d)
    assert cfg.lineage is not None
    job = StartJob(job_id=9, table="state", track=0, kind="derived", start=T0, end=T0 + MINUTE,
                   new_freshness=T0 + MINUTE, new_safe_freshness=T0 + MINUTE, sources=("m_raw",))
    ev = json.loads(Serde.to_json(run_event(cfg, cfg.lineage, job, "0190e7b4-4b6a-7f3c-9a5e-1d2c3b4a5f60", T0, T0)))
    validate(ev)
    assert ev["job"]["facets"]["sql"]["query"] == inc


def test_runs_in_flight_at_a_sigkill_are_aborted_after_the_restart(tmp_path, receiver):
    """A process STARTs two runs, completes one and is killed (SIGKILL). The next daemon finds
    the other one open (`_freshet/lineage_runs.json`) and closes it with ABORT and why — a valid
    OpenLineage event with the same run id; the completed run is not touched, and a third start
    has nothing left to close."""
    import os
    import signal
    import subprocess
    import sys

    import yaml

    from warehouse.config import load_config

    rx = receiver()
    d = warehouse_dict(tmp_path)
    d["lineage"] = {"transport": "http", "url": rx.url, "namespace": "e2e"}
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(d))
    child = (
        "import os, signal, sys\n"
        "from prometheus_client import CollectorRegistry\n"
        "from ops.lineage import LineageEmitter\n"
        "from tests.test_lineage import OUTCOMES, jobs\n"
        "from warehouse.config import load_config\n"
        "em = LineageEmitter(load_config(sys.argv[1]), CollectorRegistry())\n"
        "j = {job.job_id: job for job in jobs()}\n"
        "em.started(j[1], 1.0e9); em.started(j[3], 1.0e9); em.ended(j[3], OUTCOMES[3], 1.0e9 + 4)\n"
        "assert em.flush(30)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", child, str(path)], cwd=root, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(root)}, timeout=60)
    assert r.returncode == -signal.SIGKILL, r.stderr
    before = [(b["eventType"], b["run"]["facets"]["freshet"]["jobId"]) for b in rx.bodies]
    assert before == [("START", 1), ("START", 3), ("COMPLETE", 3)]
    left = json.loads((tmp_path / "data" / "_freshet" / "lineage_runs.json").read_text())["runs"]
    assert list(left) == [rx.bodies[0]["run"]["runId"]]  # the completed run left the file

    em = LineageEmitter(load_config(path), CollectorRegistry())  # the restarted daemon
    try:
        assert em.close_abandoned(1.0e9 + 60) == 1
        assert em.flush(10)
    finally:
        em.close()
    abort = rx.bodies[-1]
    validate(abort)
    assert len(rx.bodies) == 4 and abort["eventType"] == "ABORT"
    assert abort["run"]["runId"] == rx.bodies[0]["run"]["runId"]
    assert (abort["job"]["namespace"], abort["job"]["name"]) == ("e2e", "m_raw")
    assert "daemon stopped while this job ran" in abort["run"]["facets"]["errorMessage"]["message"]
    assert json.loads((tmp_path / "data" / "_freshet" / "lineage_runs.json").read_text())["runs"] == {}
    again = LineageEmitter(load_config(path), CollectorRegistry())
    assert again.close_abandoned(1.0e9 + 120) == 0
    again.close()
    assert len(rx.bodies) == 4


@pytest.mark.spark
@pytest.mark.slow
def test_a_daemon_killed_mid_job_aborts_the_run_after_its_restart(tmp_path, receiver):
    """`freshet run` with lineage: a derived job that takes seconds (its SQL sleeps in the JVM) is
    STARTed, the daemon and its JVM are SIGKILLed; the restarted daemon sends ABORT for that run
    (the same run id) before it runs the job again as a new run."""
    import os
    import signal
    import subprocess
    import sys

    import httpx
    import yaml

    from tests.conftest import write_minutes
    from tests.helpers_live import free_port, wait_for
    from warehouse.config import load_config

    root = Path(__file__).resolve().parents[1]
    rx = receiver()
    port = free_port()
    slow = ("SELECT ts, n, reflect('java.lang.Thread', 'sleep', CAST(6000 AS BIGINT)) AS slept "
            "FROM (SELECT max(ts) AS ts, count(*) AS n FROM m_raw) WHERE n > 0")
    raw = warehouse_dict(tmp_path, tracks=1, extra_tables=[{"name": "slow_m", "sources": ["m_raw"], "priority": 100,
                                                            "sql": slow}])
    raw["listen"] = f"127.0.0.1:{port}"
    raw["lineage"] = {"transport": "http", "url": rx.url, "namespace": "e2e"}
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = load_config(path)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)

    def start(name: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(path), "--log-format",
                                 "json", "--poll", "0.3"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)},
                                stdout=(tmp_path / f"{name}.log").open("w"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        wait_for(f"{name} ready", lambda: proc.poll() is None and client.get("/readyz").status_code == 200,
                 timeout=300)
        return proc

    def events(kind: str, job: str) -> list[dict[str, Any]]:
        return [b for b in list(rx.bodies) if b["eventType"] == kind and b["job"]["name"] == job]

    first = start("first")
    second = None
    try:
        write_minutes(cfg, "m", 0, 1)
        (started,) = wait_for("slow_m's job STARTed", lambda: events("START", "slow_m"), timeout=180, every=0.1)
        assert not events("COMPLETE", "slow_m")  # it sleeps 6 s in the JVM: still running
        os.killpg(first.pid, signal.SIGKILL)  # the daemon and its Spark JVM, mid-job
        first.wait(30)
        run_id = started["run"]["runId"]
        assert run_id in json.loads((tmp_path / "data" / "_freshet" / "lineage_runs.json").read_text())["runs"]

        second = start("second")
        (abort,) = wait_for("the ABORT of the killed run", lambda: events("ABORT", "slow_m"), timeout=60)
        validate(abort)
        assert abort["run"]["runId"] == run_id and abort["job"]["namespace"] == "e2e"
        assert "daemon stopped while this job ran" in abort["run"]["facets"]["errorMessage"]["message"]
        done = wait_for("slow_m run again, as a new run", lambda: events("COMPLETE", "slow_m"), timeout=180)
        assert all(d["run"]["runId"] != run_id for d in done)
        assert rx.bodies.index(abort) < rx.bodies.index(done[0])
        second.send_signal(signal.SIGTERM)
        assert second.wait(120) == 0
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)
        client.close()
