"""Priority inheritance over view hierarchies (§3.3).

Source tables inherit the priority of the tables that depend on them, so a high-priority view is
not starved behind a low-priority source:

- none:     Ip_i = p_i
- sum:      Ip_i = p_i + Σ p_d over all (transitive) dependents d, each counted once
- max:      Ip_i = max(p_i, max p_d over all dependents)
- max-plus: Ip_i = max(p_i, K · max Ip_d over direct dependents) — applied recursively, so each
            level up the DAG multiplies by K, raising base tables above long chains (§3.3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["inherit"]


def inherit(
    priority: Mapping[str, float],
    dependents: Mapping[str, Sequence[str]],
    order: Sequence[str],
    mode: str = "max",
    k: float = 2.0,
) -> dict[str, float]:
    """Inherited priorities Ip_i. `order` is topological (sources before dependents)."""
    if mode == "none":
        return dict(priority)
    if mode == "sum":
        out = {}
        for t in order:
            seen: set[str] = set()
            stack = list(dependents[t])
            while stack:
                d = stack.pop()
                if d not in seen:
                    seen.add(d)
                    stack.extend(dependents[d])
            out[t] = priority[t] + sum(priority[d] for d in seen)
        return out
    ip: dict[str, float] = {}
    for t in reversed(order):  # dependents first
        below = [ip[d] for d in dependents[t]]
        if mode == "max":
            ip[t] = max([priority[t], *below])
        elif mode == "max-plus":
            ip[t] = max([priority[t], *(k * b for b in below)])
        else:
            raise ValueError(f"unknown inheritance mode {mode!r} (none, sum, max, max-plus)")
    return ip
