"""Small helpers shared by the tests that drive a real daemon process (no fixtures here)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 120.0, every: float = 0.5) -> Any:
    """Poll `fn` until it returns something truthy; fail naming `what` and the last answer."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except (httpx.HTTPError, OSError, ValueError, KeyError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
