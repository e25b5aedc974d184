"""A modelled Delta log and a reference model for the model-based test (tests/test_model.py).

`ModelLake` stands in for the lake executor (warehouse.lake.executor) and the Delta tables: for
each StartJob it plans, from the committed log alone (docs/warehouse.md §5: never from an in-memory
plan), what the executor would commit — the rows of a base job's partitions (or of its time
slice), the windows of a derived job computed from its sources' committed rows, with the SQL
version of the config the job ran under — and keeps each commit as Delta's JSON actions would
hold it (`txn` + `commitInfo.userMetadata`). It is also a `lake.recovery.DeltaLog`, so a restart
recovers through `lake.recovery.recover`, the daemon's own path, from the modelled log.

`Reference` is what must be true of the warehouse, written without the engine: every row of
every partition that arrived (and was not quarantined) is in its base table once; every window
of a derived table holds its SQL (the current version) over its sources' rows of that window
(§2.2); and why each committed window may be rewritten (a source changed under it, its SQL
changed, an operator asked, a job over it failed).

Times are whole seconds; a partition `(start, end]` holds one row every `ROW_STEP` seconds.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from warehouse.config import FreshetConfig, TableConfig
from warehouse.events import StartJob
from warehouse.lake.delta import app_id, ms, next_txn_version
from warehouse.lake.recovery import LogReplay, TableState
from warehouse.sqltext import sql_version

ROW_STEP = 5

Row = tuple[str, int]  # (partition id, event time)


def rows_of(pid: str, lo: float, hi: float, start: float, end: float) -> list[Row]:
    """The rows of partition `pid` = `(start, end]` with lo < ts ≤ hi."""
    first = int(start) + ROW_STEP
    return [(pid, ts) for ts in range(first, int(end) + 1, ROW_STEP) if lo < ts <= hi]


def window_ends(lo: float, hi: float, g: int) -> list[int]:
    """The ends of the granules of `g` seconds in `(lo, hi]`."""
    return list(range((math.floor(lo) // g + 1) * g, math.floor(hi) + 1, g))


@dataclass(slots=True)
class Window:
    """One committed window of a derived table: its value and when its sources were read."""

    value: tuple
    read_seq: int
    version: str


@dataclass(slots=True)
class Plan:
    """What a job will commit (decided when it starts, from the log), or a no-op."""

    job: StartJob
    noop: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    txn: int = 0
    rows: list[Row] = field(default_factory=list)
    wins: dict[int, Window] = field(default_factory=dict)
    overwrite: tuple[float, float] | None = None  # replace windows in (lo, hi]; (−inf, inf): whole table
    written: list[tuple[float, float]] = field(default_factory=list)  # event-time ranges the commit writes


class ModelLake:
    """The Delta tables of one warehouse, in memory, and the executor that writes them."""

    def __init__(self, config: FreshetConfig) -> None:
        self.config = config
        self.commits: dict[str, list[tuple[int, list[dict[str, Any]]]]] = {}
        self.rows: dict[str, set[Row]] = {}
        self.wins: dict[str, dict[int, Window]] = {}
        self.seq = 0  # one clock for commits, reads and reports (the reference's "after")
        self.touches: dict[str, list[tuple[int, float, float]]] = {}  # table → (seq, lo, hi) of changes
        self._replays: dict[str, LogReplay] = {}  # each table's log, replayed as it is written
        self._states: dict[str, TableState] = {}  # each table's replayed state (dropped at each commit)

    def tick(self) -> int:
        self.seq += 1
        return self.seq

    # ---- lake.recovery.DeltaLog --------------------------------------------------------------------
    def _name(self, path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    def version(self, path: str) -> int | None:
        c = self.commits.get(self._name(path))
        return c[-1][0] if c else None

    def table_state(self, path: str, table: str) -> TableState:
        if table not in self._states:
            r = self._replays.get(table)
            self._states[table] = r.state() if r is not None else TableState()
        return dataclasses.replace(self._states[table])  # (copy() leaves out what recovery reads)

    def commit_metrics(self, path: str, table: str, txn_version: int) -> tuple[int | None, int | None]:
        return None, None

    def state(self, table: str) -> TableState:
        return self.table_state(table, table)

    # ---- the executor --------------------------------------------------------------------------------
    def plan(self, job: StartJob) -> Plan:
        """What `job` commits, planned from the log as the executor does (lake.executor)."""
        tc = next(t for t in self.config.tables if t.name == job.table)
        st = self.state(tc.name)
        if tc.is_base:
            return self._plan_base(job, st)
        if job.kind == "recompute":
            return self._plan_recompute(job, tc, st)
        return self._plan_derived(job, tc, st)

    def _plan_base(self, job: StartJob, st: TableState) -> Plan:
        parts = [p for p in job.arrivals if p.partition_id not in st.partitions]
        loaded = {p.partition_id: st.slices[p.partition_id] for p in parts if p.partition_id in st.slices}
        parts = [p for p in parts if loaded.get(p.partition_id, p.start) < min(p.end, job.end)]
        if not parts:
            return Plan(job, noop="its partitions (or this slice) are committed")
        new_f = max(job.new_freshness, st.freshness) if st.freshness is not None else job.new_freshness
        new_safe = job.new_safe_freshness if st.safe_freshness is None else max(job.new_safe_freshness,
                                                                                 st.safe_freshness)
        new_safe = min(new_safe, new_f)
        fps = {p.partition_id: p.fingerprint for p in parts if p.end <= job.end}
        slices = {p.partition_id: job.end for p in parts if p.end > job.end}
        plan = Plan(job, txn=next_txn_version(new_f, st.txn_version))
        for p in parts:
            lo, hi = loaded.get(p.partition_id, p.start), min(p.end, job.end)
            plan.rows += rows_of(p.partition_id, lo, hi, p.start, p.end)
            plan.written.append((lo, hi))
        plan.meta = {"kind": "base", "job_id": job.job_id, "partitions": fps, "freshness": new_f,
                     "safe_freshness": new_safe, "window": [job.start, job.end],
                     "windows": {p.partition_id: [p.start, p.end] for p in parts}}
        if slices:
            plan.meta["slices"] = slices
        return plan

    def _compute(self, tc: TableConfig, start: float, end: float) -> tuple[dict[int, Window], dict[str, int]]:
        """The SQL of `tc` over its sources' committed rows in `(start, end]`, window by window."""
        g = int(tc.granularity or 1)
        version = sql_version(tc.sql)
        read = self.tick()
        sources = {s: self.version(s) for s in tc.sources}
        out = {}
        for e in window_ends(start, end, g):
            lo = max(e - g, start)
            out[e] = Window((version, tuple(self._read(s, lo, e) for s in tc.sources)), read, version)
        return out, {s: v for s, v in sources.items() if v is not None}

    def _read(self, source: str, lo: float, hi: float) -> tuple:
        if source in self.rows:
            return (source, tuple(sorted(r for r in self.rows[source] if lo < r[1] <= hi)))
        wins = self.wins.get(source, {})
        return (source, tuple((e, wins[e].value) for e in sorted(wins) if lo < e <= hi))

    def _plan_derived(self, job: StartJob, tc: TableConfig, st: TableState) -> Plan:
        start = job.start if st.freshness is None or job.full else max(job.start, st.freshness)
        end = job.end
        if end <= start or (job.full and st.freshness is not None and st.freshness >= end):
            return Plan(job, noop=f"its window ends at or before the committed freshness {st.freshness}")
        txn = next_txn_version(end, st.txn_version)
        if txn != ms(end):
            return Plan(job, noop=f"txn version {ms(end)} is not above the recorded {st.txn_version}")
        wins, versions = self._compute(tc, start, end)
        meta = {"kind": "derived", "job_id": job.job_id, "partitions": {}, "freshness": end,
                "safe_freshness": min(job.new_safe_freshness, end), "window": [start, end], "sources": versions,
                "sql_version": sql_version(tc.sql)}
        if job.full:
            meta["full"] = True
        return Plan(job, meta=meta, txn=txn, wins=wins, overwrite=(-math.inf, math.inf) if job.full else None,
                    written=[(start, end)])

    def _plan_recompute(self, job: StartJob, tc: TableConfig, st: TableState) -> Plan:
        if st.freshness is None:
            return Plan(job, noop="the table has no committed windows to recompute")
        start, end = job.start, st.freshness if job.full else min(job.end, st.freshness)
        if end <= start:
            return Plan(job, noop=f"nothing committed in ({start}, {job.end}]")
        wins, versions = self._compute(tc, start, end)
        meta = {"kind": "recompute", "job_id": job.job_id, "partitions": {}, "freshness": st.freshness,
                "safe_freshness": st.safe_freshness if st.safe_freshness is not None else st.freshness,
                "window": [start, end], "sources": versions, "sql_version": sql_version(tc.sql),
                "reasons": list(job.reasons), "late": list(job.late)}
        if job.full:
            meta["full"] = True
        return Plan(job, meta=meta, txn=next_txn_version(st.freshness, st.txn_version), wins=wins,
                    overwrite=(-math.inf, math.inf) if job.full else (start, end), written=[(start, end)])

    def commit(self, plan: Plan, at: float) -> bool:
        """Apply `plan` to the log (False: a no-op). Each row is appended once, each derived
        window appended once (a rewrite replaces it): anything else is a duplicate in Delta."""
        if plan.noop:
            return False
        name = plan.job.table
        st = self.state(name)
        if st.txn_version is not None and plan.txn <= st.txn_version:
            return False  # Delta skips a txn version not above the recorded one
        if plan.rows:
            have = self.rows.setdefault(name, set())
            twice = sorted(set(plan.rows) & have)
            assert not twice, f"{name}: rows loaded twice by job {plan.job.job_id}: {twice[:4]}"
            have.update(plan.rows)
        if plan.wins or plan.overwrite is not None:
            wins = self.wins.setdefault(name, {})
            if plan.overwrite is None:
                again = sorted(set(plan.wins) & set(wins))
                assert not again, f"{name}: windows appended twice by job {plan.job.job_id}: {again}"
            else:
                lo, hi = plan.overwrite
                for e in [e for e in wins if lo < e <= hi]:
                    del wins[e]
            wins.update(plan.wins)
        commits = self.commits.setdefault(name, [])
        meta = {"freshet": 1, **plan.meta, "txn": plan.txn}
        actions = [{"txn": {"appId": app_id(name), "version": plan.txn}},
                   {"commitInfo": {"timestamp": int(at * 1000), "operation": "WRITE",
                                   "userMetadata": json.dumps(meta, sort_keys=True)}}]
        commits.append((len(commits), actions))
        self._replays.setdefault(name, LogReplay(app_id(name))).add(len(commits) - 1, actions)
        self._states.pop(name, None)
        seq = self.tick()
        for lo, hi in plan.written:
            self.touches.setdefault(name, []).append((seq, lo, hi))
        if st.freshness is not None:
            assert self.state(name).freshness >= st.freshness, f"{name}: committed freshness went down"
        return True

    def reported(self, job: StartJob, wrote: list[tuple[float, float]] | None = None) -> None:
        """The engine was told `job` finished: what it loaded or wrote is a change it now knows of —
        `wrote`, what its commit wrote, when it committed (a no-op: what it was to load)."""
        seq = self.tick()
        if job.kind == "base" and wrote is not None:
            ranges = wrote
        elif job.kind == "base":
            ranges = [(max(p.start, job.start), min(p.end, job.end)) for p in job.arrivals]
        elif job.kind in ("derived", "recompute"):
            ranges = [(job.start, job.end)]
        else:
            ranges = []
        for lo, hi in ranges:
            self.touches.setdefault(job.table, []).append((seq, lo, hi))


@dataclass(slots=True)
class Arrived:
    stream: str
    pid: str
    start: float
    end: float
    rows: int


class Reference:
    """What must be true of the warehouse, independent of how the engine gets there."""

    def __init__(self) -> None:
        self.arrived: dict[str, Arrived] = {}  # every partition that ever arrived, by id
        self.dropped: set[str] = set()  # quarantined after acceptance (unloadable)
        self.backfills: list[tuple[str, float, float, int]] = []  # (table, start, end, seq) accepted
        self.failed: list[tuple[str, int, float, float]] = []  # (table, seq, lo, hi) jobs reported failed
        self.sql_changes: list[tuple[str, int]] = []  # (table, seq) a reload changed its SQL (even back)

    def live(self, stream: str) -> list[Arrived]:
        return [a for a in self.arrived.values() if a.stream == stream and a.pid not in self.dropped]

    def base_rows(self, stream: str) -> set[Row]:
        return {r for a in self.live(stream) for r in rows_of(a.pid, a.start, a.end, a.start, a.end)}

    def truth(self, config: FreshetConfig, lake: ModelLake, table: str, e: int) -> tuple:
        """The right value of window `e` of derived `table`: its current SQL over its sources'
        right rows of the window, within what the table covers (its log's origin)."""
        tc = next(t for t in config.tables if t.name == table)
        g = int(tc.granularity or 1)
        origin = lake.state(table).origin
        lo = max(e - g, origin if origin is not None else -math.inf)
        items = []
        for s in tc.sources:
            sc = next(t for t in config.tables if t.name == s)
            if sc.is_base:
                items.append((s, tuple(sorted(r for r in self.base_rows(sc.stream) if lo < r[1] <= e))))
            else:
                ss = lake.state(s)
                gs = int(sc.granularity or 1)
                ends = window_ends(ss.origin, ss.freshness, gs) if ss.freshness is not None else []
                items.append((s, tuple((x, self.truth(config, lake, s, x)) for x in ends if lo < x <= e)))
        return (sql_version(tc.sql), tuple(items))

    def reasons(self, config: FreshetConfig, lake: ModelLake, table: str, lo: float, hi: float) -> dict[int, str]:
        """Why each committed window of `table` in `(lo, hi]` may be rewritten now; "" for none."""
        tc = next(t for t in config.tables if t.name == table)
        g = int(tc.granularity or 1)
        version = sql_version(tc.sql)
        out: dict[int, str] = {}
        for e, w in lake.wins.get(table, {}).items():
            if not lo < e <= hi:
                continue
            a = e - g
            why = ""
            if w.version != version or any(t == table and seq > w.read_seq for t, seq in self.sql_changes):
                why = "sql"
            elif any(seq > w.read_seq and x < e and y > a for s in tc.sources
                     for seq, x, y in lake.touches.get(s, ())):
                why = "source changed"
            elif any(t == table and seq > w.read_seq and x < e and y > a for t, x, y, seq in self.backfills):
                why = "backfill"
            elif any(t == table and seq > w.read_seq and x < e and y > a for t, seq, x, y in self.failed):
                why = "retry"
            out[e] = why
        return out


def unjustified(reasons: dict[int, str]) -> list[int]:
    return sorted(e for e, why in reasons.items() if not why)


def ends_of(items: Iterable[Arrived]) -> list[float]:
    return [a.end for a in items]
