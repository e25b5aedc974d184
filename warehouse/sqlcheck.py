"""Every column a derived table's SQL names must exist in its sources — checked from the config
alone, with sqlglot, before any job runs (no Spark, no JVM).

The columns of a source are known from the config: a base table has its stream's declared
`schema` and its partition column (`date` or `hour`); a derived table has its SQL's output
columns (read by sqlglot) and its partition column; a stateful table has its key, its folded
columns and the time of each `last`/`first` one (lake.stateful). A SQL (a stateful table's
`increment`) is qualified against its sources' columns (sqlglot's `qualify`); a column it cannot
resolve is a problem naming the table, the column and the columns there are.

The check refuses only what it knows: a table reading a stream with no declared schema, or a
source whose output columns sqlglot cannot name (a `*` it cannot expand, an unnamed expression
whose Spark name differs from sqlglot's), is not checked — Spark finds its mistakes when the job
runs. So are SQL texts sqlglot does not parse, and the default names of generator functions
(`explode(x)` outputs `col`).
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import TYPE_CHECKING

from warehouse.sqltext import bind_window

if TYPE_CHECKING:
    from warehouse.config import FreshetConfig, StreamConfig, TableConfig

__all__ = ["column_problems"]

_UNRESOLVED = (re.compile(r"^Column '([^']+)' could not be resolved\.?(?: Line|$)"),
               re.compile(r"^Unknown column: (\S+)$"))
_GENERATOR = re.compile(r"\b(?:explode|posexplode|inline|stack|json_tuple)(?:_outer)?\s*\(", re.IGNORECASE)
_GENERATED = frozenset({"col", "pos", "key", "value"})  # Spark's names for a generator's unnamed outputs


def column_problems(config: FreshetConfig) -> list[str]:
    """One line per column a derived or stateful table's SQL names that none of its sources has:
    `tables[x].sql: column 'y' does not exist in its sources (m_raw: ts, v, date) — did you mean 'v'?`."""
    columns: dict[str, list[str] | None] = {}  # table → its columns; None: not known from the config
    problems: list[str] = []
    streams = {s.name: s for s in config.streams}  # (config.stream() is a scan: O(n²) at 10,000 tables)
    remaining = list(config.tables)
    while remaining:
        ready = [t for t in remaining if t.is_base or all(s in columns for s in t.sources)]
        if not ready:  # a cycle: the config's own check says so
            break
        for t in ready:
            columns[t.name] = _columns(streams, t, columns, problems)
        taken = {id(t) for t in ready}  # (list.remove compared models field by field: O(n²))
        remaining = [t for t in remaining if id(t) not in taken]
    return problems


def _columns(streams: dict[str, StreamConfig], t: TableConfig, columns: dict[str, list[str] | None],
             problems: list[str]) -> list[str] | None:
    """`t`'s columns (None: unknown), adding to `problems` what its SQL names that does not exist."""
    if t.is_base:
        schema = streams[t.stream].schema_ if t.stream else {}
        return [*schema, t.partition_by] if schema else None
    field, sql = ("increment", t.increment) if t.is_stateful else ("sql", t.sql)
    outputs = _check(t, field, sql, columns, problems)
    if t.is_stateful:
        from warehouse.lake.stateful import at_column

        return [*t.key, *t.fold, *(at_column(c) for c, f in t.fold.items() if f in ("last", "first"))]
    if outputs is None or any(c == "*" or c.startswith("_col_") for c in outputs):
        return None
    return [*outputs, t.partition_by]


def _check(t: TableConfig, field: str, sql: str | None, columns: dict[str, list[str] | None],
           problems: list[str]) -> list[str] | None:
    """Qualify `sql` against the sources' columns: its output column names, or None (not checked)."""
    if not sql or any(columns.get(s) is None for s in t.sources):
        return None
    outputs, name = _qualified(sql, tuple((s, tuple(columns[s] or ())) for s in t.sources))
    if name is _NOT_A_QUERY:
        problems.append(f"tables[{t.name}].{field}: not a query (a SELECT, or WITH … SELECT): {sql.strip()[:80]!r}")
    elif name is not None:
        have = {c for s in t.sources for c in columns[s] or []}
        hint = difflib.get_close_matches(name, sorted(have), n=1)
        where = "; ".join(f"{s}: {', '.join(columns[s] or [])}" for s in t.sources)
        problems.append(f"tables[{t.name}].{field}: column {name!r} does not exist in its sources ({where})"
                        + (f" — did you mean {hint[0]!r}?" if hint else ""))
    return None if outputs is None else list(outputs)


_NOT_A_QUERY = "(not a query)"  # what `_qualified` names for a text that parses to no query ("0", "a + 1")


@functools.lru_cache(maxsize=4096)  # a reload parses again only the SQL that changed (sqlglot's parse is slow)
def _qualified(sql: str, sources: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[tuple[str, ...] | None, str | None]:
    """(its output column names, None), (None, the first column it names that does not exist),
    (None, `_NOT_A_QUERY`) for an expression that is no query, or (None, None) when sqlglot cannot say."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import OptimizeError
    from sqlglot.optimizer.qualify import qualify

    schema = {s: dict.fromkeys(cols, "string") for s, cols in sources}
    try:
        tree = qualify(sqlglot.parse_one(bind_window(sql, 0.0, 1.0), read="spark"), schema=schema,
                       dialect="spark", validate_qualify_columns=True)
    except OptimizeError as err:
        message = str(err).strip()
        name = next((m.group(1) for p in _UNRESOLVED if (m := p.match(message))), None)
        if name is not None and name.lower() in _GENERATED and _GENERATOR.search(sql):
            name = None
        return None, name
    except Exception:  # noqa: BLE001 — a text sqlglot does not follow (or a bug of its): Spark judges it
        return None, None
    if not isinstance(tree, exp.Query):
        return None, _NOT_A_QUERY
    return tuple(e.alias_or_name for e in tree.selects), None
