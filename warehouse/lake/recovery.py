"""Recovery from the Delta log (DESIGN.md §4.4): the log is the truth at start and on reload.

A table's `_delta_log/` — checkpoint and JSON commits, read directly with no Spark session — gives
its freshness F, safe freshness F' (§2.2), last txn version, loaded partition ids and the metrics
of a commit, from Freshet's `userMetadata` and Delta's `txn` actions.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.config import FreshetConfig
from warehouse.lake.delta import app_id, table_path

__all__ = ["RecoveryState", "TableState", "commit_metrics", "delta_version", "read_table_state", "recover"]

log_ = logging.getLogger("freshet.recovery")
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d+\.\d+)?\.parquet$")


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

    def copy(self) -> TableState:
        return TableState(self.freshness, self.safe_freshness, self.txn_version, self.delta_version,
                          dict(self.partitions), self.commits, self.origin, dict(self.windows))


@dataclass(slots=True)
class RecoveryState:
    """Every table's committed state, read back on start."""

    tables: dict[str, TableState]
    loaded: dict[str, dict[str, str]]  # stream → {partition id → fingerprint}

    @property
    def recovered(self) -> dict[str, Any]:
        """`warehouse.scheduler.Recovered` per table that has ever been loaded."""
        from warehouse.scheduler import Recovered

        return {
            name: Recovered(freshness=s.freshness, safe_freshness=s.safe_freshness, origin=s.origin)
            for name, s in self.tables.items()
            if s.freshness is not None
        }


# ---- reading the log ------------------------------------------------------------------------------
def delta_version(path: str) -> int | None:
    """The latest committed Delta version of the table at `path` (None: no table)."""
    log = Path(path) / "_delta_log"
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return None
    versions = [int(m.group(1)) for n in names if (m := _COMMIT.match(n))]
    if not versions:
        cps = [int(m.group(1)) for n in names if (m := _CHECKPOINT.match(n))]
        return max(cps) if cps else None
    return max(versions)


def _checkpoint_txn(log: Path, names: list[str], app: str) -> tuple[int | None, int | None]:
    """(checkpoint version, txn version of `app` in it) from the latest checkpoint."""
    cps: dict[int, list[str]] = {}
    for n in names:
        if m := _CHECKPOINT.match(n):
            cps.setdefault(int(m.group(1)), []).append(n)
    if not cps:
        return None, None
    import pyarrow.parquet as pq

    for version in sorted(cps, reverse=True):
        best: int | None = None
        try:
            for n in cps[version]:
                tbl = pq.read_table(log / n, columns=["txn"])
                for txn in tbl.column("txn").to_pylist():
                    if txn and txn.get("appId") == app and txn.get("version") is not None:
                        best = txn["version"] if best is None else max(best, txn["version"])
        except (OSError, ValueError, KeyError) as err:  # a torn checkpoint: use an older one
            log_.warning("skipping unreadable checkpoint %s of %s: %s", version, log, err)
            continue
        return version, best
    return None, None


def read_table_state(path: str, table: str) -> TableState:
    """Replay `<path>/_delta_log` for Freshet's commits to `table` (§4.4)."""
    log = Path(path) / "_delta_log"
    state = TableState()
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return state
    app = app_id(table)
    commits = sorted((int(m.group(1)), n) for n in names if (m := _COMMIT.match(n)))
    cp_version, cp_txn = _checkpoint_txn(log, names, app)
    state.txn_version = cp_txn
    best_meta: dict[str, Any] | None = None
    best_txn: int | None = None
    for version, name in commits:
        txn_v: int | None = None
        meta: dict[str, Any] | None = None
        try:
            lines = (log / name).read_text().splitlines()
        except FileNotFoundError:  # cleaned up between listing and reading
            continue
        for line in lines:
            # one action per line; only these two matter (skip parsing add/remove with stats)
            if not line.startswith(('{"txn"', '{"commitInfo"')):
                continue
            action = json.loads(line)
            if "txn" in action and action["txn"].get("appId") == app:
                txn_v = int(action["txn"]["version"])
            elif "commitInfo" in action:
                um = action["commitInfo"].get("userMetadata")
                if um:
                    try:
                        parsed = json.loads(um)
                    except ValueError:
                        parsed = None
                    if isinstance(parsed, dict) and parsed.get("freshet"):
                        meta = parsed
        if txn_v is not None:
            state.txn_version = txn_v if state.txn_version is None else max(state.txn_version, txn_v)
            if best_txn is None or txn_v >= best_txn:
                best_txn, best_meta = txn_v, meta
        if meta is not None:
            state.commits += 1
            state.partitions.update(meta.get("partitions") or {})
            windows = meta.get("windows")  # commits before windows were recorded have none: skipped
            if isinstance(windows, dict):
                state.windows.update({pid: (float(w[0]), float(w[1])) for pid, w in windows.items()
                                      if isinstance(w, list) and len(w) == 2})
            window = meta.get("window")
            if isinstance(window, list) and window and window[0] is not None:
                w0 = float(window[0])
                state.origin = w0 if state.origin is None else min(state.origin, w0)
        state.delta_version = version
    if state.delta_version is None:
        state.delta_version = cp_version
    if best_meta is not None and best_txn == state.txn_version:
        state.freshness = float(best_meta["freshness"])
        sf = best_meta.get("safe_freshness")
        state.safe_freshness = None if sf is None else float(sf)
    elif state.txn_version is not None:
        # The commit holding the metadata was cleaned up: the txn version *is* F in ms (±1 per
        # late load), and F' falls back to F − lateness in the Scheduler.
        state.freshness = state.txn_version / 1000.0
    return state


def recover(config: FreshetConfig) -> RecoveryState:
    """Every table's freshness, safe freshness, txn version and loaded ids, from Delta logs alone."""
    tables: dict[str, TableState] = {}
    loaded: dict[str, dict[str, str]] = {s.name: {} for s in config.streams}
    for t in config.tables:
        st = read_table_state(table_path(config, t.name), t.name)
        tables[t.name] = st
        if t.stream:
            loaded.setdefault(t.stream, {}).update(st.partitions)
    return RecoveryState(tables=tables, loaded=loaded)


def commit_metrics(path: str, table: str, txn_version: int) -> tuple[int | None, int | None]:
    """(Delta version, rows written) of the commit that recorded `txn_version`, if it exists."""
    log = Path(path) / "_delta_log"
    app = app_id(table)
    latest = delta_version(path)
    if latest is None:
        return None, None
    for version in range(latest, max(-1, latest - 20), -1):
        f = log / f"{version:020d}.json"
        if not f.exists():
            continue
        hit, rows = False, None
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            a = json.loads(line)
            if "txn" in a and a["txn"].get("appId") == app and int(a["txn"]["version"]) == txn_version:
                hit = True
            elif "commitInfo" in a:
                n = (a["commitInfo"].get("operationMetrics") or {}).get("numOutputRows")
                rows = None if n is None else int(n)
        if hit:
            return version, rows
    return None, None
