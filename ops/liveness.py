"""The daemon's line to Spark (docs/architecture.md): start it, watch it, hear of its loss.

* **Start** — `start()` builds the session, or connects to the Spark Connect server. A Connect
  server that does not answer is waited for (/readyz says so) until it does or the daemon is told
  to stop. The Spark driver JVM this process launched is recorded in the lease (`ops.lease`).
* **Liveness** — with a local driver, `alive()` makes one cheap call into its JVM; when Py4J
  cannot reach it any more the daemon exits so its supervisor restarts it.
* **Reconnect** — over Spark Connect a lost server is survivable: a watcher thread makes one
  cheap round trip every `SPARK_CHECK_EVERY` seconds, so a lost server shows on /readyz without
  waiting for a job, and a restored one ends the outage. Running jobs fail and are retried after
  their back-off (`freshet_spark_connection_lost_total`).
* **The service manager's watchdog** — `Heartbeat`: WATCHDOG=1 from whatever shows progress (the
  scheduler loop's turns; during start each table's Delta log read and the wait for Spark), at
  most every half WatchdogSec; while starting also EXTEND_TIMEOUT_USEC, so a start that keeps
  making progress outlives TimeoutStartSec and one that stalls does not (sd_notify(3)).

Numbers and readiness go out through the callbacks it is given; it keeps no counters itself.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ops.notify import sd_notify, watchdog_interval
from warehouse.config import SparkConfig

__all__ = ["START_EXTEND", "SPARK_CHECK_EVERY", "Heartbeat", "SparkWatch", "driver_jvm_pid"]

log = logging.getLogger("freshet")

SPARK_CHECK_EVERY = 5.0  # seconds between liveness checks (the driver JVM, or the Connect server)
START_EXTEND = 300.0  # seconds: while starting, each sign of progress extends the start timeout by this
UNWATCHED_EVERY = 10.0  # seconds between two start extensions when systemd asked for no watchdog


class Heartbeat:
    """systemd's watchdog, fed by progress (sd_notify(3)). `beat()` sends WATCHDOG=1 at most every
    half WatchdogSec (`watchdog_interval`); `beat(starting=True)` adds EXTEND_TIMEOUT_USEC (the
    watchdog is armed only once READY=1 is sent; until then TimeoutStartSec bounds the start)."""

    def __init__(self, env: dict[str, str] | None = None, clock: Callable[[], float] = time.monotonic,
                 extend: float = START_EXTEND) -> None:
        self.env = env
        self.watched = watchdog_interval(env)  # None: systemd asked for no pings
        self.every = self.watched if self.watched is not None else UNWATCHED_EVERY
        self.extend = extend
        self._clock = clock
        self._last = -float("inf")

    def beat(self, starting: bool = False, status: str | None = None) -> None:
        now = self._clock()
        if now - self._last < self.every or (self.watched is None and not starting):
            return
        self._last = now
        lines = ["WATCHDOG=1"]
        if starting:
            lines.append(f"EXTEND_TIMEOUT_USEC={int(self.extend * 1e6)}")
        if status:
            lines.append(f"STATUS={status}")
        sd_notify("\n".join(lines), self.env)


class SparkWatch:
    """One daemon's Spark: `start()`, `alive()`, `watch(stop)` (a thread), `close()`.

    `connected(up)` and `lost()` are called on every change (the metrics); `ready(ok, why)` while
    the daemon `serving()`; `stopping()` ends the wait for a Connect server, and `waiting()` is
    called while it lasts (the watchdog); `helper(pid)` gets the driver JVM's pid (the lease).
    """

    def __init__(self, cfg: SparkConfig, *, connected: Callable[[bool], None], lost: Callable[[], None],
                 ready: Callable[[bool, str], None], serving: Callable[[], bool],
                 stopping: Callable[[], bool], helper: Callable[[int], None],
                 waiting: Callable[[], None] = lambda: None) -> None:
        from warehouse.lake.session import SparkLink

        self.cfg = cfg
        self.link = SparkLink(cfg)
        self.link.on_change(self._changed)
        self.spark: Any = None
        self._connected, self._lost, self._ready = connected, lost, ready
        self._serving, self._stopping, self._helper, self._waiting = serving, stopping, helper, waiting

    @property
    def remote(self) -> bool:
        return bool(self.link.remote)

    def start(self) -> bool:
        """Start (or connect to) Spark; False if the daemon was stopped while waiting for it."""
        from warehouse.lake.session import connection_lost

        log.info("starting Spark", extra={"spark": self.cfg.where})
        waited = 0
        while True:
            try:
                self.spark = self.link.session()
                self._connected(True)
                jvm = driver_jvm_pid()
                if jvm is not None:
                    self._helper(jvm)
                return True
            except Exception as e:
                if not (self.remote and connection_lost(e)):
                    raise
                if waited % 12 == 0:  # every minute
                    log.warning("waiting for the Spark Connect server", extra={
                        "remote": self.cfg.remote, "error": f"{type(e).__name__}: {str(e)[:300]}"})
                self._ready(False, f"waiting for the Spark Connect server {self.cfg.remote}")
                waited += 1
            for _ in range(50):
                if self._stopping():
                    return False
                self._waiting()
                time.sleep(0.1)

    def _changed(self, connected: bool, error: str | None) -> None:
        """The Spark Connect link was lost or restored (from a track worker or the watcher)."""
        self._connected(connected)
        if not connected:
            self._lost()
            log.error("lost the Spark Connect server; jobs fail and are retried after their back-off",
                      extra={"remote": self.cfg.remote, "error": error})
        else:
            log.info("Spark Connect server reachable again", extra={"remote": self.cfg.remote})
        if self._serving():
            self._ready(connected, "" if connected else error or "Spark Connect server unreachable")

    def watch(self, stop: threading.Event) -> None:
        """Spark Connect only (a thread): check the server every SPARK_CHECK_EVERY seconds."""
        while not stop.wait(SPARK_CHECK_EVERY):
            try:
                self.link.check()
            except Exception:  # never let the watcher die
                log.exception("Spark Connect check failed")

    def alive(self) -> bool:
        """One cheap call into the driver JVM; False when Py4J cannot reach it any more. True
        over Spark Connect (a lost server is survivable: `watch`) and before Spark started."""
        if self.remote or self.spark is None:
            return True
        try:
            self.spark.sparkContext._jvm.java.lang.System.currentTimeMillis()
        except Exception as e:
            log.critical("the Spark driver JVM is gone; exiting so the supervisor restarts the daemon",
                         extra={"error": f"{type(e).__name__}: {e}"})
            return False
        return True

    def close(self, jobs_running: bool) -> None:
        """Release the Connect session (the server goes on), or stop the local driver when no job
        is running (a job cut off keeps it: the process is exiting anyway)."""
        if self.remote:
            with contextlib.suppress(Exception):
                self.link.close()
        elif not jobs_running and self.spark is not None:
            from warehouse.lake.session import stop_spark

            with contextlib.suppress(Exception):
                stop_spark()


def driver_jvm_pid() -> int | None:
    """The pid of the Spark driver JVM this process launched (local or standalone master), if any."""
    try:
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)  # set by pyspark's launch_gateway
        return int(proc.pid) if proc is not None else None
    except Exception:  # Spark Connect, or a pyspark without it: nothing to record
        return None
