"""The warehouse lease as an object on the bucket, for `warehouse.root: s3a://bucket/prefix`.

`<prefix>/_freshet/lease` holds JSON (owner, host, pid, helpers, listen, epoch, seq, state) and is
only ever written with a conditional PutObject, so of two writers that read one version exactly one
replaces it:

* **take** — `If-None-Match: *` (the object is absent), or `If-Match: <ETag>` on a *released*
  object, or on one whose ETag stayed unchanged for the whole `timeout` on this process's own
  monotonic clock (the holder stopped renewing: wall clocks of two hosts are never compared). Each
  take bumps `epoch`; a released object keeps it, so epochs only grow.
* **renew** — every `timeout / 3`, `If-Match` on the ETag it last wrote (`seq` changes the body,
  hence the ETag). 412 means a successor took it: the owner is told (`on_lost`) and stops.
* **expire** — an owner whose last successful renewal was *sent* more than `timeout − margin` ago
  (the endpoint unreachable, a stall) is told it lost the lease too: a successor starts counting
  only after it saw that write, so the owner stops at least `margin` before anyone may take over.
  From that same moment a job of the owner still running is refused before it writes (the fence,
  `ops.lease_base.Fenced`), and every commit it made names it (`leader`: owner and epoch).
* **release** — overwritten with `If-Match` as `state: released` (not deleted: the epoch goes on).

As with the file lease, an owner on this machine (same host, kernel boot and pid namespace) whose
process and Spark JVM are gone is taken over at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ops.lease_base import Fenced, LeaseHeld, machine, pid_alive
from warehouse.errors import FreshetError
from warehouse.lake.s3a import s3_client, s3_status

__all__ = ["LEASE_KEY", "S3Lease", "s3_client"]

LEASE_KEY = "_freshet/lease"


def _pid_gone(pid: Any) -> bool:
    return isinstance(pid, int) and not pid_alive(pid)


class S3Lease(Fenced):
    """The warehouse lease of this process on the bucket; see the module docstring. `acquire()`,
    then `start(on_lost)` renews it in a thread; `release()` on a clean exit. `epoch` is this
    holder's take-over counter, named in each commit it makes (`lapsed()` is the fence before
    each write)."""

    def __init__(self, client: Any, bucket: str, key: str, *, timeout: float = 30.0, listen: str = "",
                 margin: float | None = None, poll: float | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client, self.bucket, self.key = client, bucket, key
        self.path = f"s3a://{bucket}/{key}"
        self.timeout = timeout
        self.margin = timeout / 4 if margin is None else margin
        self.poll = min(1.0, timeout / 10) if poll is None else poll
        self.listen = listen
        self.monotonic = monotonic
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.epoch = 0
        self.took_over: dict[str, Any] | None = None
        self.helpers: list[int] = []
        self.etag: str | None = None
        self.renewed_at = float("-inf")  # monotonic send time of the last write that succeeded
        self._seq = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the object --
    def _record(self, state: str = "held") -> bytes:
        self._seq += 1
        return json.dumps({"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(),
                           "machine": machine(), "helpers": self.helpers, "listen": self.listen,
                           "epoch": self.epoch, "seq": self._seq, "state": state, "timeout": self.timeout,
                           "written": time.time()}).encode()

    def _put(self, body: bytes, **cond: str) -> str:
        return str(self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body,
                                          ContentType="application/json", **cond)["ETag"])

    def read(self) -> tuple[dict[str, Any], str] | None:
        """The object's record (`{}` if unreadable) and ETag, or None if absent."""
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except Exception as e:
            if s3_status(e) == 404:
                return None
            raise
        try:
            data = json.loads(got["Body"].read())
        except ValueError:
            data = {}
        return (data if isinstance(data, dict) else {}), str(got["ETag"])

    def _etag_now(self) -> str | None:
        try:
            return str(self.client.head_object(Bucket=self.bucket, Key=self.key)["ETag"])
        except Exception as e:
            if s3_status(e) == 404:
                return None
            raise

    # -- taking it --
    def acquire(self) -> None:
        """Take the lease, or raise LeaseHeld naming the holder once it is seen renewing
        (FreshetError if the bucket cannot be reached)."""
        try:
            self._acquire()
        except FreshetError:
            raise
        except Exception as e:
            raise FreshetError(f"cannot take the warehouse lease {self.path}: {type(e).__name__}: {e}") from None

    def _acquire(self) -> None:
        while True:
            sent = self.monotonic()
            self.epoch = 1
            try:
                self._took(self._put(self._record(), IfNoneMatch="*"), sent)
                return
            except Exception as e:
                self.epoch = 0
                if s3_status(e) not in (409, 412):
                    raise
            seen = self.read()
            if seen is None:
                continue  # released by deletion in between: create again
            held, etag = seen
            why = self._free(held)
            if why is None:
                changed = self._watch(etag, self.monotonic())
                if changed is None:
                    why = f"its lease object did not change for {self.timeout:g} s"
                else:
                    now = self.read()  # who renewed it, or took it over meanwhile
                    raise LeaseHeld(self._held_message(now[0] if now else held, changed))
            sent = self.monotonic()
            epoch = held.get("epoch")
            self.epoch = epoch + 1 if isinstance(epoch, int) else 1
            try:
                self._took(self._put(self._record(), IfMatch=etag), sent)
            except Exception as e:
                self.epoch = 0
                if s3_status(e) not in (409, 412):
                    raise
                raise LeaseHeld(f"warehouse in use: another freshet daemon took the lease first ({self.path})") from None
            if held.get("state") != "released":
                self.took_over = {**held, "reason": why}
            return

    def _took(self, etag: str, sent: float) -> None:
        self.etag, self.renewed_at = etag, sent

    def _free(self, held: dict[str, Any]) -> str | None:
        """Why `held` may be taken at once, or None: it must be watched for the timeout."""
        if held.get("state") == "released":
            return "released"
        if not held:
            return None  # unreadable: watched like a live one (its writer may be renewing)
        if (held.get("host") == socket.gethostname() and held.get("machine") and held.get("machine") == machine()
                and _pid_gone(held.get("pid")) and all(_pid_gone(p) for p in held.get("helpers") or [])):
            return f"its owner (pid {held['pid']} on this host) is gone"
        return None

    def _watch(self, etag: str, since: float) -> float | None:
        """Poll the object's ETag until `timeout` has passed since `since` (when `etag` was read):
        None if it never changed, else the seconds after which it did."""
        while True:
            left = since + self.timeout - self.monotonic()
            if left <= 0:
                return None
            if self._stop.wait(min(self.poll, left)):
                raise LeaseHeld(f"stopped waiting for the warehouse lease {self.path}")
            if self._etag_now() != etag:
                return self.monotonic() - since

    def _held_message(self, held: dict[str, Any], changed: float) -> str:
        where = f" (API {held['listen']})" if held.get("listen") else ""
        return (f"warehouse in use: another freshet daemon holds {self.path} — pid {held.get('pid')} on host "
                f"{held.get('host')}{where}, epoch {held.get('epoch')}, renewed within {changed:.1f} s. One daemon "
                f"per warehouse: stop it first; if it crashed on another host, its lease is taken over once the "
                f"object has not changed for {self.timeout:g} s")

    # -- holding it --
    def add_helper(self, pid: int) -> None:
        """A child process that may still commit after this one dies (the Spark JVM)."""
        self.helpers.append(pid)
        with contextlib.suppress(Exception):
            self.renew()

    def holding(self) -> bool:
        return self.etag is not None

    def renew(self) -> bool:
        """Rewrite the object if it is still ours; False if a successor holds it (raises on other errors)."""
        with self._lock:
            if self.etag is None:
                return False
            for _ in range(2):
                sent = self.monotonic()
                try:
                    self._took(self._put(self._record(), IfMatch=self.etag), sent)
                    return True
                except Exception as e:
                    if s3_status(e) != 412:
                        raise
                seen = self.read()  # a write that timed out here may have landed: ours, with a new ETag
                if seen is None or seen[0].get("owner") != self.owner or seen[0].get("epoch") != self.epoch:
                    self.etag = None
                    return False
                self.etag = seen[1]
            return False

    def start(self, on_lost: Callable[[str], None], on_error: Callable[[Exception], None] | None = None) -> None:
        """Renew every timeout/3 seconds in a thread (every timeout/10 after a failed attempt);
        `on_lost(message)` once when a successor took it or no renewal succeeded for `timeout − margin`."""

        def run() -> None:
            due = self.monotonic() + self.timeout / 3
            while True:
                deadline = self.renewed_at + self.timeout - self.margin
                if self._stop.wait(max(0.0, min(due, deadline) - self.monotonic())):
                    return
                if not self.fresh():
                    on_lost(f"no renewal of {self.path} succeeded for {self.monotonic() - self.renewed_at:.1f} s "
                            f"(timeout {self.timeout:g} s): stopping before another daemon may take it over")
                    return
                if self.monotonic() < due:
                    continue
                try:
                    ok = self.renew()
                except Exception as e:
                    due = self.monotonic() + self.timeout / 10
                    if on_error is not None:
                        on_error(e)
                    continue
                if not ok:
                    held = None
                    with contextlib.suppress(Exception):
                        held = self.read()
                    on_lost(self._taken_message(held[0] if held else {}))
                    return
                due = self.monotonic() + self.timeout / 3

        self._thread = threading.Thread(target=run, name="freshet-lease", daemon=True)
        self._thread.start()

    def _taken_message(self, held: dict[str, Any]) -> str:
        return (f"another freshet daemon took over {self.path}: pid {held.get('pid')} on host {held.get('host')}, "
                f"epoch {held.get('epoch')}")

    def cancel(self) -> None:
        """Stop waiting for the lease: a watching `acquire()` raises LeaseHeld within `poll` seconds."""
        self._stop.set()

    def release(self) -> None:
        """Stop renewing and mark the object released if it is still ours."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2)
        with self._lock:
            if self.etag is None:
                return
            with contextlib.suppress(Exception):
                self._put(self._record("released"), IfMatch=self.etag)
            self.etag = None
