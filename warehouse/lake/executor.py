"""Running the Scheduler's StartJob decisions on Spark (docs/warehouse.md §5).

Track workers call `Executor.execute(job)` from their own threads; it runs the update job, measures
its duration (the Scheduler re-estimates α, β from it — §2.4 of *Scalable Scheduling of Updates in
Streaming Data Warehouses*) and answers with the event to feed back: `JobFinished` or `JobFailed`.
Spark errors become events; they never reach the core.

Each kind of job is one pipeline in a module of its own — plan from the committed state, read at
pinned versions, compute, commit (`lake.commit.finish`) — read top to bottom there:

| job | pipeline |
|---|---|
| base append (§2.1) | `lake.base.run_base` |
| derived update (§2.2), full refresh | `lake.derived.run_derived` |
| derived recompute (late data, changed SQL, backfill) | `lake.derived.run_recompute` |
| stateful fold / late fold | `lake.stateful.run_fold` / `lake.stateful.fold_late` |
| stateful rebuild chunk | `lake.rebuild.run_rebuild` |
| OPTIMIZE, VACUUM | `lake.maintain.run_maintenance` |

Immediately before it writes, each job asks the warehouse lease the daemon holds whether it may
(`Executor.fence`; a job refused there is known not committed) and names it in its commit
(`Executor.sign`, the `leader` of `userMetadata`): one writer per warehouse, visible in the logs.

Every job is planned from the watermark committed in the table's Delta log: after a failure whose
outcome is unknown the table's state is re-read before its next job, so a job that did commit
becomes a no-op (its partitions are already recorded; its window is already covered), and the
Delta txn (`freshet/<table>`, version) guards against a replay that slips past that. After each
commit the table's new Delta snapshot is warmed in the background (`lake.warm`): the state
reconstruction Delta's txn check needs runs then, not in the table's next job.

The same jobs run over Spark Connect (`spark.remote`): DataFrame writes with the txn options,
sources pinned with `versionAsOf`, the log read through Spark (`lake.recovery.SparkLog`). A lost
connection fails the job like any Spark error (it is retried after its back-off) and is reported
to the daemon's `SparkLink`, which opens a new session for the next job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from policies.bulk import pool_for
from warehouse.config import FreshetConfig, TableConfig
from warehouse.events import JobFailed, JobFinished, StartJob
from warehouse.lake.base import run_base
from warehouse.lake.commit import leader_of
from warehouse.lake.delta import table_path
from warehouse.lake.derived import run_derived, run_recompute
from warehouse.lake.evolution import evolution_problems
from warehouse.lake.files import LiveFiles
from warehouse.lake.maintain import run_maintenance
from warehouse.lake.outcome import JobError, JobOutcome, JobRefused, failure_reason, noop_outcome
from warehouse.lake.rebuild import run_rebuild
from warehouse.lake.recovery import LocalLog, RecoveryState, TableState, delta_log, recover
from warehouse.lake.session import SparkLink, job_description
from warehouse.lake.stateful import fold_late, run_fold
from warehouse.lake.warm import SnapshotWarmer
from warehouse.upkeep import MAINTENANCE_KINDS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.lake.commit import Lake, Leader

__all__ = ["Executor", "JobError", "JobOutcome", "pipeline"]

log = logging.getLogger("freshet.executor")

Pipeline = Callable[["Lake", StartJob, TableConfig, float], JobOutcome]


def pipeline(job: StartJob, tc: TableConfig) -> Pipeline:
    """The pipeline that runs `job` on `tc` (the module docstring's table)."""
    if job.kind in MAINTENANCE_KINDS:
        return run_maintenance
    if tc.is_base:
        return run_base
    if tc.is_stateful:  # one MERGE of the increment, never a window rewrite
        if job.kind != "recompute":
            return run_fold
        return run_rebuild if "rebuild" in job.reasons else fold_late
    return run_recompute if job.kind == "recompute" else run_derived


class Executor:
    """Runs update jobs against the Delta tables under `warehouse.root` (a `lake.commit.Lake`)."""

    def __init__(self, config: FreshetConfig, spark: SparkSession | None, state: RecoveryState | None = None,
                 *, link: SparkLink | None = None, leader: Leader | None = None) -> None:
        """`spark`: the session; or `link`, the daemon's (reconnecting) line to Spark. `leader`:
        the warehouse lease the daemon holds — each write is fenced by it and names it (None: neither)."""
        self.config = config
        self._spark = spark
        self.link = link
        self.leader = leader
        self.log = delta_log(config, lambda: self.spark)  # the files, or through Spark (lake.recovery)
        state = state if state is not None else recover(config, self.log)
        self._states: dict[str, TableState] = {t.name: state.tables.get(t.name, TableState()).copy()
                                               for t in config.tables}
        self._reread: set[str] = set()  # tables whose next job plans from the log, not from memory
        self._lock = threading.Lock()
        self.warmer = SnapshotWarmer(lambda: self.spark, config.scheduler.tracks)  # lake.warm: a thread per track
        self._warm: set[str] = set()  # tables with a commit in this session: their next job is not cold
        # sources read at their pinned versions from files the log names, no Delta scan (lake.files)
        self.files: LiveFiles | None = LiveFiles() if isinstance(self.log, LocalLog) else None

    def reconfigure(self, config: FreshetConfig, state: RecoveryState | None = None) -> None:
        """Apply a new config (SIGHUP): new tables start from their recovered state."""
        state = state if state is not None else recover(config, self.log)
        with self._lock:
            self.config = config
            for t in config.tables:
                if t.name not in self._states:
                    self._states[t.name] = state.tables.get(t.name, TableState()).copy()

    @property
    def spark(self) -> SparkSession:
        """The session jobs run in (over Connect: the link's current one, reconnecting if lost)."""
        if self.link is not None:
            return self.link.session()
        assert self._spark is not None, "an Executor needs a SparkSession or a SparkLink"
        return self._spark

    # ---- committed state --------------------------------------------------------------------------
    def refresh(self, table: str) -> TableState:
        """Re-read `table`'s committed watermark from its Delta log (after an unknown outcome)."""
        st = self.log.table_state(table_path(self.config, table), table)
        with self._lock:
            self._states[table] = st
            self._reread.discard(table)
        return st.copy()

    def reread(self, table: str) -> None:
        """Plan `table`'s next job from its Delta log (after an unknown outcome, or a commit
        Freshet did not make itself)."""
        with self._lock:
            self._reread.add(table)

    def table_state(self, table: str) -> TableState:
        """What is committed for `table` now (a copy)."""
        with self._lock:
            if table not in self._reread:
                return self._states.setdefault(table, TableState()).copy()
        return self.refresh(table)

    def commit_state(self, table: str, st: TableState) -> None:
        with self._lock:
            self._states[table] = st

    # ---- running jobs -----------------------------------------------------------------------------
    def execute(self, job: StartJob) -> JobFinished | JobFailed:
        """Run `job`; the event for the Scheduler. Never raises."""
        generation = self.link.generation if self.link is not None else None
        try:
            return self.run(job).event()
        except Exception as err:  # noqa: BLE001 — every failure becomes an event
            if self.link is not None and self.link.lost(err, generation):
                reason = f"Spark Connect connection lost ({self.link.error}); retried after the back-off"
                log.warning("job %d (%s, %s) failed: %s", job.job_id, job.kind, job.table, reason)
                return JobFailed(job_id=job.job_id, reason=reason)
            reason = err.reason if isinstance(err, JobError) else failure_reason(err)
            log.warning("job %d (%s, %s) failed: %s", job.job_id, job.kind, job.table, reason,
                        exc_info=not isinstance(err, JobError))
            return JobFailed(job_id=job.job_id, reason=reason, refused=isinstance(err, JobRefused))

    def run(self, job: StartJob) -> JobOutcome:
        """Run `job` and return its outcome; JobError (or a Spark exception) if it did not commit."""
        try:
            tc = self.config.table(job.table)
        except StopIteration:
            raise JobError(f"unknown table {job.table!r}") from None
        t0 = time.monotonic()
        least = min((t.priority for t in self.config.tables), default=1.0)  # pools weigh relative to it
        pool = pool_for(job.priority, least, job.bulk)
        try:
            with job_description(self.spark, f"freshet {job.kind} job {job.job_id}: {job.table}", pool=pool):
                outcome = pipeline(job, tc)(self, job, tc, t0)
        except BaseException:
            self.reread(job.table)  # outcome unknown: plan the next job from the log, not from memory
            raise
        if outcome.committed:  # the next job's txn check finds the new snapshot's state computed
            self.warmer.warm(table_path(self.config, job.table), pool)
            with self._lock:
                if job.table not in self._warm:  # its first: a cold start is not its cost (JobFinished.cold)
                    self._warm.add(job.table)
                    outcome = replace(outcome, cold=True)
        return outcome

    def noop(self, job: StartJob, t0: float, st: TableState, note: str) -> JobOutcome:
        """`job`'s work is already in the log `st`: nothing committed."""
        log.info("job %d (%s): %s — nothing appended", job.job_id, job.table, note)
        return noop_outcome(job, time.monotonic() - t0, st, note)

    def fence(self) -> None:
        """Refuse the write about to start (`JobRefused`: known not committed) unless the lease is
        still held with margin (`Leader.lapsed`); no lease, no fence."""
        why = self.leader.lapsed() if self.leader is not None else None
        if why is not None:
            raise JobRefused(f"refused before writing: {why}")

    def sign(self, meta: dict[str, Any]) -> dict[str, Any]:
        """`meta` for the write about to start: fenced (`fence`), then with `leader` (`lake.commit.leader_of`)."""
        self.fence()
        return meta if self.leader is None else {**meta, "leader": leader_of(self.leader)}

    def evolution_problems(self, new: FreshetConfig) -> list[str]:
        """For a reload (SIGHUP): each derived table whose SQL in `new` would change its Delta
        schema in a way that is not additive without `rebuild: true` (lake.evolution)."""
        return evolution_problems(self.config, new, self.log, self.spark)
