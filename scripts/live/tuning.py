"""What the tuned peers are told: every table's inherited priority, which work is
valuable and which is bulk, and the fair-scheduler allocation file they run with.

A Spark engineer who is handed the priorities does what Freshet does with them before any
scheduling: a source inherits the priority of what is built from it (§3.3, `max`, Freshet's
default), so `b04` (p = 8) is worth 40 because `d_rollup` reads it. On this warehouse the
inherited priorities fall into two groups with a gap between them: 20–100 (`b00`–`b04` and the
three derived tables) and 1–5 (`b05`–`b11`, which all burst). The first group is *valuable*, the
second *bulk*. `b03` and `b04` burst too, but they feed the roll-ups of priority 20 and 40: a user
who set those priorities would not put their feeds behind the p = 1 loads.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from policies.inheritance import inherit
from warehouse.config import FreshetConfig
from warehouse.dag import Dag

__all__ = ["MAX_PARTITION_BYTES", "VALUABLE", "Pool", "allocation_xml", "inherited", "is_valuable", "periods", "pools_settings",
           "write_allocation"]

VALUABLE = 20.0  # inherited priority at or above which a table's work is valuable; below it, bulk
# spark.sql.files.maxPartitionBytes for the tuned peers (default 128 MB): a burst partition (80–240 MB
# of parquet) is read in 5–15 tasks of ~1 s instead of one or two long ones, so the fair scheduler
# has task boundaries at which to hand a core to a valuable pool
MAX_PARTITION_BYTES = str(16 * 1024 * 1024)


def inherited(config: FreshetConfig) -> dict[str, float]:
    """Ip_i with `max` inheritance over the config's DAG (§3.3)."""
    dag = Dag.from_config(config)
    return inherit({t.name: t.priority for t in config.tables}, dag.dependents, dag.order, "max")


def is_valuable(config: FreshetConfig) -> dict[str, bool]:
    """Table → valuable (inherited priority ≥ VALUABLE) or bulk."""
    return {t: p >= VALUABLE for t, p in inherited(config).items()}


def periods(config: FreshetConfig) -> dict[str, float]:
    """P_i: a base table's stream period, a derived table's the longest of its ancestors' (§2.4)."""
    return Dag.from_config(config).periods()


@dataclass(frozen=True, slots=True)
class Pool:
    """One `<pool>` of Spark's fair-scheduler allocation file (docs: job-scheduling.html)."""

    name: str
    weight: int
    min_share: int = 0
    mode: str = "FIFO"  # how the pool's own jobs share its slots: FIFO or FAIR


def allocation_xml(pools: list[Pool]) -> str:
    body = "".join(f'  <pool name="{p.name}"><schedulingMode>{p.mode}</schedulingMode><weight>{p.weight}</weight>'
                   f"<minShare>{p.min_share}</minShare></pool>\n" for p in pools)
    return f'<?xml version="1.0"?>\n<allocations>\n{body}</allocations>\n'


def write_allocation(pools: list[Pool], directory: str | Path | None = None) -> Path:
    """Write the allocation file (under `directory`, else the temp dir); its path for
    `spark.scheduler.allocation.file`."""
    d = Path(directory) if directory is not None else Path(tempfile.gettempdir())
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"fairscheduler-{os.getpid()}.xml"
    path.write_text(allocation_xml(pools))
    return path


def pools_settings(pools: list[Pool]) -> list[dict[str, object]]:
    """The pools as JSON-able dicts (for a contestant's recorded settings)."""
    return [asdict(p) for p in pools]
