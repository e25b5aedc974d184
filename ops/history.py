"""What the status page (`ops.page`) remembers: the last hour of each table's freshness and the
jobs each track ran lately.

Staleness `S_i(τ) = τ − F_i(τ)` (§2.1) is a sawtooth: it grows with slope 1 and drops when a job
commits. So the history keeps no samples, only the steps of F_i — the instant each job finished
and the freshness it left (`StartJob.new_freshness`, unchanged by recompute and maintenance jobs)
— and `staleness_points` draws the curve exactly from them. A table's freshness before its first
step is the one in the snapshot published before the first job result seen (every earlier
result was recorded, so that snapshot already holds the freshness the daemon started with).

The daemon's scheduler loop calls `record` once per job result; the HTTP thread reads a frozen
`view`. Bounded: steps and jobs older than `window` seconds are dropped, and at most `max_jobs`
jobs are kept.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from warehouse.events import JobFinished
from warehouse.stats import SchedulerStats

__all__ = ["History", "HistoryView", "JobSpan", "staleness_points"]

WINDOW = 3600.0  # seconds of history kept: the sparkline's hour
MAX_JOBS = 5000


@dataclass(frozen=True, slots=True)
class JobSpan:
    """One job as a track ran it: `[began, ended]` in epoch seconds; `reason` when it failed."""

    job_id: int
    track: int
    table: str
    kind: str  # StartJob.kind: base, derived, stateful, recompute, optimize, vacuum
    began: float
    ended: float
    ok: bool
    reason: str = ""

    @property
    def duration(self) -> float:
        return self.ended - self.began


@dataclass(frozen=True, slots=True)
class HistoryView:
    """A frozen copy for one page: `since` is when recording began."""

    since: float
    steps: dict[str, tuple[tuple[float, float | None], ...]]  # table → ((time, freshness from then on), …)
    jobs: tuple[JobSpan, ...]  # oldest first


class History:
    """Freshness steps per table and recent jobs; thread-safe (one writer, many readers)."""

    def __init__(self, window: float = WINDOW, max_jobs: int = MAX_JOBS, *, since: float | None = None) -> None:
        self.window = window
        self.since = time.time() if since is None else since
        self._steps: dict[str, deque[tuple[float, float | None]]] = {}
        self._jobs: deque[JobSpan] = deque(maxlen=max_jobs)
        self._lock = threading.Lock()

    def record(self, result: Any, snapshot: SchedulerStats | None, now: float) -> None:
        """A track's job result (`ops.workers.JobResult`: job, event, began, ended), handled at
        `now`; `snapshot` is the one published before it (it seeds tables seen for the first time)."""
        job, event = result.job, result.event
        ok = isinstance(event, JobFinished)
        span = JobSpan(job_id=job.job_id, track=job.track, table=job.table, kind=job.kind, began=result.began,
                       ended=result.ended, ok=ok, reason="" if ok else str(getattr(event, "reason", "")))
        with self._lock:
            if snapshot is not None:
                for t in snapshot.tables:
                    if t.name not in self._steps:
                        self._steps[t.name] = deque([(snapshot.now, t.freshness)])
            self._jobs.append(span)
            if ok:
                steps = self._steps.setdefault(job.table, deque())
                if not steps or steps[-1][1] != job.new_freshness:
                    steps.append((now, job.new_freshness))
            self._prune(now)

    def _prune(self, now: float) -> None:
        cut = now - self.window
        for steps in self._steps.values():
            # keep the last step before the cut: it gives F at the start of the window
            while len(steps) > 1 and steps[1][0] <= cut:
                steps.popleft()
        while self._jobs and self._jobs[0].ended < cut:
            self._jobs.popleft()

    def view(self) -> HistoryView:
        with self._lock:
            return HistoryView(since=self.since, steps={k: tuple(v) for k, v in self._steps.items()},
                               jobs=tuple(self._jobs))


def staleness_points(steps: tuple[tuple[float, float | None], ...], current: float | None, since: float,
                     t0: float, now: float) -> list[tuple[float, float]]:
    """The polyline of `S(τ) = τ − F(τ)` over `[max(t0, since), now]` (§2.1): slope 1 between
    steps, a vertical drop at each. `steps` are (time, freshness from then on); the first one's
    freshness also holds before it, back to `since`; `current` is F in the latest snapshot (a
    step at `now` if it differs, e.g. after a reload). Spans where F is unknown are left out."""
    start = max(t0, since)
    seq = [(t, f) for t, f in steps if t <= now]
    if seq:
        seq[0] = (min(seq[0][0], start), seq[0][1])
    if not seq or seq[-1][1] != current:
        seq.append((now if seq else start, current))
    out: list[tuple[float, float]] = []
    for i, (t, f) in enumerate(seq):
        a = max(t, start)
        b = seq[i + 1][0] if i + 1 < len(seq) else now
        if b < start or f is None:
            continue
        out.append((a, a - f))
        if b > a:
            out.append((b, b - f))
    return out
