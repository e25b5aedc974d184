"""Small builders shared by the engine tests (no Spark, no SimPy)."""

from __future__ import annotations

from typing import Any

from warehouse.config import FreshetConfig, parse_config


def config(streams: list[dict], tables: list[dict], **scheduler: Any) -> FreshetConfig:
    sched = {"tracks": 1, "partitioner": "global", "learn_costs": False, "chop": None, "inheritance": "none"}
    sched.update(scheduler)
    return parse_config({"streams": streams, "tables": tables, "scheduler": sched})
