"""Traces: recorded arrivals and job durations, as JSON lines (docs/simulator.md).

One JSON object per line; blank lines and lines starting with `#` are skipped.

- **arrival** — a partition arrived: `{"time": 130.2, "stream": "s0", "start": 100.0, "end": 130.0,
  "rows": 1234}`; optional `"partition"` (id; default `<stream>-<n>`) and `"safe_through"`.
- **job** — an update job finished: `{"time": 141.0, "table": "t0", "start": 100.0, "end": 130.0,
  "duration": 10.8}`; optional `"rows"`, `"work"` (n of E(n), `StartJob.n`: for a base job its
  rows at the stream's typical rate, warehouse.cost.RowRate; default `end − start`), `"track"`,
  `"status"` (`"ok"` default; other values are ignored on replay), `"cold"` (the table's first
  job on a fresh JVM, `JobFinished.cold`).
- **action** — an operator action the engine took (warehouse.events: Suspend, Resume, Refresh,
  Backfill, CancelBackfill): `{"time": 150.0, "action": "suspend", "table": "t0"}`; a backfill or
  its cancel adds `"start"`, `"end"` and `"reason"` (the label its recompute jobs carry). A replay
  hands each to the engine at its time, like arrivals.
- **header** (optional, first line) — `{"freshet_trace": 1, ...}` with any metadata; a daemon's
  says `"source": "freshet run"`, and its replay learns costs as the daemon did (sim.simulator).

`time` is when the event happened, on any clock (epoch seconds from the daemon, simulated seconds
from `freshet sim run --write-trace`); `start`/`end` are event times of the data, on the same clock.
A replay shifts nothing: the simulation starts at the earliest `time` or `start` in the file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from warehouse.errors import ConfigError, SchedulerMisuse, TraceError
from warehouse.events import ACTION_EVENTS, Backfill, CancelBackfill, OperatorAction

log = logging.getLogger("freshet")

__all__ = ["LIVE_SOURCE", "ActionRecord", "Arrival", "JobRecord", "Trace", "TraceWriter", "read_trace"]

TRACE_VERSION = 1
LIVE_SOURCE = "freshet run"  # the header's `source` in a daemon's trace (ops.loop)


@dataclass(frozen=True, slots=True)
class Arrival:
    """A partition of `stream` covering `(start, end]`, arriving at `time` (§2.1)."""

    time: float
    stream: str
    partition: str
    start: float
    end: float
    rows: int = 0
    safe_through: float | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"time": self.time, "stream": self.stream, "partition": self.partition,
                             "start": self.start, "end": self.end, "rows": self.rows}
        if self.safe_through is not None:
            d["safe_through"] = self.safe_through
        return d


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A finished update job of `table` that loaded `(start, end]` in `duration` seconds."""

    time: float
    table: str
    start: float
    end: float
    duration: float
    rows: int = 0
    track: int | None = None
    status: str = "ok"
    work: float | None = None  # n of E(n) (§2.4): StartJob.n of the job; None: end − start
    cold: bool = False  # JobFinished.cold: the table's first job on a fresh JVM

    def __post_init__(self) -> None:
        if self.work is None:  # a trace written before `work` was recorded
            object.__setattr__(self, "work", self.end - self.start)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"time": self.time, "table": self.table, "start": self.start, "end": self.end,
                             "duration": self.duration, "rows": self.rows, "work": self.work}
        if self.track is not None:
            d["track"] = self.track
        if self.status != "ok":
            d["status"] = self.status
        if self.cold:
            d["cold"] = True
        return d


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """An operator action (warehouse.events.OperatorAction) handed to the engine at `time`."""

    time: float
    action: str  # a key of warehouse.events.ACTION_EVENTS
    table: str
    start: float | None = None
    end: float | None = None
    reason: str = ""

    @classmethod
    def of(cls, time: float, ev: OperatorAction) -> ActionRecord:
        name = next(k for k, v in ACTION_EVENTS.items() if isinstance(ev, v))
        if isinstance(ev, Backfill | CancelBackfill):
            return cls(time, name, ev.table, ev.start, ev.end, ev.reason)
        return cls(time, name, ev.table, reason=ev.reason)

    def event(self) -> OperatorAction:
        kind = ACTION_EVENTS[self.action]
        if kind in (Backfill, CancelBackfill):
            return kind(table=self.table, start=self.start, end=self.end, reason=self.reason)
        return kind(table=self.table, reason=self.reason)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"time": self.time, "action": self.action, "table": self.table}
        if self.start is not None:
            d.update(start=self.start, end=self.end)
        if self.reason:
            d["reason"] = self.reason
        return d


@dataclass
class Trace:
    """A parsed trace: arrivals per stream (in time order), measured durations by window and the
    operator actions (in time order). `live`: a daemon wrote it (`"source": "freshet run"`), so its
    durations are the ones the daemon's cost models learned from (§2.4)."""

    arrivals: dict[str, list[Arrival]]
    durations: dict[tuple[str, float, float], float]
    jobs: list[JobRecord]
    actions: list[ActionRecord] = field(default_factory=list)
    live: bool = False
    source: str = "the trace"  # where it was read from, for errors

    def fitted_costs(self, priors: dict[str, tuple[float, float]],
                     kinds: Iterable[Iterable[str]] = ()) -> dict[str, tuple[float, float]]:
        """(α, β) per table with recorded jobs: the cost model (§2.4) fitted to their measured
        durations in order, starting from `priors`. The tables of each group of `kinds` lean on
        their settled peers as the daemon's do (cost.Peers), and have an estimate without a job."""
        from warehouse.cost import CostModel, Peers

        models: dict[str, CostModel] = {}
        Peers([[models.setdefault(t, CostModel(*priors[t])) for t in group] for group in kinds])
        for j in self.jobs:
            if j.status == "ok" and j.table in priors:
                m = models.get(j.table)
                if m is None:
                    m = models[j.table] = CostModel(*priors[j.table])
                m.observe(j.work, j.duration, j.cold)
        return {t: (m.alpha, m.beta) for t, m in models.items()}

    @property
    def origin(self) -> float:
        """The earliest time or data start in the trace: where the replay begins."""
        firsts = [min(a[0].time, a[0].start) for a in self.arrivals.values() if a]
        return min(firsts) if firsts else 0.0

    @property
    def last_time(self) -> float:
        return max((a[-1].time for a in self.arrivals.values() if a), default=0.0)


def _num(obj: dict[str, Any], key: str, where: str) -> float:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TraceError(f"{where}: `{key}` must be a number (got {v!r})")
    return float(v)


def read_trace(path: str | Path) -> Trace:
    """Parse a trace file; every bad line is reported at once, by line number."""
    p = Path(path)
    try:
        lines = p.read_text().splitlines()
    except OSError as e:
        raise TraceError(f"cannot read trace: {e.strerror}", source=str(p)) from None
    return parse_trace(lines, source=str(p))


def parse_trace(lines: Iterable[str], *, source: str = "<trace>") -> Trace:
    arrivals: dict[str, list[Arrival]] = {}
    durations: dict[tuple[str, float, float], float] = {}
    jobs: list[JobRecord] = []
    actions: list[ActionRecord] = []
    problems: list[str] = []
    counts: dict[str, int] = {}
    live = False
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"line {lineno}"
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            problems.append(f"{where}: not JSON ({e.msg})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{where}: expected a JSON object")
            continue
        try:
            if "freshet_trace" in obj:
                if obj["freshet_trace"] != TRACE_VERSION:
                    problems.append(f"{where}: unsupported trace version {obj['freshet_trace']!r}")
                live = obj.get("source") == LIVE_SOURCE
            elif "stream" in obj:
                stream = str(obj["stream"])
                n = counts.get(stream, 0)
                counts[stream] = n + 1
                start, end = _num(obj, "start", where), _num(obj, "end", where)
                if end <= start:
                    raise TraceError(f"{where}: partition end {end} is not after start {start}")
                safe = obj.get("safe_through")
                a = Arrival(time=_num(obj, "time", where), stream=stream,
                            partition=str(obj.get("partition", obj.get("partition_id", f"{stream}-{n}"))),
                            start=start, end=end, rows=int(obj.get("rows", 0) or 0),
                            safe_through=None if safe is None else _num(obj, "safe_through", where))
                seq = arrivals.setdefault(stream, [])
                if seq and a.time < seq[-1].time:
                    raise TraceError(f"{where}: arrivals of stream {stream!r} go back in time "
                                      f"({a.time} after {seq[-1].time})")
                seq.append(a)
            elif "action" in obj:
                actions.append(_action(obj, where))
            elif "table" in obj:
                rec = JobRecord(time=_num(obj, "time", where), table=str(obj["table"]),
                                start=_num(obj, "start", where), end=_num(obj, "end", where),
                                duration=_num(obj, "duration", where), rows=int(obj.get("rows", 0) or 0),
                                track=obj.get("track"), status=str(obj.get("status", "ok")),
                                work=None if obj.get("work") is None else _num(obj, "work", where),
                                cold=obj.get("cold") is True)
                jobs.append(rec)
                if rec.status == "ok":
                    durations.setdefault((rec.table, rec.start, rec.end), rec.duration)
            else:
                problems.append(f"{where}: neither an arrival (`stream`) nor a job (`table`)")
        except ConfigError as e:
            problems.extend(e.problems)
    if problems:
        raise TraceError(problems, source=source)
    actions.sort(key=lambda a: a.time)
    return Trace(arrivals=arrivals, durations=durations, jobs=jobs, actions=actions, live=live, source=source)


def _action(obj: dict[str, Any], where: str) -> ActionRecord:
    name = obj["action"]
    if name not in ACTION_EVENTS:
        raise TraceError(f"{where}: unknown action {name!r} (known: {', '.join(ACTION_EVENTS)})")
    if not isinstance(obj.get("table"), str):
        raise TraceError(f"{where}: an action needs a `table`")
    ranged = ACTION_EVENTS[name] in (Backfill, CancelBackfill)
    rec = ActionRecord(time=_num(obj, "time", where), action=name, table=obj["table"],
                       start=_num(obj, "start", where) if ranged else None,
                       end=_num(obj, "end", where) if ranged else None, reason=str(obj.get("reason", "")))
    try:
        rec.event()
    except SchedulerMisuse as e:  # the event's own check (a finite range), reported by line
        raise TraceError(f"{where}: {e}") from None
    return rec


class TraceWriter:
    """Appends arrivals and finished jobs as JSON lines: the simulator's `--write-trace` and the
    daemon's trace file write the same records. Thread-safe; a write error (a full disk) is
    reported to `on_error` and never raised, so a trace can never stop the warehouse.

    `append_to(..., rotate_at=B)`: once the file holds B bytes it is renamed `<name>.1` (replacing
    the one before) and a new file begins, so a trace kept for the tuner alone stays bounded."""

    def __init__(self, fh: IO[str] | None, header: dict[str, Any] | None = None, *, write_header: bool = True,
                 on_error: Callable[[OSError], None] | None = None, path: Path | None = None,
                 rotate_at: int | None = None) -> None:
        self._fh = fh
        self._lock = threading.Lock()
        self._on_error = on_error
        self._header = {"freshet_trace": TRACE_VERSION, **(header or {})}
        self._path, self._rotate_at = path, rotate_at
        self._size = 0
        self._rotate_failed = False
        if fh is None:
            self._open()
        elif write_header:
            self._write(self._header)

    @classmethod
    def append_to(cls, path: str | Path, header: dict[str, Any] | None = None, *,
                  on_error: Callable[[OSError], None] | None = None, rotate_at: int | None = None) -> TraceWriter:
        """Open `path` for appending (line-buffered); the header only goes into a new file."""
        p = Path(path).expanduser()
        p.parent.mkdir(parents=True, exist_ok=True)
        return cls(None, header, on_error=on_error, path=p, rotate_at=rotate_at)

    def _open(self) -> None:
        assert self._path is not None
        self._size = self._path.stat().st_size if self._path.exists() else 0
        self._fh = self._path.open("a", buffering=1)
        if self._size == 0:
            line = json.dumps(self._header, sort_keys=True) + "\n"
            self._fh.write(line)
            self._size = len(line.encode())

    def _write(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, sort_keys="freshet_trace" in obj) + "\n"
        with self._lock:
            try:
                if self._fh is None:  # a rotation could not reopen the file: try again
                    self._open()
                assert self._fh is not None
                self._fh.write(line)
                self._size += len(line.encode())
            except OSError as e:
                if self._on_error is None:
                    raise
                self._on_error(e)
                return
            if self._rotate_at is not None and self._size >= self._rotate_at:
                self._rotate()

    def _rotate(self) -> None:
        """The line is written: a failure here is logged and never raised (a retried write would
        write it twice); the rename is tried again at the next write, a reopen before it."""
        assert self._fh is not None and self._path is not None
        self._fh.close()
        self._fh = None
        try:
            self._path.replace(self._path.with_name(self._path.name + ".1"))
        except OSError as e:
            if not self._rotate_failed:  # once, not at every line
                log.warning("cannot rotate the trace file %s (it grows on): %s", self._path, e)
            self._rotate_failed = True
        else:
            self._rotate_failed = False
        with contextlib.suppress(OSError):
            self._open()

    def arrival(self, a: Arrival) -> None:
        self._write(a.to_json())

    def job(self, rec: JobRecord) -> None:
        self._write(rec.to_json())

    def action(self, rec: ActionRecord) -> None:
        self._write(rec.to_json())

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()

