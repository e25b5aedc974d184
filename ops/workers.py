"""Track workers (§3.2: at most one job per track): one thread per track runs the Spark job of
each `StartJob` it is handed and reports the outcome to the scheduler loop's queue.

A worker never raises into the loop: whatever the executor throws becomes a `JobFailed`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from warehouse.events import JobFailed, JobFinished, StartJob

__all__ = ["JobResult", "TrackWorkers"]

log = logging.getLogger("freshet")


@dataclass(frozen=True, slots=True)
class JobResult:
    """A track worker's report: the job, the event for the Scheduler, and when it began and ended."""

    job: StartJob
    event: JobFinished | JobFailed
    began: float
    ended: float


class TrackWorkers:
    """One thread and one queue per track; `run(job)` executes a job and returns its event."""

    def __init__(self, run: Callable[[StartJob], JobFinished | JobFailed], report: Callable[[JobResult], None]) -> None:
        self._run = run
        self._report = report
        self._queues: dict[int, queue.Queue[StartJob | None]] = {}
        self._threads: dict[int, threading.Thread] = {}

    def ensure(self, tracks: int) -> None:
        """Start workers for tracks 0 … tracks−1 that do not have one yet."""
        for i in range(tracks):
            if i not in self._threads:
                q: queue.Queue[StartJob | None] = queue.Queue()
                self._queues[i] = q
                t = threading.Thread(target=self._work, args=(i, q), name=f"freshet-track-{i}", daemon=True)
                self._threads[i] = t
                t.start()

    def submit(self, job: StartJob) -> None:
        self.ensure(job.track + 1)
        self._queues[job.track].put(job)

    def stop(self) -> None:
        for q in self._queues.values():
            q.put(None)

    def _work(self, track: int, q: queue.Queue[StartJob | None]) -> None:
        while True:
            job = q.get()
            if job is None:
                return
            began = time.time()
            try:
                event = self._run(job)
            except Exception as e:  # the executor should not raise; never let it kill a track
                log.exception("executor raised", extra={"table": job.table, "job": job.job_id, "track": track})
                event = JobFailed(job_id=job.job_id, reason=f"{type(e).__name__}: {e}")
            self._report(JobResult(job, event, began, time.time()))
