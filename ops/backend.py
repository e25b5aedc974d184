"""What the HTTP API asks the daemon (`ops.api.Backend`), answered from the daemon's published
state — the snapshot, readiness, the last reload — and, for the two mutating requests, handed to
the intake and the operator actions, whose results the scheduler loop picks up from its queue.
Called from the HTTP threads, never from the scheduler loop.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from ops.api import ApiError, ApiServer, create_app, parse_listen
from ops.auth import load_token
from ops.metrics import SnapshotHolder
from ops.reload import Reloader
from warehouse.config import FreshetConfig
from warehouse.landing.intake import Submitted
from warehouse.stats import SchedulerStats
from warehouse.times import iso

__all__ = ["DaemonBackend", "serve"]

log = logging.getLogger("freshet")


class Daemon(Protocol):
    """What the backend reads of the daemon (`ops.daemon.Daemon`)."""

    config: FreshetConfig
    holder: SnapshotHolder
    history: Any  # ops.history.History
    tuner: Any  # ops.autotune.AutoTuner
    registry: CollectorRegistry
    reloader: Reloader
    accepting: bool
    actions: Any  # ops.actions.OperatorActions, once started
    events: Any  # the scheduler loop's queue
    opts: Any  # ops.loop.Options

    @property
    def intake(self) -> Any: ...


class DaemonBackend:
    """`ops.api.Backend` over a running `Daemon`."""

    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon
        self.started = time.time()

    def snapshot(self) -> SchedulerStats | None:
        return self.d.holder.get()

    def ready(self) -> tuple[bool, str]:
        return self.d.holder.ready()

    def standby(self) -> bool:
        return self.d.holder.standby()

    @property
    def history(self) -> Any:
        """The status page's last hour of job results (`ops.history`)."""
        return self.d.history

    @property
    def intake(self) -> Any:
        return self.d.intake

    def streams(self) -> list[str]:
        return [s.name for s in self.d.config.streams]

    def submit_partition(self, stream: str, manifest: Any) -> Submitted:
        """The intake validates and may quarantine (ops.api maps its exceptions to statuses)."""
        intake = self.d.intake
        if not self.d.accepting or intake is None:
            raise ApiError(503, "not accepting partitions: the daemon is starting or shutting down", "not_accepting")
        sub = intake.submit(stream, manifest)
        if sub.arrived is not None:
            self.d.events.put(sub.arrived)
        return sub

    def operator_action(self, table: str, action: str, body: Any) -> dict[str, Any]:
        """Validate, keep and queue (ops.actions)."""
        actions = self.d.actions
        if not self.d.accepting or actions is None:
            raise ApiError(503, "not accepting actions: the daemon is starting or shutting down", "not_accepting")
        return actions.request(table, action, body)

    def actions_view(self, table: str) -> dict[str, Any] | None:
        return self.d.actions.view(table) if self.d.actions is not None else None

    def status(self) -> dict[str, Any]:
        """The process: readiness, the config it runs, the last SIGHUP and how it ended."""
        ok, why = self.d.holder.ready()
        cfg = self.d.config
        last = self.d.reloader.last
        return {"ready": ok, "reason": why, "accepting": self.d.accepting, "pid": os.getpid(),
                "started": self.started, "started_iso": iso(self.started), "config": self.d.reloader.path,
                "tables": len(cfg.tables), "streams": len(cfg.streams), "tracks": cfg.scheduler.tracks,
                "policy": cfg.scheduler.policy, "spark": cfg.spark.where,
                "reload": None if last is None else last.view(), "autotune": self.d.tuner.status()}


def serve(daemon: Daemon, listen: str) -> tuple[ApiServer, str]:
    """Start the HTTP API on `listen` (HOST:PORT); mutating endpoints need the bearer token, or
    are open without one on loopback only. Returns the server and the address it is bound to."""
    host, port = parse_listen(listen)
    token = load_token()
    loopback = host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
    if token is None and not loopback:
        log.warning("no API token configured: POST endpoints are disabled on a non-loopback address",
                    extra={"listen": f"{host}:{port}"})
    app = create_app(DaemonBackend(daemon), daemon.registry, token=token, open_without_token=loopback,
                     max_body=daemon.opts.max_body)
    server = ApiServer(app, host, port)
    bound = server.start()
    log.info("HTTP API listening", extra={"listen": f"{host}:{bound}", "token": token is not None})
    return server, f"{host}:{bound}"
