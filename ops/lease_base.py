"""What both warehouse leases share (`ops.lease`: a file; `ops.lease_s3`: an object on the bucket):
the refusal, whether a process recorded in a lease is gone, and the fence a job passes before it
writes (`Fenced`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from warehouse.errors import FreshetError

__all__ = ["Fenced", "LeaseHeld", "machine", "pid_alive"]


class LeaseHeld(FreshetError):
    """Another daemon holds the warehouse's lease."""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) holds nothing
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat[stat.rfind(")") + 2:].split()[0] == "Z":
            return False
    return True


def machine() -> str:
    """This kernel boot and pid namespace: a pid recorded under the same value names a process here."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


class Fenced:
    """The fence of a lease held by this process (`warehouse.lake.commit.Leader`): an update job
    asks it immediately before its Delta write (`Executor.fence`), and its commit names the holder
    (`owner`, `epoch`). The holder stops `margin` before a successor may take over; the fence shuts
    at that same point, on the monotonic clock, so a job still running then writes nothing."""

    path: Any
    owner: str
    epoch: int | None
    timeout: float
    margin: float
    renewed_at: float  # monotonic send time of the last write of the lease that succeeded
    monotonic: Callable[[], float]

    def holding(self) -> bool:
        """Whether this process took the lease and has not lost or released it since."""
        raise NotImplementedError

    def fresh(self) -> bool:
        """Whether this owner may still write: its last renewal was sent less than `timeout − margin` ago."""
        return self.monotonic() - self.renewed_at < self.timeout - self.margin

    def lapsed(self) -> str | None:
        """None while this holder may write (`holding` and `fresh`); else why it may not."""
        if not self.holding():
            return f"this daemon does not hold the warehouse lease {self.path} any more"
        if not self.fresh():
            return (f"the last renewal of the warehouse lease {self.path} that succeeded was sent "
                    f"{self.monotonic() - self.renewed_at:.1f} s ago; its holder stops writing "
                    f"{self.timeout - self.margin:g} s after one (lease_timeout {self.timeout:g} s)")
        return None
