"""Small helpers shared by the tests that drive a real daemon process (no fixtures here)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
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


def start_child(data: dict, log: Path, code: str) -> subprocess.Popen:
    """`python -c code <config as JSON>` from the repository root; stdout piped, stderr to `log`."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen([sys.executable, "-c", code, json.dumps(data)], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=log.open("ab"), text=True)


def wait_line(proc: subprocess.Popen, prefix: str, timeout: float) -> str | None:
    """The first stdout line starting with `prefix`, or None if the process ends first."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return None
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no {prefix!r} within {timeout}s")
