"""Recovery from the Delta log (docs/warehouse.md §5): the log is the truth at start and on reload.

A table's `_delta_log/` — checkpoint and JSON commits — gives its freshness F, safe freshness F'
(§2.2), last txn version, loaded partition ids and the metrics of a commit, from Freshet's
`userMetadata` and Delta's `txn` actions. Two readers of the same log, one interface (`DeltaLog`):

- `LocalLog` reads the files directly (`lake.logdir`), with no Spark session: a local
  `warehouse.root` and a Spark in this process (`spark.master`);
- `SparkLog` reads them through Spark — the JSON commits and checkpoints as data
  (`spark.read.json` / `.parquet` of `_delta_log/`), the newest commits with `DESCRIBE HISTORY` —
  when the root is a URI (`s3a://…`) or the Spark is remote (`spark.remote`: the daemon may see no
  file system at all). Not Delta's `DeltaTable` Python API: it does not work over Spark Connect
  without Delta's server plugin.

`delta_log(config, spark)` picks the reader; both replay the same actions the same way
(`_replay`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from warehouse.config import FreshetConfig
from warehouse.errors import WarehouseError
from warehouse.lake.delta import app_id, is_local_root, sql_path, table_path
from warehouse.lake.logdir import Checkpoint, LogDir, commit_version, whole_checkpoints
from warehouse.lake.origin import local_min_time, repair_origins, spark_min_time
from warehouse.lake.session import connection_lost
from warehouse.recompute import VersionMap, touched

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DeltaLog",
    "LocalLog",
    "LogReplay",
    "RecoveryState",
    "SparkLog",
    "TableState",
    "commit_metrics",
    "commit_rows",
    "delta_log",
    "delta_version",
    "needs_spark",
    "read_table_state",
    "recover",
    "stale_ranges",
]

log_ = logging.getLogger("freshet.recovery")


@dataclass(slots=True)
class TableState:
    """What a table's Delta log says is committed."""

    freshness: float | None = None
    safe_freshness: float | None = None
    txn_version: int | None = None
    delta_version: int | None = None
    partitions: dict[str, str] = field(default_factory=dict)  # id → fingerprint
    commits: int = 0  # Freshet commits seen in the retained JSON log
    origin: float | None = None  # the start of the first load's window
    windows: dict[str, tuple[float, float]] = field(default_factory=dict)  # id → (start, end), base tables
    slices: dict[str, float] = field(default_factory=dict)  # id → loaded through, partly loaded partitions
    # maintenance history (warehouse.upkeep): OPTIMIZE and VACUUM commits carry no Freshet txn
    commits_since_optimize: int = 0  # Freshet commits after the last OPTIMIZE
    optimized_through: float | None = None  # the table's freshness when it last ran
    last_optimize: float | None = None  # commit timestamps, epoch seconds
    last_vacuum: float | None = None
    first_commit: float | None = None  # the first retained commit's timestamp
    versions: VersionMap = field(default_factory=VersionMap)  # derived: the SQL version of each committed range
    # what recovery needs to find derived windows computed before a change of their sources
    # (late data) was recomputed: (lo, hi, Delta version) of every range a commit wrote, and, for a
    # derived table, the source versions each committed range was computed from (JSON)
    written: list[tuple[float, float, int]] = field(default_factory=list)
    reads: VersionMap = field(default_factory=VersionMap)
    dirty: list[tuple[float, float]] = field(default_factory=list)  # derived: to recompute (recover())
    log_from: int | None = None  # the oldest retained JSON commit: 0 unless Delta cleaned up the log
    read: dict[str, int] = field(default_factory=dict)  # the source versions the last commit read (stateful)
    rebuild: dict[str, Any] | None = None  # stateful: the last rebuild's progress (id, from, to, done, versions)
    shadow: dict[str, Any] | None = None  # stateful: a rebuild under way, its progress from the shadow's log
    last_job_id: int | None = None  # the highest `job_id` a retained commit records

    def copy(self) -> TableState:
        return TableState(self.freshness, self.safe_freshness, self.txn_version, self.delta_version,
                          dict(self.partitions), self.commits, self.origin, dict(self.windows), dict(self.slices),
                          self.commits_since_optimize, self.optimized_through, self.last_optimize,
                          self.last_vacuum, self.first_commit, self.versions.copy(),
                          log_from=self.log_from, read=dict(self.read),
                          rebuild=None if self.rebuild is None else dict(self.rebuild),
                          shadow=None if self.shadow is None else dict(self.shadow), last_job_id=self.last_job_id)

    def record(self, partitions: dict[str, str], slices: dict[str, float]) -> None:
        """A commit's partitions (fully loaded) and time slices (loaded through an event time)."""
        self.partitions.update(partitions)
        for pid, cut in slices.items():
            self.slices[pid] = max(self.slices.get(pid, cut), float(cut))
        for pid in partitions:
            self.slices.pop(pid, None)

    def committed(self, meta: dict[str, Any], txn: int, version: int) -> TableState:
        """This state after Freshet's commit `(txn, Delta version)` whose `userMetadata` is `meta`:
        what the executor keeps in memory until it reads the log again (`_replay` reads the
        same fields back after a restart)."""
        new = self.copy()
        new.freshness, new.safe_freshness = meta["freshness"], meta["safe_freshness"]
        new.txn_version, new.delta_version = txn, version
        new.commits += 1
        new.record(meta["partitions"], meta.get("slices", {}))
        new.windows.update({pid: (w[0], w[1]) for pid, w in meta.get("windows", {}).items()})
        if "window" in meta:
            start, end = meta["window"]
            new.origin = start if new.origin is None else min(new.origin, start)
            if "sql_version" in meta:
                new.versions.set(start, end, meta["sql_version"])
        if "read" in meta:  # stateful: the source versions its late rows start after
            new.read = dict(meta["read"])
        if "rebuild" in meta:  # stateful: a rebuild swapped in
            new.rebuild = meta["rebuild"]
        return new


@dataclass(slots=True)
class RecoveryState:
    """Every table's committed state, read back on start."""

    tables: dict[str, TableState]
    loaded: dict[str, dict[str, str]]  # stream → {partition id → fingerprint}

    @property
    def next_job_id(self) -> int:
        """The first job id of a daemon started on this log: above every id a commit records, so
        `job_id` in the commits' metadata never repeats across restarts."""
        return 1 + max((s.last_job_id or 0 for s in self.tables.values()), default=0)

    @property
    def recovered(self) -> dict[str, Any]:
        """`warehouse.scheduler.Recovered` per table that has ever been loaded."""
        from warehouse.scheduler import Recovered

        return {
            name: Recovered(freshness=s.freshness, safe_freshness=s.safe_freshness, origin=s.origin,
                            commits_since_optimize=s.commits_since_optimize, optimized_through=s.optimized_through,
                            last_optimize=s.last_optimize, last_vacuum=s.last_vacuum, first_commit=s.first_commit,
                            sql_versions=s.versions.tuples(), dirty=tuple(s.dirty), rebuild=_rebuilding(s.shadow),
                            slices=tuple(sorted(s.slices.items())))
            for name, s in self.tables.items()
            if s.freshness is not None
        }


SHADOW_DIR = "_freshet_rebuild"


def shadow_path(config: FreshetConfig, table: str) -> str:
    """Where `table`'s rebuild folds its new state before the swap."""
    return table_path(config, SHADOW_DIR) + "/" + table


def under_way(live: dict[str, Any] | None, shadow: dict[str, Any] | None) -> dict[str, Any] | None:
    """The shadow's progress if its rebuild is not swapped in yet (the live log's last swap names
    another rebuild, or none)."""
    if not shadow or not isinstance(shadow.get("id"), str):
        return None
    return None if live and live.get("id") == shadow["id"] and live.get("swapped") else shadow


def _rebuilding(progress: dict[str, Any] | None) -> tuple[float, float] | None:
    """(the next chunk's start, the end) of a stateful table's rebuild under way (lake.rebuild):
    its shadow folded up to `done`; all folded but not swapped in: its last chunk again (the fold
    is skipped by its txn, then the swap)."""
    if not progress or not all(isinstance(progress.get(k), int | float) for k in ("done", "to")):
        return None
    done, to = float(progress["done"]), float(progress["to"])
    if done < to:
        return done, to
    lo = progress.get("lo")
    return (float(lo), to) if isinstance(lo, int | float) and lo < to else None


# ---- reading the log ------------------------------------------------------------------------------
def delta_version(path: str) -> int | None:
    """The latest committed Delta version of the table at `path` (None: no table)."""
    return LogDir(path).latest()


def _checkpoint_txn(log: LogDir, names: list[str], app: str) -> tuple[int | None, int | None]:
    """(checkpoint version, txn version of `app` in it) from the newest readable checkpoint."""

    def txn(cp: Checkpoint) -> int | None:
        best: int | None = None
        for _, cols in cp.columns(["txn"]):
            for t in cols.get("txn", ()):
                if t and t.get("appId") == app and t.get("version") is not None:
                    best = t["version"] if best is None else max(best, t["version"])
        return best

    found = log.newest_checkpoint(names, txn)
    return (None, None) if found is None else (found[0].version, found[1])


def read_table_state(path: str, table: str) -> TableState:
    """Replay `<path>/_delta_log` for Freshet's commits to `table` (§4.4), from the files."""
    log = LogDir(path)
    names = log.names()
    if names is None:
        return TableState()
    app = app_id(table)
    cp_version, cp_txn = _checkpoint_txn(log, names, app)

    def actions() -> Iterable[tuple[int, list[dict[str, Any]]]]:
        for version in log.commits(names):
            # only these two kinds matter (add/remove with their statistics are left unparsed)
            found = log.commit(version, starts=('{"txn"', '{"commitInfo"'))
            if found is not None:  # None: cleaned up between listing and reading
                yield version, found

    return _replay(app, cp_version, cp_txn, actions())


def _freshet_meta(user_metadata: str | None) -> dict[str, Any] | None:
    """Freshet's `userMetadata` JSON of a commit, or None (another writer's, or none)."""
    if not user_metadata:
        return None
    try:
        parsed = json.loads(user_metadata)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) and parsed.get("freshet") else None


def _replay(app: str, cp_version: int | None, cp_txn: int | None,
            commits: Iterable[tuple[int, list[dict[str, Any]]]]) -> TableState:
    """The state of a log: its commits (in version order) after a checkpoint (`LogReplay`)."""
    replay = LogReplay(app, cp_version, cp_txn)
    for version, actions in commits:
        replay.add(version, actions)
    return replay.state()


class LogReplay:
    """Fold the `txn` and `commitInfo` actions of each commit, in version order, into a state: one
    commit at a time, so a log that grows (the tests' modelled lake) is not replayed from its start.

    Commits of other writers (OPTIMIZE, VACUUM START/END, SET TBLPROPERTIES …) carry no Freshet
    txn or metadata: they move only the Delta version — and OPTIMIZE and VACUUM the maintenance
    history (`warehouse.upkeep`)."""

    __slots__ = ("_app", "_best_meta", "_best_txn", "_cp_version", "_loaded", "_state")

    def __init__(self, app: str, cp_version: int | None = None, cp_txn: int | None = None) -> None:
        self._app, self._cp_version = app, cp_version
        self._state = TableState(txn_version=cp_txn)
        self._best_meta: dict[str, Any] | None = None
        self._best_txn: int | None = None
        self._loaded: float | None = None  # the freshness so far, for optimized_through

    def add(self, version: int, actions: list[dict[str, Any]]) -> None:
        """The next commit of the log."""
        state, app = self._state, self._app
        if state.log_from is None:
            state.log_from = version
        txn_v: int | None = None
        meta: dict[str, Any] | None = None
        for action in actions:
            if action.get("txn") and action["txn"].get("appId") == app:
                txn_v = int(action["txn"]["version"])
            elif action.get("commitInfo"):
                info = action["commitInfo"]
                meta = _freshet_meta(info.get("userMetadata")) or meta
                _maintenance(state, info, self._loaded)
        if txn_v is not None:
            state.txn_version = txn_v if state.txn_version is None else max(state.txn_version, txn_v)
            if self._best_txn is None or txn_v >= self._best_txn:
                self._best_txn, self._best_meta = txn_v, meta
        if meta is not None:
            state.commits += 1
            if isinstance(job_id := meta.get("job_id"), int):
                state.last_job_id = max(state.last_job_id or 0, job_id)
            state.commits_since_optimize += 1
            if meta.get("freshness") is not None:
                f = float(meta["freshness"])
                self._loaded = f if self._loaded is None else max(self._loaded, f)
            cuts = meta.get("slices") or {}
            sliced = dict(state.slices)  # how far time slices had loaded each partition before this commit
            state.record(meta.get("partitions") or {}, cuts)
            windows = meta.get("windows")  # commits before windows were recorded have none: skipped
            if isinstance(windows, dict):
                ws = {pid: (float(w[0]), float(w[1])) for pid, w in windows.items()
                      if isinstance(w, list) and len(w) == 2}
                state.windows.update(ws)
                # what it wrote of each: from where earlier slices stopped, through its own cut (§3.4)
                state.written.extend((max(a, float(sliced.get(pid, a))), min(b, float(cuts.get(pid, b))), version)
                                     for pid, (a, b) in ws.items())
            if isinstance(meta.get("rebuild"), dict):  # a stateful table's rebuild chunk (lake.stateful)
                state.rebuild = meta["rebuild"]
            window = meta.get("window")
            if isinstance(window, list) and window and window[0] is not None:
                w0 = float(window[0])
                state.origin = w0 if state.origin is None else min(state.origin, w0)
                if isinstance(meta.get("sql_version"), str) and len(window) == 2:  # derived (Olston, Graceful Logic Evolution in Web Data Processing Workflows)
                    state.versions.set(w0, float(window[1]), meta["sql_version"])
                if meta.get("kind") in ("derived", "recompute") and len(window) == 2:
                    state.written.append((w0, float(window[1]), version))
                    if isinstance(meta.get("sources"), dict):
                        state.reads.set(w0, float(window[1]), json.dumps(meta["sources"], sort_keys=True))
        state.delta_version = version

    def state(self) -> TableState:
        """The log's state so far: a copy, which later commits leave as it is."""
        state = self._state.copy()
        state.written, state.reads = list(self._state.written), self._state.reads.copy()
        if state.delta_version is None:
            state.delta_version = self._cp_version
        best_meta = self._best_meta
        if best_meta is not None and self._best_txn == state.txn_version:
            state.freshness = float(best_meta["freshness"])
            sources = best_meta.get("read", best_meta.get("sources"))
            if best_meta.get("kind") == "stateful" and isinstance(sources, dict):  # its late rows: committed since
                state.read = {k: int(v) for k, v in sources.items() if isinstance(v, int)}
            sf = best_meta.get("safe_freshness")
            state.safe_freshness = None if sf is None else float(sf)
        elif state.txn_version is not None:
            # The commit holding the metadata was cleaned up: the txn version *is* F in ms (±1 per
            # late load), and F' falls back to F − lateness in the Scheduler.
            state.freshness = state.txn_version / 1000.0
        return state


def _maintenance(state: TableState, info: dict[str, Any], loaded: float | None) -> None:
    """One commit's `commitInfo` into the maintenance history: its time, and whether it was an
    OPTIMIZE (compaction) or a VACUUM (garbage collection), Nova, SIGMOD 2011 §2.4."""
    ts = info.get("timestamp")
    if ts is None:
        return
    at = float(ts) / 1000.0
    state.first_commit = at if state.first_commit is None else min(state.first_commit, at)
    op = info.get("operation") or ""
    if op == "OPTIMIZE":
        state.last_optimize, state.commits_since_optimize, state.optimized_through = at, 0, loaded
    elif op.startswith("VACUUM"):
        state.last_vacuum = at


def recover(config: FreshetConfig, log: DeltaLog | None = None,
            progress: Callable[[], None] | None = None) -> RecoveryState:
    """Every table's freshness, safe freshness, txn version and loaded ids, from Delta logs alone.

    `log` reads them (default: the files, `LocalLog`; `delta_log(config, spark)` picks the reader
    a config needs). `progress` is called after each table's log is read (a long recovery feeds
    the service manager's watchdog with it, ops.liveness).
    """
    if log is None:
        if needs_spark(config):
            raise WarehouseError(f"recovering {config.warehouse.root!r} with spark "
                                 f"{config.spark.where} needs a Spark session (lake.recovery.delta_log)")
        log = LocalLog()
    tables: dict[str, TableState] = {}
    loaded: dict[str, dict[str, str]] = {s.name: {} for s in config.streams}
    for t in config.tables:
        st = log.table_state(table_path(config, t.name), t.name)
        tables[t.name] = st
        if t.stream:
            loaded.setdefault(t.stream, {}).update(st.partitions)
        if progress is not None:
            progress()
    repair_origins(config, tables, log)  # a log cleaned up by Delta: the origin from the data
    for t in config.tables:
        if t.is_stateful:  # a rebuild under way folds into its shadow (lake.rebuild)
            st = tables[t.name]
            st.shadow = under_way(st.rebuild, log.table_state(shadow_path(config, t.name), t.name).rebuild)
    for t in config.tables:
        if not t.is_base:
            tables[t.name].dirty = stale_ranges(tables[t.name], {s: tables[s] for s in t.sources if s in tables},
                                                lookback=t.lookback, granularity=t.granularity)
    return RecoveryState(tables=tables, loaded=loaded)


def stale_ranges(st: TableState, sources: dict[str, TableState], *, lookback: float,
                 granularity: float | None) -> list[tuple[float, float]]:
    """A derived table's committed ranges computed from an older Delta version of a source than
    a later commit that wrote rows they read (a late partition, a source recomputed, a skew) — the
    recompute work a restart must not lose (warehouse.recompute): its own log says which source
    version each range read, the source's log which version wrote which range."""
    from bisect import bisect_right

    ranges = st.reads.tuples()  # sorted, disjoint
    starts = [lo for lo, _, _ in ranges]
    reads: dict[int, dict[str, Any]] = {}
    out: list[tuple[float, float]] = []
    for name, src in sources.items():
        for a, b, version in src.written:  # each write touches the few ranges around it: O(w log r)
            i = max(0, bisect_right(starts, a) - 1)
            while i < len(ranges) and ranges[i][0] < b + lookback:
                lo, hi, raw = ranges[i]
                if i not in reads:
                    try:
                        reads[i] = json.loads(raw)
                    except ValueError:
                        reads[i] = {}
                seen = reads[i].get(name)
                if isinstance(seen, int) and version > seen and (r := touched(
                        a, b, lookback=lookback, granularity=granularity, taken=hi, origin=lo)) is not None:
                    out.append(r)
                i += 1
    return out


def commit_rows(metrics: dict[str, Any] | None) -> int | None:
    """The rows a commit wrote, from its `operationMetrics` (the same map in the JSON commit and in
    `DESCRIBE HISTORY`): a MERGE's keys inserted and updated — not the unchanged rows it copied
    into the files it rewrote — any other write's output rows; None when they do not say."""
    m = metrics or {}
    if "numTargetRowsInserted" in m:
        return int(m["numTargetRowsInserted"]) + int(m.get("numTargetRowsUpdated") or 0)
    n = m.get("numOutputRows")
    return None if n is None else int(n)


def commit_metrics(path: str, table: str, txn_version: int) -> tuple[int | None, int | None]:
    """(Delta version, rows written: `commit_rows`) of the commit that recorded `txn_version`, if
    it exists among the newest 20."""
    log = LogDir(path)
    app = app_id(table)
    latest = log.latest()
    if latest is None:
        return None, None
    for version in range(latest, max(-1, latest - 20), -1):
        actions = log.commit(version, starts=('{"txn"', '{"commitInfo"'))
        hit, rows = False, None
        for a in actions or ():
            if "txn" in a and a["txn"].get("appId") == app and int(a["txn"]["version"]) == txn_version:
                hit = True
            elif "commitInfo" in a:
                rows = commit_rows(a["commitInfo"].get("operationMetrics"))
        if hit:
            return version, rows
    return None, None


# ---- two readers of one log -------------------------------------------------------------------------
class DeltaLog(Protocol):
    """What the executor and recovery read from a table's Delta log."""

    def version(self, path: str) -> int | None:
        """The latest committed Delta version (None: no table yet)."""

    def table_state(self, path: str, table: str) -> TableState:
        """Freshet's committed state of `table` (§4.4)."""

    def commit_metrics(self, path: str, table: str, txn_version: int) -> tuple[int | None, int | None]:
        """(Delta version, rows written: `commit_rows`) of the commit that recorded `txn_version`,
        if any."""

    def min_time(self, path: str, column: str) -> float | None:
        """A lower bound of `column` over the table's rows, epoch seconds (None: no rows)."""


class LocalLog:
    """The log's files read directly (a local `warehouse.root`; no Spark session)."""

    def version(self, path: str) -> int | None:
        return delta_version(path)

    def table_state(self, path: str, table: str) -> TableState:
        return read_table_state(path, table)

    def commit_metrics(self, path: str, table: str, txn_version: int) -> tuple[int | None, int | None]:
        return commit_metrics(path, table, txn_version)

    def min_time(self, path: str, column: str) -> float | None:
        return local_min_time(path, column)


# the actions the replay needs; every other field of the log's JSON lines is ignored unread
_ACTIONS_DDL = ("txn STRUCT<appId: STRING, version: BIGINT>, "
                "commitInfo STRUCT<userMetadata: STRING, operation: STRING, timestamp: BIGINT>")
_HISTORY_DEPTH = 20


def _not_found(err: BaseException) -> bool:
    """A read of a path that does not exist (no table yet), as opposed to Spark being unreachable."""
    text = str(err)
    return any(k in text for k in ("PATH_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND",
                                   "is not a Delta table", "Path does not exist"))


class SparkLog:
    """The log read through Spark (a URI root, or Spark Connect): the same actions as `LocalLog`.

    `spark` is a session or a function returning the current one (the daemon's reconnecting
    Spark Connect link).
    """

    def __init__(self, spark: SparkSession | Callable[[], SparkSession]) -> None:
        self._spark: Callable[[], SparkSession] = (lambda: spark) if hasattr(spark, "sql") else spark  # type: ignore[assignment,return-value]

    @property
    def spark(self) -> SparkSession:
        return self._spark()

    def _history(self, path: str, limit: int) -> list[Any]:
        try:
            return self.spark.sql(f"DESCRIBE HISTORY {sql_path(path)} LIMIT {int(limit)}").select(
                "version", "userMetadata", "operationMetrics").collect()
        except Exception as err:
            if _not_found(err):
                return []
            raise

    def min_time(self, path: str, column: str) -> float | None:
        return spark_min_time(self.spark, path, column)

    def version(self, path: str) -> int | None:
        rows = self._history(path, 1)
        return int(rows[0]["version"]) if rows else None

    def commit_metrics(self, path: str, table: str, txn_version: int) -> tuple[int | None, int | None]:
        for r in self._history(path, _HISTORY_DEPTH):
            meta = _freshet_meta(r["userMetadata"])
            if meta is not None and meta.get("txn") == txn_version:
                return int(r["version"]), commit_rows(r["operationMetrics"])
        return None, None

    def table_state(self, path: str, table: str) -> TableState:
        from pyspark.sql import functions as F

        spark = self.spark
        log = path.rstrip("/") + "/_delta_log"
        app = app_id(table)
        try:
            rows = (spark.read.schema(_ACTIONS_DDL).json(log + "/*.json")
                    .where(F.col("txn").isNotNull() | F.col("commitInfo").isNotNull())
                    .select("txn", "commitInfo", F.col("_metadata.file_name").alias("file")).collect())
        except Exception as err:
            if _not_found(err):
                return TableState()
            raise
        by_version: dict[int, list[dict[str, Any]]] = {}
        for r in rows:
            version = commit_version(r["file"])
            if version is None:  # log compactions and other JSON files beside the commits
                continue
            action: dict[str, Any] = {}
            if r["txn"] is not None:
                action["txn"] = r["txn"].asDict()
            if r["commitInfo"] is not None:
                action["commitInfo"] = r["commitInfo"].asDict()
            by_version.setdefault(version, []).append(action)
        cp_version, cp_txn = self._checkpoint_txn(log, app)
        if not by_version and cp_version is None:
            return TableState()
        return _replay(app, cp_version, cp_txn, sorted(by_version.items()))

    def _checkpoint_txn(self, log: str, app: str) -> tuple[int | None, int | None]:
        """(checkpoint version, txn version of `app` in it) from the newest readable checkpoint."""
        from pyspark.sql import functions as F

        spark = self.spark
        try:
            files = [r["path"].rsplit("/", 1)[-1] for r in spark.read.format("binaryFile")
                     .option("pathGlobFilter", "*.checkpoint*.parquet").load(log).select("path").collect()]
        except Exception as err:
            if _not_found(err):
                return None, None
            raise
        for version, parts in whole_checkpoints(files):
            try:
                txns = (spark.read.parquet(*[log + "/" + n for n in parts]).where(F.col("txn.appId") == app)
                        .select(F.max("txn.version").alias("v")).collect())
            except Exception as err:  # a torn checkpoint: use an older one
                if connection_lost(err):
                    raise
                log_.warning("skipping unreadable checkpoint %s of %s: %s", version, log, str(err)[:200])
                continue
            v = txns[0]["v"] if txns else None
            return version, None if v is None else int(v)
        return None, None


def needs_spark(config: FreshetConfig) -> bool:
    """The log must be read through Spark: a URI root, or a remote Spark (the daemon may not see
    the files at all)."""
    return config.spark.remote is not None or not is_local_root(config.warehouse.root)


def delta_log(config: FreshetConfig, spark: SparkSession | Callable[[], SparkSession] | None = None) -> DeltaLog:
    """The reader `config` needs: `SparkLog` (through `spark`) when `needs_spark`, else `LocalLog`."""
    if needs_spark(config):
        if spark is None:
            raise WarehouseError(f"reading the Delta logs under {config.warehouse.root!r} with spark "
                                 f"{config.spark.where} needs a Spark session")
        return SparkLog(spark)
    return LocalLog()
