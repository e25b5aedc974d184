"""One daemon per warehouse: a lease in the warehouse root — an object on the bucket for an
`s3a://` root (`ops.lease_s3`), else a file (below). `open_lease` picks it from the root.

Two daemons on one warehouse would both scan the landing zone and both plan jobs from their own
view of the log. Delta's txn makes a *replayed* job a no-op, but not two *different* plans of the
same partitions (one daemon loads p1–p2 as version F2, the other p1–p3 as F3 > F2: both commit,
p1 and p2 twice). So the second daemon refuses to start.

`_freshet.lease` (JSON: owner, host, pid, listen, renewed, epoch, state) lives in `warehouse.root`
when it is a local path, else (a URI other than `s3a://`) in the landing zone. The owner rewrites it
every `timeout / 3` seconds. A starting daemon takes the lease when the file is absent (created with
`O_EXCL`), released (a clean stop marks it `state: released` and keeps it), when its owner ran on
this host and that process is gone (a crash: taken at once), or when it has not been renewed for
`timeout` seconds (an owner on another host, or a wedged one). A takeover writes the file
atomically and reads it back after a short pause, so of two successors racing for one stale lease
exactly one proceeds. Each take raises `epoch` by one (a released file keeps it, so epochs only
grow). An owner that finds the file naming someone else has lost it (it stalled for longer than the
timeout) and must stop at once; one whose last renewal succeeded more than `timeout × 3/4` ago
writes nothing more until a renewal succeeds (the fence, `ops.lease_base.Fenced`).

The file lease is a guard against a mistake, not a consensus protocol: on a file system without
atomic rename or with skewed clocks between hosts, a timeout takeover can overlap a stalled owner.
The object lease compares no clocks and takes over with a conditional write (`ops.lease_s3`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ops.lease_base import Fenced, LeaseHeld, pid_alive
from ops.lease_s3 import LEASE_KEY, S3Lease, s3_client
from warehouse.config import FreshetConfig, S3Settings
from warehouse.errors import FreshetError
from warehouse.lake.s3a import is_s3a
from warehouse.paths import local_path, split_bucket

__all__ = ["LEASE_FILE", "Lease", "LeaseHeld", "hold", "lease_path", "open_lease", "take_lease"]

log = logging.getLogger("freshet")

LEASE_FILE = "_freshet.lease"


def lease_path(config: FreshetConfig) -> Path:
    """Where the lease file lives: the warehouse root if local, else the landing zone — resolved by
    `warehouse.paths` like the tables and the actions store, so `root: ~/wh` is one lease
    whichever directory a daemon starts in. (An `s3a://` root's lease is an object: `open_lease`.)"""
    for location in (config.warehouse.root, config.warehouse.landing):
        base = local_path(location)
        if base is not None:
            return base / LEASE_FILE
    raise FreshetError(f"the warehouse lease is kept under a local warehouse.root or landing; both are URIs "
                       f"({config.warehouse.root!r}, {config.warehouse.landing!r})")


class Lease(Fenced):
    """The warehouse lease of this process; see the module docstring. `acquire()`, then
    `start(on_lost)` renews it in a thread; `release()` on a clean exit. `epoch`: this holder's
    take counter, named in each commit it makes (`lapsed()` is the fence before each write)."""

    def __init__(self, path: Path, *, timeout: float = 30.0, listen: str = "",
                 clock: Callable[[], float] = time.time, settle: float = 0.2,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.timeout = timeout
        self.margin = timeout / 4  # as the object lease's: the fence shuts at timeout × 3/4
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.listen = listen
        self.clock = clock
        self.monotonic = monotonic
        self.settle = settle
        self.took_over: dict[str, Any] | None = None  # the stale lease this one replaced
        self.epoch: int | None = None  # set when taken: one above the file's, or 1 for a new file
        self.helpers: list[int] = []  # child processes that act for this daemon (its Spark driver JVM)
        self.renewed_at = float("-inf")  # monotonic time before the last write of the file that succeeded
        self._held = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self, state: str = "held") -> dict[str, Any]:
        return {"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(), "helpers": self.helpers,
                "listen": self.listen, "renewed": self.clock(), "timeout": self.timeout, "epoch": self.epoch,
                "state": state}

    def holding(self) -> bool:
        return self._held

    def add_helper(self, pid: int) -> None:
        """A child process that may still commit after this one dies (the Spark JVM): the lease
        is only taken over at once when it is gone too."""
        self.helpers.append(pid)
        self.renew()

    def read(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}  # torn or garbage: treated as stale
        return data if isinstance(data, dict) else {}

    def _write(self, state: str = "held") -> None:
        tmp = self.path.with_name(f".{LEASE_FILE}.{self.owner.replace(':', '_')}.tmp")
        tmp.write_text(json.dumps(self._record(state)))
        tmp.replace(self.path)

    def stale(self, held: dict[str, Any]) -> str | None:
        """Why `held` may be taken over, or None if it is live."""
        if held.get("state") == "released":
            return "released"
        if held.get("host") == socket.gethostname() and isinstance(held.get("pid"), int):
            helpers = [p for p in held.get("helpers") or [] if isinstance(p, int)]
            if not pid_alive(held["pid"]) and not any(pid_alive(p) for p in helpers):
                return f"its owner (pid {held['pid']} on this host) is gone"
        renewed = held.get("renewed")
        if not isinstance(renewed, (int, float)):
            return "the lease file is unreadable"
        age = self.clock() - renewed
        if age > self.timeout:
            return f"it was last renewed {age:.0f} s ago (timeout {self.timeout:g} s)"
        return None

    def acquire(self) -> None:
        """Take the lease, or raise LeaseHeld naming the holder (FreshetError if it cannot be written)."""
        try:
            self._acquire()
        except OSError as e:
            raise FreshetError(f"cannot take the warehouse lease {self.path}: {e.strerror or e}") from None

    def _acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sent = self.monotonic()
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held = self.read() or {}
            why = self.stale(held)
            if why is None:
                raise LeaseHeld(self._held_message(held)) from None
            epoch = held.get("epoch")
            self.epoch = epoch + 1 if isinstance(epoch, int) and not isinstance(epoch, bool) else 1
            self._write()
            time.sleep(self.settle)  # a racing successor may have written after us: the last rename wins
            now = self.read() or {}
            if now.get("owner") != self.owner:
                raise LeaseHeld(self._held_message(now)) from None
            self._took(sent)
            if why != "released":
                self.took_over = {**held, "reason": why}
            return
        self.epoch = 1
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(self._record()))
        self._took(sent)

    def _took(self, sent: float) -> None:
        self._held, self.renewed_at = True, sent

    def _held_message(self, held: dict[str, Any]) -> str:
        age = self.clock() - held["renewed"] if isinstance(held.get("renewed"), (int, float)) else float("nan")
        where = f" (API {held['listen']})" if held.get("listen") else ""
        return (f"warehouse in use: another freshet daemon holds {self.path} — pid {held.get('pid')} on host "
                f"{held.get('host')}{where}, renewed {age:.1f} s ago. One daemon per warehouse: stop it first; "
                f"if it crashed on another host, its lease expires {self.timeout:g} s after its last renewal")

    def renew(self) -> bool:
        """Rewrite the lease if it is still ours; False if someone else holds it now."""
        held = self.read()
        if held is not None and held.get("owner") not in (self.owner, None):
            self._held = False
            return False
        sent = self.monotonic()
        self._write()
        self.renewed_at = sent
        return True

    def start(self, on_lost: Callable[[str], None], on_error: Callable[[OSError], None] | None = None) -> None:
        """Renew every timeout/3 seconds in a thread; `on_lost(message)` once if it is lost;
        `on_error(err)` when a renewal cannot be written (a full disk, say: retried next time)."""

        def run() -> None:
            while not self._stop.wait(self.timeout / 3):
                try:
                    ok = self.renew()
                except OSError as e:
                    ok = True
                    if on_error is not None:
                        on_error(e)
                if not ok:
                    on_lost(self._held_message(self.read() or {}))
                    return

        self._thread = threading.Thread(target=run, name="freshet-lease", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stop waiting for the lease (a file lease never waits: nothing to do)."""

    def release(self) -> None:
        """Stop renewing and mark the file released if it is still ours (kept: its epoch goes on)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        self._held = False
        held = self.read()
        if held is not None and held.get("owner") == self.owner:
            with contextlib.suppress(OSError):
                self._write("released")


def open_lease(config: FreshetConfig, listen: str = "") -> Lease | S3Lease:
    """The lease of `config`'s warehouse, not taken yet: an `ops.lease_s3.S3Lease` on the bucket
    for an `s3a://` root (with the credentials, endpoint and addressing Spark's S3A gets), else a
    `Lease` file (`lease_path`)."""
    timeout = config.warehouse.lease_timeout
    root = config.warehouse.root
    if is_s3a(root):
        bucket, prefix = split_bucket(root)
        key = f"{prefix.strip('/')}/{LEASE_KEY}".lstrip("/")
        return S3Lease(s3_client(config.warehouse.s3 or S3Settings(), timeout), bucket, key,
                       timeout=timeout, listen=listen)
    return Lease(lease_path(config), timeout=timeout, listen=listen)


def take_lease(config: FreshetConfig, listen: str, on_lost: Callable[[str], None]) -> Lease | S3Lease:
    """The daemon's lease (`open_lease`): taken (or LeaseHeld, a FreshetError: exit 1 naming the
    holder's pid, host and API), then renewed in a thread; `on_lost(message)` if another daemon
    takes it over (or, on the bucket, if it could not be renewed in time)."""
    return hold(open_lease(config, listen), on_lost)


def hold(lease: Lease | S3Lease, on_lost: Callable[[str], None]) -> Lease | S3Lease:
    """Take `lease` (LeaseHeld if another daemon holds it), log a takeover, and renew it in a thread."""
    lease.acquire()
    if lease.took_over:
        log.warning("took over the warehouse lease", extra={
            "lease": str(lease.path), "reason": lease.took_over.get("reason"), "epoch": lease.epoch,
            "previous_pid": lease.took_over.get("pid"), "previous_host": lease.took_over.get("host")})

    def failed(err: Exception) -> None:
        log.warning("cannot renew the warehouse lease; retrying", extra={"lease": str(lease.path), "error": str(err)})

    lease.start(on_lost, failed)
    return lease
