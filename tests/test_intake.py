"""The landing zone (DESIGN.md §4.3): discovery, every quarantine case, duplicates, the HTTP path.

No Spark here: validation reads Parquet metadata and the time column with pyarrow.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import MINUTE, T0, make_config, write_minutes

from warehouse.lake.recovery import RecoveryState, TableState
from warehouse.landing.intake import Intake, PartitionRejected, UnknownStream


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


@pytest.mark.parametrize(
    ("change", "reason"),
    [
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
    ],
)
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
    ev = intake.submit("m", {**manifest, "id": "m-0000"})
    assert ev is not None and ev.partition_id == "m-0000" and ev.rows == 4
    assert (d / "_partition.json").is_file()  # persisted: survives a restart
    assert intake.scan() == []
    assert intake.submit("m", {**manifest, "id": "m-0000"}) is None  # the same again: a no-op
    with pytest.raises(PartitionRejected, match="already pending with different content"):
        intake.submit("m", {**manifest, "end": T0 + 61, "id": "m-0000"})
    with pytest.raises(UnknownStream, match="unknown stream 'nope'"):
        intake.submit("nope", manifest)
    write_minutes(cfg, "m", 1, 1)
    (Path(cfg.warehouse.landing) / "m" / "m-0001" / "_partition.json").unlink()
    with pytest.raises(PartitionRejected, match="row count"):
        intake.submit("m", {**manifest, "start": T0 + 60, "end": T0 + 120, "rows": 9, "id": "m-0001"})
    assert "row count" in quarantined(cfg, "m", "m-0001")


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
