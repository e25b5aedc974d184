"""A table's origin when its Delta log no longer reaches back to its first commit (docs/warehouse.md §5).

The origin — the earliest event time a table covers — is where a full rewrite starts (`rebuild:
true`, `refresh_mode: full`; docs/warehouse.md §5): the job computes `(origin, F]` and overwrites
the whole table. Recovery reads it from the window of the first Freshet commit in the log. Delta
deletes commits older than `delta.logRetentionDuration` (30 days by default) at each checkpoint,
and then the oldest *retained* window is far later than the table's true origin: a full rewrite
from there drops every older row, silently. So when the log does not start at version 0, the
origin is taken from the data as well — a lower bound of the time column — and a derived table's
origin is never after its sources' (it covers what they cover):

    origin = min(window of the oldest retained commit, min(time column) − 1 ms [floored to the
                 granularity], the sources' origins)

A lower bound is enough: an origin a little early only makes the rewrite read source time that
holds no rows; one a little late loses rows. `LocalLog` bounds the column from the log's own file
statistics (`minValues` of every file the checkpoint and the retained commits add; the Parquet
footer of a file whose statistics lack the column), `SparkLog` asks Spark for `min(column)`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

from warehouse import times
from warehouse.freshness import floor_to
from warehouse.lake.delta import sql_path
from warehouse.lake.logdir import TICK, Checkpoint, LogDir, stat_bounds

if TYPE_CHECKING:
    from warehouse.config import FreshetConfig

__all__ = ["local_min_time", "repair_origins", "spark_min_time"]

log_ = logging.getLogger("freshet.recovery")


def _file_min(path: Path, column: str) -> float | None:
    """min(column) of one data file, read from the file (its statistics lacked the column)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    col = pq.read_table(path, columns=[column]).column(column)
    if not len(col) or col.null_count == len(col):
        return None
    return pc.min(col).as_py().timestamp()


def local_min_time(path: str, column: str) -> float | None:
    """A lower bound of `column` (epoch seconds) over the rows of the Delta table at `path`, from
    the files of its log alone (no Spark): every file its newest checkpoint and the commits
    retained after it add. None when no file holds a row."""
    log = LogDir(path)
    names = log.names()
    if names is None:
        return None
    adds: list[tuple[str, str | None]] = []  # (path, stats JSON)

    def checkpoint_adds(cp: Checkpoint) -> list[tuple[str, str | None]]:
        return [(a["path"], a.get("stats")) for _, cols in cp.columns(["add"]) for a in cols.get("add", ())
                if a and a.get("path")]

    found = log.newest_checkpoint(names, checkpoint_adds)
    if found is not None:
        adds += found[1]
    for version in log.commits(names):
        for action in log.commit(version, starts=('{"add"',)) or ():  # None: cleaned up meanwhile
            adds.append((action["add"]["path"], action["add"].get("stats")))
    lo: float | None = None
    for rel, stats in adds:
        t = stat_bounds(stats, column)[0]
        if t is None:
            try:
                t = _file_min(Path(path) / unquote(rel), column)
            except (OSError, KeyError, ValueError) as err:  # removed and vacuumed since: not live
                log_.debug("cannot read %s of %s: %s", column, rel, err)
                continue
        if t is not None:
            lo = t if lo is None else min(lo, t)
    return lo


def spark_min_time(spark: Any, path: str, column: str) -> float | None:
    """min(column) (epoch seconds) of the Delta table at `path`, through Spark."""
    col = "`" + column.replace("`", "``") + "`"
    [row] = spark.sql(f"SELECT unix_micros(min({col})) AS t FROM {sql_path(path)}").collect()
    return None if row["t"] is None else row["t"] / 1e6


class _Origins(Protocol):
    """What `repair_origins` reads and sets of a table's recovered state (recovery.TableState)."""

    delta_version: int | None
    log_from: int | None
    origin: float | None


class _MinTime(Protocol):
    """The one reader `repair_origins` needs of a Delta log (recovery.DeltaLog)."""

    def min_time(self, path: str, column: str) -> float | None: ...


def repair_origins(config: FreshetConfig, tables: Mapping[str, _Origins], log: _MinTime) -> None:
    """Lower each table's origin to what its data and its sources say when its log was truncated
    (the module docstring), sources before the tables that read them."""
    from warehouse.dag import Dag
    from warehouse.lake.delta import table_path, time_column

    configs = {t.name: t for t in config.tables}
    # sources before the tables that read them: a loop in topological order, not a recursive
    # closure (a function that refers to itself is a reference cycle, and this one held the config
    # and every table's state: a reload's preparation must be freed by reference counts alone)
    for name in Dag.from_config(config).order:
        if name not in tables:
            continue
        tc = configs[name]
        st = tables[name]
        if st.delta_version is None or st.log_from == 0:
            continue  # no table, or the whole log: the first commit's window is the origin
        found = [st.origin] if st.origin is not None else []
        low = log.min_time(table_path(config, name), time_column(config, tc))
        if low is not None:
            found.append(floor_to(low - TICK, tc.granularity))
        found += [tables[s].origin for s in tc.sources if s in tables and tables[s].origin is not None]
        origin = min(found) if found else None
        if origin != st.origin:
            log_.info("the Delta log of %s starts at version %s: origin %s taken from the data and the "
                      "sources (the oldest retained commit says %s)", name, st.log_from,
                      times.iso(origin), times.iso(st.origin))
        st.origin = origin
