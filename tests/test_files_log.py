"""`lake.files` on hand-written Delta logs (no Spark): which files a pinned version holds, which
may hold a window's rows, and when it declines (the job then reads through Delta)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from warehouse.lake.files import LiveFiles

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
    {"name": "k", "type": "string", "nullable": True, "metadata": {}},
    {"name": "date", "type": "date", "nullable": True, "metadata": {}}]})


def _add(name: str, lo: str | None, hi: str | None, **extra: Any) -> dict[str, Any]:
    stats = None if lo is None else json.dumps({"numRecords": 1, "minValues": {"ts": lo}, "maxValues": {"ts": hi}})
    return {"add": {"path": f"date=2025-11-24/{name}", "partitionValues": {"date": "2025-11-24"}, "size": 1,
                    "modificationTime": 0, "dataChange": True, "stats": stats, **extra}}


def _log(tmp: Path, *commits: list[dict[str, Any]]) -> str:
    log = tmp / "t" / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    for v, actions in enumerate(commits):
        (log / f"{v:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return str(tmp / "t")


FIRST = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
         {"metaData": {"id": "x", "format": {"provider": "parquet"}, "schemaString": SCHEMA,
                       "partitionColumns": ["date"], "configuration": {}}},
         _add("a.parquet", "2025-11-24T16:00:00.001Z", "2025-11-24T16:00:59.999Z")]


def test_a_version_holds_what_its_commits_add_and_do_not_remove(tmp_path: Path) -> None:
    path = _log(tmp_path, FIRST, [_add("b.parquet", "2025-11-24T16:01:00.5Z", "2025-11-24T16:02:00Z")],
                [{"remove": {"path": "date=2025-11-24/a.parquet", "dataChange": True}},
                 _add("c.parquet", None, None)])
    files = LiveFiles()
    assert set(files.snapshot(path, 0, "ts").files) == {"date=2025-11-24/a.parquet"}
    assert set(files.snapshot(path, 2, "ts").files) == {"date=2025-11-24/b.parquet", "date=2025-11-24/c.parquet"}
    assert files.replays == 1  # 0, then brought forward to 2
    assert set(files.snapshot(path, 1, "ts").files) == {"date=2025-11-24/a.parquet", "date=2025-11-24/b.parquet"}
    assert files.replays == 2  # an older version than the one kept: replayed


def test_the_statistics_keep_the_files_that_may_hold_the_window(tmp_path: Path) -> None:
    """(lo, hi] against [min, max + 1 ms]: Delta truncates a timestamp's statistics to the ms."""
    t16 = 1_764_000_000.0  # 2025-11-24T16:00:00Z
    path = _log(tmp_path, FIRST, [_add("b.parquet", "2025-11-24T16:01:00.500Z", "2025-11-24T16:02:00.000Z"),
                                  _add("c.parquet", None, None)])
    snap = LiveFiles().snapshot(path, 1, "ts")
    names = lambda lo, hi: sorted(p.rsplit("/", 1)[1] for p in snap.overlapping(lo, hi))  # noqa: E731
    assert names(t16 + 60, t16 + 120) == ["b.parquet", "c.parquet"]  # a ends at 16:00:59.999
    assert names(t16 - 60, t16) == ["c.parquet"]  # a starts after 16:00:00
    assert names(t16 + 59.9995, t16 + 60.2) == ["a.parquet", "c.parquet"]  # a row at 59.9995 s is in a
    assert names(t16 + 120.0005, t16 + 180) == ["b.parquet", "c.parquet"]  # max 16:02:00.000 may be .0009
    other = LiveFiles().snapshot(path, 1, "k")  # a time column that is no timestamp: every file
    assert len(other.overlapping(t16 - 60, t16)) == 3


def test_what_plain_parquet_cannot_read_is_declined(tmp_path: Path) -> None:
    dv = {"storageType": "u", "pathOrInlineDv": "x", "offset": 1, "sizeInBytes": 1, "cardinality": 1}
    cases = {
        "dv": [_add("b.parquet", None, None, deletionVector=dv)],
        "features": [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                   "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}}],
        "mapping": [{"metaData": {"id": "x", "schemaString": SCHEMA, "partitionColumns": ["date"],
                                  "configuration": {"delta.columnMapping.mode": "name"}}}],
        "prefix": [{"add": {"path": "Ab/part-1.parquet", "partitionValues": {"date": "2025-11-24"}, "size": 1,
                            "modificationTime": 0, "dataChange": True}}],
    }
    for name, commit in cases.items():
        path = _log(tmp_path / name, FIRST, commit)
        files = LiveFiles()
        assert files.snapshot(path, 0, "ts") is not None, name
        assert files.snapshot(path, 1, "ts") is None, name
    ok = _log(tmp_path / "ntz", [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                               "readerFeatures": ["timestampNtz"], "writerFeatures": ["timestampNtz"]}},
                                 *FIRST[1:]])
    assert LiveFiles().snapshot(ok, 0, "ts") is not None
    gap = _log(tmp_path / "gap", FIRST, [], [])
    (Path(gap) / "_delta_log" / f"{1:020d}.json").unlink()
    assert LiveFiles().snapshot(gap, 2, "ts") is None
    assert LiveFiles().snapshot(str(tmp_path / "none"), 0, "ts") is None
