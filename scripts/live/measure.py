"""What the benchmark measures, independently of every contestant's own metrics.

**Staleness from the Delta logs** (§2.3): a table's freshness F(τ) is the newest event time in the
data committed by τ — commit times from the log (the in-commit timestamp, or the commit file's
modification time, as the Delta protocol defines them), event times from the added files'
statistics (`maxValues.ts`, or the file's data when a writer kept no statistics), read with
delta-rs (`deltalake`), not with Spark. S(τ) = τ − F(τ); before the first commit F = the window start (the
warehouse is fresh when the trace begins). The integral, the time within target and their
formulas are `warehouse.freshness.StalenessMeter`'s, the same the simulator and the metrics use.

**Resources**: CPU-seconds (user + system) and peak resident memory of a contestant's whole
process tree (Python, the Spark JVM, a Connect server), sampled with psutil.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.freshness import StalenessMeter, longest_gap

__all__ = ["Commit", "ProcessMonitor", "TableFigures", "commits", "complete_windows", "staleness", "starvation",
           "weighted"]


@dataclass(frozen=True, slots=True)
class Commit:
    version: int
    time: float  # commit time (in-commit timestamp or commit file mtime), epoch seconds
    max_event: float | None  # newest event time in the files it added (None: no rows added)
    rows: int = 0  # rows in the files it added


def _epoch(v: Any) -> float | None:
    if v is None:
        return None
    if hasattr(v, "timestamp"):
        return float(v.timestamp())
    return float(v) / 1e6  # microseconds (pyarrow timestamp[us] as int)


def commits(path: str | Path, time_column: str = "ts") -> list[Commit]:
    """Every commit of the Delta table at `path`, oldest first, with the newest event time it
    added: delta-rs loads each version and diffs the set of data files."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    if not any(Path(path, "_delta_log").glob("*.json")):
        return []  # no table yet (or a first commit cut off when the contestant was stopped)
    dt = DeltaTable(str(path), version=0)
    # the commit's time per the Delta protocol: its in-commit timestamp when the table has them,
    # else the modification time of the commit file (when the data became visible; commitInfo's
    # `timestamp` is taken earlier, when the writer prepared the commit — seconds earlier under load)
    stamps = {}
    for h in DeltaTable(str(path)).history():
        v = int(h["version"])
        ict = h.get("inCommitTimestamp")
        f = Path(path, "_delta_log", f"{v:020d}.json")
        stamps[v] = float(ict) / 1000.0 if ict is not None else f.stat().st_mtime if f.exists() else None
    stamps = {v: t for v, t in stamps.items() if t is not None}
    last = max(stamps)
    seen: set[str] = set()
    out: list[Commit] = []
    for v in range(0, last + 1):
        if v:
            dt.load_as_version(v)
        adds = pa.table(dt.get_add_actions(flatten=True)).to_pydict()
        newest: float | None = None
        rows = 0
        for i, p in enumerate(adds.get("path", [])):
            if p in seen:
                continue
            seen.add(p)
            rows += int(adds["num_records"][i] or 0)
            m = adds.get(f"max.{time_column}", [None] * len(adds["path"]))[i]
            if m is None and adds["num_records"][i]:
                col = pq.read_table(Path(path) / p, columns=[time_column]).column(time_column)
                m = pc.max(col).as_py()
            e = _epoch(m)
            if e is not None and (newest is None or e > newest):
                newest = e
        if v in stamps:
            out.append(Commit(v, stamps[v], newest, rows))
    return out


@dataclass(slots=True)
class TableFigures:
    """One table over the window [t0, t1]."""

    area: float  # ∫ S dτ
    max_staleness: float
    within: float  # share of the window with S ≤ target
    series: list[tuple[float, float]] = field(default_factory=list)  # (τ − t0, S(τ)) for the plots


def staleness(log: list[Commit], t0: float, t1: float, target: float | None, *, f0: float | None = None,
              step: float = 1.0) -> TableFigures:
    """F(τ) = max(f0, newest event committed by τ) (f0: the trace start, default t0); the exact
    ∫ S over [t0, t1], the max S and the share of [t0, t1] within `target`, plus S sampled every
    `step` seconds (and just before and after each commit), τ relative to t0."""
    f = t0 if f0 is None else f0
    changes: list[tuple[float, float]] = []  # (commit time, new F) inside the window
    for c in sorted(log, key=lambda c: (c.time, c.version)):
        if c.max_event is None:
            continue
        if c.time <= t0:
            f = max(f, c.max_event)
        elif c.time < t1 and c.max_event > (changes[-1][1] if changes else f):
            changes.append((c.time, c.max_event))
    meter = StalenessMeter(target=target)
    meter.start(f, t0)
    worst = t0 - f
    series: list[tuple[float, float]] = []
    grid = [t0 + i * step for i in range(int(math.floor((t1 - t0) / step)) + 1)]
    gi = 0
    for when, new_f in changes:
        while gi < len(grid) and grid[gi] < when:
            series.append((grid[gi] - t0, grid[gi] - meter.freshness))
            gi += 1
        series.append((when - t0, when - meter.freshness))  # the peak just before the commit
        worst = max(worst, when - meter.freshness)
        meter.set_freshness(new_f, when)
        series.append((when - t0, when - new_f))
    while gi < len(grid):
        series.append((grid[gi] - t0, grid[gi] - meter.freshness))
        gi += 1
    worst = max(worst, t1 - meter.freshness)
    within, observed = meter.time_within(t1)
    return TableFigures(meter.integral(t1), worst, within / observed if target is not None and observed else 0.0,
                        series)


def starvation(log: list[Commit], t0: float, t1: float) -> float:
    """The longest time within [t0, t1] the table went without a commit that made it fresher
    (added rows newer than any committed before): the largest gap between successive such
    commits, the window's ends counting as boundaries. A commit of no rows, or of older data (a
    materialized view recomputed over the same sources), does not end a starvation."""
    marks, newest = [], -math.inf
    for c in sorted(log, key=lambda c: (c.time, c.version)):
        if c.max_event is not None and c.max_event > newest:
            newest = c.max_event
            marks.append(c.time)
    return longest_gap(marks, t0, t1)


def complete_windows(log: list[Commit], sources: list[list[Commit]], granularity: float | None) -> list[Commit]:
    """A derived table's log with each commit credited only with complete windows: its newest
    event time capped at what its sources had committed by then (their trailing edge, floored to
    the granularity). A commit labelled past that holds a window its sources had not yet filled
    (a materialized view recomputing the current bucket); a commit left with nothing complete
    adds no freshness."""
    from warehouse.freshness import floor_to

    out = []
    for c in log:
        edges = [max((s.max_event for s in src if s.max_event is not None and s.time <= c.time), default=None)
                 for src in sources]
        if c.max_event is None or any(e is None for e in edges):
            out.append(Commit(c.version, c.time, None, c.rows))
            continue
        cap = floor_to(min(edges), granularity)
        out.append(Commit(c.version, c.time, min(c.max_event, cap), c.rows))
    return out


def weighted(figures: dict[str, TableFigures], priorities: dict[str, float], t0: float, t1: float) -> float:
    """The average over [t0, t1] of Σ p_i·S_i(τ): Σ p_i ∫ S_i / (t1 − t0)."""
    return sum(priorities[t] * f.area for t, f in figures.items()) / (t1 - t0)


def spark_jobs(events: Path) -> int | None:
    """The Spark jobs started in the event logs under `events` (`spark.eventLog.dir`: one file per
    Spark application of the contestant), None when there is none."""
    files = [f for f in events.rglob("*") if f.is_file()] if events.is_dir() else []
    if not files:
        return None
    needle = b'"Event":"SparkListenerJobStart"'
    return sum(sum(1 for line in f.open("rb") if needle in line) for f in files)


def _kind(process: Any) -> str:
    """`jvm`, `python` or `other`, from the executable's name (a thread of a JVM may rename the
    process's `comm`; the executable stays `java`)."""
    try:
        name = Path(process.exe()).name or process.name()
    except Exception:  # noqa: BLE001 — psutil.Error, or no access to exe: the short name
        name = process.name()
    return "jvm" if name == "java" else "python" if name.startswith("python") else "other"


class ProcessMonitor:
    """CPU-seconds and peak RSS of a process and all its descendants, sampled every `every` s; the
    peak RSS also per kind of process (`peak_rss_by_kind`: `jvm` — Spark's drivers and servers,
    `python`, `other`), each the peak of that kind's sum.

    CPU time of a process that exits between samples is counted up to its last sample. Processes are
    told apart by pid alone: psutil's create time is the boot time plus the start, and the boot time
    follows the wall clock, so a clock stepped while the run goes on (a virtual machine paused and
    resumed) would make one process two and count its CPU twice. A pid whose CPU time goes down is a
    new process under a reused pid: the old one's time is kept."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        import psutil

        self._root = psutil.Process(pid)
        self._every = every
        self._cpu: dict[int, float] = {}  # pid → last CPU seconds
        self._ended = 0.0  # CPU seconds of processes whose pid was reused
        self.peak_rss = 0
        self.peak_rss_by_kind: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-monitor", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return
        by_kind: dict[str, int] = {}
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    kind = _kind(p)
                    by_kind[kind] = by_kind.get(kind, 0) + p.memory_info().rss
                    self._count(p.pid, t.user + t.system)
            except psutil.Error:
                continue
        self.peak_rss = max(self.peak_rss, sum(by_kind.values()))
        for kind, rss in by_kind.items():
            self.peak_rss_by_kind[kind] = max(self.peak_rss_by_kind.get(kind, 0), rss)

    def _count(self, pid: int, seconds: float) -> None:
        last = self._cpu.get(pid, 0.0)
        if seconds < last:
            self._ended += last
        self._cpu[pid] = seconds

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self._every)

    @property
    def cpu_seconds(self) -> float:
        return self._ended + sum(self._cpu.values())

    def stop(self) -> None:
        self._sample()
        self._stop.set()
        self._thread.join(5)
