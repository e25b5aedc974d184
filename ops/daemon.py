"""`freshet run`: the live shell around the Scheduler (DESIGN.md §3, STYLE.md §2).

One process, these threads:

* **scheduler loop** (the main thread) — the only caller of the `Scheduler`. It takes events off
  one queue (partitions arrived, jobs finished or failed, back-off expiries as `Tick`s at
  `next_wakeup()`), hands each to `Scheduler.handle(event, time.time())`, sends the resulting
  `StartJob`s to their tracks, publishes a fresh `stats()` snapshot for metrics and the API, and
  pings the systemd watchdog. Signals only set flags that this loop reads.
* **track workers**, one per track (§3.2: at most one job per track): each runs the Spark job of
  its `StartJob` with the warehouse's `Executor` and reports `JobFinished` / `JobFailed`.
* **intake** — polls the landing zone (DESIGN.md §4.3) and queues `PartitionArrived` events.
* **HTTP API** (uvicorn, `ops.api`) — reads the published snapshot; a POSTed manifest goes through
  the same intake.
* **demo producer** (`--demo`) — writes realistic partitions into the landing zone.

Operator actions (`ops.actions`: suspend, resume, refresh, backfill) come in through the API,
are kept under the warehouse root first, then queued to the scheduler loop like events; on start
the kept ones are re-applied before the first job.

Lifecycle: listen → recover every table from its Delta log → start Spark → READY=1 (sd_notify)
and /readyz → run. With `spark.remote` (Spark Connect) or a warehouse root that is a URI, Spark
comes first and the log is read through it; the daemon waits for an unreachable Connect server
(/readyz says so), and a server lost mid-run fails the running jobs (retried after their
back-off), makes /readyz 503 until a new session answers, and is counted
(`freshet_spark_connection_lost_total`). SIGTERM/SIGINT: stop intake and dispatching, let running jobs finish within
`--grace` seconds, exit 0 (a job cut off is safe to redo: Delta's idempotent txn, §4.4).
SIGHUP: reload the config file; an invalid one is logged and the old one stays; a valid one goes
to `Scheduler.reconfigure` (tables added/removed, priorities changed, repartition §3.2).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from ops.actions import ActionRequest, ActionStore, OperatorActions, store_path
from ops.api import ApiServer, create_app, load_token, parse_listen
from ops.logs import RepeatedFailure
from ops.metrics import FreshetMetrics, SnapshotHolder, register_metrics
from ops.notify import sd_notify, watchdog_interval
from ops.workers import JobResult, TrackWorkers
from sim.trace import ActionRecord, Arrival, JobRecord, TraceWriter
from warehouse.config import FreshetConfig, load_config
from warehouse.errors import ConfigError, FreshetError, PartitionRefused
from warehouse.events import (
    JobFailed,
    JobFinished,
    PartitionArrived,
    PartitionDropped,
    Reconfigure,
    StartJob,
    Tick,
)
from warehouse.landing.intake import Submitted
from warehouse.stats import SchedulerStats
from warehouse.times import iso
from warehouse.upkeep import MAINTENANCE_KINDS

if TYPE_CHECKING:
    from warehouse.lake.recovery import RecoveryState

__all__ = ["Daemon", "Options"]

log = logging.getLogger("freshet")

LOOP_TIMEOUT = 0.25  # seconds the scheduler loop waits for an event before re-checking flags
SNAPSHOT_EVERY = 1.0  # publish a snapshot at least this often even without events
SNAPSHOT_MIN_GAP = 0.1
SPARK_CHECK_EVERY = 5.0  # seconds between liveness checks of the Spark driver JVM


# ---------------------------------------------------------------- the daemon
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
    demo_options: dict[str, Any] = field(default_factory=dict)


class Daemon:
    """The process: see the module docstring. `run()` returns the exit code."""

    def __init__(self, config: FreshetConfig, opts: Options) -> None:
        self.config = config
        self.opts = opts
        self.events: queue.Queue[Any] = queue.Queue()
        self.holder = SnapshotHolder()
        self.registry = CollectorRegistry()
        self.metrics: FreshetMetrics = register_metrics(self.registry, self.holder.get)
        self.metrics.declare(config)
        self.sched: Any = None
        self.intake: Any = None
        self.executor: Any = None
        self.spark: Any = None
        self.link: Any = None  # warehouse.lake.session.SparkLink
        self.state: Any = None
        self.workers = TrackWorkers(self._execute, self.events.put)
        self._unloadable: dict[int, dict[str, str]] = {}  # job id → {partition: why}, for _on_result
        self.stop_flag = threading.Event()  # stop intake/demo threads
        self._term: int | None = None
        self._hup = False
        self._force = False
        self._stopping_since: float | None = None
        self._trace: TraceWriter | None = None
        self._counts_seen: dict[tuple[str, str], int] = {}
        self._accepting = False
        self._dispatched: dict[int, str] = {}  # job id → table: handed to a track, not reported back yet
        self.server: ApiServer | None = None
        self.actions: OperatorActions | None = None
        self._restored: list[StartJob] = []  # jobs the kept operator actions started at start
        self.lease: Any = None  # ops.lease.Lease: one daemon per warehouse
        self._lease_lost: str | None = None

    # -- API backend (called from the HTTP thread) --
    def snapshot(self) -> SchedulerStats | None:
        return self.holder.get()

    def ready(self) -> tuple[bool, str]:
        return self.holder.ready()

    def streams(self) -> list[str]:
        return [s.name for s in self.config.streams]

    def submit_partition(self, stream: str, manifest: Any) -> Submitted:
        """Called in an HTTP worker thread: the intake validates and may quarantine (ops.api maps
        its exceptions to statuses)."""
        from ops.api import ApiError

        if not self._accepting or self.intake is None:
            raise ApiError(503, "not accepting partitions: the daemon is starting or shutting down", "not_accepting")
        sub = self.intake.submit(stream, manifest)
        if sub.arrived is not None:
            self.events.put(sub.arrived)
        return sub

    def operator_action(self, table: str, action: str, body: Any) -> dict[str, Any]:
        """Called in an HTTP worker thread: validate, keep and queue (ops.actions)."""
        from ops.api import ApiError

        if not self._accepting or self.actions is None:
            raise ApiError(503, "not accepting actions: the daemon is starting or shutting down", "not_accepting")
        return self.actions.request(table, action, body)

    def actions_view(self, table: str) -> dict[str, Any] | None:
        return self.actions.view(table) if self.actions is not None else None

    # -- signals --
    def _on_term(self, signum: int, _frame: Any) -> None:
        if self._term is not None:  # a second SIGTERM/SIGINT: stop waiting for running jobs
            self._force = True
        self._term = signum

    def _on_hup(self, _signum: int, _frame: Any) -> None:
        self._hup = True

    # -- threads --
    def _intake_loop(self) -> None:
        failures = RepeatedFailure(log, "landing-zone scan failed; retrying", "landing-zone scan works again",
                                   every=self.opts.error_log_every,
                                   count=self.metrics.loop_errors.labels(loop="intake_scan").inc,
                                   loop="intake_scan")
        while not self.stop_flag.is_set():
            try:
                for ev in self.intake.scan():
                    self.events.put(ev)
            except Exception as e:
                failures.failed(e)
            else:
                failures.ok()
            self.stop_flag.wait(self.opts.poll)

    def _start_demo(self) -> None:
        from ops.demo import produce, resume_points

        speed = float(self.opts.demo_options.get("speed", 60.0))
        start = time.time() - float(self.opts.demo_options.get("backfill", 3600.0))
        # a restart continues each stream after what the Delta log and the landing zone hold
        after = resume_points(self.config, self.state)
        log.info("demo producer started", extra={"speed": speed, "from": iso(start, "seconds"),
                                                 "landing": self.config.warehouse.landing,
                                                 "resume": {s: iso(t, "seconds") for s, t in sorted(after.items())}})

        def run() -> None:
            try:
                produce(self.config, speed=speed, start=start, stop=self.stop_flag, after=after)
            except Exception:
                log.exception("demo producer stopped")

        threading.Thread(target=run, name="freshet-demo", daemon=True).start()

    # -- the scheduler loop --
    def _dispatch(self, decisions: list[StartJob]) -> None:
        for job in decisions:
            if self._stopping_since is not None:
                # the Scheduler believes it runs; we are exiting and Delta makes a re-run safe
                log.info("not starting job: shutting down", extra={"table": job.table, "job": job.job_id})
                continue
            log.info("job started", extra={
                "table": job.table, "job": job.job_id, "track": job.track, "kind": job.kind,
                "window_start": iso(job.start, "seconds"), "window_end": iso(job.end, "seconds"), "partitions": len(job.partitions),
                "estimate": job.estimate, "freshness": iso(job.new_freshness, "seconds")})
            self._dispatched[job.job_id] = job.table
            self.workers.submit(job)
        if decisions and self.actions is not None:
            self.actions.settle(self.sched)  # a refresh whose job started is done

    def _execute(self, job: StartJob) -> Any:
        """A track worker's job: run it; if a base job failed, recheck its partitions' files (a
        file deleted or corrupted since acceptance fails every retry: those are quarantined)."""
        event = self.executor.execute(job)
        if not isinstance(event, JobFinished) and job.kind == "base":
            try:
                committed = self.executor.table_state(job.table).partitions  # re-read after the failure
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
            self._trace.arrival(Arrival(time=now, stream=ev.stream, partition=ev.partition_id, start=ev.start,
                                        end=ev.end, rows=ev.rows, safe_through=ev.safe_through))
        log.info("partition arrived", extra={"stream": ev.stream, "partition": ev.partition_id,
                                             "start": iso(ev.start, "seconds"), "end": iso(ev.end, "seconds"), "rows": ev.rows})
        try:
            decisions = self._handle(ev, now)
        except PartitionRefused as e:  # input, not a bug: quarantine it and keep running (DESIGN.md §3)
            self.intake.refuse(ev.stream, ev.partition_id, e.reason)
            return
        self._dispatch(decisions)

    def _on_result(self, r: JobResult, now: float) -> None:
        job, ev = r.job, r.event
        dropped: list[PartitionDropped] = []
        self._dispatched.pop(job.job_id, None)
        if job.job_id not in self.sched.running:
            log.warning("result for a job the scheduler no longer runs (table removed?)",
                        extra={"table": job.table, "job": job.job_id})
            return
        if isinstance(ev, JobFinished):
            self.intake.archive(job)
            if self.actions is not None:
                self.actions.job_finished(job)
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
                    self.intake.refuse(stream, pid, why)
                    dropped.append(PartitionDropped(stream=stream, partition_id=pid, reason=why))
        self._dispatch(self._handle(ev, now))
        for drop in dropped:  # gone from every table of the stream, its arrived and backlog too
            self._dispatch(self._handle(drop, now))

    def _trace_job(self, job: StartJob, at: float, duration: float, rows: int, status: str) -> None:
        if self._trace and job.kind not in MAINTENANCE_KINDS:  # a replay maps (table, window) to update jobs
            self._trace.job(JobRecord(time=at, table=job.table, start=job.start, end=job.end, duration=duration,
                                      rows=rows, track=job.track, status=status,
                                      work=round(job.n, 3)))

    def _sync_counters(self) -> None:
        """Carry the intake's counters into Prometheus counters (they only grow)."""
        if self.intake is None:
            return
        for name, counts in (("quarantined", self.intake.quarantined), ("duplicates", self.intake.duplicates)):
            metric = (self.metrics.partitions_quarantined if name == "quarantined"
                      else self.metrics.partitions_duplicate)
            for stream, n in dict(counts).items():
                seen = self._counts_seen.get((name, stream), 0)
                if n > seen:
                    metric.labels(stream=stream).inc(n - seen)
                    self._counts_seen[(name, stream)] = n

    def _reload(self, now: float) -> None:
        path = self.opts.config_path
        try:
            new = load_config(path)
            problems = []
            for section in ("warehouse", "spark", "listen"):
                if getattr(new, section) != getattr(self.config, section):
                    problems.append(f"{section}: changing it needs a restart")
            if not problems:  # a changed derived SQL must keep its table's schema or only add columns (seed 001)
                problems = self._evolution_problems(new)
            if problems:
                raise ConfigError(problems, source=path)
        except ConfigError as e:
            self.metrics.reloads.labels(result="rejected").inc()
            log.error("config reload rejected; keeping the running config", extra={"config": path,
                                                                                   "reason": str(e)})
            return
        old_tables = {t.name for t in self.config.tables}
        new_tables = {t.name for t in new.tables}
        state = self._reconfigure_warehouse(new)
        self.config = new
        self.metrics.declare(new)
        decisions = self.sched.handle(Reconfigure(config=new, recovered=state.recovered), now)
        self.metrics.reloads.labels(result="ok").inc()
        log.info("config reloaded", extra={"config": path, "added": sorted(new_tables - old_tables),
                                           "removed": sorted(old_tables - new_tables),
                                           "tracks": new.scheduler.tracks})
        self._dispatch(decisions)
        # partitions waiting in the landing zone for a newly added table (the intake loop would
        # find them at its next poll; a failing scan here must not stop the daemon)
        try:
            for ev in self.intake.scan():
                self.events.put(ev)
        except Exception as e:
            self.metrics.loop_errors.labels(loop="intake_scan").inc()
            log.warning("landing-zone scan after the reload failed; the intake loop retries",
                        extra={"error": f"{type(e).__name__}: {e}"})

    def _evolution_problems(self, new: FreshetConfig) -> list[str]:
        """Derived tables whose new SQL changes their schema in a way that is not additive without
        `rebuild: true` (Executor.evolution_problems). If Spark cannot analyse, the reload goes on:
        such a table's jobs then fail with the same reason and back off; the rest run."""
        try:
            return self.executor.evolution_problems(new)
        except Exception as e:  # noqa: BLE001 — the check, not the reload, failed
            log.warning("could not check the reloaded SQL's schemas; its jobs will refuse a non-additive change",
                        extra={"error": f"{type(e).__name__}: {str(e)[:300]}"})
            return []

    def _reconfigure_warehouse(self, new: FreshetConfig) -> RecoveryState:
        """Point intake and executor at the new config; new tables start from their Delta state,
        which is also handed to the Scheduler (the Delta log is the truth on reload, §4.4)."""
        from warehouse.lake.recovery import recover

        state = recover(new, self.executor.log)
        self.intake.reconfigure(new, state)
        self.executor.reconfigure(new, state)
        return state

    def _startup(self) -> None:
        """Recover every table from its Delta log, start Spark, build the Scheduler (§4.4).

        A local root with a local Spark: the log's files are read first (no Spark needed). A URI
        root or Spark Connect: Spark first, then the log through it (lake.recovery.SparkLog).
        """
        from warehouse.lake.executor import Executor
        from warehouse.lake.recovery import delta_log, needs_spark, recover
        from warehouse.lake.session import SparkLink
        from warehouse.landing.intake import Intake
        from warehouse.scheduler import Scheduler

        t0 = time.time()
        self.link = SparkLink(self.config.spark)
        self.link.on_change(self._on_spark_change)
        if needs_spark(self.config):
            if not self._start_spark():
                return
            self.state = recover(self.config, delta_log(self.config, self.link.session))
        else:
            self.state = recover(self.config)
        for name, st in sorted(self.state.tables.items()):
            log.info("recovered table", extra={"table": name, "freshness": iso(st.freshness, "seconds"),
                                               "safe_freshness": iso(st.safe_freshness, "seconds"),
                                               "partitions": len(st.partitions)})
        self.intake = Intake(self.config, self.state)
        if self.spark is None and not self._start_spark():
            return
        if self.link.remote:
            self.executor = Executor(self.config, None, self.state, link=self.link)
        else:
            self.executor = Executor(self.config, self.spark, self.state)
        now = time.time()
        self.sched = Scheduler(self.config, now=now, recovered=self.state.recovered)
        self.actions = OperatorActions(
            ActionStore(store_path(self.config)), lambda: self.config, self.holder.get, self.events.put,
            lambda table, action: self.metrics.operator_actions.labels(table=table, action=action).inc(), time.time,
            record=lambda at, ev: self._trace.action(ActionRecord.of(at, ev)) if self._trace else None)
        self._restored = self.actions.restore(self.sched, now)
        # one round before any event: maintenance already due per the Delta log (warehouse.upkeep)
        self._restored += self.sched.handle(Tick(), now)
        self.holder.publish(self.sched.stats(now))
        log.info("recovery done", extra={"tables": len(self.config.tables), "seconds": round(now - t0, 3)})

    def _start_spark(self) -> bool:
        """Start (or connect to) Spark. A Spark Connect server that does not answer is waited
        for — /readyz says so — until it does or a signal stops the daemon (False)."""
        from warehouse.lake.session import connection_lost

        log.info("starting Spark", extra={"spark": self.config.spark.where})
        waited = 0
        while True:
            try:
                self.spark = self.link.session()
                self.metrics.spark_connected.set(1)
                jvm = _driver_jvm_pid(self.spark)
                if jvm is not None and self.lease is not None:
                    self.lease.add_helper(jvm)
                return True
            except Exception as e:
                if not (self.link.remote and connection_lost(e)):
                    raise
                if waited % 12 == 0:  # every minute
                    log.warning("waiting for the Spark Connect server", extra={
                        "remote": self.config.spark.remote, "error": f"{type(e).__name__}: {str(e)[:300]}"})
                self.holder.set_ready(False, f"waiting for the Spark Connect server {self.config.spark.remote}")
                waited += 1
            for _ in range(50):
                if self._term is not None:
                    return False
                time.sleep(0.1)

    def _on_spark_change(self, connected: bool, error: str | None) -> None:
        """The Spark Connect link was lost or restored (from a track worker or the watcher)."""
        self.metrics.spark_connected.set(1 if connected else 0)
        if not connected:
            self.metrics.spark_connection_lost.inc()
            log.error("lost the Spark Connect server; jobs fail and are retried after their back-off",
                      extra={"remote": self.config.spark.remote, "error": error})
        else:
            log.info("Spark Connect server reachable again", extra={"remote": self.config.spark.remote})
        if self._stopping_since is None and self._accepting:
            self.holder.set_ready(connected, "" if connected else error or "Spark Connect server unreachable")
            self.metrics.ready.set(1 if connected else 0)

    def _watch_spark(self) -> None:
        """Spark Connect only: one cheap round trip every SPARK_CHECK_EVERY seconds, so a lost
        server shows on /readyz without waiting for a job, and a restored one ends the outage."""
        while not self.stop_flag.wait(SPARK_CHECK_EVERY):
            try:
                self.link.check()
            except Exception:  # never let the watcher die
                log.exception("Spark Connect check failed")

    def run(self) -> int:
        cfg = self.config
        host, port = parse_listen(self.opts.listen or cfg.listen)
        token = load_token()
        loopback = host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
        if token is None and not loopback:
            log.warning("no API token configured: POST endpoints are disabled on a non-loopback address",
                        extra={"listen": f"{host}:{port}"})
        if self.opts.trace or cfg.warehouse.trace:
            path = self.opts.trace or cfg.warehouse.trace or ""
            self._trace = TraceWriter.append_to(
                path, {"source": "freshet run", "clock": "epoch seconds"},
                on_error=lambda e: log.warning("cannot append to the trace file",
                                               extra={"path": path, "error": str(e)}))
        self._take_lease(f"{host}:{port}")
        app = create_app(self, self.registry, token=token, open_without_token=loopback,
                         max_body=self.opts.max_body)
        self.server = ApiServer(app, host, port)
        try:
            bound = self.server.start()
        except BaseException:
            self.lease.release()
            raise
        log.info("HTTP API listening", extra={"listen": f"{host}:{bound}", "token": token is not None})

        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGHUP, self._on_hup)
        try:
            self._startup()
        except FreshetError:
            self.server.stop()
            self.lease.release()
            raise
        except Exception as e:
            log.exception("startup failed")
            self.server.stop()
            self.lease.release()
            raise FreshetError(f"startup failed: {type(e).__name__}: {e}") from e
        if self._term is not None:  # stopped during recovery
            self.server.stop()
            self.lease.release()
            return 0

        self.workers.ensure(cfg.scheduler.tracks)
        threading.Thread(target=self._intake_loop, name="freshet-intake", daemon=True).start()
        if self.link.remote:
            threading.Thread(target=self._watch_spark, name="freshet-spark-watch", daemon=True).start()
        if self.opts.demo:
            self._start_demo()
        self._accepting = True
        self.holder.set_ready(True)
        self.metrics.ready.set(1)
        sd_notify(f"READY=1\nSTATUS=scheduling {len(cfg.tables)} tables on {cfg.scheduler.tracks} tracks\n"
                  f"MAINPID={os.getpid()}")
        log.info("ready", extra={"tables": len(cfg.tables), "tracks": cfg.scheduler.tracks,
                                 "policy": cfg.scheduler.policy, "partitioner": cfg.scheduler.partitioner})
        self._dispatch(self._restored)
        try:
            return self._loop()
        except FreshetError:
            raise
        except Exception:
            log.exception("the scheduler loop crashed; the Delta log makes a restart safe")
            raise
        finally:
            self._shutdown()

    def _take_lease(self, listen: str) -> None:
        """One daemon per warehouse (ops.lease): refuse to start if another holds the lease."""
        from ops.lease import Lease, lease_path

        self.lease = Lease(lease_path(self.config), timeout=self.config.warehouse.lease_timeout, listen=listen)
        self.lease.acquire()  # LeaseHeld (a FreshetError): exit 1 with the holder's pid, host and API
        if self.lease.took_over:
            log.warning("took over the warehouse lease", extra={
                "lease": str(self.lease.path), "reason": self.lease.took_over.get("reason"),
                "previous_pid": self.lease.took_over.get("pid"), "previous_host": self.lease.took_over.get("host")})

        def lost(message: str) -> None:
            self._lease_lost = message

        def failed(err: OSError) -> None:
            log.warning("cannot renew the warehouse lease; retrying", extra={"lease": str(self.lease.path),
                                                                             "error": str(err)})

        self.lease.start(lost, failed)

    def _spark_alive(self) -> bool:
        """One cheap call into the driver JVM; False when Py4J cannot reach it any more. (Over
        Spark Connect there is no JVM here: a lost server is survivable, `_watch_spark`.)"""
        if self.link is not None and self.link.remote:
            return True
        try:
            self.spark.sparkContext._jvm.java.lang.System.currentTimeMillis()
        except Exception as e:
            log.critical("the Spark driver JVM is gone; exiting so the supervisor restarts the daemon",
                         extra={"error": f"{type(e).__name__}: {e}"})
            return False
        return True

    def _loop(self) -> int:
        wd = watchdog_interval()
        last_wd = 0.0
        last_pub = 0.0
        last_spark = time.time()
        dirty = False
        while True:
            now = time.time()
            if self._lease_lost is not None:
                log.critical("lost the warehouse lease; exiting (another daemon took it over)",
                             extra={"reason": self._lease_lost})
                raise FreshetError(f"lost the warehouse lease: {self._lease_lost}")
            if now - last_spark >= SPARK_CHECK_EVERY:
                last_spark = now
                if not self._spark_alive():
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
            if self._stopping_since is not None:
                if not self._dispatched:  # jobs dispatched to a track and not reported back yet
                    log.info("stopped: no job running", extra={"seconds": round(now - self._stopping_since, 3)})
                    return 0
                if self._force:
                    log.warning("second signal: exiting now with jobs running (safe to redo: Delta txn)",
                                extra={"running": sorted(self._dispatched.values())})
                    return 130
                if now - self._stopping_since >= self.opts.grace:
                    log.warning("grace period over; exiting with jobs running (safe to redo: Delta txn)",
                                extra={"running": sorted(self._dispatched.values()),
                                       "grace": self.opts.grace})
                    return 0
            wake = self.sched.next_wakeup()
            timeout = LOOP_TIMEOUT if wake is None else min(LOOP_TIMEOUT, max(0.0, wake - now))
            try:
                item = self.events.get(timeout=timeout)
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
                self._sync_counters()
                self.holder.publish(self.sched.stats(now))
                last_pub, dirty = now, False

    def _begin_stop(self, now: float) -> None:
        self._stopping_since = now
        self._accepting = False
        self.stop_flag.set()
        self.holder.set_ready(False, "shutting down")
        self.metrics.ready.set(0)
        sd_notify("STOPPING=1")
        running = sorted(self._dispatched.values())
        log.info("stopping: no new jobs; waiting for running ones", extra={
            "signal": signal.Signals(self._term).name if self._term else None, "running": running,
            "grace": self.opts.grace})

    def _shutdown(self) -> None:
        self.stop_flag.set()
        if self.lease is not None and self._lease_lost is None:
            self.lease.release()
        self.workers.stop()
        if self.server is not None:
            self.server.stop()
        if self._trace:
            self._trace.close()
        if self.link is not None and self.link.remote:
            with contextlib.suppress(Exception):
                self.link.close()  # releases the server-side session; the server goes on
        elif not self._dispatched and self.spark is not None:
            from warehouse.lake.session import stop_spark

            with contextlib.suppress(Exception):
                stop_spark()


def _driver_jvm_pid(spark: Any) -> int | None:
    """The pid of the Spark driver JVM this process launched (local or standalone master), if any."""
    try:
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)  # set by pyspark's launch_gateway
        return int(proc.pid) if proc is not None else None
    except Exception:  # Spark Connect, or a pyspark without it: nothing to record
        return None
