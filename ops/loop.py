"""The scheduler loop: the live shell around the Scheduler (docs/architecture.md).

The loop (the main thread) is the only caller of the `Scheduler`. It takes events off one queue —
partitions arrived (from the intake thread and the API), jobs finished or failed (from the track
workers, `ops.workers`), operator actions (`ops.actions`), back-off expiries as `Tick`s at
`next_wakeup()` — hands each to `Scheduler.handle(event, time.time())`, sends the resulting
`StartJob`s to their tracks, publishes a fresh `stats()` snapshot for metrics and the API, and
pings the systemd watchdog (`ops.liveness.Heartbeat`). Signals only set flags that it reads:
SIGHUP reloads the config (`ops.reload`: all parts switch, or none); SIGTERM/SIGINT stop
dispatching and wait up to `grace` seconds for running jobs (a job cut off is safe to redo:
Delta's idempotent txn, §4.4); a second one exits at once.

Nothing slow runs on the loop. A reload is prepared in a thread (`freshet-reload`: the file read
and validated, Spark's analysis of changed SQL, every table's Delta log replayed, the trace file
decided again and opened, the new config laid out for the Scheduler and the intake —
`warehouse.blueprint`: the DAG, each table's parameters, what changed, the track plan made ahead
from the cost models copied when the reload began) while the loop goes on serving events and the
watchdog; between two tables' logs the thread gives way to a turn of the loop under way (two busy
threads share the interpreter by 5 ms slices: a turn would last twice its CPU time, or more). The
prepared result comes back on the queue (`ReloadReady`) and is switched in with one `Reconfigure`
through `handle`, which touches only the tables whose parameters changed. Partitions and results that arrived meanwhile were handled by the running config, whose
tables that stay keep their run state across the switch; if a job of a table the reload adds (or
of one of its sources) finished meanwhile, what was read of the logs is stale and the reload is
prepared again. The landing zone is rescanned for the new streams in a thread after the switch.
A full collection of the garbage collector holds the interpreter for as long as it takes to scan
every object (a third of a second at 10,000 tables): what the start builds, and what a reload
prepares, is frozen out of later collections (`gc.freeze`), and no collection runs while a reload
is prepared. A frozen object is freed by its reference count alone: what a reload prepares must
hold no reference cycle (each one would keep a replaced config and its Delta state for ever). A large warehouse's snapshot is published less often: `stats()` takes at most
SNAPSHOT_SHARE of the loop's time.

A step of the loop that touches the disk — quarantining a partition, archiving a loaded one,
writing the operator-actions file, appending to the trace — and hits an OSError (a full disk, a
permission) is logged (rate-limited), counted (`freshet_loop_errors_total{loop}`) and retried every
`retry_every` seconds until it works; the loop goes on. The process around it (lease, API, Spark,
threads, start and stop) is `ops.daemon`.
"""

from __future__ import annotations

import gc
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
from ops.liveness import Heartbeat
from ops.logs import RepeatedFailure
from ops.metrics import LOOP_STEPS, FreshetMetrics, SnapshotHolder, register_metrics
from ops.notify import sd_notify
from ops.reload import Parts, Prepared, Reloader
from ops.workers import JobResult, TrackWorkers
from sim.trace import LIVE_SOURCE, Arrival, JobRecord, TraceWriter
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

__all__ = ["LIVENESS_EVERY", "Options", "ReloadReady", "SchedulerLoop", "open_trace"]

log = logging.getLogger("freshet")

LOOP_TIMEOUT = 0.25  # seconds the scheduler loop waits for an event before re-checking flags
SNAPSHOT_EVERY = 1.0  # publish a snapshot at least this often even without events
SNAPSHOT_MIN_GAP = 0.1
SNAPSHOT_SHARE = 0.1  # at most this share of the loop's time goes to stats() (10,000 tables: 0.05 s a call)
LIVENESS_EVERY = 5.0  # seconds between calls of `alive()` (the Spark driver JVM, ops.liveness)
GIVE_WAY = 0.5  # seconds a reload's preparation waits at most for a turn of the loop to end
RELOAD_ROUNDS = 3  # preparations of one reload at most, when jobs of the tables it adds keep committing
TRACE_HEADER = {"source": LIVE_SOURCE, "clock": "epoch seconds"}


def open_trace(path: str, rotate: int | None) -> TraceWriter:
    """The trace file the daemon appends arrivals and jobs to (ops.autotune.trace_file decides it)."""
    try:
        return TraceWriter.append_to(path, TRACE_HEADER, rotate_at=rotate)
    except OSError as e:
        raise FreshetError(f"cannot append to the trace file {path}: {e}") from None


@dataclass(frozen=True, slots=True)
class ReloadReady:
    """A reload prepared off the loop (`ops.reload.Prepared`), for the loop to switch in; `round`
    counts the preparations of one SIGHUP."""

    prepared: Prepared
    round: int = 0


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
        # the scheduler that tunes itself: replays the trace in a separate process
        self.trace_path, self.trace_rotate = trace_file(config, opts.trace)  # the one decision: written and read
        self.tuner = AutoTuner(config, self.trace_path, self.registry, self._autotuned, now=time.time())
        self.reloader = Reloader(opts.config_path, lambda result: self.metrics.reloads.labels(result=result).inc())
        self.heartbeat = Heartbeat()  # systemd's watchdog (ops.liveness)
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
        self._preparing: float | None = None  # a reload is prepared off the loop: when it was asked for
        self._waiting = threading.Event()  # set but in a turn of the loop: a reload's preparation goes on
        self._waiting.set()
        self._hup_again = False  # SIGHUP while one was prepared: another once it is switched in
        self._committed: set[str] = set()  # tables whose jobs finished while a reload was prepared
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

    def _set_ready(self, ok: bool, reason: str = "", standby: bool = False) -> None:
        self.holder.set_ready(ok, reason, standby)
        self.metrics.ready.set(1 if ok else 0)
        self.metrics.standby.set(1 if standby else 0)

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
                "partitions": len(job.partitions), "estimate": job.estimate, "bulk": job.bulk,
                "overdue": job.overdue, "freshness": iso(job.new_freshness, "seconds")})
            self._dispatched[job.job_id] = job.table
            self.lineage.started(job, time.time())  # never blocks: a bounded queue (ops.lineage)
            self.workers.submit(job)
        if self.actions is not None and self.actions.unsettled:  # after every event: a refresh whose job
            self._step("actions_write", partial(self.actions.settle, self.sched))  # started, or that ended

    def _execute(self, job: StartJob) -> Any:
        """A track worker's job: run it; if a base job failed, recheck its partitions' files (a
        file deleted or corrupted since acceptance fails every retry: those are quarantined) —
        unless it was refused before writing (the lease's fence): its files are not the cause."""
        executor = self.parts.executor
        event = executor.execute(job)
        if not isinstance(event, JobFinished) and job.kind == "base" and not event.refused:
            try:
                committed = executor.table_state(job.table).partitions  # re-read after the failure
                bad = {pid: why for pid, why in self.intake.recheck(job).items() if pid not in committed}
            except Exception as e:  # the recheck is best effort: the job is retried anyway
                log.warning("cannot recheck a failed job's partitions", extra={
                    "table": job.table, "job": job.job_id, "error": f"{type(e).__name__}: {e}"})
                bad = {}
            if bad:
                self._unloadable[job.job_id] = bad
                event = JobFailed(job_id=job.job_id, reason=event.reason, bad_partitions=tuple(sorted(bad)),
                                  refused=event.refused)
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
        except PartitionRefused as e:  # input, not a bug: quarantine it and keep running (docs/architecture.md)
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
            if self._preparing is not None:  # what a reload read of this table's log is behind now
                self._committed.add(job.table)
            self._step("archive", partial(self.intake.archive, job))
            if self.actions is not None:
                self._step("actions_write", partial(self.actions.job_finished, job))
            late = set(job.late)
            self.metrics.job_done(job.table, job.kind, ev.duration, ev.rows,
                                  sum(a.rows for a in job.arrivals if a.partition_id in late))
            self._trace_job(job, r.ended, ev.duration, ev.rows, "ok", ev.cold)
            log.info("job finished", extra={
                "table": job.table, "job": job.job_id, "track": job.track, "kind": job.kind,
                "duration": ev.duration, "rows": ev.rows, "freshness": iso(job.new_freshness, "seconds"),
                "staleness": round(now - job.new_freshness, 3), "cold": ev.cold})
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

    def _trace_job(self, job: StartJob, at: float, duration: float, rows: int, status: str,
                   cold: bool = False) -> None:
        if self._trace and job.kind not in MAINTENANCE_KINDS:  # a replay maps (table, window) to update jobs
            self._step("trace_write", partial(self._trace.job, JobRecord(
                time=at, table=job.table, start=job.start, end=job.end, duration=duration, rows=rows,
                track=job.track, status=status, work=round(job.n, 3), cold=cold)))

    def _autotuned(self, new: FreshetConfig) -> None:
        """The tuner's switch (ops.autotune.switch): only the scheduler section changed, so the
        Scheduler alone takes it, through its one door; running jobs finish, nothing pending is lost."""
        self.config = new
        self._dispatch(self._handle(Reconfigure(config=new), time.time()))

    @staticmethod
    def _settle() -> None:
        """Once, after the start and before READY: what the start built (the config, the Delta
        state, the Scheduler's tables) leaves the garbage collector's generations (`gc.freeze`), so
        no full collection scans it again (one over 10,000 tables holds the loop a third of a second)."""
        gc.collect()
        gc.freeze()

    # -- SIGHUP: prepared off the loop, switched in on it --
    def _begin_reload(self, requested: float, round_: int = 0) -> None:
        if self.parts is None:
            return
        if round_ == 0:
            sd_notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}\nSTATUS=reloading {self.opts.config_path}")
        self._preparing = requested
        self._committed = set()
        # the cost models now, copied here (the track plan is made ahead from them), and the
        # Scheduler's blueprint (immutable: the new one is compared with it off the loop)
        laid = (self.sched.costs(), self.sched.blueprint)
        threading.Thread(target=self._prepare_reload, args=(self.config, self.parts, requested, round_, laid),
                         name="freshet-reload", daemon=True).start()

    def _prepare_reload(self, current: FreshetConfig, parts: Parts, requested: float, round_: int,
                        laid: tuple[dict[str, tuple[float, float]], Any] | None = None) -> None:
        """The reload thread: `Reloader.prepare`, then what the daemon needs beside — the trace file
        decided again for the new config (and opened: the tuner reads it) and the metric series of
        its tables — and the result on the loop's queue. Never raises."""
        gc.disable()  # no full collection over the heap it builds meanwhile (the loop would wait)
        try:
            prepared = self.reloader.prepare(current, parts, requested, *(laid or ()), pause=self._give_way)
            if prepared.config is not None:
                gc.freeze()  # what it built, like the start's, stays out of later collections
        finally:
            gc.enable()
        if prepared.config is not None:
            try:
                trace = trace_file(prepared.config, self.opts.trace)
                prepared.extra["trace"] = trace
                if trace != (self.trace_path, self.trace_rotate) and trace[0] is not None:
                    prepared.extra["trace_writer"] = open_trace(*trace)
                self.metrics.declare(prepared.config)
            except Exception as e:  # noqa: BLE001 — e.g. an unwritable trace: nothing switches
                prepared = Prepared(requested, result="failed", reason=f"{type(e).__name__}: {e}")
        self.events.put(ReloadReady(prepared, round_))

    def _give_way(self) -> None:
        """The reload thread, between two tables' logs: while the loop serves an event it waits
        (at most a turn's worth), so the turn has the interpreter to itself instead of sharing it
        (two busy threads take turns every 5 ms: a turn would last twice its CPU time, or more).
        Not once the daemon stops: the loop may be gone."""
        if not self.stop_flag.is_set():
            self._waiting.wait(GIVE_WAY)

    def _switch(self, ready: ReloadReady, now: float) -> None:
        """On the loop: the prepared reload switched in (ops.reload.Reloader.switch), or dropped."""
        prepared = ready.prepared
        self._preparing = None
        writer: TraceWriter | None = prepared.extra.pop("trace_writer", None)
        if self._stopping_since is not None:
            log.info("reload dropped: shutting down")
            if writer is not None:
                writer.close()
            return
        stale = prepared.reads(self.config) & self._committed if self._committed else set()
        if prepared.result == "ok" and stale and ready.round + 1 < RELOAD_ROUNDS:
            log.info("reload prepared again: tables it adds committed meanwhile", extra={"tables": sorted(stale)})
            if writer is not None:
                writer.close()
            self._begin_reload(prepared.requested, ready.round + 1)
            return
        done = self.reloader.switch(prepared, self.config, self.parts, now)
        if done is not None:
            self.config, decisions = done
            added = self.reloader.last.added if self.reloader.last is not None else []
            if self.actions is not None and added:
                decisions += self.actions.restore(self.sched, now, set(added))
            self.lineage.reconfigure(self.config)
            self._retrace(prepared.extra["trace"], writer)
            self.tuner.reconfigured(self.config, now)  # the file's setting again
            self.tuner.follow_trace(self.trace_path)
            self._dispatch(decisions)
            threading.Thread(target=self._scan_after_reload, name="freshet-reload-scan", daemon=True).start()
        sd_notify(f"READY=1\nSTATUS=scheduling {len(self.config.tables)} tables on {self.config.scheduler.tracks} tracks")
        if self._hup_again:
            self._hup_again, self._hup = False, True

    def _retrace(self, trace: tuple[str | None, int | None], writer: TraceWriter | None) -> None:
        """The trace file decided again for the new config (ops.autotune.trace_file): a daemon whose
        tuner a reload turned on starts keeping one, one turned off stops."""
        if trace == (self.trace_path, self.trace_rotate):
            return
        if self._trace is not None:
            self._step("trace_write", self._trace.close)
        self._trace = writer
        self.trace_path, self.trace_rotate = trace
        log.info("trace file decided again", extra={"trace": self.trace_path})

    def _scan_after_reload(self) -> None:
        """Partitions waiting for a newly added stream (a failing scan is retried by the intake loop)."""
        try:
            for ev in self.intake.scan():
                self.events.put(ev)
        except Exception as e:
            self.metrics.loop_errors.labels(loop="intake_scan").inc()
            log.warning("landing-zone scan after the reload failed; the intake loop retries",
                        extra={"error": f"{type(e).__name__}: {e}"})

    def _loop(self) -> int:
        last_pub = last_retry = 0.0
        publish_gap = SNAPSHOT_MIN_GAP
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
            self.heartbeat.beat()
            if self._term is not None and self._stopping_since is None:
                self._begin_stop(now)
            if self._hup:
                self._hup = False
                if self._stopping_since is None and self._preparing is None:
                    self._begin_reload(now)
                elif self._stopping_since is None:  # the file may have changed after the one under way read it
                    self._hup_again = True
            if self._stopping_since is not None and (code := self._stopped(now)) is not None:
                return code
            if self._retries and now - last_retry >= self.opts.retry_every:
                last_retry = now
                self._retry_steps()
            if self._stopping_since is None and self.parts is not None:
                self.tuner.poll(now)  # never blocks: an evaluation runs in its own process
            wake = self.sched.next_wakeup()
            try:
                wait = min(LOOP_TIMEOUT, self.heartbeat.every)  # the watchdog's next ping in time
                self._waiting.set()
                item = self.events.get(timeout=wait if wake is None else min(wait, max(0.0, wake - now)))
            except queue.Empty:
                item = None
            self._waiting.clear()  # a turn: a reload's preparation gives way (_give_way)
            now = time.time()
            if isinstance(item, PartitionArrived):
                if self._stopping_since is None:
                    self._on_arrival(item, now)
            elif isinstance(item, JobResult):
                self._on_result(item, now)
            elif isinstance(item, ActionRequest) and self.actions is not None:
                self._dispatch(self.actions.apply(self.sched, item, now))
            elif isinstance(item, ReloadReady):
                self._switch(item, now)
            wake = self.sched.next_wakeup()
            if wake is not None and wake <= now:
                self._dispatch(self._handle(Tick(), now))
            dirty = dirty or item is not None
            # publish after changes (at most every SNAPSHOT_MIN_GAP, so a burst of events costs
            # one stats() call) and at least every SNAPSHOT_EVERY; not in the turn of a switch (a
            # reload's is the longest turn: the next one publishes, after the queue is served)
            if isinstance(item, ReloadReady):
                continue
            if (dirty and now - last_pub >= publish_gap) or now - last_pub >= max(SNAPSHOT_EVERY, publish_gap):
                self.holder.publish(self.sched.stats(now))
                took = time.time() - now
                publish_gap = max(SNAPSHOT_MIN_GAP, took / SNAPSHOT_SHARE)  # a large warehouse publishes less often
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
