"""The landing zone on a bucket (`warehouse.landing: s3a://bucket/prefix`, docs/warehouse.md §3): the
S3 store under the intake (warehouse.landing.store_s3) and the intake over it, on a real S3 API
(moto's server, tests/helpers_s3.py) with a real boto3 client. No Spark: validation reads Parquet
with pyarrow; tests/test_s3_warehouse.py loads a bucket's partitions into Delta with Spark."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import MINUTE, T0, warehouse_dict, write_minutes
from test_intake import BAD_MANIFESTS, rewrite_manifest

from tests.helpers_s3 import CREDENTIALS, S3Server, upload
from warehouse.config import FreshetConfig, parse_config
from warehouse.events import StartJob
from warehouse.landing import store_s3
from warehouse.landing.intake import Intake
from warehouse.landing.store import LocalStore
from warehouse.landing.store_s3 import S3Store

NOW = T0 + 86400.0  # the intake's clock: a day after the partitions


@pytest.fixture(scope="module")
def moto(s3_server: S3Server) -> S3Server:
    """A bucket for the module on the process's moto server; each test works under its own prefix."""
    return s3_server.with_bucket("freshet-landing")


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)


@pytest.fixture()
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}/landing"


def configs(tmp: Path, server: S3Server, prefix: str) -> tuple[FreshetConfig, FreshetConfig]:
    """(the config with its landing zone on the bucket, a staging config whose local landing zone
    the partitions are written into before `upload` puts them on the bucket)."""
    stage = parse_config(warehouse_dict(tmp))
    raw = warehouse_dict(tmp)
    raw["warehouse"].update(landing=f"s3a://{server.bucket}/{prefix}", s3=server.s3_settings())
    return parse_config(raw), stage


def staged(stage: FreshetConfig) -> Path:
    return Path(stage.warehouse.landing)


def counting(intake: Intake) -> Counter[str]:
    """The S3 requests `intake` makes from now on, by operation."""
    calls: Counter[str] = Counter()
    intake.store.client.meta.events.register("before-call.s3", lambda event_name, **_: calls.update(
        [event_name.rsplit(".", 1)[1]]))
    return calls


def job(ev: Any, table: str = "m_raw") -> StartJob:
    return StartJob(job_id=1, table=table, track=0, kind="base", start=ev.start, end=ev.end,
                    new_freshness=ev.end, new_safe_freshness=ev.end, arrivals=(ev,))


def reason(server: S3Server, prefix: str, stream: str, pid: str) -> str:
    """The reason of a quarantined partition (asserts it is gone from the stream's prefix)."""
    assert not server.keys(f"{prefix}/{stream}/{pid}/"), f"{pid} still in the landing zone"
    c = server.client()
    return c.get_object(Bucket=server.bucket, Key=f"{prefix}/_quarantine/{stream}/{pid}/reason")["Body"].read().decode()


# ---- the store --------------------------------------------------------------------------------
def put(server: S3Server, *keys: str) -> None:
    c = server.client()
    for k in keys:
        c.put_object(Bucket=server.bucket, Key=k, Body=k.encode())


def test_children_are_one_delimited_listing_and_a_move_copies_then_deletes(moto: S3Server, prefix: str) -> None:
    put(moto, f"{prefix}/m/a/x.parquet", f"{prefix}/m/a/_partition.json", f"{prefix}/m/b/y", f"{prefix}/m/loose",
        f"{prefix}/_loaded/m/c/x", f"{prefix}x/m/not-mine/x")
    store = S3Store(moto.client(), moto.bucket, prefix)
    assert store.children("m") == ["a", "b"]  # directories only; a loose object is none
    assert store.children("") == ["_loaded", "m"]  # not the sibling prefix `<prefix>x/`
    assert store.children("nope") == []
    assert store.is_dir("m/a") and not store.is_dir("m/z") and store.is_file("m/a/_partition.json")
    assert store.move("m/a", "_loaded/m", "a") == "_loaded/m/a"
    assert moto.keys(f"{prefix}/m/a/") == []
    assert sorted(moto.keys(f"{prefix}/_loaded/m/a/")) == [f"{prefix}/_loaded/m/a/_partition.json",
                                                          f"{prefix}/_loaded/m/a/x.parquet"]
    put(moto, f"{prefix}/m/a/x.parquet")  # the same id again: archived beside the first, never over it
    assert store.move("m/a", "_loaded/m", "a") == "_loaded/m/a.1"
    with pytest.raises(FileNotFoundError):
        store.move("m/a", "_loaded/m", "a")
    assert store.read_text("_loaded/m/a.1/x.parquet") == f"{prefix}/m/a/x.parquet"
    with pytest.raises(FileNotFoundError, match="no such bucket"):  # a trial's typo read "no such object"
        S3Store(moto.client(), "nosuchbucket", prefix).children("m")


def test_of_two_intakes_claiming_one_partition_exactly_one_wins(moto: S3Server, prefix: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Two stores (two intakes: their own clients and owners) claim the same directories at once,
    released together by a barrier: each directory goes to exactly one. A claim left by a dead
    mover is taken over once it is stale, again by exactly one of two."""
    a, b = (S3Store(moto.client(), moto.bucket, prefix, owner=o) for o in ("a", "b"))
    rounds = 8
    won: dict[str, list[bool]] = {"a": [], "b": []}
    barrier = threading.Barrier(2)

    def race(store: S3Store, name: str) -> None:
        for i in range(rounds):
            barrier.wait()
            won[name].append(store.claim(f"m/p{i}"))

    threads = [threading.Thread(target=race, args=(s, n)) for s, n in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert [x + y for x, y in zip(won["a"], won["b"], strict=True)] == [1] * rounds
    assert not a.claim("m/p0") and not b.claim("m/p0")  # held (not stale): nobody else gets it

    # the holder of p1 died: its claim is stale after CLAIM_STALE of the bucket's clock (whole
    # seconds: Last-Modified and Date); a claim just taken over is fresh again
    monkeypatch.setattr(store_s3, "CLAIM_STALE", 2.0)
    time.sleep(3.2)
    got: list[bool] = []
    barrier = threading.Barrier(2)

    def take(store: S3Store) -> None:
        barrier.wait()
        got.append(store.claim("m/p1"))

    threads = [threading.Thread(target=take, args=(s,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(got) == [False, True]


def test_two_movers_of_one_partition_copy_it_once(moto: S3Server, prefix: str) -> None:
    put(moto, *(f"{prefix}/m/p{i}/{f}" for i in range(4) for f in ("x.parquet", "_partition.json")))
    a, b = (S3Store(moto.client(), moto.bucket, prefix, owner=o) for o in ("a", "b"))
    results: list[str] = []
    barrier = threading.Barrier(2)

    def move(store: S3Store) -> None:
        for i in range(4):
            barrier.wait()
            try:
                results.append(store.move(f"m/p{i}", "_loaded/m", f"p{i}"))
            except FileNotFoundError:
                results.append("lost")

    threads = [threading.Thread(target=move, args=(s,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == ["_loaded/m/p0", "_loaded/m/p1", "_loaded/m/p2", "_loaded/m/p3"] + ["lost"] * 4
    assert moto.keys(f"{prefix}/m/") == []  # the claims went with them
    assert len(moto.keys(f"{prefix}/_loaded/")) == 8  # once each, no `.1` copy


# ---- the intake on the bucket -------------------------------------------------------------------
def test_partitions_on_a_bucket_are_accepted_loaded_from_s3a_and_archived_out_of_the_scan(
        moto: S3Server, prefix: str, tmp_path: Path) -> None:
    cfg, stage = configs(tmp_path, moto, prefix)
    ids = write_minutes(stage, "m", 0, 3)
    upload(moto, staged(stage), prefix, "m", ids)
    write_minutes(stage, "m", 3, 1)
    upload(moto, staged(stage), prefix, "m", ["m-0003"], manifest=False)  # still being written
    intake = Intake(cfg, clock=lambda: NOW)
    assert intake.landing is None and intake.store.location == f"s3a://{moto.bucket}/{prefix}"
    got = intake.scan()
    assert [e.partition_id for e in got] == ids and intake.accepted["m"] == 3
    assert got[0].files == (f"s3a://{moto.bucket}/{prefix}/m/m-0000/part-0.parquet",)  # what Spark reads
    assert (got[0].start, got[0].end, got[0].rows) == (T0, T0 + MINUTE, 4)
    # the same bytes on a local landing zone have the same fingerprint: content, not place
    assert got[0].fingerprint == Intake(stage, clock=lambda: NOW).scan()[0].fingerprint

    for ev in got:  # m_raw, the one base table of stream m, committed them
        intake.archive(job(ev))
    assert moto.keys(f"{prefix}/m/m-0000/") == []
    assert f"{prefix}/_loaded/m/m-0000/part-0.parquet" in moto.keys(f"{prefix}/_loaded/")

    # bounded listing: a scan with nothing new lists each stream's prefix once, with the delimiter,
    # and reads only what is new (the incomplete partition's manifest: absent)
    calls = counting(intake)
    assert intake.scan() == []
    assert calls == Counter({"ListObjectsV2": 2, "HeadObject": 1})

    # the producer's retry of an archived partition (files and manifest again): a duplicate,
    # archived beside the first, not loaded twice
    upload(moto, staged(stage), prefix, "m", ["m-0001"])
    assert intake.scan() == [] and intake.duplicates["m"] == 1 and intake.quarantined["m"] == 0
    assert moto.keys(f"{prefix}/m/m-0001/") == []
    assert moto.keys(f"{prefix}/_loaded/m/m-0001.1/")
    # the manifest alone, re-sent after the archive: compared with the archived files, a duplicate
    upload(moto, staged(stage), prefix, "m", ["m-0002"])
    moto.client().delete_object(Bucket=moto.bucket, Key=f"{prefix}/m/m-0002/part-0.parquet")
    assert intake.scan() == [] and intake.duplicates["m"] == 2 and intake.quarantined["m"] == 0

    # the incomplete one completes
    upload(moto, staged(stage), prefix, "m", ["m-0003"])
    assert [e.partition_id for e in intake.scan()] == ["m-0003"]


@pytest.mark.parametrize(("change", "why"), BAD_MANIFESTS)
def test_bad_manifests_on_a_bucket_are_quarantined_once_with_a_reason(moto: S3Server, tmp_path: Path,
                                                                      prefix: str, change, why) -> None:
    cfg, stage = configs(tmp_path, moto, prefix)
    ids = write_minutes(stage, "m", 0, 2)
    rewrite_manifest(stage, "m", "m-0000", **change)
    upload(moto, staged(stage), prefix, "m", ids)
    intake = Intake(cfg, clock=lambda: NOW)
    assert [e.partition_id for e in intake.scan()] == ["m-0001"]  # the other partition is unaffected
    assert why in reason(moto, prefix, "m", "m-0000")
    assert intake.scan() == [] and intake.quarantined["m"] == 1  # once
    assert intake.unquarantined() == []


def test_hostile_files_on_a_bucket(moto: S3Server, tmp_path: Path, prefix: str) -> None:
    """Not JSON, a file that is not Parquet, a file changed after its manifest was written
    (the content no longer what was declared), a window overlapping another, a loaded id sent
    again with other content: each quarantined once, with its reason."""
    cfg, stage = configs(tmp_path, moto, prefix)
    local = staged(stage)
    ids = write_minutes(stage, "m", 0, 4)
    (local / "m" / ids[0] / "_partition.json").write_text("{not json")
    (local / "m" / ids[1] / "part-0.parquet").write_bytes(b"PAR1 but not really")
    write_minutes(stage, "m", 2, 1, seed=1, n=5, pid_prefix="x")  # 5 rows where m-0002's manifest says 4
    (local / "m" / ids[2] / "part-0.parquet").write_bytes((local / "m" / "xm-0002" / "part-0.parquet").read_bytes())
    (local / "m" / "xm-0002").rename(local / "m" / "zz-overlap")
    # another id over m-0003's window
    rewrite_manifest(stage, "m", "zz-overlap", start=T0 + 3 * MINUTE - 30, end=T0 + 4 * MINUTE - 30, rows=0, files=[])
    upload(moto, local, prefix, "m", [*ids, "zz-overlap"])
    intake = Intake(cfg, clock=lambda: NOW)
    assert [e.partition_id for e in intake.scan()] == [ids[3]]
    assert "malformed manifest" in reason(moto, prefix, "m", ids[0])
    assert "not a parquet file" in reason(moto, prefix, "m", ids[1])
    assert "row count: the manifest says 4 rows, the files hold 5" in reason(moto, prefix, "m", ids[2])
    assert "overlaps partition m-0003" in reason(moto, prefix, "m", "zz-overlap")
    # the bad ones' files went with them: nothing lost
    assert f"{prefix}/_quarantine/m/{ids[1]}/part-0.parquet" in moto.keys(f"{prefix}/_quarantine/")
    intake.archive(job(intake.partition("m", ids[3]).arrived()))
    write_minutes(stage, "m", 3, 1, seed=7)  # the loaded id again, other rows
    upload(moto, local, prefix, "m", [ids[3]])
    assert intake.scan() == []
    assert "already loaded with different content" in reason(moto, prefix, "m", ids[3])
    assert intake.quarantined["m"] == 5 and intake.accepted["m"] == 1

    # after acceptance: a file rewritten before the job read it makes the partition unloadable
    write_minutes(stage, "a", 0, 1)
    upload(moto, local, prefix, "a", ["a-0000"])
    [ev] = intake.scan()
    moto.client().put_object(Bucket=moto.bucket, Key=f"{prefix}/a/a-0000/part-0.parquet", Body=b"gone bad")
    assert "unloadable after acceptance" in intake.recheck(job(ev, "a_raw"))["a-0000"]


def test_a_large_file_is_read_from_a_download_with_the_same_fingerprint(moto: S3Server, tmp_path: Path, prefix: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from warehouse.landing import manifest

    cfg, stage = configs(tmp_path, moto, prefix)
    ids = write_minutes(stage, "m", 0, 1)
    upload(moto, staged(stage), prefix, "m", ids)
    in_memory = Intake(cfg, clock=lambda: NOW).scan()[0].fingerprint
    monkeypatch.setattr(manifest, "SMALL_FILE", 0)  # every file is large: downloaded, read from disk
    assert Intake(cfg, clock=lambda: NOW).scan()[0].fingerprint == in_memory


def test_the_http_intake_on_a_bucket(moto: S3Server, tmp_path: Path, prefix: str) -> None:
    """POST /v1/streams/{stream}/partitions with the landing zone on a bucket, through the real API
    and a real HTTP client: the files PUT first, the manifest POSTed; a retry is a duplicate; a
    manifest naming a file that is not there is quarantined, with what was sent."""
    import httpx
    from prometheus_client import CollectorRegistry
    from test_api import AUTH, TOKEN, IntakeBackend

    from ops.api import ApiServer, create_app

    cfg, stage = configs(tmp_path, moto, prefix)
    ids = write_minutes(stage, "m", 0, 2)
    upload(moto, staged(stage), prefix, "m", ids, manifest=False)
    manifests = [json.loads((staged(stage) / "m" / pid / "_partition.json").read_text()) for pid in ids]
    backend = IntakeBackend(cfg)
    srv = ApiServer(create_app(backend, CollectorRegistry(), token=TOKEN), "127.0.0.1", 0)
    port = srv.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, headers=AUTH) as client:
            r = client.post("/v1/streams/m/partitions", json={**manifests[0], "id": ids[0]})
            assert r.status_code == 202, r.text
            assert backend.arrived[-1].files[0].startswith(f"s3a://{moto.bucket}/{prefix}/m/{ids[0]}/")
            assert f"{prefix}/m/{ids[0]}/_partition.json" in moto.keys(prefix)  # kept for a restart
            r = client.post("/v1/streams/m/partitions", json={**manifests[0], "id": ids[0]})
            assert r.status_code == 200 and r.json()["status"] == "duplicate"
            r = client.post("/v1/streams/m/partitions", json={**manifests[1], "id": ids[1], "files": ["nope.parquet"]})
            assert r.status_code == 422 and "file missing: 'nope.parquet'" in r.text
    finally:
        srv.stop()
    assert "file missing" in reason(moto, prefix, "m", ids[1])
    c = moto.client()
    sent = json.loads(c.get_object(Bucket=moto.bucket, Key=f"{prefix}/_quarantine/m/{ids[1]}/_partition.json")
                      ["Body"].read())
    assert sent["files"] == ["nope.parquet"]
    assert backend.intake.scan() == []  # the scanner beside it finds the POSTed one pending: once
    assert len(backend.arrived) == 1


def test_the_local_store_is_the_directory_it_always_was(tmp_path: Path) -> None:
    cfg = parse_config(warehouse_dict(tmp_path))
    write_minutes(cfg, "m", 0, 1)
    intake = Intake(cfg)
    assert isinstance(intake.store, LocalStore) and intake.landing == (tmp_path / "landing").resolve()
    [ev] = intake.scan()
    assert ev.files == (str((tmp_path / "landing" / "m" / "m-0000" / "part-0.parquet").resolve()),)
