"""Two daemons on one warehouse: the second refuses to start, naming the first; a
crashed owner's successor takes the lease over (at once on the same host, after the timeout from
another host); an owner whose lease was taken stops. Unit tests on `ops.lease` with real files,
then both daemons really running (`freshet run`, real Spark)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from conftest import MINUTE, T0, make_config, warehouse_dict, write_minutes

from ops.lease import LEASE_FILE, Lease, LeaseHeld, lease_path
from tests.helpers_live import free_port, wait_for

ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_lease_lives_in_the_warehouse_root(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    assert lease_path(cfg) == Path(cfg.warehouse.root) / LEASE_FILE


@pytest.mark.parametrize("root, where", [
    ("{tmp}/wh", "{tmp}/wh/_freshet.lease"), ("file://{tmp}/wh", "{tmp}/wh/_freshet.lease"),
    ("s3a://bucket/some/wh/", "s3a://bucket/some/wh/_freshet/lease"), ("s3a://bucket", "s3a://bucket/_freshet/lease"),
    ("hdfs://nn/wh", "{tmp}/landing/_freshet.lease")])
def test_the_lease_follows_the_root(tmp_path: Path, root: str, where: str) -> None:
    """A local root keeps the lease file; an s3a:// root (shared by daemons on several hosts, each
    with its own landing directory) has it as an object on the bucket; another URI, in the landing zone."""
    from ops.lease import open_lease
    from ops.lease_s3 import S3Lease
    from warehouse.config import parse_config

    src = warehouse_dict(tmp_path)
    src["warehouse"]["root"] = root.format(tmp=tmp_path)
    lease = open_lease(parse_config(src), "127.0.0.1:9464")
    assert str(lease.path) == where.format(tmp=tmp_path) and lease.listen == "127.0.0.1:9464"
    assert isinstance(lease, S3Lease) == root.startswith("s3a://")


def test_a_home_relative_root_is_one_lease_from_any_directory(tmp_path: Path, monkeypatch) -> None:
    """Defect 5: with `root: ~/wh` the lease was `~/wh/_freshet.lease` relative to the current
    directory, so two daemons started from two directories both took one and loaded the same
    tables. The lease, the tables and the actions store resolve the root the same way now."""
    from ops.actions import store_path
    from warehouse.config import parse_config
    from warehouse.lake.delta import table_path

    home = tmp_path / "home"
    (home / "wh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    src = warehouse_dict(tmp_path)
    src["warehouse"] = {"root": "~/wh", "landing": "~/landing"}
    cfg = parse_config(src)
    leases = []
    for cwd in ("one", "two"):
        (tmp_path / cwd).mkdir()
        monkeypatch.chdir(tmp_path / cwd)
        assert lease_path(cfg) == home / "wh" / LEASE_FILE
        assert Path(table_path(cfg, "m_raw")) == home / "wh" / "m_raw"
        assert store_path(cfg) == home / "wh" / "_freshet" / "actions.json"
        leases.append(Lease(lease_path(cfg), timeout=30, settle=0.0))
    leases[0].acquire()
    with pytest.raises(LeaseHeld, match="warehouse in use"):
        leases[1].acquire()
    leases[0].release()


@pytest.mark.parametrize("root, where", [
    ("file://{tmp}/wh", "{tmp}/wh"), ("file:{tmp}/wh", "{tmp}/wh"), ("file://localhost{tmp}/wh", "{tmp}/wh"),
    ("wh", "{tmp}/wh"), ("./x/../wh", "{tmp}/wh"), ("s3a://bucket/wh", None)])
def test_one_resolver_of_local_paths(tmp_path: Path, monkeypatch, root: str, where: str | None) -> None:
    from warehouse.paths import is_local, local_path

    monkeypatch.chdir(tmp_path)
    root = root.format(tmp=tmp_path)
    assert local_path(root) == (None if where is None else Path(where.format(tmp=tmp_path)))
    assert is_local(root) == (where is not None)


def test_a_second_owner_is_refused_with_the_holders_pid_host_and_api(tmp_path: Path) -> None:
    path = tmp_path / LEASE_FILE
    first = Lease(path, timeout=30, listen="127.0.0.1:9464")
    first.acquire()
    second = Lease(path, timeout=30)
    with pytest.raises(LeaseHeld) as e:
        second.acquire()
    msg = str(e.value)
    assert f"pid {os.getpid()}" in msg and socket.gethostname() in msg and "127.0.0.1:9464" in msg
    assert "warehouse in use" in msg
    first.release()
    assert json.loads(path.read_text())["state"] == "released"  # kept: its epoch goes on
    second.acquire()  # free again
    assert json.loads(path.read_text())["owner"] == second.owner


def test_a_crashed_owner_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    path = tmp_path / LEASE_FILE
    path.write_text(json.dumps({"owner": "x", "host": socket.gethostname(), "pid": dead_pid(), "helpers": [],
                                "renewed": time.time(), "timeout": 30}))
    lease = Lease(path, timeout=30, settle=0.0)
    lease.acquire()
    assert lease.took_over is not None and "is gone" in lease.took_over["reason"]
    assert json.loads(path.read_text())["owner"] == lease.owner


def test_an_owner_whose_jvm_still_runs_is_not_taken_over_at_once(tmp_path: Path) -> None:
    """The daemon died but its Spark JVM (a helper) lives: it may still commit."""
    path = tmp_path / LEASE_FILE
    path.write_text(json.dumps({"owner": "x", "host": socket.gethostname(), "pid": dead_pid(),
                                "helpers": [os.getpid()], "renewed": time.time(), "timeout": 30}))
    with pytest.raises(LeaseHeld):
        Lease(path, timeout=30, settle=0.0).acquire()


def test_another_hosts_lease_is_taken_over_only_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / LEASE_FILE
    clock = Clock()
    path.write_text(json.dumps({"owner": "other", "host": "elsewhere", "pid": 1, "renewed": clock.t, "timeout": 30}))
    lease = Lease(path, timeout=30, clock=clock, settle=0.0)
    clock.t += 29
    with pytest.raises(LeaseHeld, match="renewed 29.0 s ago"):
        lease.acquire()
    clock.t += 2
    lease.acquire()
    assert "last renewed 31 s ago" in lease.took_over["reason"]


def test_garbage_in_the_lease_file_is_stale(tmp_path: Path) -> None:
    path = tmp_path / LEASE_FILE
    path.write_text("{torn")
    lease = Lease(path, timeout=30, settle=0.0)
    lease.acquire()
    assert lease.took_over["reason"] == "the lease file is unreadable"


def test_an_owner_that_lost_its_lease_is_told(tmp_path: Path) -> None:
    path = tmp_path / LEASE_FILE
    clock = Clock()
    first = Lease(path, timeout=0.3, clock=clock)
    first.acquire()
    lost: list[str] = []
    clock.t += 10  # the owner stalled past its timeout: a successor takes over
    second = Lease(path, timeout=0.3, clock=clock, settle=0.0)
    second.acquire()
    first.start(lost.append)
    wait_for("the first owner notices", lambda: bool(lost), timeout=5, every=0.05)
    assert "warehouse in use" in lost[0]
    assert json.loads(path.read_text())["owner"] == second.owner  # the loser did not overwrite it
    first.release()
    assert path.exists()  # release removes only its own lease


def test_renewal_keeps_the_lease_fresh(tmp_path: Path) -> None:
    path = tmp_path / LEASE_FILE
    lease = Lease(path, timeout=0.3)
    lease.acquire()
    t1 = json.loads(path.read_text())["renewed"]
    lease.start(lambda m: None)
    wait_for("renewed", lambda: json.loads(path.read_text())["renewed"] > t1, timeout=5, every=0.05)
    lease.release()
    assert json.loads(path.read_text())["state"] == "released"


# ---------------------------------------------------------------- both daemons really running
def start_daemon(tmp: Path, cfg_path: Path, name: str) -> tuple[subprocess.Popen, Path]:
    log = tmp / f"{name}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("FRESHET_API_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(cfg_path), "--log-format",
                             "json", "--poll", "0.3", "--listen", f"127.0.0.1:{free_port()}"],
                            cwd=tmp, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def url_of(log: Path) -> str | None:
    for line in log.read_text().splitlines():
        if '"HTTP API listening"' in line:
            return "http://" + json.loads(line)["listen"]
    return None


@pytest.mark.spark
@pytest.mark.slow
def test_two_daemons_on_one_warehouse(tmp_path: Path) -> None:
    data = warehouse_dict(tmp_path, tracks=1)
    data["spark"]["master"] = "local[1]"
    cfg_path = tmp_path / "freshet.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    cfg = make_config(tmp_path, tracks=1)
    write_minutes(cfg, "m", 0, 2)
    a, a_log = start_daemon(tmp_path, cfg_path, "a")
    b = c = None
    try:
        wait_for("daemon A's API", lambda: a.poll() is None and url_of(a_log) is not None, timeout=60)
        # B, started while A runs, refuses at once: exit 1, naming A's pid and API, touching nothing
        b, b_log = start_daemon(tmp_path, cfg_path, "b")
        assert b.wait(60) == 1
        text = b_log.read_text()
        assert "warehouse in use" in text and f"pid {a.pid}" in text and url_of(a_log).removeprefix("http://") in text
        assert "Traceback" not in text and "starting Spark" not in text
        a_url = url_of(a_log)
        wait_for("A ready", lambda: a.poll() is None and httpx.get(a_url + "/readyz").status_code == 200, timeout=240)
        wait_for("A loads m", lambda: httpx.get(a_url + "/v1/tables/m_raw").json()["freshness"] == T0 + 2 * MINUTE,
                 timeout=120)
        # A crashes (SIGKILL: no clean release); its successor takes the lease over once A and
        # A's JVM are gone, and carries on loading
        a.send_signal(signal.SIGKILL)
        a.wait(30)
        held = json.loads(lease_path(cfg).read_text())
        assert held["pid"] == a.pid and held["helpers"], held  # the JVM was recorded
        wait_for("A's JVM exits", lambda: not any(_alive(p) for p in held["helpers"]), timeout=30)
        write_minutes(cfg, "m", 2, 1)
        c, c_log = start_daemon(tmp_path, cfg_path, "c")
        wait_for("C's API", lambda: c.poll() is None and url_of(c_log) is not None, timeout=60)
        c_url = url_of(c_log)
        wait_for("C loads m", lambda: c.poll() is None and httpx.get(c_url + "/v1/tables/m_raw").json()["freshness"]
                 == T0 + 3 * MINUTE, timeout=240)
        assert "took over the warehouse lease" in c_log.read_text()
        c.send_signal(signal.SIGTERM)
        assert c.wait(120) == 0
        released = json.loads(lease_path(cfg).read_text())  # a clean stop releases it, keeping its epoch
        assert released["state"] == "released" and released["pid"] == c.pid and released["epoch"] == 2, released
    finally:
        for p in (a, b, c):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")



def test_an_unwritable_lease_is_a_clear_error(tmp_path: Path) -> None:
    from warehouse.errors import FreshetError

    (tmp_path / "file").write_text("")
    with pytest.raises(FreshetError, match="cannot take the warehouse lease .*file/_freshet.lease"):
        Lease(tmp_path / "file" / LEASE_FILE).acquire()
