"""The landing zone on a bucket (`warehouse.landing: s3a://bucket/prefix`, docs/warehouse.md §3): the
S3 store under the intake (warehouse.landing.store_s3), on a real S3 API (moto's server,
tests/helpers_s3.py) with a real boto3 client."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import warehouse_dict, write_minutes

from tests.helpers_s3 import CREDENTIALS, S3Server, start_s3, stop_s3
from warehouse.config import parse_config
from warehouse.landing import store_s3
from warehouse.landing.intake import Intake
from warehouse.landing.store import LocalStore
from warehouse.landing.store_s3 import S3Store


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One moto server for the module; each test works under its own prefix."""
    server = start_s3(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    stop_s3(server)


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)


@pytest.fixture()
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}/landing"


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


def test_the_local_store_is_the_directory_it_always_was(tmp_path: Path) -> None:
    cfg = parse_config(warehouse_dict(tmp_path))
    write_minutes(cfg, "m", 0, 1)
    intake = Intake(cfg)
    assert isinstance(intake.store, LocalStore) and intake.landing == (tmp_path / "landing").resolve()
    [ev] = intake.scan()
    assert ev.files == (str((tmp_path / "landing" / "m" / "m-0000" / "part-0.parquet").resolve()),)
