"""The scheduler loop: the live shell around the Scheduler (DESIGN.md §3, STYLE.md §2).

The loop (the main thread) is the only caller of the `Scheduler`. It takes events off one queue —
partitions arrived (from the intake thread and the API), jobs finished or failed (from the track
workers, `ops.workers`), operator actions (`ops.actions`), back-off expiries as `Tick`s at
`next_wakeup()` — hands each to `Scheduler.handle(event, time.time())`, sends the resulting
`StartJob`s to their tracks, publishes a fresh `stats()` snapshot for metrics and the API, and
pings the systemd watchdog. Signals only set flags that it reads: SIGHUP reloads the config
(`ops.reload`: all parts switch, or none); SIGTERM/SIGINT stop dispatching and wait up to `grace`
seconds for running jobs (a job cut off is safe to redo: Delta's idempotent txn, §4.4); a second
one exits at once.

A step of the loop that touches the disk — quarantining a partition, archiving a loaded one,
writing the operator-actions file, appending to the trace — and hits an OSError (a full disk, a
permission) is logged (rate-limited), counted (`freshet_loop_errors_total{loop}`) and retried every
`retry_every` seconds until it works; the loop goes on. The process around it (lease, API, Spark,
threads, start and stop) is `ops.daemon`.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry

from ops.actions import ActionRequest, OperatorActions
from ops.autotune import AutoTuner, trace_file
from ops.history import History
from ops.lineage import LineageEmitter
from ops.logs import RepeatedFailure
from ops.metrics import LOOP_STEPS, FreshetMetrics, SnapshotHolder, register_metrics
from ops.notify import sd_notify, watchdog_interval
from ops.reload import Parts, Reloader
from ops.workers import JobResult, TrackWorkers
from sim.trace import Arrival, JobRecord, TraceWriter
from warehouse.config import FreshetConfig
from warehouse.errors import FreshetError, PartitionRefused
from warehouse.events import (
    JobFailed,
    JobFinished,
    PartitionArrived,
    PartitionDropped,
    Reconfigure,
    StartJob,
    Tick,
)
from warehouse.times import iso
from warehouse.upkeep import MAINTENANCE_KINDS

__all__ = ["LIVENESS_EVERY", "Options", "SchedulerLoop"]

log = logging.getLogger("freshet")

LOOP_TIMEOUT = 0.25  # seconds the scheduler loop waits for an event before re-checking flags
SNAPSHOT_EVERY = 1.0  # publish a snapshot at least this often even without events
SNAPSHOT_MIN_GAP = 0.1
LIVENESS_EVERY = 5.0  # seconds between calls of `alive()` (the Spark driver JVM, ops.liveness)


@dataclass
class Options:
    config_path: str
    listen: str | None = None
    grace: float = 60.0
    demo: bool = False
    poll: float = 1.0
    trace: str | None = None
    max_body: int = 64 * 1024
    error_log_every: float = 60.0  # a loop failing on every poll logs at most this often
    retry_every: float = 5.0  # seconds between retries of a loop step that hit a disk error
    demo_options: dict[str, Any] = field(default_factory=dict)


class SchedulerLoop:
    """The loop and its state; `ops.daemon.Daemon` builds the parts and runs it (`_loop()`)."""

    def __init__(self, config: FreshetConfig, opts: Options) -> None:
        self.config = config
        self.opts = opts
        self.events: queue.Queue[Any] = queue.Queue()
        self.holder = SnapshotHolder()
        self.history = History()  # the status page's last hour (ops.page)
        self.registry = CollectorRegistry()
        self.metrics: FreshetMetrics = register_metrics(self.registry, self.holder.get)
        self.metrics.declare(config)
        self.lineage = LineageEmitter(config, self.registry)  # OpenLineage per job (ops.lineage); off without `lineage:`
        # the scheduler that tunes itself (issue 20): replays the trace in a separate process
        self.trace_path, self.trace_rotate = trace_file(config, opts.trace)  # the one decision: written and read
        self.tuner = AutoTuner(config, self.trace_path, self.registry, self._autotuned, now=time.time())
        self.reloader = Reloader(opts.config_path, lambda result: self.metrics.reloads.labels(result=result).inc())
        self.parts: Parts | None = None
        self.actions: OperatorActions | None = None
        self.workers = TrackWorkers(self._execute, self.events.put)
        self.alive: Callable[[], bool] = lambda: True  # is Spark's driver still there (ops.liveness)
        self.stop_flag = threading.Event()  # stops the intake, demo and watcher threads
        self.accepting = False  # partitions and actions from the API
        self._unloadable: dict[int, dict[str, str]] = {}  # job id → {partition: why}, for _on_result
        self._dispatched: dict[int, str] = {}  # job id → table: handed to a track, not reported back yet
        self._restored: list[StartJob] = []  # jobs the kept operator actions started at start
        self._term: int | None = None
        self._hup = False
        self._force = False
        self._stopping_since: float | None = None
        self._lease_lost: str | None = None
        self._trace: TraceWriter | None = None
        self._retries: list[tuple[str, Callable[[], object]]] = []
        self._step_failures = {s: RepeatedFailure(
            log, "a step of the scheduler loop failed; retrying", "a step of the scheduler loop works again",
            every=opts.error_log_every, count=self.metrics.loop_errors.labels(loop=s).inc, loop=s)
            for s in LOOP_STEPS}

    @property
    def intake(self) -> Any:
        return self.parts.intake if self.parts is not None else None

    @property
    def sched(self) -> Any:
        return self.parts.sched if self.parts is not None else None

    def _set_ready(self, ok: bool, reason: str = "") -> None:
        self.holder.set_ready(ok, reason)
        self.metrics.ready.set(1 if ok else 0)

    # -- steps of the loop that touch the disk (defect 8) --
    def _step(self, step: str, fn: Callable[[], object]) -> None:
        """Run `fn`; on an OSError log it (rate-limited), count it and keep it for a retry."""
        try:
            fn()
        except OSError as e:
            self._step_failures[step].failed(e)
            self._retries.append((step, fn))
        else:
            self._step_failures[step].ok()

    def _retry_steps(self) -> None:
        pending, self._retries = self._retries, []
        for step, fn in pending:
            self._step(step, fn)

    # -- the scheduler loop --
    def _dispatch(self, decisions: list[StartJob]) -> None:
        for job in decisions:
            if self._stopping_since is not None:
                # the Scheduler believes it runs; we are exiting and Delta makes a re-run safe
                log.info("not starting job: shutting down", extra={"table": job.table, "job": job.job_id})
                continue
            log.info("job started", extra={
                "table": job.table, "job": job.job_id, "track": job.track, "kind": job.kind,
                "window_start": iso(job.start, "seconds"), "window_end": iso(job.end, "seconds"),
                "partitions": len(job.partitions), "estimate": job.estimate,
                "freshness": iso(job.new_freshness, "seconds")})
            self._dispatched[job.job_id] = job.table
            self.lineage.started(job, time.time())  # never blocks: a bounded queue (ops.lineage)
            self.workers.submit(job)
        if self.actions is not None and self.actions.unsettled:  # after every event: a refresh whose job
            self._step("actions_write", partial(self.actions.settle, self.sched))  # started, or that ended

    def _execute(self, job: StartJob) -> Any:
        """A track worker's job: run it; if a base job failed, recheck its partitions' files (a
        file deleted or corrupted since acceptance fails every retry: those are quarantined)."""
        executor = self.parts.executor
        event = executor.execute(job)
        if not isinstance(event, JobFinished) and job.kind == "base":
            try:
                committed = executor.table_state(job.table).partitions  # re-read after the failure
                bad = {pid: why for pid, why in self.intake.recheck(job).items() if pid not in committed}
            except Exception as e:  # the recheck is best effort: the job is retried anyway
                log.warning("cannot recheck a failed job's partitions", extra={
                    "table": job.table, "job": job.job_id, "error": f"{type(e).__name__}: {e}"})
                bad = {}
            if bad:
                self._unloadable[job.job_id] = bad
                event = JobFailed(job_id=job.job_id, reason=event.reason, bad_partitions=tuple(sorted(bad)))
        return event

    def _handle(self, event: Any, now: float) -> list[StartJob]:
        with self.metrics.decision_seconds.time():
            return self.sched.handle(event, now)

    def _on_arrival(self, ev: PartitionArrived, now: float) -> None:
        self.metrics.partitions_arrived.labels(stream=ev.stream).inc()
        if self._trace:
            self._step("trace_write", partial(self._trace.arrival, Arrival(
                time=now, stream=ev.stream, partition=ev.partition_id, start=ev.start, end=ev.end, rows=ev.rows,
                safe_through=ev.safe_through)))
        log.info("partition arrived", extra={"stream": ev.stream, "partition": ev.partition_id, "rows": ev.rows,
                                             "start": iso(ev.start, "seconds"), "end": iso(ev.end, "seconds")})
        try:
            decisions = self._handle(ev, now)
        except PartitionRefused as e:  # input, not a bug: quarantine it and keep running (DESIGN.md §3)
            self.intake.refuse(ev.stream, ev.partition_id, e.reason)  # a failed move: the intake retries it
            return
        self._dispatch(decisions)

    def _on_result(self, r: JobResult, now: float) -> None:
        job, ev = r.job, r.event
        dropped: list[PartitionDropped] = []
        self._dispatched.pop(job.job_id, None)
        self.history.record(r, self.holder.get(), now)
        self.lineage.ended(job, ev, now)  # COMPLETE or FAIL (ops.lineage); never blocks
        if job.job_id not in self.sched.running:
            log.warning("result for a job the scheduler no longer runs (table removed?)",
                        extra={"table": job.table, "job": job.job_id})
            return
        if isinstance(ev, JobFinished):
            self._step("archive", partial(self.intake.archive, job))
            if self.actions is not None:
                self._step("actions_write", partial(self.actions.job_finished, job))
            late = set(job.late)
            self.metrics.job_done(job.table, job.kind, ev.duration, ev.rows,
                                  sum(a.rows for a in job.arrivals if a.partition_id in late))
            self._trace_job(job, r.ended, ev.duration, ev.rows, "ok")
            log.info("job finished", extra={
                "table": job.table, "job": job.job_id, "track": job.track, "kind": job.kind,
                "duration": ev.duration, "rows": ev.rows, "freshness": iso(job.new_freshness, "seconds"),
                "staleness": round(now - job.new_freshness, 3)})
        else:
            duration = round(r.ended - r.began, 3)
            self._trace_job(job, r.ended, duration, 0, "failed")
            log.warning("job failed", extra={"table": job.table, "job": job.job_id, "track": job.track,
                                             "kind": job.kind, "reason": ev.reason, "duration": duration})
            stream = next((t.stream for t in self.config.tables if t.name == job.table), None)
            for pid, why in self._unloadable.pop(job.job_id, {}).items():
                if stream is not None:  # quarantined and counted like any bad partition; the rest is retried
                    self.intake.refuse(stream, pid, why)  # a failed move: the intake retries it
                    dropped.append(PartitionDropped(stream=stream, partition_id=pid, reason=why))
        self._dispatch(self._handle(ev, now))
        for drop in dropped:  # gone from every table of the stream, its arrived and backlog too
            self._dispatch(self._handle(drop, now))

    def _trace_job(self, job: StartJob, at: float, duration: float, rows: int, status: str) -> None:
        if self._trace and job.kind not in MAINTENANCE_KINDS:  # a replay maps (table, window) to update jobs
            self._step("trace_write", partial(self._trace.job, JobRecord(
                time=at, table=job.table, start=job.start, end=job.end, duration=duration, rows=rows,
                track=job.track, status=status, work=round(job.n, 3))))

    def _autotuned(self, new: FreshetConfig) -> None:
        """The tuner's switch (ops.autotune.switch): only the scheduler section changed, so the
        Scheduler alone takes it, through its one door; running jobs finish, nothing pending is lost."""
        self.config = new
        self._dispatch(self._handle(Reconfigure(config=new), time.time()))

    def _reload(self, now: float) -> None:
        """SIGHUP (`ops.reload`): all parts switch to the new config, or none does."""
        if self.parts is None:
            return
        done = self.reloader.reload(self.config, self.parts, now)
        if done is None:
            return
        self.config, decisions = done
        if self.actions is not None and self.reloader.last is not None and self.reloader.last.added:
            decisions += self.actions.restore(self.sched, now, set(self.reloader.last.added))
        self.metrics.declare(self.config)
        self.lineage.reconfigure(self.config)
        self.tuner.reconfigured(self.config, now)  # the file's setting again
        self._dispatch(decisions)
        try:  # partitions waiting for a newly added table (a failing scan is retried by the intake loop)
            for ev in self.intake.scan():
                self.events.put(ev)
        except Exception as e:
            self.metrics.loop_errors.labels(loop="intake_scan").inc()
            log.warning("landing-zone scan after the reload failed; the intake loop retries",
                        extra={"error": f"{type(e).__name__}: {e}"})

    def _loop(self) -> int:
        wd = watchdog_interval()
        last_wd = last_pub = last_retry = 0.0
        last_spark = time.time()
        dirty = False
        while True:
            now = time.time()
            if self._lease_lost is not None:
                log.critical("lost the warehouse lease; exiting (another daemon took it over)",
                             extra={"reason": self._lease_lost})
                raise FreshetError(f"lost the warehouse lease: {self._lease_lost}")
            if now - last_spark >= LIVENESS_EVERY:
                last_spark = now
                if not self.alive():
                    self._dispatched.clear()  # nothing can finish any more
                    raise FreshetError("the Spark driver JVM is gone")
            if wd is not None and now - last_wd >= wd:
                sd_notify("WATCHDOG=1")
                last_wd = now
            if self._term is not None and self._stopping_since is None:
                self._begin_stop(now)
            if self._hup:
                self._hup = False
                if self._stopping_since is None:
                    self._reload(now)
            if self._stopping_since is not None and (code := self._stopped(now)) is not None:
                return code
            if self._retries and now - last_retry >= self.opts.retry_every:
                last_retry = now
                self._retry_steps()
            if self._stopping_since is None and self.parts is not None:
                self.tuner.poll(now)  # never blocks: an evaluation runs in its own process
            wake = self.sched.next_wakeup()
            try:
                item = self.events.get(timeout=LOOP_TIMEOUT if wake is None else min(LOOP_TIMEOUT, max(0.0, wake - now)))
            except queue.Empty:
                item = None
            now = time.time()
            if isinstance(item, PartitionArrived):
                if self._stopping_since is None:
                    self._on_arrival(item, now)
            elif isinstance(item, JobResult):
                self._on_result(item, now)
            elif isinstance(item, ActionRequest) and self.actions is not None:
                self._dispatch(self.actions.apply(self.sched, item, now))
            wake = self.sched.next_wakeup()
            if wake is not None and wake <= now:
                self._dispatch(self._handle(Tick(), now))
            dirty = dirty or item is not None
            # publish after changes (at most every SNAPSHOT_MIN_GAP, so a burst of events costs
            # one stats() call) and at least every SNAPSHOT_EVERY
            if (dirty and now - last_pub >= SNAPSHOT_MIN_GAP) or now - last_pub >= SNAPSHOT_EVERY:
                self.holder.publish(self.sched.stats(now))
                last_pub, dirty = now, False

    def _stopped(self, now: float) -> int | None:
        """Stopping: the exit code once no job runs, the grace is over or a second signal came."""
        if not self._dispatched:  # jobs dispatched to a track and not reported back yet
            log.info("stopped: no job running", extra={"seconds": round(now - self._stopping_since, 3)})
            return 0
        running = sorted(self._dispatched.values())
        if self._force:
            log.warning("second signal: exiting now with jobs running (safe to redo: Delta txn)",
                        extra={"running": running})
            return 130
        if now - self._stopping_since >= self.opts.grace:
            log.warning("grace period over; exiting with jobs running (safe to redo: Delta txn)",
                        extra={"running": running, "grace": self.opts.grace})
            return 0
        return None

    def _begin_stop(self, now: float) -> None:
        self._stopping_since = now
        self.accepting = False
        self.stop_flag.set()
        self._set_ready(False, "shutting down")
        sd_notify("STOPPING=1")
        log.info("stopping: no new jobs; waiting for running ones", extra={
            "signal": signal.Signals(self._term).name if self._term else None,
            "running": sorted(self._dispatched.values()), "grace": self.opts.grace})
