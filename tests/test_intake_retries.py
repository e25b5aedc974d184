"""The intake's half: a partition is quarantined once however many base tables read its
stream (6), a producer's retry of a loaded partition is a duplicate, not a quarantine (10), and a
quarantine whose move fails is retried, never raised (8). No Spark: a real Intake on a temporary
landing zone, the real Scheduler, and the HTTP API on a real server with a real client."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import T0, warehouse_dict, write_minutes
from test_api import AUTH, TOKEN, Server

from warehouse.config import parse_config
from warehouse.events import StartJob
from warehouse.landing.intake import Intake
from warehouse.scheduler import Scheduler
from warehouse.times import parse_time

NOW = T0 + 86400


def two_tables_on_m(tmp: Path):
    """The test warehouse plus a second base table on stream `m`."""
    copy = {"name": "m_copy", "stream": "m", "priority": 2, "cost": {"alpha": 1, "beta": 0.01}}
    return parse_config(warehouse_dict(tmp, extra_tables=[copy], chop=None))


def test_a_bad_partition_read_by_two_tables_is_quarantined_once(tmp_path: Path) -> None:
    """Both tables' jobs fail on the same bad partition; the daemon rechecks each
    failed job and refuses its bad partitions (ops/daemon.py `_execute`, `_on_result`)."""
    cfg = two_tables_on_m(tmp_path)
    write_minutes(cfg, "m", 0, 2)
    intake = Intake(cfg, clock=lambda: NOW)
    sched = Scheduler(cfg, now=NOW)
    jobs: list[StartJob] = []
    for ev in intake.scan():
        jobs += sched.handle(ev, NOW)
    by_table = {j.table: j for j in jobs if j.table in ("m_raw", "m_copy")}
    assert set(by_table) == {"m_raw", "m_copy"}
    pid = by_table["m_raw"].arrivals[0].partition_id
    assert pid in {a.partition_id for a in by_table["m_copy"].arrivals}
    (tmp_path / "landing" / "m" / pid / "part-0.parquet").unlink()  # deleted after acceptance
    for table in ("m_raw", "m_copy"):  # each job fails; the daemon rechecks and refuses, per table
        bad = intake.recheck(by_table[table])
        assert pid in bad, (table, bad)
        for p, why in bad.items():
            intake.refuse("m", p, why)
    qdir = tmp_path / "landing" / "_quarantine" / "m"
    assert sorted(p.name for p in qdir.iterdir()) == [pid], "quarantined more than once"
    assert "file missing" in (qdir / pid / "reason").read_text()
    assert intake.quarantined["m"] == 1


@pytest.fixture()
def server(tmp_path: Path):
    s = Server(tmp_path, token=TOKEN)
    yield s
    s.close()


def _load(srv: Server, pid: str) -> None:
    """What the daemon does once the partition's base job committed (Intake.archive)."""
    intake = srv.backend.intake
    intake.mark_loaded("m_raw", "m", {pid: intake.partition("m", pid).fingerprint})


def test_a_producer_retrying_the_post_of_a_loaded_partition_gets_a_duplicate(server: Server) -> None:
    """The files of a loaded partition are archived; re-POSTing its manifest is a 200
    duplicate, not a 422 `file missing` with `_quarantine/m/<id>` and `<id>.1`."""
    srv, client = server, server.client
    intake = srv.backend.intake
    body = srv.stage("m")
    body = dict(body, start=parse_time(body["start"]), end=parse_time(body["end"]))  # epoch seconds
    pid = body["id"]
    r = client.post("/v1/streams/m/partitions", json=body, headers=AUTH)
    assert r.status_code == 202, r.text
    _load(srv, pid)
    assert not (srv.landing / "m" / pid).exists() and (srv.landing / "_loaded" / "m" / pid).is_dir()
    for _ in range(2):  # the retry, and a retry of the retry
        r = client.post("/v1/streams/m/partitions", json=body, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json() == {"stream": "m", "partition": pid, "status": "duplicate"}
    assert not (srv.landing / "_quarantine").exists()
    assert intake.quarantined["m"] == 0 and intake.duplicates["m"] == 2
    assert (srv.landing / "_loaded" / "m" / pid / "part-0.parquet").is_file()  # the archive stays

    # other content under the loaded id is still a conflict (checked against the archived files)
    r = client.post("/v1/streams/m/partitions", json={**body, "rows": 5}, headers=AUTH)
    assert r.status_code == 422 and "row count" in r.text, r.text
    r = client.post("/v1/streams/m/partitions", json={**body, "start": body["start"] + 1}, headers=AUTH)
    assert r.status_code == 422, r.text

    # the archive deleted (docs: "delete it whenever you like"): the window decides
    shutil.rmtree(srv.landing / "_loaded" / "m" / pid)
    r = client.post("/v1/streams/m/partitions", json=body, headers=AUTH)
    assert r.status_code == 200 and r.json()["status"] == "duplicate", r.text
    r = client.post("/v1/streams/m/partitions", json={**body, "end": body["end"] + 1}, headers=AUTH)
    assert r.status_code == 422 and "already loaded with different content" in r.text, r.text
    assert intake.quarantined["m"] == 3 and intake.duplicates["m"] == 3


def test_a_redelivered_manifest_of_a_loaded_partition_is_archived_not_quarantined(tmp_path: Path) -> None:
    """The landing-zone path of the same retry: a manifest alone dropped again after the load."""
    cfg = parse_config(warehouse_dict(tmp_path))
    [pid] = write_minutes(cfg, "m", 0, 1)
    d = tmp_path / "landing" / "m" / pid
    manifest = (d / "_partition.json").read_text()
    intake = Intake(cfg, clock=lambda: NOW)
    [ev] = intake.scan()
    intake.archive(StartJob(job_id=1, table="m_raw", track=0, kind="base", start=ev.start, end=ev.end,
                            new_freshness=ev.end, new_safe_freshness=ev.end, arrivals=(ev,)))
    assert not d.exists()
    d.mkdir()
    (d / "_partition.json").write_text(manifest)
    assert intake.scan() == []
    assert intake.quarantined["m"] == 0 and intake.duplicates["m"] == 1
    assert not d.exists() and not (tmp_path / "landing" / "_quarantine").exists()


def test_a_quarantine_that_cannot_move_is_retried_not_raised(tmp_path: Path) -> None:
    """`_quarantine` cannot be created (here a file stands in its place; a full disk
    fails the same way, with an OSError). Nothing escapes, the other partitions go on, the bad one
    stays where it is and is counted once; a later scan finishes the move."""
    cfg = parse_config(warehouse_dict(tmp_path))
    landing = tmp_path / "landing"
    good = write_minutes(cfg, "m", 0, 1)
    [bad] = write_minutes(cfg, "m", 1, 1, pid_prefix="bad-")
    m = json.loads((landing / "m" / bad / "_partition.json").read_text())
    (landing / "m" / bad / "_partition.json").write_text(json.dumps({**m, "rows": 99}))
    (landing / "_quarantine").write_text("in the way")
    intake = Intake(cfg, clock=lambda: NOW)
    assert [e.partition_id for e in intake.scan()] == good  # no exception; the good one accepted
    assert intake.unquarantined() == [("m", bad)]
    assert (landing / "m" / bad / "part-0.parquet").is_file()  # not lost
    assert intake.scan() == []  # retried, still failing: not counted again, not re-validated
    assert intake.quarantined["m"] == 1 and intake.quarantine_failures["m"] == 2

    # the Scheduler's refusal of an accepted partition (ops/daemon.py) fails the same way, quietly
    intake.refuse("m", good[0], "no table reads stream 'm'")
    assert intake.unquarantined() == [("m", bad), ("m", good[0])]
    assert intake.scan() == []  # not accepted again while its quarantine waits

    (landing / "_quarantine").unlink()  # the disk has room again
    assert intake.scan() == []
    assert intake.unquarantined() == []
    assert "row count" in (landing / "_quarantine" / "m" / bad / "reason").read_text()
    assert "no table reads" in (landing / "_quarantine" / "m" / good[0] / "reason").read_text()
    assert not (landing / "m" / bad).exists() and not (landing / "m" / good[0]).exists()
    assert intake.quarantined["m"] == 2


def test_the_intake_pushes_its_counts_to_prometheus_as_they_happen(tmp_path: Path) -> None:
    """Counters pushed by callbacks, not copied: a quarantine and a duplicate show on
    /metrics at once, read back through prometheus-client's own parser, with no sync step."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ops.metrics import register_metrics

    cfg = two_tables_on_m(tmp_path)
    reg = CollectorRegistry()
    metrics = register_metrics(reg, lambda: None)
    metrics.declare(cfg)
    write_minutes(cfg, "m", 0, 1)
    intake = Intake(cfg, clock=lambda: NOW, on_count=metrics.intake_counted)
    arrived = intake.scan()
    pid = arrived[0].partition_id
    (tmp_path / "landing" / "m" / "bad").mkdir()
    (tmp_path / "landing" / "m" / "bad" / "_partition.json").write_text("{not json")
    intake.scan()

    def value(name: str, **labels: str) -> float:
        for fam in text_string_to_metric_families(generate_latest(reg).decode()):
            for s in fam.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    return s.value
        raise AssertionError(f"no sample {name} {labels}")

    assert value("freshet_partitions_quarantined_total", stream="m") == 1
    assert value("freshet_partitions_duplicate_total", stream="m") == 0
    assert pid and intake.quarantined["m"] == 1
