"""The operator actions' store (ops.actions.ActionStore) under the daemon's threads: the HTTP
threads that keep requests and the scheduler loop that forgets what is done — a real file, a real
HTTP server, each interleaving forced by gates (no sleeps)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import conftest

import ops.actions as actions_mod
from ops.actions import HISTORY, RECOMPUTE_KIND, ActionStore, store_path
from tests import test_actions
from tests.test_actions import Daemonish, on_file
from warehouse.events import JobFinished, PartitionArrived, StartJob

T0 = conftest.T0
served = test_actions.served  # the fixture: a Daemonish behind the real HTTP API


def test_the_loop_does_not_wait_behind_an_http_threads_write(served, monkeypatch) -> None:
    """An HTTP thread keeping a suspend is inside its fsync (held there by a gate); the scheduler
    loop settles a served refresh and a covered backfill meanwhile. Both calls return while the
    fsync still waits: they change memory only; the writer thread writes them once it may."""
    d, client = served()
    backfill = client.post("/v1/tables/m_5m/refresh", json={"from": T0 - 600, "to": T0}).json()
    (job,) = d.sched.handle(PartitionArrived(stream="m", partition_id="m-1", start=T0, end=T0 + 60), T0 + 61)
    d.sched.handle(PartitionArrived(stream="m", partition_id="m-2", start=T0 + 60, end=T0 + 120), T0 + 121)
    assert client.post("/v1/tables/m_raw/refresh").status_code == 202
    d.loop_once()
    d.sched.handle(JobFinished(job_id=job.job_id, duration=1.0), T0 + 122)  # the refresh is served
    assert not d.sched.refresh_pending("m_raw")

    inside, release = threading.Event(), threading.Event()
    real = actions_mod.os.fsync

    def held_fsync(fd: int) -> None:
        inside.set()
        release.wait(30)
        real(fd)

    monkeypatch.setattr(actions_mod.os, "fsync", held_fsync)
    answers: list[int] = []
    http = threading.Thread(target=lambda: answers.append(client.post("/v1/tables/a_raw/suspend").status_code))
    loop_done = threading.Event()

    def loop() -> None:
        d.actions.settle(d.sched)
        d.actions.job_finished(StartJob(job_id=9, table="m_5m", track=0, kind=RECOMPUTE_KIND, start=T0 - 600,
                                        end=T0, new_freshness=T0, new_safe_freshness=T0))
        loop_done.set()

    try:
        http.start()
        assert inside.wait(10), "the HTTP thread never reached its fsync"
        threading.Thread(target=loop, daemon=True).start()
        assert loop_done.wait(5), "the scheduler loop waited behind the HTTP thread's fsync"
        assert d.actions.store.refreshes() == [] and d.actions.store.backfills() == []
    finally:
        release.set()
        http.join(10)
    assert answers == [202]
    kept = on_file(d)
    assert (kept["refresh"], kept["backfills"], list(kept["suspended"])) == ({}, [], ["a_raw"])
    assert [(h["action"], h.get("id")) for h in kept["history"]] == [
        ("backfill", backfill["id"]), ("refresh", None), ("suspend", None)]


def test_the_history_is_bounded_in_memory_as_on_file(served, tmp_path: Path) -> None:
    """Every action adds to the history; memory keeps the last HISTORY of them, as the file does,
    so a write costs the same after thousands of actions as at the start."""
    d, client = served()
    n = 2 * HISTORY + 7
    for k in range(n):
        d.actions.request("a_raw", "suspend" if k % 2 == 0 else "resume", {"reason": f"r{k}"})
    assert len(d.actions.store._state.history) == HISTORY
    kept = on_file(d)["history"]
    assert [h["reason"] for h in kept] == [f"r{k}" for k in range(n - HISTORY, n)]
    assert [h["reason"] for h in d.actions.store._state.history] == [h["reason"] for h in kept]
    assert len(Daemonish(tmp_path).actions.store._state.history) == HISTORY  # a restart: the same


def test_a_refresh_requested_between_the_serving_of_the_last_one_and_the_settle_is_kept(
        served, tmp_path: Path) -> None:
    """m_raw's refresh is served (its job started); before the loop settles it, an HTTP thread keeps
    a second refresh of m_raw (queued for the loop). Settling forgets the first only: the second is
    in the file, so a restart re-applies it; once it is served in turn, it is forgotten too."""
    d, client = served()
    (job,) = d.sched.handle(PartitionArrived(stream="m", partition_id="m-1", start=T0, end=T0 + 60), T0 + 61)
    d.sched.handle(PartitionArrived(stream="m", partition_id="m-2", start=T0 + 60, end=T0 + 120), T0 + 121)
    assert client.post("/v1/tables/m_raw/refresh").status_code == 202
    d.loop_once()
    (served_job,) = d.sched.handle(JobFinished(job_id=job.job_id, duration=1.0), T0 + 122)  # the refresh served
    assert served_job.partitions == ("m-2",) and not d.sched.refresh_pending("m_raw")
    assert client.post("/v1/tables/m_raw/refresh").status_code == 202  # the HTTP thread, before the settle
    d.actions.settle(d.sched)  # the loop, after dispatching the served job
    assert d.actions.store.refreshes() == ["m_raw"]
    assert list(on_file(d)["refresh"]) == ["m_raw"]
    assert ActionStore(store_path(d.config)).refreshes() == ["m_raw"]  # what a restart re-applies

    d.loop_once()  # the loop applies the second refresh: m_raw's next job goes first
    assert d.sched.refresh_pending("m_raw")
    d.sched.handle(PartitionArrived(stream="m", partition_id="m-3", start=T0 + 120, end=T0 + 180), T0 + 181)
    (nxt,) = d.sched.handle(JobFinished(job_id=served_job.job_id, duration=1.0), T0 + 182)
    assert nxt.partitions == ("m-3",)
    d.actions.settle(d.sched)
    assert d.actions.store.refreshes() == [] and on_file(d)["refresh"] == {}


def test_a_kept_refresh_from_an_older_file_is_restored_and_settled(tmp_path: Path) -> None:
    """A file written before refreshes had ids: its refresh is restored, and settled once served."""
    cfg = conftest.make_config(tmp_path)
    path = store_path(cfg)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "suspended": {}, "backfills": [], "history": [],
                                "refresh": {"m_raw": {"requested": T0}}}))
    d = Daemonish(tmp_path)
    assert d.actions.store.refreshes() == []  # nothing to load: served at once
    assert on_file(d)["refresh"] == {}

