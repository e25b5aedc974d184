"""Small builders shared by the engine tests (no Spark, no SimPy)."""

from __future__ import annotations

from typing import Any

from warehouse.config import FreshetConfig, parse_config

# rollout's look-ahead cut to a test's time (scheduler.rollout): 2 candidates, 100 events, 100 s ahead
SHORT_ROLLOUT: dict[str, Any] = {"k": 2, "budget_events": 100, "horizon": 100.0}


def config(streams: list[dict], tables: list[dict], **scheduler: Any) -> FreshetConfig:
    sched = {"tracks": 1, "partitioner": "global", "learn_costs": False, "chop": None, "inheritance": "none"}
    sched.update(scheduler)
    return parse_config({"streams": streams, "tables": tables, "scheduler": sched})
