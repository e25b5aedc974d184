"""The table DAG (§2.1): ancestors, dependents, topological order, periods (§2.4)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from warehouse.config import FreshetConfig

__all__ = ["Dag"]


@dataclass(frozen=True, slots=True)
class Dag:
    """Sources point from a table to the tables it reads; dependents point the other way."""

    sources: Mapping[str, tuple[str, ...]]
    dependents: Mapping[str, tuple[str, ...]]
    order: tuple[str, ...]  # topological: every table after its sources
    base_period: Mapping[str, float]  # base tables: the stream's period

    @classmethod
    def from_config(cls, cfg: FreshetConfig) -> Dag:
        streams = {s.name: s for s in cfg.streams}
        sources = {t.name: tuple(t.sources) for t in cfg.tables}
        periods = {t.name: streams[t.stream].period for t in cfg.tables if t.stream is not None}
        return cls.build(sources, periods)

    @classmethod
    def build(cls, sources: Mapping[str, Sequence[str]], base_period: Mapping[str, float]) -> Dag:
        names = list(sources)
        deps: dict[str, list[str]] = {n: [] for n in names}
        for n in names:
            for s in sources[n]:
                deps[s].append(n)
        # Kahn's algorithm, stable in declaration order
        indeg = {n: len(sources[n]) for n in names}
        ready = deque(n for n in names if indeg[n] == 0)
        order: list[str] = []
        while ready:
            n = ready.popleft()
            order.append(n)
            for d in deps[n]:
                indeg[d] -= 1
                if indeg[d] == 0:
                    ready.append(d)
        if len(order) != len(names):
            raise ValueError("cycle in the table DAG among " + ", ".join(sorted(set(names) - set(order))))
        return cls(
            sources={n: tuple(sources[n]) for n in names},
            dependents={n: tuple(deps[n]) for n in names},
            order=tuple(order),
            base_period=dict(base_period),
        )

    def ancestors(self, table: str) -> set[str]:
        """Tables that directly or indirectly serve as sources of `table` (§2.1)."""
        return _reach(table, self.sources)

    def descendants(self, table: str) -> set[str]:
        """Tables directly or indirectly sourced from `table` (the paper's "dependents", §2.1)."""
        return _reach(table, self.dependents)

    def periods(self) -> dict[str, float]:
        """P_i: a base table's stream period; a derived table's is the max over its ancestors (§2.4)."""
        out: dict[str, float] = {}
        for t in self.order:
            if not self.sources[t]:
                out[t] = self.base_period.get(t, 0.0)
            else:
                out[t] = max(out[s] for s in self.sources[t])
        return out


def _reach(table: str, edges: Mapping[str, tuple[str, ...]]) -> set[str]:
    out: set[str] = set()
    stack = list(edges[table])
    while stack:
        t = stack.pop()
        if t not in out:
            out.add(t)
            stack.extend(edges[t])
    return out
