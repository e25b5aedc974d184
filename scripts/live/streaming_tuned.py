"""The `structured-streaming-tuned` contestant: the same 15 streaming queries as
`structured-streaming` (`scripts/live/streaming.py`), set up by a Spark engineer who has been
handed the tables' priorities.

    python -m scripts.live.streaming_tuned --config freshet.yaml --ready FILE --work DIR

- **Pools** (a generated fair-scheduler allocation file, `spark.scheduler.allocation.file`;
  FAIR mode as for every contestant): each valuable table's query (`scripts/live/tuning.py`:
  inherited priority ≥ 20) has a pool of its own, weighted by its inherited priority, with
  `minShare` 1 (the top pool, `b00`'s, the cores: its tasks go first whenever it has any), named
  so that Spark's tie-break between idle pools (by name) follows the priorities.
  The bulk loads (`b05`–`b11`, inherited 1–5, all bursting) share one FIFO pool of weight 1 and
  minShare 0: one bulk micro-batch at a time gets what the valuable pools leave. A query runs in the pool set
  with `setLocalProperty("spark.scheduler.pool", …)` on the thread that starts it.
- **Triggers**: 1 s for the valuable queries (a partition waits ≤ 1 s for its micro-batch);
  `BULK_TRIGGER` (5 s) for the bulk ones. The issue proposed about a period for them: a trigger
  of P delays each partition by P/2 on average (the next trigger instant is independent of when
  the partition lands), ≈ 590 priority-seconds of Σp·S on this warehouse against ≈ 40 for 5 s,
  and a longer trigger saves only the idle listing of a folder — a busy query runs its batches
  back to back whatever the trigger.
- **`maxFilesPerTrigger` = 1 on every bursting source** (`b03`–`b11`): one partition per
  micro-batch, so a backlog after the burst is loaded and committed partition by partition
  (Freshet's chopping, §3.4) instead of in one batch that commits nothing until all is loaded.
- **`spark.sql.files.maxPartitionBytes` = 16 MB** (default 128 MB): a burst partition (80–240 MB
  of parquet) is read in 5–15 tasks of ~1 s instead of one or two long ones, so the fair
  scheduler has task boundaries at which to hand a core to a valuable pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scripts.live import tuning
from scripts.live.spec import from_env
from scripts.live.streaming import QueryPlan, peer_args, serve, start_queries
from warehouse.config import FreshetConfig

__all__ = ["BULK_POOL", "BULK_TRIGGER", "VALUABLE_TRIGGER", "main", "plans", "pool_names", "pools", "settings",
           "spark_conf", "tuned_config"]

VALUABLE_TRIGGER = "1 second"
BULK_TRIGGER = "5 seconds"
BULK_POOL = "bulk"
MAX_FILES = 1  # landing files (= partitions) per micro-batch on a bursting source


def _cores(config: FreshetConfig) -> int:
    master = config.spark.master or "local[2]"
    inside = master.partition("[")[2].rstrip("]")
    return int(inside) if inside.isdigit() else 2


def pool_names(config: FreshetConfig) -> dict[str, str]:
    """Valuable table → its pool, `q<rank>-<table>`, rank 00 for the highest inherited priority.
    Spark's fair scheduler breaks ties between pools (two idle pools both at 0 running tasks) by
    the pool's *name* (`FairSchedulingAlgorithm`: `s1.name < s2.name`), so the names sort by
    priority: with `q-<table>` names, `d_agg` (20) would win a free core over `d_join` (50)."""
    ip, valuable = tuning.inherited(config), tuning.is_valuable(config)
    ranked = [t.name for t in sorted(config.tables, key=lambda t: -ip[t.name]) if valuable[t.name]]  # ties: config order
    return {t: f"q{i:02d}-{t}" for i, t in enumerate(ranked)}


def pools(config: FreshetConfig) -> list[tuning.Pool]:
    """One pool per valuable table, weight = its inherited priority, minShare 1 (the cores for
    the top one), and the FIFO `bulk` pool of weight 1 and minShare 0. A pool below its minShare
    goes before every pool at or above it, so an idle valuable pool gets the next free core before
    the bulk pool (with minShare 0 everywhere, the weights would only count between pools that
    already run tasks, and idle pools would be served in name order)."""
    ip, names = tuning.inherited(config), pool_names(config)
    top = next(iter(names))
    out = [tuning.Pool(name, weight=max(1, round(ip[t])), min_share=_cores(config) if t == top else 1)
           for t, name in names.items()]
    return [*out, tuning.Pool(BULK_POOL, weight=1)]


def plans(config: FreshetConfig) -> dict[str, QueryPlan]:
    """Each table's trigger, pool and maxFilesPerTrigger."""
    names = pool_names(config)
    bursting = {s.table for s in from_env().streams if s.bursts}
    return {t: QueryPlan(trigger=VALUABLE_TRIGGER if t in names else BULK_TRIGGER, pool=names.get(t, BULK_POOL),
                         max_files=MAX_FILES if t in bursting else None)
            for t in tuning.inherited(config)}


def spark_conf() -> dict[str, str]:
    """Spark settings on top of every contestant's (the allocation file is added at start)."""
    return {"spark.sql.files.maxPartitionBytes": tuning.MAX_PARTITION_BYTES}


def settings(config: FreshetConfig) -> dict[str, Any]:
    """What this contestant runs with, for the benchmark's JSON."""
    return {"spark_conf": spark_conf(), "pools": tuning.pools_settings(pools(config)),
            "queries": {t: {"trigger": p.trigger, "pool": p.pool, "maxFilesPerTrigger": p.max_files}
                        for t, p in plans(config).items()},
            "inherited_priorities": tuning.inherited(config), "valuable_at_or_above": tuning.VALUABLE}


def tuned_config(config: FreshetConfig, work: Path) -> FreshetConfig:
    """`config` with this peer's Spark settings and its pools' allocation file (written to `work`)."""
    allocation = tuning.write_allocation(pools(config), work)
    conf = {**config.spark.conf, **spark_conf(), "spark.scheduler.allocation.file": allocation.as_uri()}
    return config.model_copy(update={"spark": config.spark.model_copy(update={"conf": conf})})


def main(argv: list[str] | None = None) -> int:
    config, ready, work = peer_args(__doc__, argv)
    config = tuned_config(config, work)

    from warehouse.lake.session import get_spark

    spark = get_spark(config.spark)
    return serve(start_queries(spark, config, work / "checkpoints", plans(config).__getitem__), ready)


if __name__ == "__main__":
    raise SystemExit(main())
