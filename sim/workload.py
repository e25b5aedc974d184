"""Workloads for the simulator (§4.1): the paper's job sets, built as ordinary configurations.

A workload is a `FreshetConfig` — the same schema the daemon reads (docs/warehouse.md). The paper's
job sets are built programmatically as plain dicts and validated with `parse_config`, so a sweep
point can be written to YAML and run again with `freshet sim run --config`.

Utilization (how the experiments' x-axes are normalised — the paper leaves it open) is offered
work over capacity, the usual queueing meaning, so U ≥ 1 is overload whatever the slowdowns:

    U = Σ_i E_i(P_i)/P_i · (b + ½) · m / N

Σ E_i(P_i)/P_i is the work each second of data brings if every period is loaded in one job; (b + ½)
is the mean of the uniform draw [b, 1+b]; m = (normal + slow) / (normal + slow/S) is the factor by
which the normal/slow cycle shrinks a track's capacity (a track does 1/S of normal work per second
while slow); N is the number of tracks. P_i of a derived table is the largest period of its
ancestors (§2.4). For Table 2 (S=3, equal normal and slow periods) m = 1.5. Tables named in
`sim.bursts` (per-class phases) count β times its mean over the burst cycle.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from warehouse.config import FreshetConfig, parse_config

__all__ = [
    "TableClass",
    "build_workload",
    "burst_factor",
    "burst_time",
    "config_of",
    "mean_slowdown",
    "periods",
    "scale_costs",
    "true_costs",
    "utilization",
    "with_utilization",
]


@dataclass(frozen=True)
class TableClass:
    """`count` identical chains of tables: a base table fed by its own stream, then `depth - 1`
    derived tables each reading the one before (depth 1 = base tables only, §4.5, §4.7).

    `priorities[level]` is the priority at each level of the chain (a single number = all levels).
    """

    count: int
    period: float = 100.0
    priorities: tuple[float, ...] | float = 1.0
    alpha: float = 1.0
    beta: float = 0.1
    depth: int = 1
    name: str = "t"

    def priority(self, level: int) -> float:
        if isinstance(self.priorities, int | float):
            return float(self.priorities)
        return float(self.priorities[min(level, len(self.priorities) - 1)])


@dataclass(frozen=True)
class _Defaults:
    scheduler: Mapping[str, Any] = field(default_factory=dict)
    sim: Mapping[str, Any] = field(default_factory=dict)


def build_workload(
    classes: Sequence[TableClass],
    *,
    scheduler: Mapping[str, Any] | None = None,
    sim: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The config dict for a set of table classes (Table 2 defaults: α=1, β=0.1, P=100).

    Names: stream `<class>_s<i>`, base table `<class><i>`, derived levels `<class><i>_d<level>`.
    Every table carries its own `cost`, which in the simulator is its true E(n).
    """
    streams: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []
    for cls in classes:
        for i in range(cls.count):
            stream = f"{cls.name}_s{i}"
            streams.append({"name": stream, "period": cls.period})
            prev = f"{cls.name}{i}"
            cost = {"alpha": cls.alpha, "beta": cls.beta}
            tables.append({"name": prev, "stream": stream, "priority": cls.priority(0), "cost": dict(cost)})
            for level in range(1, cls.depth):
                name = f"{cls.name}{i}_d{level}"
                tables.append(
                    {"name": name, "sources": [prev], "sql": f"SELECT * FROM {prev}",
                     "priority": cls.priority(level), "cost": dict(cost)}
                )
                prev = name
    return {
        "streams": streams,
        "tables": tables,
        "scheduler": dict(scheduler or {}),
        "sim": dict(sim or {}),
    }


def periods(cfg: FreshetConfig) -> dict[str, float]:
    """P_i: the stream period of a base table; the largest ancestor period of a derived one (§2.4)."""
    out: dict[str, float] = {}
    by_name = {t.name: t for t in cfg.tables}

    def period(name: str) -> float:
        if name not in out:
            t = by_name[name]
            out[name] = cfg.stream(t.stream).period if t.stream else max(period(s) for s in t.sources)
        return out[name]

    for t in cfg.tables:
        period(t.name)
    return out


def true_costs(cfg: FreshetConfig) -> dict[str, tuple[float, float]]:
    """(α_i, β_i) per table: its `cost`, else the `sim` defaults (§4.1)."""
    return {t.name: (cfg.cost_prior(t).alpha, cfg.cost_prior(t).beta) for t in cfg.tables}


def mean_slowdown(cfg: FreshetConfig) -> float:
    """m: how much the normal/slow cycle shrinks capacity, (normal + slow) / (normal + slow/S) (§4.1)."""
    sd = cfg.sim.slowdown
    if sd.slow <= 0 or sd.factor == 1.0:
        return 1.0
    return (sd.normal + sd.slow) / (sd.normal + sd.slow / sd.factor)


def burst_factor(cfg: FreshetConfig, table: str) -> float:
    """The mean factor by which `sim.bursts` multiply a table's β: Π (normal + factor·slow) / cycle."""
    out = 1.0
    for bu in cfg.sim.bursts:
        if table in bu.tables:
            out *= (bu.normal + bu.factor * bu.slow) / (bu.normal + bu.slow)
    return out


def burst_time(t: float, normal: float, cycle: float) -> float:
    """Time in bursts from 0 to `t` of a cycle `normal` then burst (`cycle − normal`), started at 0
    (`sim.bursts`; also the slow time of the normal/slow cycle, §4.1)."""
    k, r = divmod(t, cycle)
    return k * (cycle - normal) + max(0.0, r - normal)


def utilization(cfg: FreshetConfig, tracks: int | None = None) -> float:
    """U = Σ E_i(P_i)/P_i · (b + ½) · m / N (see the module docstring; β_i times `burst_factor`)."""
    per = periods(cfg)
    costs = true_costs(cfg)
    load = sum((a + b * per[name] * (burst_factor(cfg, name) if cfg.sim.bursts else 1.0)) / per[name]
               for name, (a, b) in costs.items())
    n = tracks if tracks is not None else cfg.scheduler.tracks
    return load * (cfg.sim.b + 0.5) * mean_slowdown(cfg) / n


def scale_costs(data: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """A copy of a config dict with every α and β (and the `sim` defaults) multiplied by `factor`."""
    out = copy.deepcopy(dict(data))
    for t in out.get("tables", []):
        if t.get("cost") is not None:
            t["cost"] = {"alpha": float(t["cost"].get("alpha", 1.0)) * factor,
                         "beta": float(t["cost"].get("beta", 0.1)) * factor}
    sim = dict(out.get("sim") or {})
    sim["alpha"] = float(sim.get("alpha", 1.0)) * factor
    sim["beta"] = float(sim.get("beta", 0.1)) * factor
    out["sim"] = sim
    return out


def with_utilization(data: Mapping[str, Any], target: float) -> dict[str, Any]:
    """Scale α and β so that `utilization` equals `target` (§4.1, second type of experiment)."""
    if target <= 0:
        raise ValueError(f"target utilization must be positive, got {target}")
    base = utilization(parse_config(data))
    if base <= 0:
        raise ValueError("the workload has no work (all α and β are zero)")
    return scale_costs(data, target / base)


def config_of(data: Mapping[str, Any]) -> FreshetConfig:
    """Validate a workload dict (errors name the table or stream)."""
    return parse_config(data, source="<workload>")
