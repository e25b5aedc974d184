"""`freshet run`: the process (docs/architecture.md): its threads, signals, start and stop.

* **scheduler loop** (the main thread) — `ops.loop`, the only caller of the Scheduler.
* **track workers**, one per track (§3.2: at most one job per track): `ops.workers` runs each
  `StartJob` with the warehouse's `Executor` and reports `JobFinished` / `JobFailed`.
* **intake** — polls the landing zone (docs/warehouse.md §3) and queues `PartitionArrived` events.
* **HTTP API** (uvicorn, `ops.api`, answered by `ops.backend`) — reads the published snapshot; a
  POSTed manifest goes through the same intake; operator actions are kept, then queued.
* **Spark** — `ops.liveness`: started (waiting for a Spark Connect server), checked, reconnected.
* **demo producer** (`--demo`) — writes realistic partitions into the landing zone.

Lifecycle: take the warehouse lease (`ops.lease`; with `--standby`, listen first and wait for
it) → listen → recover every table from its Delta
log and start Spark (`ops.reload.start_parts`; each table read, and the wait for a Spark Connect
server, feeds systemd's watchdog and extends its start timeout: `ops.liveness.Heartbeat`) →
re-apply the kept operator actions → READY=1 (sd_notify) and /readyz → the loop. It returns the
exit code; the lease is released, the API stopped, the Spark session closed.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

from ops.actions import ActionStore, OperatorActions, store_path
from ops.backend import serve
from ops.lease import LeaseHeld, hold, open_lease, take_lease
from ops.liveness import SparkWatch
from ops.logs import RepeatedFailure
from ops.loop import Options, SchedulerLoop, open_trace
from ops.notify import sd_notify
from ops.podrole import PodRole
from ops.reload import start_parts
from sim.trace import ActionRecord
from warehouse.config import FreshetConfig
from warehouse.errors import FreshetError
from warehouse.events import Tick
from warehouse.lake.s3a import spark_config
from warehouse.times import iso

__all__ = ["Daemon", "Options"]

log = logging.getLogger("freshet")


class Daemon(SchedulerLoop):
    """The process: see the module docstring. `run()` returns the exit code."""

    def __init__(self, config: FreshetConfig, opts: Options, standby: bool = False) -> None:
        super().__init__(config, opts)
        self.lease: Any = None  # ops.lease.Lease or ops.lease_s3.S3Lease: one daemon per warehouse
        self.standby = standby  # wait for a held lease instead of exiting (`freshet run --standby`)
        self._lease_waited: Any = None  # the lease being waited for (`--standby`)
        self._standby_stop = threading.Event()
        self.pod_role = PodRole()  # on Kubernetes: the label the chart's Service selects (leader / standby)
        self.spark = SparkWatch(spark_config(config), connected=lambda up: self.metrics.spark_connected.set(1 if up else 0),
                                lost=self.metrics.spark_connection_lost.inc, ready=self._set_ready,
                                serving=lambda: self.accepting, stopping=lambda: self._term is not None,
                                helper=lambda pid: self.lease.add_helper(pid) if self.lease else None,
                                waiting=lambda: self.heartbeat.beat(starting=True, status="waiting for Spark"))
        self.alive = self.spark.alive

    # -- signals: flags the loop reads --
    def _on_term(self, signum: int, _frame: Any) -> None:
        if self._term is not None:  # a second SIGTERM/SIGINT: stop waiting for running jobs
            self._force = True
        self._term = signum
        self._standby_stop.set()
        if self._lease_waited is not None:
            self._lease_waited.cancel()

    def _on_hup(self, _signum: int, _frame: Any) -> None:
        self._hup = True

    # -- threads --
    def _intake_loop(self) -> None:
        failures = RepeatedFailure(log, "landing-zone scan failed; retrying", "landing-zone scan works again",
                                   every=self.opts.error_log_every,
                                   count=self.metrics.loop_errors.labels(loop="intake_scan").inc, loop="intake_scan")
        while not self.stop_flag.is_set():
            try:
                for ev in self.intake.scan():
                    self.events.put(ev)
                self.metrics.unknown_directories(self.intake.unknown)
            except Exception as e:
                failures.failed(e)
            else:
                failures.ok()
            self.stop_flag.wait(self.opts.poll)

    def _start_demo(self) -> None:
        from ops.demo import produce, resume_points

        speed = float(self.opts.demo_options.get("speed", 60.0))
        start = time.time() - float(self.opts.demo_options.get("backfill", 3600.0))
        after = resume_points(self.config, self.parts.state if self.parts else None)  # continue after the log
        log.info("demo producer started", extra={"speed": speed, "from": iso(start, "seconds"),
                                                 "landing": self.config.warehouse.landing,
                                                 "resume": {s: iso(t, "seconds") for s, t in sorted(after.items())}})

        def run() -> None:
            try:
                produce(self.config, speed=speed, start=start, stop=self.stop_flag, after=after)
            except Exception:
                log.exception("demo producer stopped")

        threading.Thread(target=run, name="freshet-demo", daemon=True).start()

    def _startup(self) -> bool:
        """Build the parts from the Delta log (`ops.reload.start_parts`), re-apply the kept
        operator actions, and run one round before any event (maintenance already due, upkeep).
        OpenLineage runs the previous daemon left open are closed first (ops.lineage: ABORT)."""
        self.lineage.close_abandoned(time.time())  # the lease is held: no other daemon's runs
        read = 0

        def progress() -> None:  # one more table's Delta log read: the start goes on
            nonlocal read
            read += 1
            self.heartbeat.beat(starting=True, status=f"recovering: {read} of {len(self.config.tables)} tables read")

        self.parts = start_parts(self.config, self.spark, on_count=self.metrics.intake_counted, progress=progress,
                                 leader=self.lease)
        if self.parts is None:
            return False
        now = time.time()
        self.actions = OperatorActions(
            ActionStore(store_path(self.config), self.opts.retry_every), lambda: self.config, self.holder.get, self.events.put,
            lambda table, action: self.metrics.operator_actions.labels(table=table, action=action).inc(), time.time,
            record=lambda at, ev: self._trace.action(ActionRecord.of(at, ev)) if self._trace else None)
        self._restored = self.actions.restore(self.sched, now) + self.sched.handle(Tick(), now)
        self.holder.publish(self.sched.stats(now))
        return True

    def run(self) -> int:
        cfg = self.config
        listen = self.opts.listen or cfg.listen
        if self.trace_path is not None:
            self._trace = open_trace(self.trace_path, self.trace_rotate)
        if not self.standby:
            self.lease = take_lease(cfg, listen, self._lost_lease)
            self.pod_role.set("leader")
        else:  # before it listens: a restarted container must not pass for the leader it was
            self.pod_role.set("standby")
        try:
            server, _ = serve(self, listen)
        except BaseException:
            if self.lease is not None:
                self.lease.release()
            raise
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGHUP, self._on_hup)
        if self.standby:
            try:
                self.lease = self._stand_by(listen)
            except BaseException:
                server.stop()
                raise
            if self.lease is None or self._term is not None:  # stopped while standing by
                server.stop()
                if self.lease is not None:
                    self.lease.release()
                return 0
        try:
            started = self._startup()
        except BaseException as e:
            server.stop()
            self.lease.release()
            if isinstance(e, FreshetError) or not isinstance(e, Exception):
                raise
            log.exception("startup failed")
            raise FreshetError(f"startup failed: {type(e).__name__}: {e}") from e
        if not started or self._term is not None:  # stopped during recovery
            server.stop()
            self.lease.release()
            return 0
        self._settle()
        self.workers.ensure(cfg.scheduler.tracks)
        threading.Thread(target=self._intake_loop, name="freshet-intake", daemon=True).start()
        if self.spark.remote:
            threading.Thread(target=self.spark.watch, args=(self.stop_flag,), name="freshet-spark-watch",
                             daemon=True).start()
        if self.opts.demo:
            self._start_demo()
        self.accepting = True
        self._set_ready(True)
        sd_notify(f"READY=1\nSTATUS=scheduling {len(cfg.tables)} tables on {cfg.scheduler.tracks} tracks\n"
                  f"MAINPID={os.getpid()}")
        log.info("ready", extra={"tables": len(cfg.tables), "tracks": cfg.scheduler.tracks,
                                 "policy": cfg.scheduler.policy, "partitioner": cfg.scheduler.partitioner,
                                 "autotune": cfg.scheduler.autotune, "trace": self.tuner.trace})
        self._dispatch(self._restored)
        try:
            return self._loop()
        except FreshetError:
            raise
        except Exception:
            log.exception("the scheduler loop crashed; the Delta log makes a restart safe")
            raise
        finally:
            self._shutdown(server)

    def _stand_by(self, listen: str) -> Any:
        """`--standby`: while another daemon holds the warehouse lease, answer /healthz, say
        "standby" on /readyz (503; 200 with ?standby=ok) and in `freshet_standby`, label the pod
        (`ops.podrole`), and try again (a file lease every `lease_timeout / 10` seconds, at most
        1 s; an object lease watches its holder's renewals meanwhile): the lease once taken, or
        None if stopped first."""
        every = min(1.0, self.config.warehouse.lease_timeout / 10)
        told = False
        lease = open_lease(self.config, listen)
        while self._term is None:
            self._lease_waited = lease
            try:
                hold(lease, self._lost_lease)
                self._set_ready(False)  # starting
                self.pod_role.set("leader")
                return lease
            except LeaseHeld as e:
                if self._term is not None:
                    break
                self._set_ready(False, f"standby: {e}", standby=True)
                self.pod_role.set("standby")
                self.heartbeat.beat(starting=True, status="standby: waiting for the warehouse lease")
                if not told:
                    log.info("standing by: another daemon holds the warehouse lease", extra={"holder": str(e)})
                    told = True
            finally:
                self._lease_waited = None
            self._standby_stop.wait(every)
        return None

    def _lost_lease(self, message: str) -> None:
        self._lease_lost = message

    def _shutdown(self, server: Any) -> None:
        self.stop_flag.set()
        if self.lease is not None and self._lease_lost is None:
            self.lease.release()
        self.workers.stop()
        self.lineage.close()  # drains for at most 2 s; what is left is not sent
        self.tuner.close()
        if self.actions is not None:
            self.actions.store.flush(timeout=2.0)  # what the loop forgot last, on file for the next start
        server.stop()
        if self._trace:
            self._trace.close()
        self.spark.close(jobs_running=bool(self._dispatched))
