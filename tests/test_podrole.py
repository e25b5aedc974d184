"""ops.podrole against a stand-in Kubernetes API server on loopback (a real HTTP server, a real
client): the JSON merge patch of the pod's own labels with the service account's token, tried
again until the API server accepts it, the last role asked for left in place."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ops.podrole import LABEL, PodRole

ENV = {"FRESHET_POD_NAME": "freshet-7d9f-abcde", "FRESHET_POD_NAMESPACE": "wh"}


class ApiServer:
    """Answers PATCH /api/v1/namespaces/<ns>/pods/<pod> with the next status of `statuses`
    (then 200), recording each request."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses, self.requests = list(statuses), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_PATCH(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((self.path, dict(self.headers), json.loads(body)))
                status = outer.statuses.pop(0) if outer.statuses else 200
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b'{"kind": "Status", "message": "forbidden"}' if status != 200 else b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def account(tmp_path: Path) -> Path:
    (tmp_path / "token").write_text("sa-token\n")
    return tmp_path


def test_the_pod_labels_itself_with_its_service_account(account: Path) -> None:
    api = ApiServer([])
    try:
        role = PodRole(ENV, api=api.url, account=account)
        role.set("standby").join(5)
        role.set("leader").join(5)
        assert role.set("leader") is None  # no change, no request
    finally:
        api.close()
    assert [r[2] for r in api.requests] == [{"metadata": {"labels": {LABEL: "standby"}}},
                                            {"metadata": {"labels": {LABEL: "leader"}}}]
    path, headers, _ = api.requests[-1]
    assert path == "/api/v1/namespaces/wh/pods/freshet-7d9f-abcde"
    assert headers["Content-Type"] == "application/merge-patch+json"
    assert headers["Authorization"] == "Bearer sa-token"
    assert role.labelled == "leader"


def test_a_refused_label_is_tried_again_until_it_is_accepted(account: Path, caplog: pytest.LogCaptureFixture) -> None:
    api = ApiServer([403, 500])
    try:
        role = PodRole(ENV, api=api.url, account=account, retry=0.05)
        role.set("leader").join(5)
    finally:
        api.close()
    assert len(api.requests) == 3 and role.labelled == "leader"
    assert "could not label this pod freshet/role=leader" in caplog.text and "forbidden" in caplog.text


def test_a_newer_role_replaces_one_still_being_tried(account: Path) -> None:
    api = ApiServer([503] * 1000)
    try:
        role = PodRole(ENV, api=api.url, account=account, retry=0.05)
        first = role.set("leader")
        api.statuses.clear()  # the API server recovers; the pod has become a standby meanwhile
        role.set("standby").join(5)
        first.join(5)
    finally:
        api.close()
    assert not first.is_alive() and role.labelled == "standby"
    assert api.requests[-1][2] == {"metadata": {"labels": {LABEL: "standby"}}}


def test_off_the_cluster_nothing_is_asked() -> None:
    assert not PodRole({}).enabled and PodRole({}).set("leader") is None
    assert not PodRole({**ENV}).enabled  # no KUBERNETES_SERVICE_HOST: not in a pod
    assert PodRole({**ENV, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}).api == "https://10.0.0.1:443"
