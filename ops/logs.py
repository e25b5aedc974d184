"""The daemon's log formats: one JSON object per line (`--log-format json`) or one human line.

Structured fields go in `extra=`; both formats print every one of them.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from warehouse.times import iso

__all__ = ["HumanFormatter", "JsonFormatter", "setup_logging"]

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
