"""One writer per warehouse, provable from the Delta logs: every commit names the lease holder
that wrote it (`userMetadata.leader`: owner id and epoch), and a job whose holder may no longer
write — its last renewal older than where the holder stops — is refused immediately before its
write, writing nothing (`lake.commit`, `ops.lease_base.Fenced`).

The leases are real (a file; the object on moto's S3 server); the jobs run on real Spark and
Delta; a stub stands in for the lease only where the test is about the executor's own logic."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import MINUTE, T0, make_config, write_minutes

from ops.lease import LEASE_FILE, Lease
from ops.lease_base import machine
from ops.lease_s3 import LEASE_KEY, S3Lease
from tests.helpers_s3 import S3Server
from warehouse.events import JobFailed, JobFinished, PartitionArrived, StartJob
from warehouse.lake.delta import table_path
from warehouse.lake.executor import Executor
from warehouse.lake.outcome import JobRefused
from warehouse.lake.recovery import recover
from warehouse.landing.intake import Intake


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class StubLeader:
    """The executor's view of a lease (`lake.commit.Leader`) whose fence the test opens and shuts."""

    owner = "wh1:4242:0a1b2c3d"
    epoch = 7

    def __init__(self) -> None:
        self.why: str | None = None
        self.asked = 0

    def lapsed(self) -> str | None:
        self.asked += 1
        return self.why


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def base_job(job_id: int, arrivals: list[PartitionArrived], start: float, end: float) -> StartJob:
    return StartJob(job_id=job_id, table="m_raw", track=0, kind="base", start=start, end=end,
                    new_freshness=end, new_safe_freshness=end, arrivals=tuple(arrivals))


def derived_job(job_id: int, start: float, end: float) -> StartJob:
    return StartJob(job_id=job_id, table="m_5m", track=0, kind="derived", start=start, end=end,
                    new_freshness=end, new_safe_freshness=end, sources=("m_raw",))


def commit_metadata(path: str) -> list[dict[str, Any]]:
    """Each commit's `userMetadata` (parsed) in version order, from the table's Delta log."""
    out = []
    for f in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                out.append(json.loads(action["commitInfo"].get("userMetadata") or "{}"))
    return out


# ---------------------------------------------------------------- the leases, no Spark
def test_the_file_lease_has_an_epoch_that_rises_at_every_take(tmp_path: Path) -> None:
    path = tmp_path / LEASE_FILE
    first = Lease(path, timeout=30, settle=0.0)
    first.acquire()
    assert first.epoch == 1 and json.loads(path.read_text())["epoch"] == 1
    first.release()  # a clean stop keeps the file, released, so the epoch goes on
    record = json.loads(path.read_text())
    assert record["state"] == "released" and record["epoch"] == 1
    second = Lease(path, timeout=30, settle=0.0)
    second.acquire()
    assert second.epoch == 2 and second.took_over is None  # a released lease is no takeover
    assert json.loads(path.read_text())["owner"] == second.owner
    # its owner crashes: the successor on this host takes it at once, one epoch up
    path.write_text(json.dumps({**json.loads(path.read_text()), "pid": dead_pid(), "helpers": []}))
    third = Lease(path, timeout=30, settle=0.0)
    third.acquire()
    assert third.epoch == 3 and "is gone" in third.took_over["reason"]
    third.release()


def test_the_file_lease_fence_shuts_at_three_quarters_of_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / LEASE_FILE
    clock = Clock()
    lease = Lease(path, timeout=40, settle=0.0, monotonic=clock)
    assert lease.lapsed() is not None  # not taken yet
    lease.acquire()
    assert lease.lapsed() is None
    clock.t += 29.9  # renewals failing (a full disk): the holder may write until 3/4 of the timeout
    assert lease.lapsed() is None
    clock.t += 0.2
    why = lease.lapsed()
    assert why is not None and "30.1 s ago" in why and "lease_timeout 40 s" in why
    assert lease.renew() and lease.lapsed() is None  # a renewal that succeeds opens it again
    other = json.loads(path.read_text())
    path.write_text(json.dumps({**other, "owner": "elsewhere:1:x", "host": "elsewhere"}))  # a successor's
    assert not lease.renew()
    assert "does not hold the warehouse lease" in lease.lapsed()
    lease.release()
    assert json.loads(path.read_text())["owner"] == "elsewhere:1:x"  # released nothing it does not hold


def test_the_s3_lease_signs_with_its_own_epoch_and_is_fenced_by_its_renewals(s3: S3Server, tmp_path: Path) -> None:
    """The executor's writes carry the object lease's owner and epoch (2: taken after a release);
    once its last renewal is older than timeout − margin, the write is refused."""
    key = f"wh/{LEASE_KEY}"
    first = S3Lease(s3.client(), s3.bucket, key, timeout=30)
    first.acquire()
    first.release()  # released, not deleted: the next take is epoch 2
    clock = Clock()
    lease = S3Lease(s3.client(), s3.bucket, key, timeout=40, monotonic=clock)
    lease.acquire()
    assert (first.epoch, lease.epoch) == (1, 2)
    ex = Executor(make_config(tmp_path), None, leader=lease)
    assert ex.sign({"kind": "base", "freshness": 1.0}) == {
        "kind": "base", "freshness": 1.0, "leader": {"id": lease.owner, "epoch": lease.epoch}}
    held = json.loads(s3.client().get_object(Bucket=s3.bucket, Key=key)["Body"].read())
    assert (held["owner"], held["epoch"]) == (lease.owner, 2)  # the epoch carried is the object's
    clock.t += 29.9
    ex.fence()
    clock.t += 0.2  # timeout − margin = 30 s since the last renewal was sent
    with pytest.raises(JobRefused, match="refused before writing: the last renewal of the warehouse lease s3a://"):
        ex.sign({"kind": "base"})
    assert lease.renew()
    ex.fence()
    lease.release()
    with pytest.raises(JobRefused, match="does not hold the warehouse lease"):
        ex.fence()
    assert Executor(make_config(tmp_path), None).sign({"x": 1}) == {"x": 1}  # no lease, no fence, no leader


# ---------------------------------------------------------------- jobs on Spark and Delta
@pytest.mark.spark
def test_every_commit_names_its_leader(spark, s3: S3Server, tmp_path: Path) -> None:
    """A base append and a derived window, run by an executor holding a real object lease taken
    after a crashed holder's (epoch 2): each commit's `userMetadata` names that owner and epoch,
    and recovery reads the log as before."""
    key = f"wh/{LEASE_KEY}"
    s3.client().put_object(Bucket=s3.bucket, Key=key, Body=json.dumps({
        "owner": "gone:1:x", "host": socket.gethostname(), "machine": machine(), "pid": dead_pid(),
        "helpers": [], "epoch": 1, "seq": 1, "state": "held"}).encode())
    lease = S3Lease(s3.client(), s3.bucket, key, timeout=600)
    lease.acquire()
    assert lease.epoch == 2 and lease.took_over is not None
    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 5)
    arrivals = Intake(cfg).scan()
    ex = Executor(cfg, spark, leader=lease)
    try:
        assert isinstance(ex.execute(base_job(1, arrivals, T0, T0 + 5 * MINUTE)), JobFinished)
        assert isinstance(ex.execute(derived_job(2, T0, T0 + 5 * MINUTE)), JobFinished)
    finally:
        lease.release()
    leader = {"id": lease.owner, "epoch": 2}
    for table in ("m_raw", "m_5m"):
        metas = commit_metadata(table_path(cfg, table))
        assert metas and all(m["leader"] == leader for m in metas), (table, metas)
    state = recover(cfg)
    assert state.tables["m_raw"].freshness == state.tables["m_5m"].freshness == T0 + 5 * MINUTE
    # without a lease (tests, tools): no fence and no leader
    write_minutes(cfg, "m", 5, 1)
    late = [a for a in Intake(cfg, state).scan() if a.partition_id == "m-0005"]
    assert Executor(cfg, spark, state).run(base_job(3, late, T0 + 5 * MINUTE, T0 + 6 * MINUTE)).committed
    assert "leader" not in commit_metadata(table_path(cfg, "m_raw"))[-1]


@pytest.mark.spark
def test_a_job_whose_fence_shut_while_it_ran_writes_nothing_and_comes_back_refused(spark, tmp_path: Path,
                                                                                     monkeypatch) -> None:
    """The lease lapses while a base job reads its partitions (after it started, before it
    writes): the job is refused at its write — `JobFailed.refused`, its window known not
    committed — and the table has no commit. Once renewed, the same job commits."""
    import warehouse.lake.base as base_mod

    cfg = make_config(tmp_path)
    write_minutes(cfg, "m", 0, 5)
    arrivals = Intake(cfg).scan()
    leader = StubLeader()
    read = base_mod.read_partitions

    def reads(*args: Any, **kw: Any) -> Any:
        leader.why = "the last renewal of the warehouse lease succeeded 31.0 s ago"  # lapsed meanwhile
        return read(*args, **kw)

    monkeypatch.setattr(base_mod, "read_partitions", reads)
    ex = Executor(cfg, spark, leader=leader)
    event = ex.execute(base_job(1, arrivals, T0, T0 + 5 * MINUTE))
    assert isinstance(event, JobFailed) and event.refused, event
    assert "refused before writing" in event.reason and "31.0 s ago" in event.reason
    m_raw = Path(table_path(cfg, "m_raw"))
    assert not (m_raw / "_delta_log").exists() and not list(m_raw.glob("**/*.parquet"))
    monkeypatch.setattr(base_mod, "read_partitions", read)
    leader.why = None  # renewed
    done = ex.execute(base_job(2, arrivals, T0, T0 + 5 * MINUTE))
    assert isinstance(done, JobFinished) and done.committed
    # a derived job whose fence is shut: refused, its table not created; the base table untouched
    leader.why = "this daemon does not hold the warehouse lease any more"
    asked = leader.asked
    event = ex.execute(derived_job(3, T0, T0 + 5 * MINUTE))
    assert isinstance(event, JobFailed) and event.refused and "does not hold" in event.reason
    assert leader.asked == asked + 1  # asked once, at its write
    assert not (Path(table_path(cfg, "m_5m")) / "_delta_log").exists()
    assert len(commit_metadata(str(m_raw))) == 1 and commit_metadata(str(m_raw))[0]["leader"]["epoch"] == 7

