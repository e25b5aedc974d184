"""Every contestant of the live benchmark and what it runs with (each contestant's JSON
records its settings).

- the Freshet variants differ only in the config's `scheduler` section (`FRESHET`): `freshet`
  with its defaults, and two ablations — `freshet-fifo` (the engine without its policy) and
  `freshet-edfp` (static priorities: EDF-P, §3.1, with Freshet's partitioner, chopping and
  inheritance; no cost model in the order, no marginal benefit);
- the peers are programs under `scripts/live/` (`PEER_MODULES`), each exposing `settings(config)`;
  a variant of a peer runs the same program with other arguments (`PEER_VARIANTS`).
"""

from __future__ import annotations

import importlib
from typing import Any

from warehouse.config import FreshetConfig

__all__ = ["FRESHET", "PEER_MODULES", "PEER_VARIANTS", "settings"]

# the config's scheduler section per Freshet variant (spec.freshet_config's policy and partitioner)
FRESHET: dict[str, dict[str, str]] = {
    "freshet": {"policy": "auto", "partitioner": "auto"},
    "freshet-fifo": {"policy": "fifo", "partitioner": "global"},
    "freshet-edfp": {"policy": "edf-p", "partitioner": "auto"},
}

PEER_MODULES: dict[str, str] = {
    "structured-streaming": "streaming",
    "structured-streaming-tuned": "streaming_tuned",
    "structured-streaming-grouped": "streaming_grouped",
    "cron": "cron",
    "priority-cron": "priority_cron",
    "declarative-pipelines": "pipelines",
    "declarative-pipelines-default": "pipelines",
}

# a peer's program run with other settings: its command-line arguments, and the same to `settings`
PEER_VARIANTS: dict[str, tuple[list[str], dict[str, Any]]] = {
    # Spark's default maxConcurrentFlows (16) instead of the benchmark's concurrency (4)
    "declarative-pipelines-default": (["--max-flows", "0"], {"max_flows": 0}),
}


def settings(name: str, config: FreshetConfig) -> dict[str, Any]:
    """What contestant `name` runs with on `config` (its generated freshet.yaml), beyond the Spark
    settings every contestant shares (`spec.SPARK_CONF`, `warehouse.lake.session.DEFAULT_CONF`)."""
    if name in FRESHET:
        from policies.bulk import BULK_POOL, bulk_limit, pool_weights

        sc = config.scheduler
        return {"scheduler": sc.model_dump(mode="json"),
                "bulk_limit": bulk_limit(sc.bulk_limit, config.spark.master, config.spark.cores),
                "pools": {"freshet-<rank>-p<w>": "w = 2^round(log2(Ip / least Ip)), FAIR inside, weight w, minShare 1",
                          BULK_POOL: "bulk jobs (policies.bulk), FIFO inside, weight 1, minShare 0",
                          "declared": sorted(pool_weights())}}
    module = importlib.import_module(f"scripts.live.{PEER_MODULES[name]}")
    return module.settings(config, **PEER_VARIANTS.get(name, ([], {}))[1])
