"""The HTTP API against a real uvicorn server on loopback, with a real HTTP client (httpx)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import conftest
import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ops.api import REJECTION_REASONS, ApiServer, create_app, load_token, parse_listen, parse_time
from ops.metrics import SnapshotHolder, register_metrics
from tests.helpers_ops import make_stats, make_table
from warehouse.errors import ConfigError
from warehouse.landing.intake import Intake

T0 = 1_700_000_000.0
TOKEN = "s3cret-token"
NOW = conftest.T0 + 86400.0  # the intake's clock: a day after the landing zone's partitions


class IntakeBackend:
    """The part of the daemon the API needs, over a real Intake on a temporary landing zone."""

    def __init__(self, config) -> None:
        from ops.actions import ActionStore, OperatorActions, store_path

        self.holder = SnapshotHolder()
        self.intake = Intake(config, clock=lambda: NOW)
        self.arrived: list = []
        self.queued: list = []  # operator actions validated and kept (the daemon's loop would apply them)
        self.actions = OperatorActions(ActionStore(store_path(config)), lambda: config, self.holder.get,
                                       self.queued.append, lambda table, action: None, lambda: NOW)

    def snapshot(self):
        return self.holder.get()

    def ready(self):
        return self.holder.ready()

    def standby(self):
        return self.holder.standby()

    def streams(self):
        return [s.name for s in self.intake.config.streams]

    def submit_partition(self, stream, manifest):
        sub = self.intake.submit(stream, manifest)
        if sub.arrived is not None:
            self.arrived.append(sub.arrived)
        return sub

    def operator_action(self, table, action, body):  # tests/test_actions.py covers these
        return self.actions.request(table, action, body)

    def actions_view(self, table):
        return self.actions.view(table)

    def status(self):  # what ops.backend.DaemonBackend answers, for a process that never reloaded
        ok, why = self.holder.ready()
        return {"ready": ok, "reason": why, "accepting": True, "reload": None, "autotune": None}


class Clock:
    t = T0 + 10

    def __call__(self) -> float:
        return self.t


class Server:
    def __init__(self, tmp: Path, **kw) -> None:
        self.config = conftest.make_config(tmp)
        self.landing = Path(self.config.warehouse.landing)
        self.backend = IntakeBackend(self.config)
        self.registry = CollectorRegistry()
        self.clock = Clock()
        register_metrics(self.registry, self.backend.holder.get, self.clock)
        app = create_app(self.backend, self.registry, clock=self.clock, **kw)
        self.srv = ApiServer(app, "127.0.0.1", 0)
        port = self.srv.start()
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)
        self._minute = 0

    def stage(self, stream: str = "m", pid: str | None = None) -> dict:
        """Put one partition's files in `landing/<stream>/<pid>/` (no manifest); its manifest, with id."""
        i = self._minute
        self._minute += 2  # gaps between windows
        (made,) = conftest.write_minutes(self.config, stream, i, 1, pid_prefix="staged-")
        d = self.landing / stream / made
        manifest = json.loads((d / "_partition.json").read_text())
        (d / "_partition.json").unlink()
        if pid is not None:
            d.rename(self.landing / stream / pid)
        return {"id": pid or made, **manifest}

    def rejected(self) -> dict[str, float]:
        fams = {f.name: f for f in text_string_to_metric_families(self.client.get("/metrics").text)}
        return {s.labels["reason"]: s.value for s in fams["freshet_api_requests_rejected"].samples
                if s.name.endswith("_total")}

    def close(self) -> None:
        self.client.close()
        self.srv.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("api"), token=TOKEN, max_body=2048)
    yield s.backend, s.client, s.clock, s
    s.close()


AUTH = {"Authorization": f"Bearer {TOKEN}"}
GOOD = {"id": "2024-01-01T00-05", "start": "2024-01-01T00:00:00Z", "end": "2024-01-01T00:05:00Z",
        "files": ["part-0.parquet"], "rows": 10}


def test_health_ready_and_no_snapshot(server):
    backend, client, _, _srv = server
    assert client.get("/healthz").json()["status"] == "ok"
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "not ready"
    r = client.get("/v1/tables")
    assert r.status_code == 503 and "not published" in r.json()["error"]
    backend.holder.set_ready(True)
    assert client.get("/readyz").status_code == 200


def test_a_standby_says_so_and_is_ready_only_when_asked_for_standbys(server):
    """`freshet run --standby` waiting for the lease: /readyz 503 "standby" (systemd, a load balancer),
    200 with ?standby=ok (Kubernetes: ready for rollouts; the Service routes by the pod's role)."""
    backend, client, _, _srv = server
    backend.holder.set_ready(False, "standby: warehouse in use by pid 7", standby=True)
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "standby" and "pid 7" in r.json()["error"]
    r = client.get("/readyz", params={"standby": "ok"})
    assert r.status_code == 200 and r.json()["status"] == "standby"
    backend.holder.set_ready(False, "starting")  # took the lease: not a standby, not ready yet
    assert client.get("/readyz", params={"standby": "ok"}).status_code == 503
    backend.holder.set_ready(True)
    assert client.get("/readyz", params={"standby": "ok"}).status_code == 200


def test_tables_stalest_first_with_request_time_staleness(server):
    backend, client, clock, _srv = server
    backend.holder.publish(make_stats(T0, [
        make_table("a", freshness=T0 - 5, priority=1, target_staleness=30, alpha=2.0, beta=0.5),
        make_table("b", freshness=T0 - 50, priority=3, state="running", running_job=9, running_track=1,
                   last_result="ok"),
        make_table("never", freshness=None),
    ]))
    clock.t = T0 + 10
    body = client.get("/v1/tables").json()
    names = [t["name"] for t in body["tables"]]
    assert names == ["b", "a", "never"]
    b, a, never = body["tables"]
    assert b["staleness"] == pytest.approx(60.0) and b["running_job"] == 9 and b["last_result"] == "ok"
    assert a["staleness"] == pytest.approx(15.0) and a["within_target"] is True
    assert a["alpha"] == 2.0 and a["beta"] == 0.5 and a["target_staleness"] == 30
    assert never["staleness"] is None and never["freshness_iso"] is None
    assert b["freshness_iso"].endswith("Z")
    clock.t = T0 + 40
    a2 = client.get("/v1/tables/a").json()
    assert a2["staleness"] == pytest.approx(45.0) and a2["within_target"] is False
    r = client.get("/v1/tables/nope")
    assert r.status_code == 404 and "'nope'" in r.json()["error"]
    tr = client.get("/v1/tracks").json()
    assert [t["track"] for t in tr["tracks"]] == [0, 1]
    assert tr["tracks"][1]["running_table"] == "b"
    assert tr["plan"]["partitioner"] == "proportional"


def test_metrics_endpoint_parses(server):
    backend, client, clock, _srv = server
    backend.holder.publish(make_stats(T0, [make_table("a", freshness=T0 - 5)]))
    clock.t = T0 + 1
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    fams = {f.name: f for f in text_string_to_metric_families(r.text)}
    (s,) = fams["freshet_table_staleness_seconds"].samples
    assert s.labels == {"table": "a"} and s.value == pytest.approx(6.0)


def test_post_partition_accepted(server):
    backend, client, _, srv = server
    body = srv.stage("m")
    r = client.post("/v1/streams/m/partitions", json=body, headers=AUTH)
    assert r.status_code == 202, r.text
    assert r.json() == {"stream": "m", "partition": body["id"], "status": "accepted"}
    ev = backend.arrived[-1]
    assert (ev.stream, ev.partition_id, ev.rows) == ("m", body["id"], 4)
    assert ev.end - ev.start == 60
    assert (srv.landing / "m" / body["id"] / "_partition.json").is_file()  # the manifest, written for restarts
    # epoch seconds work too; an exact re-delivery is a 200 no-op
    body = srv.stage("a")
    body = dict(body, start=parse_time(body["start"]), end=parse_time(body["end"]))
    r = client.post("/v1/streams/a/partitions", json=body, headers=AUTH)
    assert r.status_code == 202 and r.json()["partition"] == body["id"]
    r = client.post("/v1/streams/a/partitions", json=body, headers=AUTH)
    assert r.status_code == 200 and r.json() == {"stream": "a", "partition": body["id"], "status": "duplicate"}
    # an empty partition is valid: it advances freshness (§4.3); its id defaults to its end time
    (srv.landing / "a" / "20251124T170000Z").mkdir(parents=True)
    empty = {"start": "2025-11-24T16:59:00Z", "end": "2025-11-24T17:00:00Z", "files": [], "rows": 0}
    r = client.post("/v1/streams/a/partitions", json=empty, headers=AUTH)
    assert r.status_code == 202 and r.json()["partition"] == "20251124T170000Z"
    assert backend.arrived[-1].rows == 0


def _manifest(srv, **change):
    return {**srv.stage("m"), **change}


@pytest.mark.parametrize(("make", "status", "reason", "needle"), [
    (lambda s: {"json": s.stage()}, 401, "unauthorized", "missing bearer token"),
    (lambda s: {"json": s.stage(), "headers": {"Authorization": "Bearer wrong"}}, 403, "forbidden",
     "invalid bearer token"),
    (lambda s: {"content": b"{not json", "headers": AUTH}, 400, "bad_json", "malformed JSON"),
    (lambda s: {"json": _manifest(s, rows=-1), "headers": AUTH}, 422, "malformed", "bad field 'rows'"),
    (lambda s: {"json": _manifest(s, end="2023-12-31T00:00:00Z"), "headers": AUTH}, 422, "malformed",
     "is not after start"),
    (lambda s: {"json": _manifest(s, start="yesterday"), "headers": AUTH}, 422, "malformed",
     "bad field 'start': not an ISO-8601 time"),
    (lambda s: {"json": _manifest(s, files=["../../etc/passwd"]), "headers": AUTH}, 422, "outside_landing",
     "file outside the landing zone"),
    (lambda s: {"json": _manifest(s, extra=1), "headers": AUTH}, 422, "malformed", "unknown field(s) 'extra'"),
    (lambda s: {"json": [1, 2], "headers": AUTH}, 422, "malformed", "manifest rejected: malformed manifest"),
    (lambda s: {"json": _manifest(s, rows=5), "headers": AUTH}, 422, "bad_data", "row count"),
    (lambda s: {"json": _manifest(s, files=["nope.parquet"]), "headers": AUTH}, 422, "file_missing",
     "file missing"),
    (lambda s: {"json": {"start": 0, "files": [], "rows": 0}, "headers": AUTH}, 422, "malformed",
     "missing field(s) 'id' and 'end'"),
    (lambda s: {"json": dict(GOOD, id="../x"), "headers": AUTH}, 422, "bad_id", "bad partition id '../x'"),
    (lambda s: {"content": b"x" * 5000, "headers": AUTH}, 413, "body_too_large", "limit"),
    (lambda s: {"content": b"{}", "headers": {**AUTH, "content-type": "text/plain"}}, 415,
     "unsupported_media_type", "content type"),
])
def test_bad_requests_get_named_4xx_and_are_counted_and_logged(server, caplog, make, status, reason, needle):
    _backend, client, _, srv = server
    before = srv.rejected()
    with caplog.at_level(logging.WARNING, logger="freshet.api"):
        r = client.post("/v1/streams/m/partitions", **make(srv))
    assert r.status_code == status, r.text
    body = r.json()
    assert body["status"] == status and needle in body["error"]
    after = srv.rejected()
    assert after[reason] == before[reason] + 1
    assert sum(after.values()) == sum(before.values()) + 1
    (rec,) = [x for x in caplog.records if x.getMessage() == "request rejected"]
    assert rec.reason == reason and rec.status == status and rec.client.startswith("127.0.0.1:")
    assert needle in rec.error
    assert client.get("/healthz").status_code == 200  # the server carries on


def test_a_post_to_a_path_the_api_does_not_serve_is_counted(server, caplog):
    _b, client, _, srv = server
    before = srv.rejected()["no_route"]
    with caplog.at_level(logging.WARNING, logger="freshet.api"):
        r = client.post("/v1/streams/m/partition", json={}, headers=AUTH)
        assert r.status_code == 404 and r.json()["error"].startswith("POST /v1/streams/m/partition: Not Found")
        assert client.put("/v1/streams/m/partitions", json={}, headers=AUTH).status_code == 405
        r = client.get("/v1/nothing")  # a read is not a rejected request; its answer names the path too
        assert r.status_code == 404 and "GET /v1/nothing: Not Found" in r.json()["error"]
    assert srv.rejected()["no_route"] == before + 2
    assert [r.status for r in caplog.records if r.getMessage() == "request rejected"] == [404, 405]


def test_every_rejection_reason_is_exported_at_zero_from_the_first_scrape(tmp_path):
    srv = Server(tmp_path, token=TOKEN)
    try:
        assert srv.rejected() == dict.fromkeys(REJECTION_REASONS, 0.0)
    finally:
        srv.close()


@pytest.mark.parametrize(("change", "reason"), [
    ({"files": ["../staged-m-0000/part-0.parquet"]}, "file outside the landing zone"),
    ({"files": ["/etc/passwd"]}, "file outside the landing zone"),
    ({"end": "2025-11-24T15:00:00Z"}, "is not after start"),
    ({"rows": "many"}, "bad field 'rows'"),
    ({"id": "p 1"}, "bad partition id 'p 1'"),
])
def test_422s_that_name_a_partition_quarantine_it(server, change, reason):
    """These failed before the intake saw them, and left no trace."""
    _b, client, _, srv = server
    pid = change.get("id", None)
    body = {**srv.stage("m", pid=pid), **change}
    r = client.post("/v1/streams/m/partitions", json=body, headers=AUTH)
    assert r.status_code == 422 and reason in r.json()["error"] and "quarantined" in r.json()["error"]
    q = srv.landing / "_quarantine" / "m" / body["id"]
    assert reason in (q / "reason").read_text()
    assert json.loads((q / "_partition.json").read_text())["files"] == body["files"]  # what was sent
    assert (q / "part-0.parquet").is_file()


def test_already_pending_with_different_content_is_quarantined(server):
    _b, client, _, srv = server
    body = srv.stage("a")
    assert client.post("/v1/streams/a/partitions", json=body, headers=AUTH).status_code == 202
    other = dict(body, end=parse_time(body["end"]) + 1)
    r = client.post("/v1/streams/a/partitions", json=other, headers=AUTH)
    assert r.status_code == 422 and "already pending with different content" in r.json()["error"]
    q = srv.landing / "_quarantine" / "a" / body["id"]
    assert "already pending with different content" in (q / "reason").read_text()
    assert (srv.landing / "a" / body["id"] / "part-0.parquet").is_file()  # the pending one keeps its files
    assert srv.rejected()["conflict"] >= 1


def test_future_dated_and_overlapping_partitions_are_quarantined(server):
    _b, client, _, srv = server
    (srv.landing / "a" / "y2030").mkdir(parents=True)
    r = client.post("/v1/streams/a/partitions", headers=AUTH, json={
        "id": "y2030", "start": "2030-01-01T00:00:00Z", "end": "2030-01-01T00:05:00Z", "files": [], "rows": 0})
    assert r.status_code == 422 and "beyond the daemon's clock" in r.json()["error"]
    assert "max_future_skew" in (srv.landing / "_quarantine" / "a" / "y2030" / "reason").read_text()
    body = srv.stage("a")
    assert client.post("/v1/streams/a/partitions", json=body, headers=AUTH).status_code == 202
    (srv.landing / "a" / "again").mkdir(parents=True)
    r = client.post("/v1/streams/a/partitions", headers=AUTH, json=dict(body, id="again", files=[], rows=0))
    assert r.status_code == 422 and f"overlaps partition {body['id']} (" in r.json()["error"]
    assert srv.rejected()["future"] >= 1 and srv.rejected()["overlap"] >= 1


def post_at_once(base_url, bodies) -> list[int]:
    """POST each body from its own connection, released together; the statuses, sorted."""
    barrier = threading.Barrier(len(bodies))
    codes: list[int] = []

    def post(body):
        with httpx.Client(base_url=base_url, timeout=10) as c:
            barrier.wait()
            codes.append(c.post("/v1/streams/m/partitions", json=body, headers=AUTH).status_code)

    threads = [threading.Thread(target=post, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return sorted(codes)


def test_two_posts_of_one_partition_at_once(server):
    """One accept and one duplicate for the same content; one accept and one quarantine for other
    content (validation runs in parallel threads, the decision under the intake's lock)."""
    _b, client, _, srv = server
    for _ in range(5):
        body = srv.stage("m")
        assert post_at_once(client.base_url, [body, body]) == [200, 202]
        body = srv.stage("m")
        other = dict(body, end=parse_time(body["end"]) + 1)
        assert post_at_once(client.base_url, [body, other]) == [202, 422]


def test_healthz_stays_fast_while_a_partition_is_validated(tmp_path, held_validation):
    """The POST handler validated on the event loop, so /healthz waited behind it."""
    srv = Server(tmp_path, token=TOKEN)
    entered, release = held_validation
    body = srv.stage("m")
    result: list = []
    t = threading.Thread(target=lambda: result.append(srv.client.post("/v1/streams/m/partitions", json=body,
                                                                      headers=AUTH)))
    t.start()
    try:
        assert entered.wait(5)
        with httpx.Client(base_url=srv.client.base_url, timeout=2) as probe:
            t0 = time.perf_counter()
            assert probe.get("/healthz").status_code == 200
            assert time.perf_counter() - t0 < 1.0
            assert probe.get("/metrics").status_code == 200
    finally:
        release.set()
        t.join(10)
        srv.close()
    assert result[0].status_code == 202


def test_unknown_stream_is_404_and_names_known(server):
    _b, client, _, srv = server
    before = srv.rejected()["unknown_stream"]
    r = client.post("/v1/streams/mm/partitions", json=GOOD, headers=AUTH)
    assert r.status_code == 404
    assert "'mm'" in r.json()["error"] and "known streams: a, m" in r.json()["error"]
    assert srv.rejected()["unknown_stream"] == before + 1


def test_chunked_oversized_body_is_rejected(server):
    _b, client, _, _srv = server

    def gen():
        for _ in range(10):
            yield b"y" * 512

    r = client.post("/v1/streams/m/partitions", content=gen(), headers=AUTH)
    assert r.status_code == 413


def test_openapi_lists_endpoints(server):
    _b, client, _, _srv = server
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/metrics", "/healthz", "/readyz", "/v1/tables", "/v1/tracks", "/v1/streams/{stream}/partitions"):
        assert p in paths
    body = paths["/v1/streams/{stream}/partitions"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["required"] == ["start", "end", "files", "rows"]  # the landing zone's one schema


def test_helpers(tmp_path):
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen(":80") == ("127.0.0.1", 80)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    with pytest.raises(ConfigError, match="HOST:PORT"):
        parse_listen("localhost")
    assert parse_time("1970-01-01T00:01:00") == 60.0
    assert parse_time(5) == 5.0
    f = tmp_path / "tok"
    f.write_text("abc\n")
    assert load_token({"FRESHET_API_TOKEN_FILE": str(f)}) == "abc"
    assert load_token({}) is None
    with pytest.raises(ConfigError, match="cannot read"):
        load_token({"FRESHET_API_TOKEN_FILE": str(tmp_path / "missing")})


def test_freshet_status_renders_stalest_first(server, capsys):
    import argparse

    from ops.status import main as status_main

    backend, client, clock, _srv = server
    backend.holder.publish(make_stats(T0, [
        make_table("fresh", freshness=T0 - 1, target_staleness=60),
        make_table("late", freshness=T0 - 300, target_staleness=60, priority=5, inherited_priority=5),
    ]))
    clock.t = T0
    url = str(client.base_url)
    assert status_main(argparse.Namespace(url=url, json=False, timeout=5)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("late") and "5m00s" in out[1] and "!" in out[1]
    assert out[2].startswith("fresh") and "!" not in out[2]
    assert "1 over target: late" in out[-1]


def test_freshet_status_names_unreachable_daemon():
    import argparse

    from ops.status import main as status_main
    from warehouse.errors import FreshetError

    with pytest.raises(FreshetError, match="cannot reach the daemon at http://127.0.0.1:9"):
        status_main(argparse.Namespace(url="http://127.0.0.1:9", json=False, timeout=1))


def test_no_token_beyond_loopback_refuses_mutations(tmp_path):
    srv = Server(tmp_path, token=None, open_without_token=False)
    try:
        r = srv.client.post("/v1/streams/m/partitions", json=srv.stage())
        assert r.status_code == 403 and "FRESHET_API_TOKEN" in r.json()["error"]
        assert not srv.backend.arrived and srv.rejected()["forbidden"] == 1
    finally:
        srv.close()
