"""A real S3 API on loopback for the tests: moto's server mode (`moto[server]`), started as a child
process on a free port and stopped at the end, the way the tests start Prometheus.

moto implements the S3 REST API — buckets, multipart uploads, listing, and conditional PutObject
(`If-None-Match: *`, `If-Match: <ETag>`) — in memory: what the S3A connector, delta-rs and a lease
written with conditional requests need. `S3Server.client()` is a boto3 client on it;
`storage_options()` are delta-rs's options for reading the same bucket. One server serves a pytest
process (`s3_server`, in tests/conftest.py), a bucket of its own each test (`s3`).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers_live import free_port

BUCKET = "freshet-test"
# moto accepts any credentials; these are fixed test values, given to the daemon in its environment
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "freshet-test-key", "AWS_SECRET_ACCESS_KEY": "freshet-test-secret"}
REGION = "us-east-1"


@dataclass
class S3Server:
    """A running moto server and one bucket in it."""

    endpoint: str
    bucket: str
    proc: subprocess.Popen

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])

    def storage_options(self) -> dict[str, str]:
        """delta-rs (`deltalake`) options for `s3://<bucket>/…` on this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": REGION,
                "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", **CREDENTIALS}

    def s3_settings(self) -> dict[str, Any]:
        """The config's `warehouse.s3` section for this server."""
        return {"endpoint": self.endpoint, "region": REGION, "path_style": True, "credentials": "env"}

    def with_bucket(self, bucket: str) -> S3Server:
        """The same server, with `bucket` created on it."""
        self.client().create_bucket(Bucket=bucket)
        return S3Server(self.endpoint, bucket, self.proc)

    def keys(self, prefix: str = "") -> list[str]:
        c, keys, token = self.client(), [], None
        while True:
            kw = {"Bucket": self.bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
            page = c.list_objects_v2(**kw)
            keys += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return keys
            token = page["NextContinuationToken"]


def upload(server: S3Server, local: Path, prefix: str, stream: str, pids: list[str], *,
           manifest: bool = True) -> None:
    """Put partitions written under the local landing zone `local` into `<prefix>/<stream>/<pid>/`
    as a producer does: the data files first, then (`manifest`) `_partition.json`, last."""
    c = server.client()
    for pid in pids:
        d = local / stream / pid
        files = sorted(f for f in d.iterdir() if f.is_file() and f.name != "_partition.json")
        for f in files + ([d / "_partition.json"] if manifest else []):
            c.put_object(Bucket=server.bucket, Key=f"{prefix}/{stream}/{pid}/{f.name}", Body=f.read_bytes())


def start_s3(log: Path, bucket: str = BUCKET, timeout: float = 30.0) -> S3Server:
    """moto's server (tests/moto_serial: one request at a time) on 127.0.0.1:<free port>, with
    `bucket` created."""
    port = free_port()
    out = log.open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "tests.moto_serial", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **CREDENTIALS},
                            cwd=Path(__file__).resolve().parents[1])  # moto, one request at a time
    out.close()
    server = S3Server(f"http://127.0.0.1:{port}", bucket, proc)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"moto server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            server.client().create_bucket(Bucket=bucket)
            return server
        except Exception as e:  # noqa: BLE001 — not listening yet
            if time.monotonic() > deadline:
                stop_s3(server)
                raise AssertionError(f"moto server not answering on {server.endpoint} after {timeout}s: {e}") from e
            time.sleep(0.1)


def stop_s3(server: S3Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(10)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """This pytest process's moto server, started once (a start is 2.3-3.2 s here); each test gets
    a bucket of its own on it (`s3`)."""
    server = start_s3(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        stop_s3(server)


_buckets = itertools.count(1)


@pytest.fixture
def s3(s3_server: S3Server) -> S3Server:
    """A new, empty bucket `freshet-test-<n>` on the process's moto server, for one test (a test
    that stops its endpoint starts a server of its own: `start_s3`)."""
    if s3_server.proc.poll() is not None:
        raise AssertionError(f"the shared moto server exited with {s3_server.proc.returncode}")
    return s3_server.with_bucket(f"{BUCKET}-{next(_buckets)}")
