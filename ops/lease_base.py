"""What both warehouse leases share (`ops.lease`: a file; `ops.lease_s3`: an object on the bucket):
the refusal, and whether a process recorded in a lease is gone."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from warehouse.errors import FreshetError

__all__ = ["LeaseHeld", "machine", "pid_alive"]


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
