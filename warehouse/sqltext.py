"""Binding a derived table's window into its SQL text (DESIGN.md §4.4, docs/warehouse.md §4).

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
import re

__all__ = ["WINDOW_PARAMETERS", "bind_window", "timestamp_literal", "uses_window"]

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
