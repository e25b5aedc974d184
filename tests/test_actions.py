"""Operator actions (ops.actions) through the real HTTP API (uvicorn + httpx) and the real CLI, kept
in the real actions file, applied to the real (pure) Scheduler — and after a restart, re-applied
from the file alone. No Spark: the engine's side is what the actions change."""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path
from typing import Any

import conftest
import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ops import cli
from ops.actions import RECOMPUTE_KIND, ActionRequest, ActionStore, OperatorActions, store_path
from ops.api import ApiServer, create_app
from ops.metrics import SnapshotHolder, register_metrics
from warehouse.config import parse_config
from warehouse.events import Backfill, JobFinished, PartitionArrived, StartJob
from warehouse.scheduler import Recovered, Scheduler

TOKEN = "act-token"
T0 = conftest.T0


class Recomputing(Scheduler):
    """The engine with its `Backfill` handler recorded instead of run: these tests are about
    what the actions hand over (tests/test_recompute*.py run it)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        self.recomputed: list[tuple[str, float, float, str]] = []
        super().__init__(*a, **kw)

    def _ordered(self, ev: Any, now: float) -> None:  # the orders' handler (warehouse.orders)
        if not isinstance(ev, Backfill):
            return super()._ordered(ev, now)
        self.recomputed.append((ev.table, ev.start, ev.end, ev.reason))


class Daemonish:
    """The daemon's part in actions: its queue, the scheduler loop's apply, the published snapshot."""

    def __init__(self, tmp: Path, sched_cls: type[Scheduler] = Scheduler, config: Any = None) -> None:
        self.config = config or conftest.make_config(tmp)
        self.holder = SnapshotHolder()
        self.registry = CollectorRegistry()
        self.metrics = register_metrics(self.registry, self.holder.get)
        self.metrics.declare(self.config)
        self.queue: queue.Queue[ActionRequest] = queue.Queue()
        # m_5m holds a day of windows before T0 (a backfill recomputes what a table holds)
        self.sched = sched_cls(self.config, now=T0, initial_freshness=T0,
                               recovered={"m_5m": Recovered(T0, T0, origin=T0 - 86400)})
        self.actions = OperatorActions(
            ActionStore(store_path(self.config)), lambda: self.config, self.holder.get, self.queue.put,
            lambda table, action: self.metrics.operator_actions.labels(table=table, action=action).inc(), time.time)
        self.started = self.actions.restore(self.sched, T0)
        self.publish()

    def publish(self) -> None:
        self.holder.publish(self.sched.stats(T0 + 1000))

    def loop_once(self) -> list[StartJob]:
        jobs: list[StartJob] = []
        while not self.queue.empty():
            jobs += self.actions.apply(self.sched, self.queue.get(), T0 + 500)
        self.publish()
        return jobs

    # the Backend protocol of ops.api
    def snapshot(self) -> Any:
        return self.holder.get()

    def ready(self) -> tuple[bool, str]:
        return True, ""

    def standby(self) -> bool:
        return False

    def streams(self) -> list[str]:
        return [s.name for s in self.config.streams]

    def submit_partition(self, stream: str, manifest: Any) -> Any:
        raise AssertionError("not used")

    def operator_action(self, table: str, action: str, body: Any) -> dict[str, Any]:
        return self.actions.request(table, action, body)

    def actions_view(self, table: str) -> dict[str, Any] | None:
        return self.actions.view(table)


@pytest.fixture()
def served(tmp_path: Path):
    made: list[ApiServer] = []

    def serve(sched_cls: type[Scheduler] = Scheduler, config: Any = None) -> tuple[Daemonish, httpx.Client]:
        d = Daemonish(tmp_path, sched_cls, config)
        srv = ApiServer(create_app(d, d.registry, token=TOKEN), "127.0.0.1", 0)
        port = srv.start()
        made.append(srv)
        return d, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5,
                               headers={"Authorization": f"Bearer {TOKEN}"})

    yield serve
    for srv in made:
        srv.stop()


def on_file(d: Daemonish) -> dict[str, Any]:
    """The actions file once the writer has written what the scheduler loop changed."""
    assert d.actions.store.flush(5)
    return json.loads(store_path(d.config).read_text())


def counter(client: httpx.Client, table: str, action: str) -> float:
    for fam in text_string_to_metric_families(client.get("/metrics").text):
        for s in fam.samples:
            if s.name == "freshet_operator_actions_total" and s.labels == {"table": table, "action": action}:
                return s.value
    raise AssertionError("no freshet_operator_actions_total series")


def test_suspend_is_authenticated_kept_counted_shown_and_survives_a_restart(served, tmp_path: Path) -> None:
    d, client = served()
    assert counter(client, "m_raw", "suspend") == 0  # exported from the start
    r = httpx.post(f"{client.base_url}/v1/tables/m_raw/suspend", timeout=5)
    assert r.status_code == 401 and "bearer" in r.json()["error"]
    r = client.post("/v1/tables/m_rw/suspend")
    assert r.status_code == 404 and "m_rw" in r.json()["error"] and "m_raw" in r.json()["error"]
    r = client.post("/v1/tables/m_raw/suspend", json={"reason": "bad upstream data"})
    assert r.status_code == 202 and r.json()["status"] == "suspended"
    assert counter(client, "m_raw", "suspend") == 1
    kept = json.loads(store_path(d.config).read_text())
    assert kept["suspended"]["m_raw"]["reason"] == "bad upstream data"
    d.loop_once()
    row = client.get("/v1/tables/m_raw").json()
    assert row["suspended"] is True and row["suspend_reason"] == "bad upstream data"
    # a refresh of a suspended table is refused, naming why
    r = client.post("/v1/tables/m_raw/refresh")
    assert r.status_code == 409 and "suspended" in r.json()["error"]

    # restart: a new process state, from the file alone
    d2, client2 = served()
    assert d2.sched.is_suspended("m_raw") and not d2.sched.is_suspended("a_raw")
    ev = PartitionArrived(stream="m", partition_id="m-1", start=T0, end=T0 + 60)
    assert d2.sched.handle(ev, T0 + 61) == []  # accepted, kept, not loaded
    assert client2.get("/v1/tables/m_raw").json()["suspended"] is True
    assert client2.post("/v1/tables/m_raw/resume").json()["status"] == "resumed"
    jobs = d2.loop_once()
    assert [(j.table, j.partitions) for j in jobs] == [("m_raw", ("m-1",))]
    assert "m_raw" not in json.loads(store_path(d2.config).read_text())["suspended"]
    d3 = Daemonish(tmp_path)
    assert not d3.sched.is_suspended("m_raw")


def test_refresh_is_kept_until_its_job_starts(served) -> None:
    d, client = served()
    (job,) = d.sched.handle(PartitionArrived(stream="m", partition_id="m-1", start=T0, end=T0 + 60), T0 + 61)
    d.sched.handle(PartitionArrived(stream="m", partition_id="m-2", start=T0 + 60, end=T0 + 120), T0 + 121)
    assert client.post("/v1/tables/m_raw/refresh").json()["status"] == "refresh requested"
    d.loop_once()  # m_raw runs: its next job (m-2) is the refresh
    assert d.sched.refresh_pending("m_raw")
    assert json.loads(store_path(d.config).read_text())["refresh"].keys() == {"m_raw"}
    nxt = d.sched.handle(JobFinished(job_id=job.job_id, duration=1.0), T0 + 122)
    assert [j.partitions for j in nxt if j.table == "m_raw"] == [("m-2",)]
    d.actions.settle(d.sched)  # as the daemon does after dispatching
    assert on_file(d)["refresh"] == {}


def test_backfill_is_validated_kept_and_handed_to_recompute_again_after_a_restart(served, tmp_path: Path) -> None:
    d, client = served()
    # validation first, each error naming the problem
    cases = [
        ("m_raw", {"from": T0, "to": T0 + 60}, 422, "base table"),
        ("m_5m", {"from": T0}, 422, "both"),
        ("m_5m", {"from": "yesterday", "to": T0}, 422, "ISO 8601"),
        ("m_5m", {"from": T0 + 60, "to": T0}, 422, "before"),
        ("m_5m", {"from": T0 + 60, "to": T0 + 120, "colour": 1}, 422, "colour"),
    ]
    for table, body, status, words in cases:
        r = client.post(f"/v1/tables/{table}/refresh", json=body)
        assert (r.status_code, words in r.json()["error"]) == (status, True), (body, r.json())
    assert not store_path(d.config).exists() or json.loads(store_path(d.config).read_text())["backfills"] == []

    d, client = served(Recomputing)
    r = client.post("/v1/tables/m_5m/refresh", json={"from": T0 + 1, "to": T0 + 900})  # beyond F: nothing there
    assert r.status_code == 422 and "computed through" in r.json()["error"]
    r = client.post("/v1/tables/m_5m/refresh", json={"from": "2025-11-24T15:50:00Z", "to": T0, "reason": "fix"})
    assert r.status_code == 202, r.json()
    body = r.json()
    assert (body["action"], body["start"], body["end"]) == ("backfill", T0 - 600, T0)
    assert counter(client, "m_5m", "backfill") == 1
    d.loop_once()
    assert d.sched.recomputed == [("m_5m", T0 - 600, T0, f"backfill {body['id']}: fix")]
    assert client.get("/v1/tables/m_5m").json()["backfills"][0]["id"] == body["id"]

    d2 = Daemonish(tmp_path, Recomputing)  # restart: the unfinished backfill is handed over again
    assert d2.sched.recomputed == [("m_5m", T0 - 600, T0, f"backfill {body['id']}: fix")]
    # recompute jobs cover the range in two pieces: then it is done and forgotten
    half = StartJob(job_id=1, table="m_5m", track=0, kind=RECOMPUTE_KIND, start=T0 - 600, end=T0 - 300,
                    new_freshness=T0, new_safe_freshness=T0)
    d2.actions.job_finished(half)
    assert len(d2.actions.store.backfills()) == 1
    d2.actions.job_finished(StartJob(job_id=2, table="m_5m", track=0, kind=RECOMPUTE_KIND, start=T0 - 300, end=T0,
                                     new_freshness=T0, new_safe_freshness=T0))
    assert d2.actions.store.backfills() == [] and on_file(d2)["backfills"] == []
    assert Daemonish(tmp_path, Recomputing).sched.recomputed == []


def test_cli_suspend_and_refresh_talk_to_the_api_with_the_token(served, monkeypatch, capsys) -> None:
    d, client = served()
    monkeypatch.setenv("FRESHET_API_TOKEN", TOKEN)
    url = str(client.base_url)
    assert cli.main(["suspend", "a_raw", "--url", url, "--reason", "maintenance window"]) == 0
    assert "a_raw: suspended" in capsys.readouterr().out
    monkeypatch.setenv("FRESHET_API_TOKEN", "wrong")
    assert cli.main(["resume", "a_raw", "--url", url]) == 1
    assert "invalid bearer token" in capsys.readouterr().err
    monkeypatch.setenv("FRESHET_API_TOKEN", TOKEN)
    assert cli.main(["refresh", "m_raw", "--url", url, "--from", "x", "--to", "y"]) == 1
    assert "base table" in capsys.readouterr().err
    d.loop_once()
    assert d.sched.is_suspended("a_raw")
    assert cli.main(["status", "--url", url]) == 0
    out = capsys.readouterr().out
    assert "suspended: a_raw (maintenance window)" in out
    assert any(line.startswith("a_raw") and " suspended " in line for line in out.splitlines())


def test_cli_actions_find_the_daemon_at_the_configs_listen(served, monkeypatch, capsys, tmp_path) -> None:
    """`freshet suspend --config FILE` posts to the file's `listen:` (as `freshet status --config`
    asks it), not to the default 127.0.0.1:9464."""
    import yaml
    from conftest import warehouse_dict

    d, client = served()
    monkeypatch.setenv("FRESHET_API_TOKEN", TOKEN)
    monkeypatch.delenv("FRESHET_URL", raising=False)
    path = tmp_path / "listen.yaml"
    path.write_text(yaml.safe_dump({**warehouse_dict(tmp_path), "listen": f"0.0.0.0:{client.base_url.port}"}))
    assert cli.main(["suspend", "a_raw", "--config", str(path)]) == 0
    assert "a_raw: suspended" in capsys.readouterr().out
    d.loop_once()
    assert d.sched.is_suspended("a_raw")



# ---- every accepted backfill finishes and leaves the store; refreshes and writes kept right ----
def run_jobs(d: Daemonish, jobs: list[StartJob], now: float) -> tuple[float, list[StartJob]]:
    """Finish every job (and what it releases) as the daemon does: the actions see it, then the engine."""
    done: list[StartJob] = []
    while jobs:
        job = jobs.pop(0)
        now += 1.0
        d.actions.job_finished(job)
        done.append(job)
        jobs += d.sched.handle(JobFinished(job_id=job.job_id, duration=1.0), now)
    return now, done


def test_a_backfill_from_before_the_origin_is_cut_to_it_finishes_and_leaves_the_store(served, tmp_path) -> None:
    d, client = served()
    r = client.post("/v1/tables/m_5m/refresh", json={"from": T0 - 90000, "to": T0 - 86400 + 600})
    assert r.status_code == 202, r.json()
    assert (r.json()["start"], r.json()["end"], r.json()["windows"]) == (T0 - 86400, T0 - 85800, 2)
    _, done = run_jobs(d, d.loop_once(), T0 + 500)
    assert {j.kind for j in done if j.table == "m_5m"} == {"recompute"}
    assert min(j.start for j in done if j.table == "m_5m") == T0 - 86400
    assert d.actions.store.backfills() == []
    assert on_file(d)["backfills"] == []
    assert Daemonish(tmp_path).sched.stats(T0).tables[2].recompute_pending == 0  # nothing re-applied


def test_a_backfill_of_a_full_refresh_table_is_done_by_its_full_update_job(served, tmp_path) -> None:
    raw = conftest.warehouse_dict(tmp_path)
    next(t for t in raw["tables"] if t["name"] == "m_5m")["refresh_mode"] = "full"
    d, client = served(config=parse_config(raw))
    now, held = T0 + 400, None

    def arrive(ks: range) -> None:  # run every job but m_5m's, which stays running until told
        nonlocal now, held
        todo: list[StartJob] = []
        for k in ks:
            todo += d.sched.handle(PartitionArrived(stream="m", partition_id=f"m-{k}", start=T0 + 60 * k,
                                                    end=T0 + 60 * (k + 1)), now)
        while todo:
            job = todo.pop(0)
            if job.table == "m_5m":
                held = job
                continue
            now += 1.0
            todo += d.sched.handle(JobFinished(job_id=job.job_id, duration=1.0), now)

    arrive(range(5))
    assert held is not None and (held.kind, held.full) == ("derived", True)
    r = client.post("/v1/tables/m_5m/refresh", json={"from": T0 - 3600, "to": T0, "reason": "fix"})
    assert r.status_code == 202, r.json()
    assert d.loop_once() == []  # m_5m runs: the backfill waits for its next job
    arrive(range(5, 10))  # and that next job is an update: a full one, which rewrites the range too
    first, held = held, None
    d.actions.job_finished(first)
    now, done = run_jobs(d, d.sched.handle(JobFinished(job_id=first.job_id, duration=1.0), now + 1), now + 1)
    assert [(j.kind, j.full, j.start) for j in done if j.table == "m_5m"] == [("derived", True, T0 - 86400)]
    assert d.actions.store.backfills() == []


def test_a_backfill_over_no_data_is_refused_naming_the_range(served) -> None:
    d, client = served()
    r = client.post("/v1/tables/m_5m/refresh", json={"from": T0 - 200000, "to": T0 - 100000})
    assert r.status_code == 422
    assert "2025-11-23T16:00:00Z" in r.json()["error"] and "has none of them" in r.json()["error"]
    assert d.actions.store.backfills() == []


def test_a_backfill_can_be_cancelled_by_the_api_and_the_cli(served, monkeypatch, capsys) -> None:
    d, client = served()
    body = client.post("/v1/tables/m_5m/refresh", json={"from": T0 - 3600, "to": T0}).json()
    r = client.post("/v1/tables/m_5m/refresh", json={"cancel": "nope"})
    assert r.status_code == 404 and body["id"] in r.json()["error"]
    r = client.post("/v1/tables/m_5m/refresh", json={"cancel": body["id"], "reason": "wrong range"})
    assert r.status_code == 202 and r.json()["status"] == "backfill cancelled"
    assert d.actions.store.backfills() == []
    # the backfill, then its cancel, reach the engine: the piece already running finishes, no other
    now, done = run_jobs(d, d.loop_once(), T0 + 500)
    assert [(j.kind, j.end - j.start) for j in done if j.table == "m_5m"] == [("recompute", 300)]  # not 12
    m5 = next(t for t in d.sched.stats(now).tables if t.name == "m_5m")
    assert m5.recompute_pending == 0 and m5.state == "idle"
    # the CLI
    b2 = client.post("/v1/tables/m_5m/refresh", json={"from": T0 - 600, "to": T0}).json()
    monkeypatch.setenv("FRESHET_API_TOKEN", TOKEN)
    assert cli.main(["refresh", "m_5m", "--url", str(client.base_url), "--cancel", b2["id"]]) == 0
    assert "m_5m: backfill cancelled" in capsys.readouterr().out
    assert d.actions.store.backfills() == []


def test_a_refresh_still_queued_is_not_settled_away_and_survives_a_restart(served, tmp_path) -> None:
    d, client = served()
    d.sched.handle(PartitionArrived(stream="a", partition_id="a-1", start=T0, end=T0 + 60), T0 + 61)
    d.sched.handle(PartitionArrived(stream="m", partition_id="m-1", start=T0, end=T0 + 60), T0 + 61)
    assert client.post("/v1/tables/m_raw/refresh").status_code == 202  # queued for the loop
    d.actions.settle(d.sched)  # the daemon settles after any round that started jobs
    assert d.actions.store.refreshes() == ["m_raw"]
    assert json.loads(store_path(d.config).read_text())["refresh"].keys() == {"m_raw"}  # a restart has it
    d.loop_once()  # now the engine holds it: m_raw runs, its next job goes first
    assert d.sched.refresh_pending("m_raw") and d.actions.store.refreshes() == ["m_raw"]


def test_an_unwritable_actions_file_changes_nothing_and_is_retried(served, monkeypatch) -> None:
    import ops.actions as actions_mod

    d, client = served()
    body = client.post("/v1/tables/m_5m/refresh", json={"from": T0 - 600, "to": T0}).json()
    kept, queued = store_path(d.config).read_text(), d.queue.qsize()
    real = os.replace

    def full_disk(*a: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(actions_mod.os, "replace", full_disk)
    r = client.post("/v1/tables/a_raw/suspend")
    assert r.status_code == 503 and "No space left" in r.json()["error"]
    assert d.actions.store.suspended() == {} and store_path(d.config).read_text() == kept  # memory = file
    assert d.queue.qsize() == queued  # not handed to the engine either
    # the scheduler loop: a covered backfill is forgotten in memory at once; the writer cannot write
    # it — logged, counted, owed and retried, never raised into the loop
    d.actions.job_finished(StartJob(job_id=9, table="m_5m", track=0, kind=RECOMPUTE_KIND, start=T0 - 600, end=T0,
                                    new_freshness=T0, new_safe_freshness=T0))
    assert d.actions.store.backfills() == []
    assert not d.actions.store.flush(0.5) and d.actions.store.owed
    assert d.actions.store.write_errors >= 2
    assert [b["id"] for b in json.loads(store_path(d.config).read_text())["backfills"]] == [body["id"]]
    assert d.actions.unsettled  # the loop's settle keeps a writer at it
    monkeypatch.setattr(actions_mod.os, "replace", real)
    d.actions.settle(d.sched)
    assert on_file(d)["backfills"] == [] and not d.actions.store.owed
