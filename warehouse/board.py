"""The track board: which update job runs on which track, since when, and each track's busy time.

At most one job runs per track (§3.2), and one per table (a table has one writer, docs/architecture.md
§4.4). This board is the one record of both: the Scheduler asks it which tracks are idle, which
job a table runs, when a busy track is expected to free up (policies.reservation), and it
reports busy time to the stats. Pure: no clock, no I/O; knows nothing of the Scheduler.
"""

from __future__ import annotations

from warehouse.events import StartJob

__all__ = ["TrackBoard"]


class TrackBoard:
    """Jobs by id, by table and by track; idle tracks; busy time per track."""

    __slots__ = ("_busy", "_since", "_track", "by_table", "idle", "jobs", "n")

    def __init__(self) -> None:
        self.jobs: dict[int, StartJob] = {}  # running jobs by id
        self.by_table: dict[str, StartJob] = {}  # the job each table runs
        self._track: list[StartJob | None] = []
        self._since: list[float] = []  # when the running job of a track started
        self._busy: list[float] = []  # busy time of finished jobs
        self.idle: set[int] = set()  # tracks below `n` with no job
        self.n = 0

    def resize(self, n: int, now: float) -> None:
        """`n` tracks from now (a reconfigure); a job on a track beyond `n` runs to its end."""
        while len(self._track) < n:
            self._track.append(None)
            self._since.append(now)
            self._busy.append(0.0)
        self.n = n
        self.idle = {i for i in range(n) if self._track[i] is None}

    def occupy(self, job: StartJob, now: float) -> None:
        """`job` runs on `job.track` from `now`."""
        self.jobs[job.job_id] = job
        self.by_table[job.table] = job
        self._track[job.track] = job
        self._since[job.track] = now
        self.idle.discard(job.track)

    def release(self, job_id: int, now: float) -> StartJob | None:
        """Job `job_id` ended at `now`: its track is free; the job, or None if it is not running."""
        job = self.jobs.pop(job_id, None)
        if job is None:
            return None
        if self.by_table.get(job.table) is job:
            del self.by_table[job.table]
        self._busy[job.track] += now - self._since[job.track]
        self._track[job.track] = None
        if job.track < self.n:
            self.idle.add(job.track)
        return job

    def on(self, track: int) -> StartJob | None:
        return self._track[track]

    def free_at(self, now: float, pace: float, but: int) -> list[float]:
        """When each track but `but` is expected to be free: now, or its job's start plus its
        estimate at the current pace (policies.chopping.Pace)."""
        out = []
        for i in range(self.n):
            if i == but:
                continue
            job = self._track[i]
            out.append(now if job is None else max(now, self._since[i] + job.estimate * pace))
        return out

    def busy_time(self, track: int, now: float) -> float:
        """Seconds `track` has run jobs so far, the running one included."""
        job = self._track[track]
        return self._busy[track] + (now - self._since[track] if job is not None else 0.0)
