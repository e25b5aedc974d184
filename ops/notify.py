"""systemd's readiness and watchdog protocol (sd_notify(3)): READY=1, STOPPING=1, WATCHDOG=1.

Without NOTIFY_SOCKET (not under systemd) every call is a no-op that returns False.
"""

from __future__ import annotations

import logging
import os
import socket

__all__ = ["sd_notify", "watchdog_interval"]

log = logging.getLogger("freshet")


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
