"""The HTTP API against a real uvicorn server on loopback, with a real HTTP client (httpx)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ops.api import ApiServer, Manifest, create_app, load_token, parse_listen, parse_time
from ops.metrics import SnapshotHolder, register_metrics
from ops.testing import make_stats, make_table
from warehouse.errors import ConfigError

T0 = 1_700_000_000.0
TOKEN = "s3cret-token"


class FakeBackend:
    def __init__(self) -> None:
        self.holder = SnapshotHolder()
        self.submitted: list[tuple[str, Manifest]] = []

    def snapshot(self):
        return self.holder.get()

    def ready(self):
        return self.holder.ready()

    def streams(self):
        return ["router_cpu", "flows"]

    def submit_partition(self, stream, manifest, raw):
        if manifest.id == "dup":
            raise ValueError("already loaded with different content")
        if manifest.id == "again":
            return None
        self.submitted.append((stream, manifest))
        return manifest.id


class Clock:
    t = T0 + 10

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="module")
def server():
    backend = FakeBackend()
    reg = CollectorRegistry()
    clock = Clock()
    register_metrics(reg, backend.holder.get, clock)
    app = create_app(backend, reg, token=TOKEN, max_body=2048, clock=clock)
    srv = ApiServer(app, "127.0.0.1", 0)
    port = srv.start()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
        yield backend, client, clock
    srv.stop()


AUTH = {"Authorization": f"Bearer {TOKEN}"}
GOOD = {"id": "2024-01-01T00-05", "start": "2024-01-01T00:00:00Z", "end": "2024-01-01T00:05:00Z",
        "files": ["part-0.parquet"], "rows": 10}


def test_health_ready_and_no_snapshot(server):
    backend, client, _ = server
    assert client.get("/healthz").json()["status"] == "ok"
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "not ready"
    r = client.get("/v1/tables")
    assert r.status_code == 503 and "not published" in r.json()["error"]
    backend.holder.set_ready(True)
    assert client.get("/readyz").status_code == 200


def test_tables_stalest_first_with_request_time_staleness(server):
    backend, client, clock = server
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
    backend, client, clock = server
    backend.holder.publish(make_stats(T0, [make_table("a", freshness=T0 - 5)]))
    clock.t = T0 + 1
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    fams = {f.name: f for f in text_string_to_metric_families(r.text)}
    (s,) = fams["freshet_table_staleness_seconds"].samples
    assert s.labels == {"table": "a"} and s.value == pytest.approx(6.0)


def test_post_partition_accepted(server):
    backend, client, _ = server
    r = client.post("/v1/streams/router_cpu/partitions", json=GOOD, headers=AUTH)
    assert r.status_code == 202, r.text
    assert r.json() == {"stream": "router_cpu", "partition": "2024-01-01T00-05", "status": "accepted"}
    stream, m = backend.submitted[-1]
    assert stream == "router_cpu" and m.rows == 10
    assert m.times()[1] - m.times()[0] == 300
    # epoch seconds work too; an exact re-delivery is a 200 no-op
    body = dict(GOOD, id="p2", start=T0, end=T0 + 60)
    r = client.post("/v1/streams/flows/partitions", json=body, headers=AUTH)
    assert r.status_code == 202 and r.json()["partition"] == "p2"
    assert backend.submitted[-1][1].times()[:2] == (T0, T0 + 60)
    r = client.post("/v1/streams/flows/partitions", json=dict(GOOD, id="again"), headers=AUTH)
    assert r.status_code == 200 and r.json()["status"] == "duplicate"
    # an empty partition is valid: it advances freshness (§4.3)
    r = client.post("/v1/streams/flows/partitions", json=dict(GOOD, id="empty", files=[], rows=0), headers=AUTH)
    assert r.status_code == 202 and backend.submitted[-1][1].files == []


@pytest.mark.parametrize(("kwargs", "status", "needle"), [
    ({"json": GOOD}, 401, "missing bearer token"),
    ({"json": GOOD, "headers": {"Authorization": "Bearer wrong"}}, 403, "invalid bearer token"),
    ({"content": b"{not json", "headers": AUTH}, 400, "malformed JSON"),
    ({"json": dict(GOOD, rows=-1), "headers": AUTH}, 422, "rows"),
    ({"json": dict(GOOD, end="2023-12-31T00:00:00Z"), "headers": AUTH}, 422, "end"),
    ({"json": dict(GOOD, start="yesterday"), "headers": AUTH}, 422, "start: not an ISO-8601 time"),
    ({"json": dict(GOOD, files=["../../etc/passwd"]), "headers": AUTH}, 422, "files"),
    ({"json": dict(GOOD, extra=1), "headers": AUTH}, 422, "extra"),
    ({"json": [1, 2], "headers": AUTH}, 422, "JSON object"),
    ({"json": dict(GOOD, id="dup"), "headers": AUTH}, 422, "'dup' rejected: already loaded"),
    ({"json": {k: v for k, v in GOOD.items() if k != "id"}, "headers": AUTH}, 422, "id: Field required"),
    ({"json": dict(GOOD, id="../x"), "headers": AUTH}, 422, "partition id"),
    ({"content": b"x" * 5000, "headers": AUTH}, 413, "limit"),
    ({"content": b"{}", "headers": {**AUTH, "content-type": "text/plain"}}, 415, "content type"),
])
def test_bad_requests_get_named_4xx(server, kwargs, status, needle):
    _backend, client, _ = server
    r = client.post("/v1/streams/router_cpu/partitions", **kwargs)
    assert r.status_code == status, r.text
    body = r.json()
    assert body["status"] == status and needle in body["error"]
    assert client.get("/healthz").status_code == 200  # the server carries on


def test_unknown_stream_is_404_and_names_known(server):
    _b, client, _ = server
    r = client.post("/v1/streams/router_cpuu/partitions", json=GOOD, headers=AUTH)
    assert r.status_code == 404
    assert "'router_cpuu'" in r.json()["error"] and "router_cpu" in r.json()["error"]


def test_chunked_oversized_body_is_rejected(server):
    _b, client, _ = server

    def gen():
        for _ in range(10):
            yield b"y" * 512

    r = client.post("/v1/streams/router_cpu/partitions", content=gen(), headers=AUTH)
    assert r.status_code == 413


def test_openapi_lists_endpoints(server):
    _b, client, _ = server
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/metrics", "/healthz", "/readyz", "/v1/tables", "/v1/tracks", "/v1/streams/{stream}/partitions"):
        assert p in paths


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

    backend, client, clock = server
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


def test_no_token_beyond_loopback_refuses_mutations():
    backend = FakeBackend()
    app = create_app(backend, CollectorRegistry(), token=None, open_without_token=False)
    srv = ApiServer(app, "127.0.0.1", 0)
    port = srv.start()
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/v1/streams/flows/partitions", json=GOOD, timeout=5)
        assert r.status_code == 403 and "FRESHET_API_TOKEN" in r.json()["error"]
        assert not backend.submitted
    finally:
        srv.stop()
