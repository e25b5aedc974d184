"""The daemon's line to Spark (DESIGN.md §3, §5): start it, watch it, hear of its loss.

* **Start** — `start()` builds the session, or connects to the Spark Connect server. A Connect
  server that does not answer is waited for (/readyz says so) until it does or the daemon is told
  to stop. The Spark driver JVM this process launched is recorded in the lease (`ops.lease`).
* **Liveness** — with a local driver, `alive()` makes one cheap call into its JVM; when Py4J
  cannot reach it any more the daemon exits so its supervisor restarts it.
* **Reconnect** — over Spark Connect a lost server is survivable: a watcher thread makes one
  cheap round trip every `SPARK_CHECK_EVERY` seconds, so a lost server shows on /readyz without
  waiting for a job, and a restored one ends the outage. Running jobs fail and are retried after
  their back-off (`freshet_spark_connection_lost_total`).

Numbers and readiness go out through the callbacks it is given; it keeps no counters itself.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from warehouse.config import SparkConfig

__all__ = ["SPARK_CHECK_EVERY", "SparkWatch", "driver_jvm_pid"]

log = logging.getLogger("freshet")

SPARK_CHECK_EVERY = 5.0  # seconds between liveness checks (the driver JVM, or the Connect server)


class SparkWatch:
    """One daemon's Spark: `start()`, `alive()`, `watch(stop)` (a thread), `close()`.

    `connected(up)` and `lost()` are called on every change (the metrics); `ready(ok, why)` while
    the daemon `serving()`; `stopping()` ends the wait for a Connect server; `helper(pid)` gets the
    driver JVM's pid (the lease).
    """

    def __init__(self, cfg: SparkConfig, *, connected: Callable[[bool], None], lost: Callable[[], None],
                 ready: Callable[[bool, str], None], serving: Callable[[], bool],
                 stopping: Callable[[], bool], helper: Callable[[int], None]) -> None:
        from warehouse.lake.session import SparkLink

        self.cfg = cfg
        self.link = SparkLink(cfg)
        self.link.on_change(self._changed)
        self.spark: Any = None
        self._connected, self._lost, self._ready = connected, lost, ready
        self._serving, self._stopping, self._helper = serving, stopping, helper

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
