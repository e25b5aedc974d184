"""Bulk loads and the cores they leave (docs/benchmarks.md): which job is bulk, how many
may run at once, and the fair-scheduler pool a job's Spark work runs in.

Tracks bound how many jobs run at once (§3.2), not what they cost the cores under them. Two bulk
loads started together on a two-core machine take every task slot, and the valuable tables' small
jobs beside them wait for slots whatever the pools say. So:

- a job is **bulk** when its estimated cost E_i(n) (§2.4) exceeds a threshold: `scheduler.bulk_cost`,
  or with `auto` `BULK_FACTOR` × the median over tables of E_j(P_j), the cost of an ordinary job
  (one period of data) — a burst, a backlog after overload, a table's first load;
- at most `scheduler.bulk_limit` bulk jobs run at once (`auto`: one fewer than the cores, so one
  core stays for the small jobs — the N of a `local[N]` master, or `spark.cores`: what the config
  says, or for `local[*]` the machine's, which the daemon writes there when it loads the config;
  a cluster or Spark Connect whose `spark.cores` is not said leaves it uncapped). The limit is a
  function of the config alone, so the simulator given the daemon's config decides as it does.
  Every job counts, and every job obeys it — update, recompute, maintenance, an operator's
  refresh: a bulk job over the limit waits (in its queue, or due); a small job takes the track.
- each job's Spark work runs in a fair-scheduler pool weighted by its table's inherited priority
  Ip (§3.3), relative to the least priority of the warehouse, in powers of two; a bulk job in the
  pool `freshet-bulk` of weight 1, so a valuable small job beside it gets the task slots as they
  free up. Spark serves first a pool below its minShare and breaks ties by pool name, so the
  priority pools have minShare 1 (the bulk pool 0) and names that sort heaviest first
  (`freshet-00-p1024` … `freshet-10-p1`): a valuable pool running nothing takes the next free
  slot, ahead of the bulk pool and of lighter pools.

Pure: no Spark, no clock.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable

__all__ = [
    "BULK_FACTOR",
    "BULK_POOL",
    "MAX_WEIGHT",
    "bulk_limit",
    "bulk_threshold",
    "pool_for",
    "pool_weights",
]

BULK_FACTOR = 4.0  # `bulk_cost: auto`: a job costing more than this many ordinary jobs is bulk
MAX_WEIGHT = 1024  # the heaviest priority pool (2^10 times the least valuable table's)
BULK_POOL = "freshet-bulk"
_LOCAL = re.compile(r"^local\[(\d+)(?:\s*,\s*\d+)?\]$")


def bulk_limit(setting: int | str | None, master: str | None, cores: int | None = None) -> int | None:
    """How many bulk jobs may run at once: `setting`, or for `auto` the cores less one (at least
    1) — `cores` (the config's `spark.cores`: said, or `local[*]`'s resolved by the shell, which
    knows the machine), else N of a `local[N]` master; None: no limit (the cores are unknown)."""
    if setting is None:
        return None
    if setting != "auto":
        return int(setting)
    if cores is None:
        m = _LOCAL.match((master or "").strip())
        cores = int(m.group(1)) if m else None
    return max(1, cores - 1) if cores is not None else None


def bulk_threshold(setting: float | str, ordinary: Iterable[float]) -> float:
    """The estimated cost above which a job is bulk: `setting` seconds, or for `auto`
    BULK_FACTOR × the median of the tables' E_j(P_j) (`ordinary`); inf when there is none."""
    if setting != "auto":
        return float(setting)
    costs = [c for c in ordinary if c > 0 and math.isfinite(c)]
    return BULK_FACTOR * statistics.median(costs) if costs else math.inf


def _weight(priority: float, least: float) -> int:
    """2^round(log2(Ip / least)) in [1, MAX_WEIGHT]."""
    if priority <= 0 or least <= 0 or not math.isfinite(priority):
        return 1
    return int(min(MAX_WEIGHT, max(1, 2 ** round(math.log2(priority / least)))))


_TOP = int(math.log2(MAX_WEIGHT))


def _name(weight: int) -> str:
    """`freshet-<rank>-p<weight>`, the rank 00 for MAX_WEIGHT: name order is weight order, heaviest
    first (Spark's fair scheduler breaks ties between pools by name)."""
    return f"freshet-{_TOP - int(math.log2(weight)):02d}-p{weight}"


def pool_weights() -> dict[str, int]:
    """Every pool Freshet declares (name → weight): freshet-00-p1024, freshet-01-p512, …
    freshet-10-p1, and the bulk pool (weight 1)."""
    out = {_name(2 ** i): 2 ** i for i in range(_TOP, -1, -1)}
    out[BULK_POOL] = 1
    return out


def pool_for(priority: float, least: float, bulk: bool) -> str:
    """The pool of a job of inherited priority `priority` in a warehouse whose least priority is
    `least`; a bulk job's is BULK_POOL."""
    return BULK_POOL if bulk else _name(_weight(priority, least))
