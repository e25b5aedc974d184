"""The configuration's building blocks (warehouse.config): durations (`90s`, `5m`, `1h`, `1d`,
`250ms` or a bare number of seconds), names, and the strict, frozen base of every section."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["Duration", "Name", "Strict", "parse_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")


def parse_duration(value: Any) -> float:
    """`90s`, `5m`, `1h`, `1d`, `250ms`, or a bare number → seconds (float, ≥ 0)."""
    if isinstance(value, bool):
        raise ValueError(f"bad duration {value!r}: expected e.g. 30s, 5m, 1h, 1d or seconds")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"bad duration {value!r}: must not be negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNITS[m.group(2) or "s"]
    raise ValueError(f"bad duration {value!r}: expected e.g. 30s, 5m, 1h, 1d or seconds")


Duration = Annotated[float, BeforeValidator(parse_duration)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)]


class Strict(BaseModel):
    """A config section: unknown keys are refused, the model is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)
