"""The configuration's building blocks (warehouse.config): durations (`90s`, `5m`, `1h`, `1d`,
`250ms` or a bare number of seconds), names, and the strict, frozen base of every section."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["Duration", "Name", "Slope", "Strict", "parse_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
MAX_DURATION = 100 * 365 * 86400.0  # a century: anything longer is a typo, and sums of it stay finite
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")  # a sign, to say what is wrong


def parse_duration(value: Any) -> float:
    """`90s`, `5m`, `1h`, `1d`, `250ms`, or a bare number → seconds (float, 0 to a century)."""
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond a float's range
            seconds = math.inf
    elif isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if seconds is None:
        raise ValueError(f"bad duration {value!r}: expected e.g. 30s, 5m, 1h, 1d or seconds")
    if seconds < 0:
        raise ValueError(f"bad duration {value!r}: negative (must be from 0 to 100 years)")
    if not seconds <= MAX_DURATION:  # also refuses NaN
        raise ValueError(f"bad duration {value!r}: must be from 0 to 100 years")
    return seconds + 0.0  # (-0 is 0)


Duration = Annotated[float, BeforeValidator(parse_duration)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)]
Slope = Annotated[float, Field(ge=0, le=1e6)]  # β of E(n) = α + β·n (§2.4): finite, so a plan's sums stay finite


class Strict(BaseModel):
    """A config section: unknown keys are refused, the model is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
