"""A source table's live files at a pinned Delta version, kept per table from its log files
(docs/warehouse.md §2; the paper's derived update reads each source's new data, Golab et al., *Scalable
Scheduling of Updates in Streaming Data Warehouses*, §2.2).

Reading a source through Delta (`versionAsOf`) costs a Spark job every time: Delta lists the
snapshot's files for the scan with a query over its reconstructed state (and reconstructs that
state first, three more jobs, if nobody has since the last commit). A derived or stateful job
reads every source at the version it pins, and those files are already written down in `_delta_log/`: the
`add` and `remove` actions of the checkpoint and the JSON commits after it. `LiveFiles` replays
them in this process (read with `lake.logdir`, the one reader of a local log) — the first time
from the newest checkpoint, then only the commits since the version it last saw — and a job
reads the files whose statistics overlap its window as Parquet, with the table's schema and
partition columns: no Spark job before the query's own.

The same actions answer a stateful job's question about late rows (`LiveFiles.appends_above`):
whether the commits since the version it last read only append files whose time-column statistics
lie above its freshness — then they hold no late row, and its read of Delta's change data feed
can be left out.

Only where that is the same as Delta's read: a local log whose protocol asks the reader for
nothing more than Parquet (reader version 1, or table features that change nothing on read: no
column mapping, no deletion vectors, no V2 checkpoints). Anything else — a URI root, a missing
commit, an unreadable checkpoint — answers None, and the job reads through Delta as before.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from warehouse.lake.logdir import TICK, Checkpoint, LogDir, stat_bounds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["LiveFiles", "Snapshot"]

log_ = logging.getLogger("freshet.executor")
# reader table features that change nothing when the data files are read as plain Parquet
_PLAIN_READER_FEATURES = frozenset({"timestampNtz", "vacuumProtocolCheck", "checkpointProtection"})


@dataclass(slots=True)
class Snapshot:
    """A table's state at `version` as far as reading it goes: schema, partition columns, files."""

    version: int
    schema: str | None = None  # metaData.schemaString (Spark's JSON schema)
    partition_columns: tuple[str, ...] = ()
    plain: bool = True  # the protocol asks nothing of a reader beyond Parquet
    timed: bool = False  # the time column is a timestamp: its statistics can prune files
    # relative path → (min, max) of the time column from the file's statistics (None: unknown)
    files: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def apply(self, action: dict[str, Any], tcol: str) -> None:
        """One action of the log, in order."""
        if "add" in action and action["add"]:
            add = action["add"]
            if add.get("deletionVector") or not all(f"{c}=" in add["path"] for c in self.partition_columns):
                self.plain = False  # deletion vectors, or partition values not in the path (random prefixes)
            self.files[add["path"]] = stat_bounds(add.get("stats"), tcol)
        elif "remove" in action and action["remove"]:
            self.files.pop(action["remove"]["path"], None)
        elif "metaData" in action and action["metaData"]:
            md = action["metaData"]
            self.schema = md.get("schemaString")
            self.partition_columns = tuple(md.get("partitionColumns") or ())
            fields = json.loads(self.schema or "{}").get("fields") or []
            self.timed = any(f.get("name") == tcol and f.get("type") in ("timestamp", "timestamp_ntz") for f in fields)
            conf = dict(md.get("configuration") or {})  # a checkpoint's map reads as (key, value) pairs
            if str(conf.get("delta.columnMapping.mode", "none")).lower() != "none":
                self.plain = False
        elif "protocol" in action and action["protocol"]:
            p = action["protocol"]
            reader = int(p.get("minReaderVersion") or 1)
            features = set(p.get("readerFeatures") or ())
            self.plain = reader == 1 or (reader == 3 and features <= _PLAIN_READER_FEATURES)

    def copy(self, version: int) -> Snapshot:
        return Snapshot(version, self.schema, self.partition_columns, self.plain, self.timed, dict(self.files))

    def overlapping(self, lo: float, hi: float) -> list[str]:
        """The files that may hold a row with the time column in `(lo, hi]` (all whose
        statistics do not say otherwise)."""
        if not self.timed:
            return list(self.files)
        return [p for p, (a, b) in self.files.items()
                if (a is None or a <= hi) and (b is None or b + TICK > lo)]


class LiveFiles:
    """Each table's newest `Snapshot` seen, brought forward commit by commit (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], Snapshot] = {}
        self.replays = 0  # snapshots built from a checkpoint (tests)

    def snapshot(self, path: str, version: int, tcol: str) -> Snapshot | None:
        """The table at `path` as of `version` (None: it cannot be read from here)."""
        key = (path, tcol)
        with self._lock:
            cached = self._cache.get(key)
        try:
            snap = None
            if cached is not None and cached.version <= version:
                snap = _forward(cached, LogDir(path), version, tcol)
            if snap is None:
                snap = _replay(path, version, tcol)
                self.replays += 1
        except (OSError, ValueError, KeyError, TypeError) as err:
            log_.debug("cannot read the Delta log of %s at version %s: %s", path, version, err)
            return None
        if snap is None:
            return None
        with self._lock:
            if key not in self._cache or self._cache[key].version <= snap.version:
                self._cache[key] = snap
        return snap if snap.plain and snap.schema else None

    def read(self, session: SparkSession, path: str, version: int, tcol: str, lo: float, hi: float) -> DataFrame | None:
        """The rows of the table at `path`, `version` in the files that may hold `tcol` in
        `(lo, hi]`, as Delta would read them (its schema, its column order); None: read it through
        Delta instead. The caller still filters the rows (`lake.delta.window_filter`)."""
        from pyspark.sql.types import StructType

        snap = self.snapshot(path, version, tcol)
        if snap is None:
            return None
        schema = StructType.fromJson(json.loads(snap.schema or "{}"))
        files = [os.path.join(path, unquote(p)) for p in snap.overlapping(lo, hi)]
        if not files:
            return session.createDataFrame([], schema)
        # a few thousand paths are listed faster on the driver than by a Spark job (the default
        # above 32 paths)
        session.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(max(32, len(files) + 1)))
        df = session.read.schema(schema).option("basePath", path).parquet(*files)
        return df.select(*[f"`{c.replace('`', '``')}`" for c in schema.fieldNames()])

    def appends_above(self, path: str, since: int, version: int, tcol: str, bound: float) -> bool:
        """Whether the commits `(since, version]` of the table at `path` only append files whose
        statistics put `tcol` above `bound` in every row (min > `bound`, the min truncated to the
        millisecond, so never above the true one): then none of them holds a row at or below it.
        False wherever the log does not say so: a commit missing, an `add` without the column's
        statistics or with a deletion vector or `dataChange: false`, any `remove`, a change of
        schema or protocol, change-data files, any other action; a table not read from here
        (`snapshot`), or whose time column is not a timestamp."""
        snap = self.snapshot(path, version, tcol)
        if snap is None or not snap.timed:
            return False
        log = LogDir(path)
        try:
            for v in range(since + 1, version + 1):
                actions = log.commit(v)
                if actions is None:
                    return False
                for action in actions:
                    if action.keys() <= {"commitInfo", "txn"}:
                        continue
                    add = action.get("add") if action.keys() == {"add"} else None
                    if not add or add.get("deletionVector") or add.get("dataChange") is False:
                        return False
                    low = stat_bounds(add.get("stats"), tcol)[0]
                    if low is None or low <= bound:
                        return False
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            log_.debug("cannot read the Delta log of %s after version %s: %s", path, since, err)
            return False
        return True

    def schema(self, path: str, version: int, tcol: str) -> StructType | None:
        """The table's schema at `version` (None: not known here)."""
        from pyspark.sql.types import StructType

        snap = self.snapshot(path, version, tcol)
        return None if snap is None else StructType.fromJson(json.loads(snap.schema or "{}"))


def _forward(snap: Snapshot, log: LogDir, version: int, tcol: str) -> Snapshot | None:
    """`snap` brought to `version` with the commits after it (None: one is missing)."""
    if snap.version == version:
        return snap
    out = snap.copy(version)
    for v in range(snap.version + 1, version + 1):
        actions = log.commit(v)
        if actions is None:
            return None
        for a in actions:
            out.apply(a, tcol)
    return out


def _replay(path: str, version: int, tcol: str) -> Snapshot | None:
    """The snapshot at `version` from the newest whole checkpoint at or below it and the commits
    after it (None: the log does not hold them all, or its checkpoint is a V2 one)."""
    log = LogDir(path)
    names = log.names()
    if names is None:
        return None

    def read(cp: Checkpoint) -> Snapshot | None:
        snap = Snapshot(cp.version)
        # protocol and metadata first; removes in a checkpoint are tombstones, not live files
        for have, cols in cp.columns(["protocol", "metaData", "add"]):
            if have & {"checkpointMetadata", "sidecar"}:
                return None  # a V2 checkpoint: its files are in sidecars, Delta reads it
            for c, values in cols.items():
                for value in values:
                    if value:
                        snap.apply({c: value}, tcol)
        return snap

    found = log.newest_checkpoint(names, read, upto=version)
    if found is not None:
        return None if found[1] is None else _forward(found[1], log, version, tcol)
    start = log.commit(0)
    if start is None:
        return None
    snap = Snapshot(0)
    for a in start:
        snap.apply(a, tcol)
    return _forward(snap, log, version, tcol)
