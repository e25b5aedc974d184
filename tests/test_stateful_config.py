"""Stateful tables in the config (Programming Bulk-Incremental Dataflows §3): `kind: stateful` with a key, an
increment and its folds — every mistake is named by file and field."""

from __future__ import annotations

from typing import Any

import pytest

from warehouse.config import parse_config
from warehouse.errors import ConfigError

INC = ("SELECT k, count(*) AS n, max(ts) AS last_seen, max_by(v, ts) AS v, max(ts) AS ts FROM raw "
       "WHERE ts > :window_start AND ts <= :window_end GROUP BY k")


def _config(**table: Any) -> dict[str, Any]:
    state = {"name": "state", "kind": "stateful", "sources": ["raw"], "key": ["k"], "increment": INC,
             "fold": {"n": "sum", "last_seen": "max", "v": "last"}, **table}
    return {"streams": [{"name": "e", "period": "1m", "schema": {"ts": "timestamp", "k": "string", "v": "double"}}],
            "tables": [{"name": "raw", "stream": "e"}, {k: v for k, v in state.items() if v is not None}]}


def test_a_stateful_table_parses():
    cfg = parse_config(_config(), source="wh.yaml")
    t = cfg.table("state")
    assert t.is_stateful and not t.is_base and t.key == ["k"] and t.fold["v"] == "last"
    assert not cfg.table("raw").is_stateful


@pytest.mark.parametrize(("table", "message"), [
    ({"fold": {"n": "avg", "last_seen": "max", "v": "last"}}, "tables[state].fold.n: Input should be 'sum'"),
    ({"fold": {"n": "sum", "last_seen": "max", "v": "last", "gone": "sum"}},
     "tables[state].fold: fold on 'gone', which the increment does not output"),
    ({"key": ["device"]}, "tables[state].key: key column 'device' is not an output column of the increment"),
    ({"key": []}, "tables[state].key: a stateful table needs the key columns"),
    ({"fold": {"n": "sum", "v": "last"}}, "tables[state].fold: no fold for increment column(s) last_seen"),
    ({"fold": {"n": "sum", "last_seen": "max", "v": "last"}, "time_column": "at"},
     "tables[state].time_column: `last`/`first` folds compare the increment's 'at' column"),
    ({"fold": {"n": "sum", "last_seen": "max", "v": "last", "k": "max"}}, "'k' is a key column"),
    ({"increment": "SELECT k, count(*) AS n FROM raw GROUP BY k", "fold": {"n": "sum"}},
     "tables[state].increment: must read only the new rows"),
    ({"increment": None}, "tables[state].increment: a stateful table needs the increment SQL"),
    ({"sql": "SELECT 1 AS ts"}, "tables[state].sql: a stateful table has an `increment`, not `sql`"),
    ({"lookback": "2m"}, "tables[state].lookback: does not apply to a stateful table"),
    # a first and a last cannot share one ordering column: max(ts) hides a late row earlier than the first
    ({"increment": INC.replace("max(ts) AS last_seen", "min_by(v, ts) AS w"),
      "fold": {"n": "sum", "w": "first", "v": "last"}},
     "tables[state].fold: w (first) and v (last) order by one column 'ts': a first needs the earliest time"),
    ({"increment": INC.replace("max(ts) AS last_seen", "min_by(v, ts) AS w"), "fold": {"n": "sum", "w": "first"},
      "time_column": None}, "tables[state].fold: no fold for increment column(s) v"),
    ({"increment": INC.replace("max(ts) AS last_seen", "min_by(v, ts) AS w").replace("max_by(v, ts) AS v, ", ""),
      "fold": {"n": "sum", "w": "first", "ts": "max"}},
     "tables[state].fold: w (first) order by 'ts', which is folded max: a first needs the earliest time"),
    ({"order": {"n": "last_seen"}}, "tables[state].order: 'n' is not a `last`/`first` fold column"),
    ({"order": {"v": "seen"}}, "tables[state].order: v compare the increment's 'seen' column, which it does not output"),
])
def test_mistakes_name_file_and_field(table, message):
    with pytest.raises(ConfigError) as err:
        parse_config(_config(**table), source="wh.yaml")
    assert "wh.yaml" in str(err.value) and message in str(err.value), str(err.value)


def test_a_first_and_a_last_each_order_by_their_own_column():
    inc = INC.replace("max(ts) AS last_seen", "min(ts) AS first_ts, min_by(v, ts) AS w")
    cfg = parse_config(_config(increment=inc, fold={"n": "sum", "first_ts": "min", "w": "first", "v": "last"},
                               order={"w": "first_ts"}), source="wh.yaml")
    assert cfg.table("state").order == {"w": "first_ts"}


def test_stateful_fields_on_other_tables_are_refused():
    data = _config()
    data["tables"][0] = {"name": "raw", "stream": "e", "key": ["k"]}
    with pytest.raises(ConfigError, match=r"tables\[raw\]\.key: applies to stateful tables only"):
        parse_config(data, source="wh.yaml")


def test_kind_must_agree_with_the_fields():
    data = _config()
    data["tables"][0] = {"name": "raw", "stream": "e", "kind": "stateful"}
    with pytest.raises(ConfigError, match=r"tables\[raw\]\.kind: a stateful table reads `sources`"):
        parse_config(data, source="wh.yaml")


def test_a_star_increment_is_left_to_spark():
    """Columns a `SELECT *` outputs are unknown from the text: not refused here."""
    inc = "SELECT * FROM raw WHERE ts > :window_start AND ts <= :window_end"
    assert parse_config(_config(increment=inc, fold={"v": "sum"}), source="wh.yaml").table("state").increment == inc
