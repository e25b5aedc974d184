"""A table's `_delta_log/` on a local file system, read as files: the one reader of what its JSON
commits and checkpoints hold (docs/warehouse.md §5).

Delta's log is a folder of JSON commits, one per version (`00000000000000000042.json`, one action
a line), and Parquet checkpoints that sum up every action up to their version
(`….checkpoint.parquet`, or `….checkpoint.<part>.<parts>.parquet` in several parts). Three readers
replay it without Spark, each for its own question, all through `LogDir`:

- `lake.recovery.LocalLog`: Freshet's committed state (its `txn` and `commitInfo` actions);
- `lake.files.LiveFiles`: the data files a pinned version holds (`add`, `remove`, `metaData`,
  `protocol`), for a derived or stateful job's reads, and whether the commits after a version only
  append rows above a time (a stateful job's late rows);
- `lake.origin.local_min_time`: a lower bound of the time column from the files' statistics.

A checkpoint counts only when all its parts are there (Delta writes them one by one), and one that
cannot be read (torn by a crash) is passed over for the next older one.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["TICK", "TORN", "Checkpoint", "LogDir", "commit_version", "stat_bounds", "whole_checkpoints"]

log_ = logging.getLogger("freshet.recovery")
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d+)\.(\d+))?\.parquet$")
TORN = (OSError, ValueError, KeyError)  # what reading a checkpoint a crash tore can raise
TICK = 1e-3  # Delta keeps timestamps in its statistics to the millisecond, truncated
T = TypeVar("T")


def commit_version(name: str) -> int | None:
    """The version of a JSON commit's file name (None: not a commit — a checkpoint, a log
    compaction, `_last_checkpoint`)."""
    m = _COMMIT.match(name)
    return None if m is None else int(m.group(1))


def stat_bounds(stats: str | None, column: str) -> tuple[float | None, float | None]:
    """(min, max) of `column` in epoch seconds from an `add` action's statistics JSON (None where
    they do not say)."""
    from warehouse import times

    if not stats:
        return None, None
    try:
        s = json.loads(stats)
        lo, hi = (s.get("minValues") or {}).get(column), (s.get("maxValues") or {}).get(column)
        return (None if lo is None else times.parse_time(lo), None if hi is None else times.parse_time(hi))
    except (ValueError, AttributeError, TypeError):
        return None, None


def whole_checkpoints(names: list[str], upto: int | None = None) -> list[tuple[int, list[str]]]:
    """(version, part names in order) of each checkpoint among `names` whose parts are all there
    (at or below `upto`), newest first."""
    parts: dict[int, list[tuple[str, int | None]]] = {}
    for n in names:
        if (m := _CHECKPOINT.match(n)) and (upto is None or int(m.group(1)) <= upto):
            parts.setdefault(int(m.group(1)), []).append((n, None if m.group(3) is None else int(m.group(3))))
    return [(v, [n for n, _ in sorted(files)]) for v, files in sorted(parts.items(), reverse=True)
            if files[0][1] is None or len(files) == files[0][1]]  # a multi-part one not all written: none


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint: its version and its part files, in order."""

    version: int
    parts: tuple[Path, ...]

    def columns(self, wanted: Sequence[str]) -> Iterator[tuple[set[str], dict[str, list[Any]]]]:
        """Part after part: the part's column names, and the values of those of `wanted` it has
        (one action kind a column: `add`, `txn`, …; a row holds one action, the others null)."""
        import pyarrow.parquet as pq

        for part in self.parts:
            have = set(pq.read_schema(part).names)
            cols = [c for c in wanted if c in have]
            table = pq.read_table(part, columns=cols)
            yield have, {c: table.column(c).to_pylist() for c in cols}


class LogDir:
    """The `_delta_log/` folder of the Delta table at `table_path` (a local path)."""

    def __init__(self, table_path: str | Path) -> None:
        self.path = Path(table_path) / "_delta_log"

    def names(self) -> list[str] | None:
        """The folder's file names (None: no log, no table yet)."""
        try:
            return os.listdir(self.path)
        except FileNotFoundError:
            return None

    @staticmethod
    def commits(names: list[str]) -> list[int]:
        """The versions of the JSON commits among `names`, oldest first."""
        return sorted(v for n in names if (v := commit_version(n)) is not None)

    def latest(self) -> int | None:
        """The latest committed version: the newest JSON commit, else the newest checkpoint (None:
        no table)."""
        names = self.names()
        if names is None:
            return None
        versions = self.commits(names)
        if versions:
            return versions[-1]
        cps = [int(m.group(1)) for n in names if (m := _CHECKPOINT.match(n))]
        return max(cps) if cps else None

    def commit(self, version: int, starts: tuple[str, ...] | None = None) -> list[dict[str, Any]] | None:
        """The actions of the JSON commit `version` (None: not there — never written, or cleaned
        up); with `starts`, only the lines that begin so (`'{"txn"'`: Delta writes one action a
        line, its kind first), the others left unparsed."""
        try:
            text = (self.path / f"{version:020d}.json").read_text()
        except FileNotFoundError:
            return None
        return [json.loads(line) for line in text.splitlines()
                if line.strip() and (starts is None or line.startswith(starts))]

    def checkpoints(self, names: list[str], upto: int | None = None) -> list[Checkpoint]:
        """The whole checkpoints among `names` (at or below `upto`), newest first."""
        return [Checkpoint(v, tuple(self.path / n for n in parts)) for v, parts in whole_checkpoints(names, upto)]

    def newest_checkpoint(self, names: list[str], read: Callable[[Checkpoint], T],
                          upto: int | None = None) -> tuple[Checkpoint, T] | None:
        """`read` of the newest checkpoint (at or below `upto`) it can read, with the checkpoint;
        None when there is none. A torn one is logged and passed over."""
        for cp in self.checkpoints(names, upto):
            try:
                return cp, read(cp)
            except TORN as err:
                log_.warning("skipping unreadable checkpoint %s of %s: %s", cp.version, self.path, err)
        return None
