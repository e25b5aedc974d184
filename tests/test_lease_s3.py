"""The warehouse lease as an object on the bucket (`ops.lease_s3`), against moto's S3 server on
loopback (tests/helpers_s3.py), no Spark: take, renew, release; a second taker refused while the
holder renews; a takeover only after the object stayed unchanged for the timeout; of two racing
successors exactly one wins; a holder overwritten by a successor, or cut off from the endpoint,
is told it lost the lease before a successor may take it; `freshet run` on a held bucket refuses,
or with `--standby` waits and takes over."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import make_config, warehouse_dict
from prometheus_client.parser import text_string_to_metric_families

from ops.lease import Lease, LeaseHeld, open_lease, take_lease
from ops.lease_base import machine
from ops.lease_s3 import LEASE_KEY, S3Lease
from tests.helpers_live import free_port, wait_for
from tests.helpers_s3 import CREDENTIALS, S3Server, start_s3, stop_s3

ROOT = Path(__file__).resolve().parents[1]
KEY = f"wh/{LEASE_KEY}"
TIMEOUT = 1.0  # a holder that stops renewing
LIVE = 4.0  # a holder that renews: moto on a loaded machine may miss a few of its 0.4 s requests


def lease(server: S3Server, timeout: float = TIMEOUT, listen: str = "") -> S3Lease:
    return S3Lease(server.client(), server.bucket, KEY, timeout=timeout, listen=listen)


def held(server: S3Server) -> dict[str, Any]:
    return json.loads(server.client().get_object(Bucket=server.bucket, Key=KEY)["Body"].read())


def put_foreign(server: S3Server, **fields: Any) -> str:
    """A lease object written by a daemon on another host."""
    record = {"owner": "elsewhere:1:x", "host": "elsewhere", "pid": 1, "machine": "other", "helpers": [],
              "listen": "10.0.0.9:9464", "epoch": 4, "seq": 1, "state": "held", **fields}
    return str(server.client().put_object(Bucket=server.bucket, Key=KEY, Body=json.dumps(record).encode())["ETag"])


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_take_renew_release_and_take_again(s3: S3Server) -> None:
    first = lease(s3, timeout=LIVE, listen="127.0.0.1:9464")
    first.acquire()
    record = held(s3)
    assert record["owner"] == first.owner and record["state"] == "held" and record["epoch"] == first.epoch == 1
    assert record["listen"] == "127.0.0.1:9464" and record["pid"] == os.getpid()
    assert first.took_over is None
    etag = first.etag
    lost: list[str] = []
    first.start(lost.append)
    wait_for("renewed", lambda: first.etag != etag and held(s3)["seq"] > record["seq"], timeout=5, every=0.05)
    assert first.fresh() and not lost
    first.release()
    assert held(s3)["state"] == "released" and held(s3)["epoch"] == 1  # kept, not deleted: epochs only grow
    second = lease(s3)
    began = time.monotonic()
    second.acquire()
    assert time.monotonic() - began < TIMEOUT  # a released lease is taken at once
    assert second.epoch == 2 and second.took_over is None and held(s3)["owner"] == second.owner
    second.release()


def test_a_second_taker_is_refused_while_the_holder_renews(s3: S3Server) -> None:
    first = lease(s3, timeout=LIVE, listen="127.0.0.1:9464")
    first.acquire()
    lost: list[str] = []
    first.start(lost.append)
    try:
        second = lease(s3, timeout=LIVE)
        began = time.monotonic()
        with pytest.raises(LeaseHeld) as e:
            second.acquire()
        assert time.monotonic() - began < LIVE  # refused as soon as a renewal is seen
        assert not lost
        msg = str(e.value)
        assert "warehouse in use" in msg and f"pid {os.getpid()}" in msg and "127.0.0.1:9464" in msg
        assert socket.gethostname() in msg and f"s3a://{s3.bucket}/{KEY}" in msg
        assert held(s3)["owner"] == first.owner
    finally:
        first.release()


def test_a_silent_holder_is_taken_over_after_the_timeout_on_the_takers_clock(s3: S3Server) -> None:
    """The holder's own `written` wall clock says "just now" (a clock an hour ahead): only the
    ETag staying unchanged for the timeout counts."""
    put_foreign(s3, written=time.time() + 3600)
    successor = lease(s3)
    began = time.monotonic()
    successor.acquire()
    assert time.monotonic() - began >= TIMEOUT
    assert successor.epoch == 5 and held(s3)["owner"] == successor.owner and held(s3)["epoch"] == 5
    assert "did not change for 1 s" in successor.took_over["reason"] and successor.took_over["host"] == "elsewhere"
    successor.release()


class Racer(S3Lease):
    """Ends its watch together with the other racer, so both send their takeover at once."""

    barrier = threading.Barrier(2, timeout=30)

    def _watch(self, etag: str, since: float) -> float | None:
        changed = super()._watch(etag, since)
        self.barrier.wait()
        return changed


def test_of_two_successors_racing_exactly_one_wins(s3: S3Server) -> None:
    put_foreign(s3)
    racers = [Racer(s3.client(), s3.bucket, KEY, timeout=TIMEOUT) for _ in range(2)]
    outcome: dict[str, str] = {}

    def take(r: S3Lease) -> None:
        try:
            r.acquire()
            outcome[r.owner] = "won"
        except LeaseHeld as e:
            outcome[r.owner] = str(e)

    threads = [threading.Thread(target=take, args=(r,)) for r in racers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    won = [r for r in racers if outcome.get(r.owner) == "won"]
    assert len(won) == 1, outcome
    lost = next(r for r in racers if r is not won[0])
    assert "took the lease first" in outcome[lost.owner]
    assert held(s3)["owner"] == won[0].owner and held(s3)["epoch"] == 5
    lost.release()  # releases nothing it does not hold
    assert held(s3)["owner"] == won[0].owner and held(s3)["state"] == "held"
    won[0].release()


def test_a_holder_overwritten_by_a_successor_is_told_and_writes_nothing(s3: S3Server) -> None:
    first = lease(s3)
    first.acquire()
    put_foreign(s3, epoch=2)  # a successor's conditional write landed (the holder had stalled)
    lost: list[str] = []
    first.start(lost.append)
    wait_for("the holder notices", lambda: bool(lost), timeout=5, every=0.05)
    assert "took over" in lost[0] and "host elsewhere" in lost[0] and "epoch 2" in lost[0]
    first.release()
    assert held(s3)["owner"] == "elsewhere:1:x"  # neither renewed nor released over the successor


def test_a_holder_cut_off_from_the_endpoint_stops_before_a_successor_may_take_over(tmp_path: Path) -> None:
    s3 = start_s3(tmp_path / "moto.log")  # a server of its own: this test stops it
    try:
        first = lease(s3)
        first.acquire()
        errors: list[Exception] = []
        lost: list[tuple[float, str]] = []
        first.start(lambda m: lost.append((time.monotonic(), m)), errors.append)
        stop_s3(s3)  # the endpoint is gone
        wait_for("the holder gives up", lambda: bool(lost), timeout=10, every=0.02)
        at, message = lost[0]
        assert errors  # each failed renewal was reported, then retried
        assert "no renewal" in message and not first.fresh()
        # the successor counts the timeout from when it saw the last write, sent at renewed_at or later
        assert TIMEOUT - first.margin <= at - first.renewed_at < TIMEOUT
    finally:
        stop_s3(s3)  # (again, if an assertion came first)


def test_a_crashed_owner_on_this_machine_is_taken_over_at_once(s3: S3Server) -> None:
    put_foreign(s3, host=socket.gethostname(), machine=machine(), pid=dead_pid())
    successor = lease(s3, timeout=30)
    began = time.monotonic()
    successor.acquire()
    assert time.monotonic() - began < 5 and "is gone" in successor.took_over["reason"]
    successor.release()


def test_same_host_name_on_another_machine_is_not_taken_over_at_once(s3: S3Server) -> None:
    """Two containers both named like this host: a pid recorded there means nothing here."""
    put_foreign(s3, host=socket.gethostname(), machine="another-boot/pid:[1]", pid=dead_pid())
    successor = lease(s3)
    began = time.monotonic()
    successor.acquire()
    assert time.monotonic() - began >= TIMEOUT and "did not change" in successor.took_over["reason"]
    successor.release()


# ---------------------------------------------------------------- the daemon's choice
def s3a_config(tmp: Path, server: S3Server, landing: str, timeout: float = TIMEOUT) -> Any:
    data = warehouse_dict(tmp)
    data["warehouse"] = {"root": f"s3a://{server.bucket}/wh", "landing": str(tmp / landing),
                         "s3": server.s3_settings(), "lease_timeout": timeout}
    return data


def test_two_daemons_on_one_bucket_from_two_landing_zones_take_one_lease(s3: S3Server, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Two hosts share the bucket, each with its own landing directory: before, each took a lease
    file in its landing zone and both started."""
    from warehouse.config import parse_config

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    a = parse_config(s3a_config(tmp_path, s3, "landing-a", timeout=LIVE))
    b = parse_config(s3a_config(tmp_path, s3, "landing-b", timeout=LIVE))
    assert isinstance(open_lease(make_config(tmp_path)), Lease)
    first = take_lease(a, "127.0.0.1:1", lambda m: None)
    try:
        assert isinstance(first, S3Lease) and (first.bucket, first.key) == (s3.bucket, KEY)
        assert held(s3)["listen"] == "127.0.0.1:1"
        with pytest.raises(LeaseHeld, match="warehouse in use"):
            take_lease(b, "127.0.0.1:2", lambda m: None)
        assert not list(tmp_path.glob("landing-*/_freshet.lease"))
    finally:
        first.release()


def test_freshet_run_on_a_held_bucket_refuses_naming_the_holder(s3: S3Server, tmp_path: Path) -> None:
    first = lease(s3, timeout=LIVE, listen="10.1.2.3:9464")
    first.acquire()
    first.start(lambda m: None)
    try:
        path = tmp_path / "freshet.yaml"
        path.write_text(yaml.safe_dump(s3a_config(tmp_path, s3, "landing", timeout=LIVE)))
        out = subprocess.run([sys.executable, "-m", "ops.cli", "run", "--config", str(path), "--listen",
                              "127.0.0.1:0"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                             env={**os.environ, **CREDENTIALS, "PYTHONPATH": str(ROOT)})
        assert out.returncode == 1, out.stderr[-3000:]
        assert "warehouse in use" in out.stderr and "10.1.2.3:9464" in out.stderr, out.stderr[-3000:]
        assert "Traceback" not in out.stderr and "starting Spark" not in out.stderr
    finally:
        first.release()


# ---------------------------------------------------------------- freshet run --standby
def start_standby(tmp: Path, server: S3Server, timeout: float) -> tuple[subprocess.Popen, str, Path]:
    path = tmp / "freshet.yaml"
    path.write_text(yaml.safe_dump(s3a_config(tmp, server, "landing-standby", timeout=timeout)))
    port = free_port()
    log = tmp / "standby.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--standby", "--config", str(path),
                                 "--listen", f"127.0.0.1:{port}", "--log-format", "json"], cwd=tmp, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **CREDENTIALS, "PYTHONPATH": str(ROOT)})
    return proc, f"http://127.0.0.1:{port}", log


def standby_gauge(url: str) -> float | None:
    """`freshet_standby` from the daemon's /metrics, read by Prometheus's own parser."""
    text = httpx.get(url + "/metrics", timeout=2).text
    return next((s.value for f in text_string_to_metric_families(text) for s in f.samples
                 if s.name == "freshet_standby"), None)


def standing_by(proc: subprocess.Popen, url: str, log: Path) -> bool:
    """/healthz 200; /readyz 503 "standby" (200 with ?standby=ok); `freshet_standby 1`."""
    assert proc.poll() is None, log.read_text()[-3000:]
    try:
        ready = httpx.get(url + "/readyz", timeout=2)
        return httpx.get(url + "/healthz", timeout=2).status_code == 200 and ready.status_code == 503 \
            and ready.json()["status"] == "standby" and ready.json()["error"].startswith("standby: warehouse in use") \
            and httpx.get(url + "/readyz?standby=ok", timeout=2).status_code == 200 and standby_gauge(url) == 1
    except httpx.TransportError:
        return False


def test_a_standby_daemon_waits_then_takes_over_within_the_timeout(s3: S3Server, tmp_path: Path) -> None:
    timeout = LIVE
    holder = lease(s3, timeout=timeout, listen="10.1.2.3:9464")
    holder.acquire()
    lost: list[str] = []
    holder.start(lost.append)
    proc, url, log = start_standby(tmp_path, s3, timeout)
    try:
        wait_for("standing by", lambda: standing_by(proc, url, log), timeout=60, every=0.2)
        assert "10.1.2.3:9464" in httpx.get(url + "/readyz").json()["error"]
        time.sleep(timeout)  # still standing by while the holder renews
        assert standing_by(proc, url, log) and held(s3)["owner"] == holder.owner and not lost
        holder.cancel()  # the holder stops renewing (a crash on another host)
        stopped = time.monotonic()
        wait_for("the standby takes over", lambda: held(s3)["pid"] == proc.pid, timeout=30, every=0.05)
        took = time.monotonic() - stopped
        # the holder renewed at most timeout/3 before it stopped; the standby then counts a whole
        # timeout from the moment it saw that last write, polling every timeout/10
        assert timeout * 2 / 3 - 0.1 <= took < timeout + 2.0, took
        print(f"the standby took over {took:.2f} s after the holder stopped renewing (timeout {timeout:g} s)")
        assert held(s3)["epoch"] == 2 and not holder.renew()
        wait_for("logged", lambda: "took over the warehouse lease" in log.read_text(), timeout=10)
        assert standby_gauge(url) == 0 and httpx.get(url + "/readyz?standby=ok").json()["status"] != "standby"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # it went on to start Spark: not this test's subject
            proc.wait(30)
        holder.release()


def test_a_standby_daemon_stops_at_once_on_sigterm(s3: S3Server, tmp_path: Path) -> None:
    holder = lease(s3, timeout=30, listen="10.1.2.3:9464")
    holder.acquire()
    holder.start(lambda m: None)
    proc, url, log = start_standby(tmp_path, s3, 30)
    try:
        wait_for("standing by", lambda: standing_by(proc, url, log), timeout=60, every=0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0, log.read_text()[-3000:]
        assert held(s3)["owner"] == holder.owner and "Traceback" not in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        holder.release()
