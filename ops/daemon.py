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

Lifecycle: listen → recover every table from its Delta log → start Spark → READY=1 (sd_notify)
and /readyz → run. SIGTERM/SIGINT: stop intake and dispatching, let running jobs finish within
`--grace` seconds, exit 0 (a job cut off is safe to redo: Delta's idempotent txn, §4.4).
SIGHUP: reload the config file; an invalid one is logged and the old one stays; a valid one goes
to `Scheduler.reconfigure` (tables added/removed, priorities changed, repartition §3.2).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from prometheus_client import CollectorRegistry

from ops.api import ApiServer, Manifest, create_app, load_token, parse_listen
from ops.metrics import FreshetMetrics, SnapshotHolder, register_metrics
from warehouse.config import FreshetConfig, load_config, parse_duration
from warehouse.errors import ConfigError, FreshetError
from warehouse.events import JobFailed, JobFinished, PartitionArrived, StartJob, Tick
from warehouse.stats import SchedulerStats
from warehouse.times import iso

__all__ = ["Daemon", "add_arguments", "main", "sd_notify"]

log = logging.getLogger("freshet")

LOOP_TIMEOUT = 0.25  # seconds the scheduler loop waits for an event before re-checking flags
SNAPSHOT_EVERY = 1.0  # publish a snapshot at least this often even without events
SNAPSHOT_MIN_GAP = 0.1
SPARK_CHECK_EVERY = 5.0  # seconds between liveness checks of the Spark driver JVM


# ---------------------------------------------------------------- systemd notify (sd_notify(3))
def sd_notify(message: str, env: dict[str, str] | None = None) -> bool:
    """Send `message` (e.g. "READY=1") to systemd's NOTIFY_SOCKET; False when not under systemd."""
    env = dict(os.environ) if env is None else env
    addr = env.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):  # abstract namespace
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(message.encode())
        return True
    except OSError as e:
        log.warning("sd_notify(%s) failed: %s", message.split("\n")[0], e)
        return False


def watchdog_interval(env: dict[str, str] | None = None) -> float | None:
    """Half of WATCHDOG_USEC in seconds, if systemd asked this process for watchdog pings."""
    env = dict(os.environ) if env is None else env
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or (pid and pid.isdigit() and int(pid) != os.getpid()):
        return None
    try:
        return max(0.05, int(usec) / 2e6)
    except ValueError:
        return None


# ---------------------------------------------------------------- logging
_STD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg and the structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": iso(record.created, "seconds"), "level": record.levelname.lower(),
                               "logger": record.name, "msg": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class HumanFormatter(logging.Formatter):
    """`2026-01-01T00:00:00Z INFO  job finished table=cpu_raw job=3 track=1 duration=2.10s ...`"""

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")}
        parts = []
        for k, v in fields.items():
            if isinstance(v, float):
                v = f"{v:.3f}" if k in ("duration", "estimate") else f"{v:g}"
            parts.append(f"{k}={v}")
        line = f"{iso(record.created, 'seconds')} {record.levelname:<5} {record.getMessage()}"
        if parts:
            line += " " + " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(fmt: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else HumanFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("py4j", "uvicorn.access", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# ---------------------------------------------------------------- trace file (docs/simulator.md)
class TraceFile:
    """Appends observed arrivals and finished jobs as JSON lines, replayable by `freshet sim run --trace`."""

    def __init__(self, path: str) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._fh: IO[str] = self.path.open("a", buffering=1)
        self._lock = threading.Lock()
        if new:
            self._write({"freshet_trace": 1, "source": "freshet run", "clock": "epoch seconds"})

    def _write(self, obj: dict[str, Any]) -> None:
        with self._lock:
            try:
                self._fh.write(json.dumps(obj) + "\n")
            except OSError as e:  # a full disk must not stop the warehouse
                log.warning("cannot append to the trace file", extra={"path": str(self.path), "error": str(e)})

    def arrival(self, ev: PartitionArrived, at: float) -> None:
        d: dict[str, Any] = {"time": at, "stream": ev.stream, "partition": ev.partition_id, "start": ev.start,
                             "end": ev.end, "rows": ev.rows}
        if ev.safe_through is not None:
            d["safe_through"] = ev.safe_through
        self._write(d)

    def job(self, job: StartJob, at: float, duration: float, rows: int, status: str) -> None:
        d: dict[str, Any] = {"time": at, "table": job.table, "start": job.start, "end": job.end,
                             "duration": duration, "rows": rows, "track": job.track}
        if status != "ok":
            d["status"] = status
        self._write(d)

    def close(self) -> None:
        with self._lock:
            self._fh.close()


# ---------------------------------------------------------------- the daemon
@dataclass
class _Result:
    """A track worker's report: the job, its event, and when it ended."""

    job: StartJob
    event: JobFinished | JobFailed
    ended: float
    note: str = ""


@dataclass
class _Options:
    config_path: str
    listen: str | None = None
    grace: float = 60.0
    demo: bool = False
    poll: float = 1.0
    trace: str | None = None
    max_body: int = 64 * 1024
    demo_options: dict[str, Any] = field(default_factory=dict)


class Daemon:
    """The process: see the module docstring. `run()` returns the exit code."""

    def __init__(self, config: FreshetConfig, opts: _Options) -> None:
        self.config = config
        self.opts = opts
        self.events: queue.Queue[Any] = queue.Queue()
        self.holder = SnapshotHolder()
        self.registry = CollectorRegistry()
        self.metrics: FreshetMetrics = register_metrics(self.registry, self.holder.get)
        self.sched: Any = None
        self.intake: Any = None
        self.executor: Any = None
        self.spark: Any = None
        self.state: Any = None
        self.track_queues: dict[int, queue.Queue[StartJob | None]] = {}
        self.workers: dict[int, threading.Thread] = {}
        self.stop_flag = threading.Event()  # stop intake/demo threads
        self._term: int | None = None
        self._hup = False
        self._force = False
        self._stopping_since: float | None = None
        self._trace: TraceFile | None = None
        self._counts_seen: dict[tuple[str, str], int] = {}
        self._accepting = False
        self._started: dict[int, float] = {}  # job id → when it was handed to its track
        self._started_tables: dict[int, str] = {}
        self.server: ApiServer | None = None

    # -- API backend (called from the HTTP thread) --
    def snapshot(self) -> SchedulerStats | None:
        return self.holder.get()

    def ready(self) -> tuple[bool, str]:
        return self.holder.ready()

    def streams(self) -> list[str]:
        return [s.name for s in self.config.streams]

    def submit_partition(self, stream: str, manifest: Manifest, raw: dict[str, Any]) -> str | None:
        from ops.api import ApiError

        if not self._accepting or self.intake is None:
            raise ApiError(503, "not accepting partitions: the daemon is starting or shutting down")
        from warehouse.intake import UnknownStream

        try:
            ev = self.intake.submit(stream, raw)
        except UnknownStream as e:
            raise ApiError(404, str(e)) from None
        if ev is None:
            return None
        self.events.put(ev)
        return ev.partition_id

    # -- signals --
    def _on_term(self, signum: int, _frame: Any) -> None:
        if self._term is not None:  # a second SIGTERM/SIGINT: stop waiting for running jobs
            self._force = True
        self._term = signum

    def _on_hup(self, _signum: int, _frame: Any) -> None:
        self._hup = True

    # -- threads --
    def _worker(self, track: int, q: queue.Queue[StartJob | None]) -> None:
        while True:
            job = q.get()
            if job is None:
                return
            try:
                event = self.executor.execute(job)
            except Exception as e:  # the executor should not raise; never let it kill a track
                log.exception("executor raised", extra={"table": job.table, "job": job.job_id, "track": track})
                event = JobFailed(job_id=job.job_id, reason=f"{type(e).__name__}: {e}")
            self.events.put(_Result(job, event, time.time()))

    def _ensure_workers(self, tracks: int) -> None:
        for i in range(tracks):
            if i not in self.workers:
                q: queue.Queue[StartJob | None] = queue.Queue()
                self.track_queues[i] = q
                t = threading.Thread(target=self._worker, args=(i, q), name=f"freshet-track-{i}", daemon=True)
                self.workers[i] = t
                t.start()

    def _intake_loop(self) -> None:
        while not self.stop_flag.is_set():
            try:
                for ev in self.intake.scan():
                    self.events.put(ev)
            except Exception:
                log.exception("landing-zone scan failed; retrying")
            self.stop_flag.wait(self.opts.poll)

    def _start_demo(self) -> None:
        from warehouse.demo import produce

        speed = float(self.opts.demo_options.get("speed", 60.0))
        start = time.time() - float(self.opts.demo_options.get("backfill", 3600.0))
        log.info("demo producer started", extra={"speed": speed, "from": iso(start, "seconds"),
                                                 "landing": self.config.warehouse.landing})

        def run() -> None:
            try:
                produce(self.config, speed=speed, start=start, stop=self.stop_flag)
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
            self._ensure_workers(job.track + 1)
            log.info("job started", extra={
                "table": job.table, "job": job.job_id, "track": job.track, "kind": job.kind,
                "window_start": iso(job.start, "seconds"), "window_end": iso(job.end, "seconds"), "partitions": len(job.partitions),
                "estimate": job.estimate, "freshness": iso(job.new_freshness, "seconds")})
            self._started[job.job_id] = time.time()
            self._started_tables[job.job_id] = job.table
            self.track_queues[job.track].put(job)

    def _handle(self, event: Any, now: float) -> list[StartJob]:
        with self.metrics.decision_seconds.time():
            return self.sched.handle(event, now)

    def _on_arrival(self, ev: PartitionArrived, now: float) -> None:
        self.metrics.partitions_arrived.labels(stream=ev.stream).inc()
        if self._trace:
            self._trace.arrival(ev, now)
        log.info("partition arrived", extra={"stream": ev.stream, "partition": ev.partition_id,
                                             "start": iso(ev.start, "seconds"), "end": iso(ev.end, "seconds"), "rows": ev.rows})
        self._dispatch(self._handle(ev, now))

    def _on_result(self, r: _Result, now: float) -> None:
        job, ev = r.job, r.event
        self._started.pop(job.job_id, None)
        self._started_tables.pop(job.job_id, None)
        if job.job_id not in self.sched.running:
            log.warning("result for a job the scheduler no longer runs (table removed?)",
                        extra={"table": job.table, "job": job.job_id})
            return
        if isinstance(ev, JobFinished):
            self.metrics.job_done(job.table, job.kind, ev.duration, ev.rows)
            if self._trace:
                self._trace.job(job, r.ended, ev.duration, ev.rows, "ok")
            log.info("job finished", extra={
                "table": job.table, "job": job.job_id, "track": job.track, "kind": job.kind,
                "duration": ev.duration, "rows": ev.rows, "freshness": iso(job.new_freshness, "seconds"),
                "staleness": round(now - job.new_freshness, 3)})
        else:
            duration = round(r.ended - self._started.get(job.job_id, r.ended), 3)
            if self._trace:
                self._trace.job(job, r.ended, duration, 0, "failed")
            log.warning("job failed", extra={"table": job.table, "job": job.job_id, "track": job.track,
                                             "kind": job.kind, "reason": ev.reason, "duration": duration})
        self._dispatch(self._handle(ev, now))

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
            if problems:
                raise ConfigError(problems, source=path)
        except ConfigError as e:
            self.metrics.reloads.labels(result="rejected").inc()
            log.error("config reload rejected; keeping the running config", extra={"config": path,
                                                                                   "reason": str(e)})
            return
        old_tables = {t.name for t in self.config.tables}
        new_tables = {t.name for t in new.tables}
        self._reconfigure_warehouse(new)
        self.config = new
        decisions = self.sched.reconfigure(new, now)
        self.metrics.reloads.labels(result="ok").inc()
        log.info("config reloaded", extra={"config": path, "added": sorted(new_tables - old_tables),
                                           "removed": sorted(old_tables - new_tables),
                                           "tracks": new.scheduler.tracks})
        self._dispatch(decisions)
        # partitions waiting in the landing zone for a newly added table
        for ev in self.intake.scan():
            self.events.put(ev)

    def _reconfigure_warehouse(self, new: FreshetConfig) -> None:
        """Point intake and executor at the new config; new tables start from their Delta state."""
        from warehouse.delta import recover

        state = recover(new)
        self.intake.reconfigure(new, state)
        self.executor.reconfigure(new, self.intake, state)

    def _startup(self) -> None:
        """Recover every table from its Delta log, start Spark, build the Scheduler (§4.4)."""
        from warehouse.delta import recover
        from warehouse.executor import Executor
        from warehouse.intake import Intake
        from warehouse.scheduler import Scheduler
        from warehouse.spark_session import get_spark

        t0 = time.time()
        self.state = recover(self.config)
        for name, st in sorted(self.state.tables.items()):
            log.info("recovered table", extra={"table": name, "freshness": iso(st.freshness, "seconds"),
                                               "safe_freshness": iso(st.safe_freshness, "seconds"),
                                               "partitions": len(st.partitions)})
        self.intake = Intake(self.config, self.state)
        log.info("starting Spark", extra={"master": self.config.spark.master})
        self.spark = get_spark(self.config.spark)
        self.executor = Executor(self.config, self.spark, self.intake, self.state)
        now = time.time()
        self.sched = Scheduler(self.config, now=now, recovered=self.state.recovered)
        self.holder.publish(self.sched.stats(now))
        log.info("recovery done", extra={"tables": len(self.config.tables), "seconds": round(now - t0, 3)})

    def run(self) -> int:
        cfg = self.config
        host, port = parse_listen(self.opts.listen or cfg.listen)
        token = load_token()
        loopback = host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
        if token is None and not loopback:
            log.warning("no API token configured: POST endpoints are disabled on a non-loopback address",
                        extra={"listen": f"{host}:{port}"})
        if self.opts.trace or cfg.warehouse.trace:
            self._trace = TraceFile(self.opts.trace or cfg.warehouse.trace or "")
        app = create_app(self, self.registry, token=token, open_without_token=loopback,
                         max_body=self.opts.max_body)
        self.server = ApiServer(app, host, port)
        bound = self.server.start()
        log.info("HTTP API listening", extra={"listen": f"{host}:{bound}", "token": token is not None})

        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGHUP, self._on_hup)
        try:
            self._startup()
        except FreshetError:
            self.server.stop()
            raise
        except Exception as e:
            log.exception("startup failed")
            self.server.stop()
            raise FreshetError(f"startup failed: {type(e).__name__}: {e}") from e
        if self._term is not None:  # stopped during recovery
            self.server.stop()
            return 0

        self._ensure_workers(cfg.scheduler.tracks)
        threading.Thread(target=self._intake_loop, name="freshet-intake", daemon=True).start()
        if self.opts.demo:
            self._start_demo()
        self._accepting = True
        self.holder.set_ready(True)
        self.metrics.ready.set(1)
        sd_notify(f"READY=1\nSTATUS=scheduling {len(cfg.tables)} tables on {cfg.scheduler.tracks} tracks\n"
                  f"MAINPID={os.getpid()}")
        log.info("ready", extra={"tables": len(cfg.tables), "tracks": cfg.scheduler.tracks,
                                 "policy": cfg.scheduler.policy, "partitioner": cfg.scheduler.partitioner})
        try:
            return self._loop()
        except FreshetError:
            raise
        except Exception:
            log.exception("the scheduler loop crashed; the Delta log makes a restart safe")
            raise
        finally:
            self._shutdown()

    def _spark_alive(self) -> bool:
        """One cheap call into the driver JVM; False when Py4J cannot reach it any more."""
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
            if now - last_spark >= SPARK_CHECK_EVERY:
                last_spark = now
                if not self._spark_alive():
                    self._started.clear()  # nothing can finish any more
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
                if not self._started:  # jobs dispatched to a track and not reported back yet
                    log.info("stopped: no job running", extra={"seconds": round(now - self._stopping_since, 3)})
                    return 0
                if self._force:
                    log.warning("second signal: exiting now with jobs running (safe to redo: Delta txn)",
                                extra={"running": sorted(self._started_tables.values())})
                    return 130
                if now - self._stopping_since >= self.opts.grace:
                    log.warning("grace period over; exiting with jobs running (safe to redo: Delta txn)",
                                extra={"running": sorted(self._started_tables.values()),
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
            elif isinstance(item, _Result):
                self._on_result(item, now)
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
        running = sorted(self._started_tables.values())
        log.info("stopping: no new jobs; waiting for running ones", extra={
            "signal": signal.Signals(self._term).name if self._term else None, "running": running,
            "grace": self.opts.grace})

    def _shutdown(self) -> None:
        self.stop_flag.set()
        for q in self.track_queues.values():
            q.put(None)
        if self.server is not None:
            self.server.stop()
        if self._trace:
            self._trace.close()
        if not self._started and self.spark is not None:
            from warehouse.spark_session import stop_spark

            with contextlib.suppress(Exception):
                stop_spark()


# ---------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="the warehouse config (YAML, DESIGN.md §4.1)")
    parser.add_argument("--listen", help="HOST:PORT for the HTTP API (default: the config's `listen`, "
                                         "127.0.0.1:9464)")
    parser.add_argument("--log-format", choices=("human", "json"), default="human", help="log line format")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--grace", type=float, default=60.0,
                        help="seconds running jobs get to finish after SIGTERM/SIGINT (default 60)")
    parser.add_argument("--demo", action="store_true",
                        help="also run the demo producer, writing partitions into the landing zone")
    parser.add_argument("--demo-speed", type=float, default=60.0,
                        help="demo: warehouse seconds per wall second until it catches up (default 60)")
    parser.add_argument("--demo-backfill", default="1h", help="demo: start this long ago (default 1h)")
    parser.add_argument("--poll", type=float, default=1.0, help="landing-zone poll interval, seconds")
    parser.add_argument("--trace", help="append arrivals and job durations here (default: warehouse.trace)")
    parser.add_argument("--max-body", type=int, default=64 * 1024, help="HTTP request body limit, bytes")


def main(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.grace < 0:
        raise ConfigError(f"--grace must not be negative (got {args.grace})")
    if args.listen:
        parse_listen(args.listen)  # fail early, naming the flag's value
    try:
        backfill = parse_duration(args.demo_backfill)
    except ValueError as e:
        raise ConfigError(f"--demo-backfill: {e}") from None
    if args.demo_speed <= 0:
        raise ConfigError(f"--demo-speed must be positive (got {args.demo_speed})")
    opts = _Options(config_path=args.config, listen=args.listen, grace=args.grace, demo=args.demo,
                    poll=args.poll, trace=args.trace, max_body=args.max_body,
                    demo_options={"speed": args.demo_speed, "backfill": backfill})
    setup_logging(args.log_format, args.log_level)
    return Daemon(config, opts).run()
