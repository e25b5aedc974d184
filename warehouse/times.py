"""Event times on the wire: ISO-8601 (naive = UTC) or epoch seconds in, epoch seconds inside,
ISO-8601 UTC with a `Z` out. One place for the landing zone, the HTTP API, logs and the demo."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

__all__ = ["iso", "parse_time"]


def parse_time(value: Any) -> float:
    """ISO-8601 (naive = UTC) or epoch seconds → epoch seconds; ValueError saying what is wrong."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not an ISO-8601 time: {value!r}") from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.UTC)
        return t.timestamp()
    raise ValueError(f"expected an ISO-8601 time or epoch seconds, got {value!r}")


def iso(t: float | None, timespec: str = "auto") -> str | None:
    """Epoch seconds → `2026-11-26T10:05:00Z` (None stays None)."""
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
