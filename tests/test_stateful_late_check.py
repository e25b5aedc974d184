"""When a stateful fold may leave out its change-feed read for late rows (warehouse/lake/files.py,
`LiveFiles.appends_above`): only when every commit since the version it last read provably holds no
row at or below F — each appends files whose time-column statistics start above F, and nothing
else. Every other commit the log could hold keeps the read. Logs written by hand, the way Delta
writes them (one action a line), so each case is exactly the one named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from warehouse.lake.files import LiveFiles
from warehouse.times import iso

F = 1_764_000_060.0  # the state's freshness: a row at or below it is late
SCHEMA = {"type": "struct", "fields": [
    {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
    {"name": "k", "type": "string", "nullable": True, "metadata": {}},
    {"name": "n", "type": "long", "nullable": True, "metadata": {}}]}


def _meta(schema: dict[str, Any] = SCHEMA) -> dict[str, Any]:
    return {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps(schema), "partitionColumns": [],
                         "configuration": {"delta.enableChangeDataFeed": "true"}}}


def _add(name: str, low: float | None, *, stats: bool = True, **extra: Any) -> dict[str, Any]:
    s = {"numRecords": 2, "minValues": {} if low is None else {"ts": iso(low, "milliseconds"), "k": "a"},
         "maxValues": {"ts": iso(F + 600, "milliseconds"), "k": "z"}, "nullCount": {"ts": 0, "k": 0}}
    add = {"path": f"{name}.parquet", "partitionValues": {}, "size": 100, "modificationTime": 0,
           "dataChange": True, **({"stats": json.dumps(s)} if stats else {}), **extra}
    return {"add": add}


def _info(op: str = "WRITE") -> dict[str, Any]:
    return {"commitInfo": {"timestamp": 0, "operation": op, "operationParameters": {}}}


def _txn(v: int) -> dict[str, Any]:
    return {"txn": {"appId": "freshet/m_raw", "version": v}}


def _log(tmp: Path, *commits: list[dict[str, Any]]) -> str:
    """A table whose version 0 creates it and each of `commits` is the next version."""
    log = tmp / "_delta_log"
    log.mkdir(parents=True)
    first = [_info("CREATE TABLE"), {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}}, _meta(),
             _add("v0", F - 50)]
    for v, actions in enumerate([first, *commits]):
        (log / f"{v:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return str(tmp)


def test_on_time_appends_prove_no_late_row(tmp_path: Path) -> None:
    path = _log(tmp_path, [_info(), _txn(1), _add("a", F + 0.001)], [_info(), _txn(2), _add("b", F + 5),
                                                                     _add("c", F + 30)], [_info()])
    files = LiveFiles()
    assert files.appends_above(path, 0, 3, "ts", F)
    assert files.appends_above(path, 1, 2, "ts", F)
    assert not files.appends_above(path, 0, 3, "ts", F + 1)  # a row of `a` at F + 0.001 is at or below it
    assert not files.appends_above(path, 0, 3, "ts", F + 0.001)  # at the bound: late, the read stays


def test_every_other_commit_keeps_the_change_feed_read(tmp_path: Path) -> None:
    ok = [_info(), _add("ok", F + 10)]
    cases: dict[str, list[dict[str, Any]]] = {
        "a late row": [_info(), _add("late", F - 1)],
        "a row at F": [_info(), _add("atf", F)],
        "no statistics": [_info(), _add("nostats", F + 10, stats=False)],
        "statistics without the time column": [_info(), _add("nots", None)],
        "a remove (OPTIMIZE)": [_info("OPTIMIZE"), {"remove": {"path": "v0.parquet", "dataChange": False}},
                                _add("big", F + 10, dataChange=False)],
        "a deletion vector": [_info("DELETE"), _add("dv", F + 10, deletionVector={"storageType": "u"})],
        "a schema change": [_info("ADD COLUMNS"), _meta({**SCHEMA, "fields": [*SCHEMA["fields"], {
            "name": "x", "type": "long", "nullable": True, "metadata": {}}]})],
        "change-data files": [_info("MERGE"), {"cdc": {"path": "_change_data/c.parquet", "partitionValues": {},
                                                       "size": 1, "dataChange": False}}, _add("m", F + 10)],
        "a protocol change": [_info("SET TBLPROPERTIES"), {"protocol": {"minReaderVersion": 1,
                                                                         "minWriterVersion": 7}}],
    }
    for i, (name, commit) in enumerate(cases.items()):
        path = _log(tmp_path / str(i), ok, commit, ok)
        files = LiveFiles()
        assert files.appends_above(path, 0, 1, "ts", F), name  # the commit before it proves it
        assert not files.appends_above(path, 0, 3, "ts", F), name
        assert not files.appends_above(path, 1, 2, "ts", F), name
        # the one after it proves it again — except after a deletion vector: a table with them is
        # not read from its log at all (LiveFiles.snapshot)
        assert files.appends_above(path, 2, 3, "ts", F) == (name != "a deletion vector"), name


def test_a_log_that_cannot_say_keeps_the_change_feed_read(tmp_path: Path) -> None:
    path = _log(tmp_path / "gap", [_info(), _add("a", F + 10)], [_info(), _add("b", F + 10)])
    (Path(path) / "_delta_log" / f"{1:020d}.json").unlink()  # cleaned up, or never there
    assert not LiveFiles().appends_above(path, 0, 2, "ts", F)
    path = _log(tmp_path / "later", [_info(), _add("a", F + 10)])
    assert not LiveFiles().appends_above(path, 0, 2, "ts", F)  # a version the log does not hold yet
    assert not LiveFiles().appends_above(path, 0, 1, "k", F)  # the time column is not a timestamp
    assert not LiveFiles().appends_above(str(tmp_path / "none"), 0, 1, "ts", F)  # no table
