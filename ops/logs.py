"""The daemon's log formats: one JSON object per line (`--log-format json`) or one human line.

Structured fields go in `extra=`; both formats print every one of them.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from warehouse.times import iso

__all__ = ["HumanFormatter", "JsonFormatter", "RepeatedFailure", "setup_logging"]

_STD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg and the structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": iso(record.created, "seconds"), "level": record.levelname.lower(),
                               "logger": record.name, "msg": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class HumanFormatter(logging.Formatter):
    """`2026-01-01T00:00:00Z INFO  job finished table=cpu_raw job=3 track=1 duration=2.10s ...`"""

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")}
        parts = []
        for k, v in fields.items():
            if isinstance(v, float):
                v = f"{v:.3f}" if k in ("duration", "estimate") else f"{v:g}"
            parts.append(f"{k}={v}")
        line = f"{iso(record.created, 'seconds')} {record.levelname:<5} {record.getMessage()}"
        if parts:
            line += " " + " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(fmt: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else HumanFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("py4j", "uvicorn.access", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class RepeatedFailure:
    """Logs a loop that fails on every poll without flooding the log, and counts every failure.

    The first failure is logged at once (with its traceback); while the loop keeps failing, at most
    one line every `every` seconds follows, saying how many failures it stands for (`repeats`)
    and the latest error. The first success after failures logs `recovered` with the total.
    `count` is called on every failure (a Prometheus counter's `inc`).
    """

    def __init__(self, logger: logging.Logger, msg: str, recovered: str, *, every: float = 60.0,
                 count: Callable[[], None] = lambda: None, clock: Callable[[], float] = time.monotonic,
                 **fields: Any) -> None:
        self.log, self.msg, self.recovered, self.every = logger, msg, recovered, every
        self.count, self.clock = count, clock
        self.fields = fields
        self.failures = 0  # in the current run of failures
        self._unlogged = 0
        self._last: float | None = None

    def failed(self, error: BaseException) -> None:
        self.count()
        self.failures += 1
        self._unlogged += 1
        now = self.clock()
        err = f"{type(error).__name__}: {error}"
        if self._last is None:
            self.log.error(self.msg, exc_info=error, extra={**self.fields, "error": err})
        elif now - self._last >= self.every:
            self.log.error(f"{self.msg} (still failing)", extra={
                **self.fields, "error": err, "repeats": self._unlogged, "failures": self.failures})
        else:
            return
        self._last, self._unlogged = now, 0

    def ok(self) -> None:
        if self.failures:
            self.log.info(self.recovered, extra={**self.fields, "failures": self.failures})
        self.failures, self._unlogged, self._last = 0, 0, None
