"""Binding a derived table's window into its SQL text (docs/warehouse.md §5, docs/warehouse.md §4).

A derived SQL may name its window as `:window_start` and `:window_end` (timestamps of
`(F_D, TE]`). Spark 4.1+ no longer binds named parameters passed to `spark.sql(sql, args=…)`
in classic PySpark without a legacy flag (apache/spark#55392), and not at all over Spark
Connect 4.2 (UNBOUND_SQL_PARAMETER), so Freshet binds them itself, the way Spark's own
pre-4.1 substitution did: each marker becomes a timestamp literal. Pure text, no Spark.

Markers are recognised outside string literals ('…', "…"), quoted identifiers (`…`) and
comments (-- …, /* … */), and not in a `::` cast.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterable

__all__ = ["WINDOW_PARAMETERS", "bind_window", "output_columns", "refresh_plan", "sql_version", "timestamp_literal", "uses_window"]

WINDOW_PARAMETERS = ("window_start", "window_end")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def timestamp_literal(t: float) -> str:
    """Epoch seconds → an exact Spark SQL timestamp literal in UTC (microseconds)."""
    d = dt.datetime.fromtimestamp(0, dt.UTC) + dt.timedelta(microseconds=round(t * 1e6))
    return f"TIMESTAMP '{d.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"


def _markers(sql: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each `:name` parameter marker outside literals and comments."""
    out: list[tuple[int, int, str]] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in ("'", '"', "`"):
            j = i + 1
            while j < n:
                if sql[j] == "\\" and c != "`":
                    j += 2
                    continue
                if sql[j] == c:
                    break
                j += 1
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == ":" and not sql.startswith("::", i) and (i == 0 or sql[i - 1] != ":"):
            m = _IDENT.match(sql, i + 1)
            if m:
                out.append((i, m.end(), m.group(0)))
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return out


def uses_window(sql: str) -> bool:
    """True if `sql` names `:window_start` or `:window_end`."""
    return any(name in WINDOW_PARAMETERS for _, _, name in _markers(sql))


def bind_window(sql: str, start: float, end: float) -> str:
    """`sql` with `:window_start` / `:window_end` replaced by the window's timestamp literals."""
    values = {"window_start": timestamp_literal(start), "window_end": timestamp_literal(end)}
    parts: list[str] = []
    last = 0
    for a, b, name in _markers(sql):
        if name in values:
            parts.append(sql[last:a])
            parts.append(values[name])
            last = b
    parts.append(sql[last:])
    return "".join(parts)


def sql_version(sql: str | None) -> str:
    """The version of a derived table's logic (Olston, Graceful Logic Evolution in Web Data Processing Workflows): a short hash of its SQL with whitespace
    runs collapsed, so re-indenting a query is not a new version. Recorded in every commit."""
    text = " ".join((sql or "").split())
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def output_columns(sql: str) -> list[str] | None:
    """The output column names of a query (its outermost SELECT), or None when they cannot be
    known from the text alone (a `*`, an unnamed expression, a text sqlglot does not parse)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(bind_window(sql, 0.0, 1.0), read="spark")
    except sqlglot.errors.ParseError:
        return None
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return None
    names = [e.alias_or_name for e in select.expressions]
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)) or not n
           for e, n in zip(select.expressions, names, strict=True)):
        return None
    return names


def refresh_plan(sql: str, time_columns: Iterable[str]) -> tuple[bool, str]:
    """(window-local?, why) for a derived SQL (Olston, Modeling and Scheduling Asynchronous Incremental Workflows §2.4, 002): may a window `(s, e]` of the
    output be computed from the sources' rows in `(s − lookback, e]` alone?

    Not window-local (full recompute): an aggregate whose GROUP BY has no time column (a global
    aggregate), a join whose condition relates no time columns of both sides (a join without a
    bounded lookback), a window function (OVER) not partitioned by a time column. Everything else
    is (the time buckets of a roll-up, a band join on time). `time_columns`: the sources' event-time
    column names. A text that does not parse (Spark accepts more than sqlglot) counts as window-local,
    as every derived table did before, and says so.
    """
    if not _MAYBE_NONLOCAL.search(sql):  # no call, join, grouping or window: a projection or filter
        return True, _LOCAL
    import sqlglot
    from sqlglot import exp

    tcols = {c.lower() for c in time_columns} | {"ts"}
    try:
        tree = sqlglot.parse_one(bind_window(sql, 0.0, 1.0), read="spark")
    except sqlglot.errors.ParseError as err:
        return True, f"the SQL did not parse for analysis ({str(err).splitlines()[0][:80]}): assumed window-local"

    def has_time(node: exp.Expression) -> bool:
        return any(c.name.lower() in tcols for c in node.find_all(exp.Column))

    for select in tree.find_all(exp.Select):
        outputs = select.expressions
        group = select.args.get("group")
        aggs = [a for e in outputs for a in e.find_all(exp.AggFunc) if a.find_ancestor(exp.Window) is None]
        if group is not None or aggs:
            keys = []
            for k in group.expressions if group is not None else []:
                if isinstance(k, exp.Literal) and k.is_int and 0 < int(k.name) <= len(outputs):
                    k = outputs[int(k.name) - 1]  # GROUP BY 1, 2: the select list's items
                keys.append(k)
            if not any(has_time(k) for k in keys):
                return False, "an aggregate whose GROUP BY has no time column (a global aggregate)"
        for join in select.args.get("joins") or []:
            on = join.args.get("on")
            tables = {c.table for c in on.find_all(exp.Column) if c.name.lower() in tcols} if on else set()
            if len(tables) < 2 and not join.args.get("using"):
                name = join.this.alias_or_name
                return False, f"the join with {name!r} relates no time columns (a join without a bounded lookback)"
        for w in select.find_all(exp.Window):
            if not any(has_time(p) for p in w.args.get("partition_by") or []):
                return False, "a window function (OVER) not partitioned by a time column"
    return True, _LOCAL


_LOCAL = "window-local: each window is computed from its own rows (and the lookback)"
_MAYBE_NONLOCAL = re.compile(r"\(|\bjoin\b|\bgroup\b|\bover\b", re.IGNORECASE)
