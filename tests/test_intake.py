"""The landing zone (docs/warehouse.md §3): discovery, every quarantine case, duplicates, the HTTP path.

No Spark here: validation reads Parquet metadata and the time column with pyarrow.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import MINUTE, T0, make_config, warehouse_dict, write_minutes

from warehouse.config import parse_config
from warehouse.lake.recovery import RecoveryState, TableState, read_table_state
from warehouse.landing.intake import Intake, PartitionRejected, Submitted, UnknownStream, Windows
from warehouse.times import parse_time


@pytest.fixture()
def cfg(tmp_path: Path):
    return make_config(tmp_path)


def quarantined(cfg, stream: str, pid: str) -> str:
    """The reason file of a quarantined partition (asserts it was moved)."""
    q = Path(cfg.warehouse.landing) / "_quarantine" / stream / pid
    assert q.is_dir(), f"{q} not quarantined"
    assert not (Path(cfg.warehouse.landing) / stream / pid).exists()
    return (q / "reason").read_text()


def rewrite_manifest(cfg, stream: str, pid: str, **changes) -> None:
    p = Path(cfg.warehouse.landing) / stream / pid / "_partition.json"
    m = json.loads(p.read_text())
    for k, v in changes.items():
        if v is None:
            m.pop(k, None)
        else:
            m[k] = v
    p.write_text(json.dumps(m))


def test_discovers_complete_partitions_in_order_and_once(cfg) -> None:
    write_minutes(cfg, "m", 0, 3)
    write_minutes(cfg, "a", 0, 2)
    # an incomplete partition (no manifest yet) is invisible
    (Path(cfg.warehouse.landing) / "m" / "m-9999").mkdir()
    intake = Intake(cfg)
    got = intake.scan()
    assert [(e.stream, e.partition_id) for e in got] == [
        ("a", "a-0000"), ("a", "a-0001"), ("m", "m-0000"), ("m", "m-0001"), ("m", "m-0002")]
    e = got[2]
    assert (e.start, e.end, e.rows) == (T0, T0 + MINUTE, 4)
    assert intake.scan() == []  # announced once
    assert intake.accepted["m"] == 3 and sum(intake.quarantined.values()) == 0
    assert len(intake.partition("m", "m-0001").files) == 1


def test_a_directory_naming_no_stream_is_logged_and_counted_once_and_left_in_place(cfg, caplog) -> None:
    """A producer writing under a directory that names no configured stream (a typo) loses
    nothing silently: the directory's complete partitions are counted while there (`unknown`, the
    daemon's freshet_landing_unknown_partitions), logged once with the known streams, and left
    where they are until the stream exists."""
    write_minutes(cfg, "m", 0, 1)
    landing = Path(cfg.warehouse.landing)
    (landing / "m").rename(landing / "mm")  # the typo: `mm/` instead of `m/`
    (landing / "notes").mkdir()  # a directory without partitions is nobody's business
    clock = [T0]
    intake = Intake(cfg, clock=lambda: clock[0])
    with caplog.at_level("WARNING", logger="freshet.intake"):
        assert intake.scan() == []
    assert intake.unknown == {"mm": 1}
    assert "mm/ names no configured stream" in caplog.text and "m-0000" in caplog.text
    assert "known streams: a, m" in caplog.text
    caplog.clear()
    clock[0] += 60
    with caplog.at_level("WARNING", logger="freshet.intake"):
        intake.scan()
    assert intake.unknown == {"mm": 1} and caplog.text == ""  # logged once
    assert (landing / "mm" / "m-0000" / "_partition.json").is_file()  # left in place
    (landing / "mm").rename(landing / "m")  # fixed: the partition loads
    clock[0] += 60
    assert [e.partition_id for e in intake.scan()] == ["m-0000"] and intake.unknown == {}


#: A manifest's change (of m-0000, one minute from T0) and the reason it is quarantined for: the
#: local landing zone's cases here, the bucket's in tests/test_landing_s3.py.
BAD_MANIFESTS = [
    ({"start": None}, "missing field(s) 'start'"),
    ({"rows": None, "files": None}, "missing field(s) 'files', 'rows'"),
    ({"end": T0 - 10}, "is not after start"),
    ({"end": "yesterday"}, "not an ISO-8601 time"),
    ({"rows": -1}, "bad field 'rows'"),
    ({"files": ["nope.parquet"]}, "file missing: 'nope.parquet'"),
    ({"files": ["../m-0001/part-0.parquet"]}, "file outside the landing zone"),
    ({"files": ["/etc/passwd"]}, "file outside the landing zone"),
    ({"rows": 5}, "row count: the manifest says 5 rows, the files hold 4"),
    ({"start": T0 + 30}, "rows outside (start, end]"),
    ({"end": T0 + 30}, "rows outside (start, end]"),
]


@pytest.mark.parametrize(("change", "reason"), BAD_MANIFESTS)
def test_bad_manifests_are_quarantined_with_a_reason(cfg, change, reason) -> None:
    write_minutes(cfg, "m", 0, 2)
    rewrite_manifest(cfg, "m", "m-0000", **change)
    intake = Intake(cfg)
    got = intake.scan()
    assert [e.partition_id for e in got] == ["m-0001"]  # the other partition is unaffected
    assert reason in quarantined(cfg, "m", "m-0000")
    assert intake.quarantined["m"] == 1


def test_malformed_json_and_non_object(cfg) -> None:
    write_minutes(cfg, "m", 0, 2)
    landing = Path(cfg.warehouse.landing)
    (landing / "m" / "m-0000" / "_partition.json").write_text("{not json")
    (landing / "m" / "m-0001" / "_partition.json").write_text("[1, 2]")
    write_minutes(cfg, "a", 0, 1)
    intake = Intake(cfg)
    assert [e.partition_id for e in intake.scan()] == ["a-0000"]  # other streams keep going
    assert "malformed manifest" in quarantined(cfg, "m", "m-0000")
    assert "malformed manifest" in quarantined(cfg, "m", "m-0001")


def test_symlink_out_of_the_landing_zone(cfg, tmp_path: Path) -> None:
    write_minutes(cfg, "m", 0, 1)
    d = Path(cfg.warehouse.landing) / "m" / "m-0000"
    outside = tmp_path / "outside.parquet"
    (d / "part-0.parquet").rename(outside)
    os.symlink(outside, d / "part-0.parquet")
    Intake(cfg).scan()
    assert "symlink" in quarantined(cfg, "m", "m-0000")


def test_wrong_format(cfg) -> None:
    write_minutes(cfg, "m", 0, 1)
    (Path(cfg.warehouse.landing) / "m" / "m-0000" / "part-0.parquet").write_text("ts,k,v,id\n1,r1,2.0,3\n")
    Intake(cfg).scan()
    assert "wrong format: part-0.parquet is not a parquet file" in quarantined(cfg, "m", "m-0000")


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ([("ts", pa.timestamp("us", "UTC")), ("k", pa.string()), ("v", pa.float64())], "missing column(s) id"),
        ([("ts", pa.timestamp("us", "UTC")), ("k", pa.string()), ("v", pa.string()), ("id", pa.int64())],
         "v is string, declared double"),
        ([("ts", pa.timestamp("us", "UTC")), ("k", pa.string()), ("v", pa.float64()), ("id", pa.int64()),
          ("extra", pa.int32())], "undeclared column(s) extra"),
        ([("ts", pa.timestamp("ns", "UTC")), ("k", pa.string()), ("v", pa.float64()), ("id", pa.int64())],
         "nanosecond"),
    ],
)
def test_schema_mismatch(cfg, schema, reason) -> None:
    import datetime as dt

    write_minutes(cfg, "m", 0, 1)
    d = Path(cfg.warehouse.landing) / "m" / "m-0000"
    t = dt.datetime.fromtimestamp(T0 + 5, dt.UTC)
    values = {"ts": [t] * 4, "k": ["r1"] * 4, "v": [1.0] * 4, "id": [1, 2, 3, 4], "extra": [0] * 4}
    if pa.types.is_string(dict(schema)["v"] if "v" in dict(schema) else pa.float64()):
        values["v"] = ["x"] * 4
    s = pa.schema(schema)
    pq.write_table(pa.table({f.name: values[f.name] for f in s}, schema=s), d / "part-0.parquet",
                   version="2.6", coerce_timestamps=None)
    Intake(cfg).scan()
    r = quarantined(cfg, "m", "m-0000")
    assert "schema mismatch" in r and reason in r


@pytest.mark.parametrize("statistics", [True, False])
@pytest.mark.parametrize(
    ("offsets", "reason"),
    [
        ([1, 30, 60, 60], None),
        ([1, 30, 60, 61], "1 row(s) of part-0.parquet have ts outside"),
        ([0, 30, 60, 60], "1 row(s) of part-0.parquet have ts outside"),
        ([1, None, 60, 60], "1 row(s) with no ts"),
    ],
)
def test_row_times_are_checked_with_or_without_parquet_statistics(cfg, statistics, offsets, reason) -> None:
    """Validation reads the time column's min/max from Parquet statistics when the file has them
    (no data read), and the column itself otherwise; several row groups are all checked."""
    import datetime as dt

    d = Path(cfg.warehouse.landing) / "m" / "m-0000"
    d.mkdir(parents=True)
    ts = [None if o is None else dt.datetime.fromtimestamp(T0 + o, dt.UTC) for o in offsets]
    s = pa.schema([("ts", pa.timestamp("us", "UTC")), ("k", pa.string()), ("v", pa.float64()), ("id", pa.int64())])
    table = pa.table({"ts": ts, "k": ["r"] * 4, "v": [1.0] * 4, "id": [1, 2, 3, 4]}, schema=s)
    pq.write_table(table, d / "part-0.parquet", row_group_size=2, write_statistics=statistics)
    (d / "_partition.json").write_text(json.dumps({"start": T0, "end": T0 + 60, "files": ["part-0.parquet"],
                                                   "rows": 4}))
    got = Intake(cfg).scan()
    if reason is None:
        assert [e.partition_id for e in got] == ["m-0000"]
    else:
        assert got == [] and reason in quarantined(cfg, "m", "m-0000")


def test_empty_partition_is_valid(cfg) -> None:
    d = Path(cfg.warehouse.landing) / "m" / "m-0000"
    d.mkdir(parents=True)
    (d / "_partition.json").write_text(json.dumps({"start": T0, "end": T0 + 60, "files": [], "rows": 0}))
    [e] = Intake(cfg).scan()
    assert (e.partition_id, e.rows, e.end) == ("m-0000", 0, T0 + 60)


def test_duplicates_of_loaded_partitions(cfg) -> None:
    write_minutes(cfg, "m", 0, 2)
    first = Intake(cfg)
    first.scan()
    fp0 = first.partition("m", "m-0000").fingerprint
    # m-0000 was loaded with this content, m-0001 with different content (as the Delta log says)
    state = RecoveryState(tables={"m_raw": TableState(freshness=T0 + 60, partitions={"m-0000": fp0, "m-0001": "x"})},
                          loaded={"m": {"m-0000": fp0, "m-0001": "x"}})
    intake = Intake(cfg, state)
    assert intake.scan() == []
    assert intake.duplicates["m"] == 1
    assert (Path(cfg.warehouse.landing) / "_loaded" / "m" / "m-0000").is_dir()  # archived, a no-op
    assert "already loaded with different content" in quarantined(cfg, "m", "m-0001")


def test_submit_a_manifest_dict(cfg) -> None:
    write_minutes(cfg, "m", 0, 1)
    d = Path(cfg.warehouse.landing) / "m" / "m-0000"
    manifest = json.loads((d / "_partition.json").read_text())
    (d / "_partition.json").unlink()  # the producer POSTs instead of writing the manifest
    intake = Intake(cfg)
    sub = intake.submit("m", {**manifest, "id": "m-0000"})
    ev = sub.arrived
    assert sub.partition_id == "m-0000" and ev is not None and ev.partition_id == "m-0000" and ev.rows == 4
    assert (d / "_partition.json").is_file()  # persisted: survives a restart
    assert intake.scan() == []
    assert intake.submit("m", {**manifest, "id": "m-0000"}) == Submitted("m-0000", None)  # the same again: a no-op
    with pytest.raises(UnknownStream, match="unknown stream 'nope'"):
        intake.submit("nope", manifest)
    write_minutes(cfg, "m", 1, 1)
    (Path(cfg.warehouse.landing) / "m" / "m-0001" / "_partition.json").unlink()
    with pytest.raises(PartitionRejected, match="row count"):
        intake.submit("m", {**manifest, "start": T0 + 60, "end": T0 + 120, "rows": 9, "id": "m-0001"})
    assert "row count" in quarantined(cfg, "m", "m-0001")


def test_the_id_of_a_posted_manifest_defaults_to_its_end(cfg) -> None:
    d = Path(cfg.warehouse.landing) / "m" / "20251124T160100Z"
    d.mkdir(parents=True)
    sub = Intake(cfg).submit("m", {"start": T0, "end": "2025-11-24T16:01:00Z", "files": [], "rows": 0})
    assert sub.partition_id == "20251124T160100Z" and sub.arrived is not None


@pytest.mark.parametrize(
    ("change", "kind", "reason"),
    [
        ({"files": ["../m-0001/part-0.parquet"]}, "outside_landing", "file outside the landing zone"),
        ({"files": ["/etc/passwd"]}, "outside_landing", "file outside the landing zone"),
        ({"end": T0 - 10}, "malformed", "is not after start"),
        ({"end": T0}, "malformed", "is not after start"),
        ({"rows": -1}, "malformed", "bad field 'rows'"),
        ({"extra": 1}, "malformed", "unknown field(s) 'extra'"),
        ({"id": "m 0000"}, "bad_id", "bad partition id 'm 0000'"),  # not a valid id, but a usable name
    ],
)
def test_posted_manifests_rejected_before_the_files_are_read_are_quarantined(cfg, change, kind, reason) -> None:
    """The 422s that failed before validation left no trace."""
    pid = change.get("id", "m-0000")
    write_minutes(cfg, "m", 0, 1, pid_prefix="" if pid == "m-0000" else "x")
    d = Path(cfg.warehouse.landing) / "m" / ("m-0000" if pid == "m-0000" else "xm-0000")
    if pid != "m-0000":
        d = d.rename(d.parent / pid)
    manifest = json.loads((d / "_partition.json").read_text())
    (d / "_partition.json").unlink()
    intake = Intake(cfg)
    with pytest.raises(PartitionRejected) as err:
        intake.submit("m", {**manifest, "id": "m-0000", **change})
    assert err.value.kind == kind and err.value.quarantined and err.value.partition == pid
    q = Path(cfg.warehouse.landing) / "_quarantine" / "m" / pid
    assert reason in (q / "reason").read_text()
    assert json.loads((q / "_partition.json").read_text())["rows"] == change.get("rows", 4)  # what was sent
    assert (q / "part-0.parquet").is_file() and not d.exists()  # the files moved with it
    assert intake.quarantined["m"] == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"id": "../x", "start": T0, "end": T0 + 60, "files": [], "rows": 0}, "bad partition id '../x'"),
        ({"id": "a/b", "start": T0, "end": T0 + 60, "files": [], "rows": 0}, "bad partition id"),
        ({"id": "_quarantine", "start": T0, "end": T0 + 60, "files": [], "rows": 0}, "bad partition id"),
        ({"id": 7, "start": T0, "end": T0 + 60, "files": [], "rows": 0}, "bad partition id 7"),
        ({"start": T0, "end": "soon", "files": [], "rows": 0}, "bad field 'end'"),
        ({"start": T0, "files": [], "rows": 0}, "missing field(s) 'id' and 'end'"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_manifests_that_name_no_usable_partition_are_refused_not_quarantined(cfg, body, reason) -> None:
    intake = Intake(cfg)
    with pytest.raises(PartitionRejected, match=re.escape(reason)) as err:
        intake.submit("m", body)
    assert not err.value.quarantined
    assert not (Path(cfg.warehouse.landing) / "_quarantine").exists()


def test_already_pending_with_other_content_quarantines_the_manifest_not_the_files(cfg) -> None:
    write_minutes(cfg, "m", 0, 1)
    d = Path(cfg.warehouse.landing) / "m" / "m-0000"
    manifest = json.loads((d / "_partition.json").read_text())
    (d / "_partition.json").unlink()
    intake = Intake(cfg)
    assert intake.submit("m", {**manifest, "id": "m-0000"}).arrived is not None
    with pytest.raises(PartitionRejected, match="already pending with different content") as err:
        intake.submit("m", {**manifest, "end": T0 + 61, "id": "m-0000"})
    assert err.value.kind == "conflict" and err.value.quarantined
    q = Path(cfg.warehouse.landing) / "_quarantine" / "m" / "m-0000"
    assert "already pending with different content" in (q / "reason").read_text()
    assert json.loads((q / "_partition.json").read_text())["end"] == T0 + 61
    assert (d / "part-0.parquet").is_file() and intake.partition("m", "m-0000").end == T0 + MINUTE  # untouched
    assert intake.quarantined["m"] == 1


# ---- future-dated partitions (defect 2) ----------------------------------------------------
def empty_partition(cfg, stream: str, pid: str, start: float, end: float) -> None:
    d = Path(cfg.warehouse.landing) / stream / pid
    d.mkdir(parents=True)
    (d / "_partition.json").write_text(json.dumps({"start": start, "end": end, "files": [], "rows": 0}))


def test_a_partition_ending_beyond_the_clock_plus_skew_is_quarantined(cfg) -> None:
    now = T0 + 3600.0
    empty_partition(cfg, "m", "ok", now - 60, now + 300)  # exactly the default skew (5m): accepted
    empty_partition(cfg, "m", "future", now, now + 301)
    empty_partition(cfg, "m", "y2030", now, 1_900_000_000.0)
    intake = Intake(cfg, clock=lambda: now)
    got = intake.scan()
    assert [e.partition_id for e in got] == ["ok"]
    assert max(e.end for e in got) <= now + 300  # freshness can never run ahead of clock + skew
    r = quarantined(cfg, "m", "future")
    assert "beyond the daemon's clock" in r and "max_future_skew" in r and "5m" in r
    assert "2030-03-17" in quarantined(cfg, "m", "y2030")
    # the same over the POST path, with the stream's own max_future_skew
    raw = warehouse_dict(Path(cfg.warehouse.root).parent)
    raw["streams"][1]["max_future_skew"] = "0s"
    intake = Intake(parse_config(raw), clock=lambda: now)
    (Path(cfg.warehouse.landing) / "a" / "p1").mkdir(parents=True)
    with pytest.raises(PartitionRejected, match="beyond the daemon's clock") as err:
        intake.submit("a", {"id": "p1", "start": now - 60, "end": now + 1, "files": [], "rows": 0})
    assert err.value.kind == "future"
    assert "0s (max_future_skew)" in quarantined(cfg, "a", "p1")
    (Path(cfg.warehouse.landing) / "a" / "p2").mkdir(parents=True)
    assert intake.submit("a", {"id": "p2", "start": now - 60, "end": now, "files": [], "rows": 0}).arrived


# ---- overlapping windows (defect 3) --------------------------------------------------------
def test_a_window_overlapping_a_pending_one_under_another_id_is_quarantined(cfg) -> None:
    write_minutes(cfg, "m", 0, 2)  # m-0000 (T0, T0+60], m-0001 (T0+60, T0+120]
    intake = Intake(cfg)
    assert len(intake.scan()) == 2
    write_minutes(cfg, "m", 0, 1, pid_prefix="again-")  # the same window and rows under a new id
    write_minutes(cfg, "m", 2, 1)  # adjacent: (T0+120, T0+180] is fine
    empty_partition(cfg, "m", "straddle", T0 + 30, T0 + 90)
    empty_partition(cfg, "m", "inside", T0 + 10, T0 + 20)
    empty_partition(cfg, "m", "around", T0 - 60, T0 + 240)
    got = intake.scan()
    assert [e.partition_id for e in got] == ["m-0002"]
    assert ("overlaps partition m-0000 (2025-11-24T16:00:00Z, 2025-11-24T16:01:00Z]"
            in quarantined(cfg, "m", "again-m-0000"))
    assert "overlaps partition m-0001" in quarantined(cfg, "m", "straddle")
    assert "overlaps partition m-0000" in quarantined(cfg, "m", "inside")
    assert "overlaps partition" in quarantined(cfg, "m", "around")
    assert intake.quarantined["m"] == 4
    write_minutes(cfg, "a", 0, 1)  # another stream's windows are its own
    assert [e.partition_id for e in intake.scan()] == ["a-0000"]


def test_a_window_overlapping_a_loaded_one_is_quarantined_after_a_restart(cfg) -> None:
    # what read_table_state recovers from the base commits' userMetadata "windows"
    state = RecoveryState(tables={"m_raw": TableState(freshness=T0 + 120, partitions={"p0005": "fp"},
                                                      windows={"p0005": (T0 + 60, T0 + 120)})},
                          loaded={"m": {"p0005": "fp"}})
    empty_partition(cfg, "m", "new", T0 + 100, T0 + 110)
    empty_partition(cfg, "m", "after", T0 + 120, T0 + 180)
    intake = Intake(cfg, state)
    got = intake.scan()
    assert [e.partition_id for e in got] == ["after"]
    assert "overlaps partition p0005 (2025-11-24T16:01:00Z, 2025-11-24T16:02:00Z]" in quarantined(cfg, "m", "new")


def test_allow_overlap_accepts_split_windows(tmp_path: Path) -> None:
    raw = warehouse_dict(tmp_path)
    raw["streams"][0]["allow_overlap"] = True
    cfg = parse_config(raw)
    write_minutes(cfg, "m", 0, 1)
    write_minutes(cfg, "m", 0, 1, pid_prefix="b-", seed=1)
    got = Intake(cfg).scan()
    assert [e.partition_id for e in got] == ["b-m-0000", "m-0000"]


def test_windows_are_a_binary_search() -> None:
    w = Windows()
    n = 200_000
    t = time.perf_counter()
    for i in range(n):  # out of order: every other window first
        j = (2 * i) % n + (2 * i) // n
        w.add(f"p{j}", j * 60.0, (j + 1) * 60.0)
    assert w.overlapping(n * 60.0, n * 60.0 + 60, "new") is None
    assert w.overlapping(59.0, 60.0, "new")[2] == "p0"
    assert w.overlapping(59.0, 61.0, "new")[2] == "p1"
    assert w.overlapping(60.0 * 777 + 1, 60.0 * 777 + 2, "new")[2] == "p777"
    assert w.overlapping(60.0 * 777, 60.0 * 778, "p777") is None  # itself
    checks = time.perf_counter()
    for i in range(n):
        assert w.overlapping(i * 60.0 + 1, i * 60.0 + 2, "x") is not None
    per_check = (time.perf_counter() - checks) / n
    assert per_check < 20e-6, per_check  # a scan of 200,000 windows would take milliseconds
    assert len(w) == n and time.perf_counter() - t < 30


def test_a_refused_partition_frees_its_window(cfg) -> None:
    write_minutes(cfg, "m", 0, 1)
    intake = Intake(cfg)
    [ev] = intake.scan()
    intake.refuse("m", ev.partition_id, "no table reads stream 'm'")  # the Scheduler said no
    assert "no table reads" in quarantined(cfg, "m", "m-0000") and intake.quarantined["m"] == 1
    write_minutes(cfg, "m", 0, 1, pid_prefix="again-")  # the window may come again
    assert [e.partition_id for e in intake.scan()] == ["again-m-0000"]
    w = Windows()
    for pid in ("a", "b", "c"):
        w.add(pid, 0.0, 10.0)
    w.discard("b")
    w.discard("zz")
    assert len(w) == 2 and [x[2] for x in w._items] == ["a", "c"]


def test_read_table_state_recovers_partition_windows(tmp_path: Path) -> None:
    """The base commit's userMetadata "windows" (warehouse/lake/executor.py), read back without Spark;
    an old commit without windows is skipped."""
    log = tmp_path / "m_raw" / "_delta_log"
    log.mkdir(parents=True)

    def commit(v: int, meta: dict) -> None:
        lines = [{"commitInfo": {"userMetadata": json.dumps({"freshet": 1, **meta})}},
                 {"txn": {"appId": "freshet/m_raw", "version": v}}]
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")

    commit(0, {"kind": "base", "partitions": {"old": "f0"}, "freshness": T0 + 60, "window": [T0, T0 + 60]})
    commit(1, {"kind": "base", "partitions": {"p1": "f1", "p2": "f2"}, "freshness": T0 + 180,
               "window": [T0 + 60, T0 + 180], "windows": {"p1": [T0 + 60, T0 + 120], "p2": [T0 + 120, T0 + 180]}})
    st = read_table_state(str(tmp_path / "m_raw"), "m_raw")
    assert st.partitions == {"old": "f0", "p1": "f1", "p2": "f2"}
    assert st.windows == {"p1": (T0 + 60, T0 + 120), "p2": (T0 + 120, T0 + 180)}
    assert st.copy().windows == st.windows


# ---- validation outside the lock (defect 7) -----------------------------------------------
def test_identical_submissions_at_once_give_one_accept_and_one_duplicate(cfg) -> None:
    ids = [pid for i in range(20) for pid in write_minutes(cfg, "m", 2 * i, 1)]  # gaps: end + 1 overlaps nothing
    manifests = {}
    for pid in ids:
        d = Path(cfg.warehouse.landing) / "m" / pid
        manifests[pid] = {**json.loads((d / "_partition.json").read_text()), "id": pid}
        (d / "_partition.json").unlink()
    intake = Intake(cfg)
    for pid in ids[:10]:  # the same manifest twice at once
        results = race(lambda pid=pid: intake.submit("m", manifests[pid]), lambda pid=pid: intake.submit("m", manifests[pid]))
        assert sorted(r.arrived is None for r in results) == [False, True], results
    for pid in ids[10:]:  # different content at once: one accepted, the other quarantined
        other = {**manifests[pid], "end": parse_time(manifests[pid]["end"]) + 1}
        results = race(lambda pid=pid: intake.submit("m", manifests[pid]), lambda pid=pid, o=other: intake.submit("m", o))
        kinds = sorted(type(r).__name__ for r in results)
        assert kinds == ["PartitionRejected", "Submitted"], results
        assert next(r for r in results if isinstance(r, Submitted)).arrived is not None
    assert intake.accepted["m"] == 20 and intake.duplicates["m"] == 10 and intake.quarantined["m"] == 10
    assert {p.id for p in intake.pending()} == set(ids)
    assert all((Path(cfg.warehouse.landing) / "m" / pid / "part-0.parquet").is_file() for pid in ids)


def race(*calls):
    """Run `calls` in threads released at once; their results (or exceptions)."""
    barrier = threading.Barrier(len(calls))
    out: list = [None] * len(calls)

    def run(i, f):
        barrier.wait()
        try:
            out[i] = f()
        except Exception as e:  # noqa: BLE001
            out[i] = e

    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return out


def test_archiving_never_waits_for_a_redelivery_being_validated(cfg, held_validation) -> None:
    """The scheduler loop archives after a commit; a re-delivery of the same partition being
    validated at that moment archives the directory itself once it finds the id loaded."""
    write_minutes(cfg, "m", 0, 1)
    intake = Intake(cfg)
    [ev] = intake.scan()
    d = Path(cfg.warehouse.landing) / "m" / "m-0000"
    manifest = {**json.loads((d / "_partition.json").read_text()), "id": "m-0000"}
    entered, release = held_validation
    result: list = []
    t = threading.Thread(target=lambda: result.append(intake.submit("m", manifest)))
    t.start()
    try:
        assert entered.wait(5)
        t0 = time.perf_counter()
        intake.mark_loaded("m_raw", "m", {"m-0000": ev.fingerprint})
        assert time.perf_counter() - t0 < 1.0 and intake.pending() == []
    finally:
        release.set()
        t.join(10)
    assert result == [Submitted("m-0000", None)]  # a duplicate of what is loaded: a no-op
    assert (Path(cfg.warehouse.landing) / "_loaded" / "m" / "m-0000" / "part-0.parquet").is_file()
    assert not d.exists() and intake.quarantined["m"] == 0


def test_validation_runs_outside_the_intake_lock(cfg, monkeypatch) -> None:
    """A partition whose files take long to read does not hold up another one, nor the scanner."""
    import warehouse.landing.intake as intake_mod

    write_minutes(cfg, "m", 0, 1)
    write_minutes(cfg, "a", 0, 1)
    slow = Path(cfg.warehouse.landing) / "m" / "m-0000"
    manifest = {**json.loads((slow / "_partition.json").read_text()), "id": "m-0000"}
    (slow / "_partition.json").unlink()
    entered, release = threading.Event(), threading.Event()
    real = intake_mod.validate_partition

    def validate(stream, *args, **kw):
        if stream.name == "m":
            entered.set()
            release.wait(10)
        return real(stream, *args, **kw)

    monkeypatch.setattr(intake_mod, "validate_partition", validate)
    intake = Intake(cfg)
    t = threading.Thread(target=lambda: intake.submit("m", manifest))
    t.start()
    try:
        assert entered.wait(5)
        done = threading.Event()
        threading.Thread(target=lambda: (intake.scan(), intake.pending(), done.set())).start()
        assert done.wait(3), "the scanner waited for another partition's validation"
        assert [p.id for p in intake.pending()] == ["a-0000"]
    finally:
        release.set()
        t.join(10)
    assert {p.id for p in intake.pending()} == {"a-0000", "m-0000"}


def test_demo_producer_writes_valid_partitions_at_each_period(tmp_path: Path) -> None:
    """`freshet demo produce` on the embedded netmon config: every partition passes validation."""
    from ops.demo import Producer
    from warehouse.config import load_config, parse_config

    raw = load_config(Path(__file__).resolve().parents[1] / "examples" / "netmon.yaml").model_dump(by_alias=True)
    raw["warehouse"] = {"root": str(tmp_path / "data"), "landing": str(tmp_path / "landing")}
    cfg = parse_config(raw)
    now = [T0 + 9 * 3600.0]  # a fake wall clock at 01:00 UTC; warehouse time starts 2 h ago, 3600x faster
    p = Producer(cfg, speed=3600.0, start=now[0] - 7200.0, clock=lambda: now[0])
    assert p.step() == 4  # each stream's last partition complete at the start (the daily dump too)
    now[0] += 1.0  # one wall second = one warehouse hour
    first = 4 + p.step()
    now[0] += 5.0  # caught up with the wall clock: never produces data from the future
    second = p.step()
    intake = Intake(cfg)
    got = intake.scan()
    assert sum(intake.quarantined.values()) == 0, dict(intake.last_rejection)
    by_stream = {s: sum(1 for e in got if e.stream == s) for s in ("router_cpu", "syslog", "link_alerts", "inventory")}
    assert by_stream == {"router_cpu": 25, "syslog": 121, "link_alerts": 121, "inventory": 2}
    assert first + second == len(got)
    assert max(e.end for e in got) <= now[0]
    assert all(e.rows > 0 for e in got if e.stream in ("router_cpu", "inventory"))


def test_csv_and_json_streams(tmp_path: Path) -> None:
    from conftest import warehouse_dict

    from warehouse.config import parse_config

    raw = warehouse_dict(tmp_path)
    raw["streams"][0]["format"] = "csv"
    raw["streams"][1]["format"] = "json"
    cfg = parse_config(raw)
    landing = Path(cfg.warehouse.landing)

    def put(stream: str, pid: str, name: str, text: str, rows: int) -> None:
        d = landing / stream / pid
        d.mkdir(parents=True)
        (d / name).write_text(text)
        (d / "_partition.json").write_text(json.dumps(
            {"start": "2025-11-24T16:00:00Z", "end": "2025-11-24T16:01:00Z", "files": [name], "rows": rows}))

    put("m", "ok", "p.csv", "ts,k,v,id\n2025-11-24T16:00:30Z,r1,1.5,1\n2025-11-24T16:01:00Z,r2,2.5,2\n", 2)
    put("m", "late-row", "p.csv", "ts,k,v,id\n2025-11-24T16:02:00Z,r1,1.5,1\n", 1)
    put("m", "bad-type", "p.csv", "ts,k,v,id\n2025-11-24T16:00:30Z,r1,high,1\n", 1)
    put("a", "ok", "p.json", '{"ts": "2025-11-24T16:00:10Z", "k": "r1", "sev": 2, "id": 7}\n', 1)
    put("a", "extra", "p.json", '{"ts": "2025-11-24T16:00:10Z", "k": "r1", "sev": 2, "id": 7, "x": 1}\n', 1)
    intake = Intake(cfg)
    assert sorted((e.stream, e.partition_id, e.rows) for e in intake.scan()) == [("a", "ok", 1), ("m", "ok", 2)]
    assert "rows outside (start, end]" in quarantined(cfg, "m", "late-row")
    assert "wrong format" in quarantined(cfg, "m", "bad-type")
    assert "wrong format" in quarantined(cfg, "a", "extra")


def test_a_table_removed_and_added_back_is_given_the_partitions_still_pending(tmp_path: Path) -> None:
    """A second base table on stream `m` is removed while a partition waits for it and added back
    while its sibling still holds the stream: the next scan announces the partition again (the
    Scheduler never gave it to the returning table), whether its sibling loaded it already or
    not. Before, the intake remembered the id as pending and skipped it: the twin never loaded it."""
    with_twin = warehouse_dict(tmp_path, extra_tables=[{"name": "m_twin", "stream": "m"}])
    cfg = parse_config(with_twin)
    write_minutes(cfg, "m", 0, 2)
    intake = Intake(cfg)
    assert [e.partition_id for e in intake.scan() if e.stream == "m"] == ["m-0000", "m-0001"]
    intake.mark_loaded("m_raw", "m", {"m-0000": intake.partition("m", "m-0000").fingerprint})
    without = parse_config(warehouse_dict(tmp_path))
    intake.reconfigure(without, RecoveryState(tables={}, loaded={}))
    assert intake.scan() == []  # nothing new while the twin is away
    intake.reconfigure(cfg, RecoveryState(tables={"m_twin": TableState()}, loaded={}))
    again = [e.partition_id for e in intake.scan() if e.stream == "m"]
    assert again == ["m-0000", "m-0001"]
    assert intake.scan() == []  # announced once


def test_a_removed_table_keeps_its_claim_until_it_returns(tmp_path: Path) -> None:
    """The sibling loads a partition after the twin was removed: the partition stays in the
    landing zone (the twin had not loaded it), is announced again when the twin returns, and is
    archived once the twin has it too."""
    cfg = parse_config(warehouse_dict(tmp_path, extra_tables=[{"name": "m_twin", "stream": "m"}]))
    write_minutes(cfg, "m", 0, 1)
    intake = Intake(cfg)
    assert [e.partition_id for e in intake.scan() if e.stream == "m"] == ["m-0000"]
    fp = {"m-0000": intake.partition("m", "m-0000").fingerprint}
    intake.reconfigure(parse_config(warehouse_dict(tmp_path)), RecoveryState(tables={}, loaded={}))
    intake.mark_loaded("m_raw", "m", fp)
    landed = Path(cfg.warehouse.landing) / "m" / "m-0000"
    assert landed.is_dir(), "archived while the removed twin had not loaded it"
    intake.reconfigure(cfg, RecoveryState(tables={"m_twin": TableState()}, loaded={}))
    assert [e.partition_id for e in intake.scan() if e.stream == "m"] == ["m-0000"]
    intake.mark_loaded("m_twin", "m", fp)
    assert not landed.exists() and (Path(cfg.warehouse.landing) / "_loaded" / "m" / "m-0000").is_dir()
