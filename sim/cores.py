"""Cores shared by the jobs running at once (`sim.cores`): the simulator's model of one
Spark application's task slots under the fair scheduler, so that what the bulk limit and the
priority pools (policies.bulk) do to the small jobs beside bulk loads shows in a simulation.

A job's drawn duration (§4.1) is its time alone. Alone, a bulk job uses every core (its tasks run
in parallel), any other job one. Running together, the cores are shared as Spark's fair scheduler
shares task slots: among pools by weight (`policies.bulk.pool_for`: the inherited priority's pool,
or `freshet-bulk`), each pool taking at most what its jobs can use, the rest going to the others;
inside a priority pool equally (FAIR), inside the bulk pool first come first served (FIFO). A job
given `a` of the `c` cores it can use progresses at `a / c` of its speed alone; every start and
finish re-shares. Tasks are not modelled: a slot moves at once, not when a task ends.

Off by default (`sim.cores` null): jobs then run for their drawn durations whatever else runs, as
in the paper's simulator; a replay of measured durations leaves it off, since they hold the
sharing already.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy

from policies.bulk import BULK_POOL, pool_for, pool_weights
from warehouse.events import StartJob

__all__ = ["Cores", "fair_share"]

_EPS = 1e-9
_WEIGHTS = pool_weights()


def fair_share(items: list[tuple[object, float, float]], total: float) -> dict[object, float]:
    """Water-filling: `total` shared among (key, weight, cap) by weight, none above its cap, what
    a capped one leaves going to the others."""
    alloc: dict[object, float] = {}
    active, left = list(items), total
    while active and left > _EPS:
        weight = sum(w for _, w, _ in active)
        capped = [x for x in active if x[2] <= left * x[1] / weight]
        if not capped:
            for k, w, _ in active:
                alloc[k] = left * w / weight
            return alloc
        for k, _, c in capped:
            alloc[k] = c
            left -= c
        active = [x for x in active if x not in capped]
    for k, _, _ in active:
        alloc[k] = 0.0
    return alloc


@dataclass(slots=True)
class _Running:
    job: StartJob
    pool: str
    demand: float  # cores it can use
    left: float  # seconds of work left at its speed alone
    started: float
    order: int
    speed: float = 0.0


class Cores:
    """The running jobs of one simulation and their shares of `n` cores. `by_priority` False: one
    weight-1 pool per track, the pools Freshet used before its bulk limit (for comparisons)."""

    by_priority = True

    def __init__(self, env: simpy.Environment, n: int, least: float,
                 finish: Callable[[StartJob, float], None]) -> None:
        self.env, self.n, self.least, self.finish = env, float(n), least, finish
        self.running: dict[int, _Running] = {}
        self._at = env.now  # when `left` was last brought up to date
        self._version = 0
        self._order = 0

    def start(self, job: StartJob, alone: float) -> None:
        """`job` starts now; it would take `alone` seconds by itself."""
        self._advance()
        self._order += 1
        demand = self.n if job.bulk else min(1.0, self.n)
        pool = pool_for(job.priority, self.least, job.bulk) if self.by_priority else f"track-{job.track}"
        self.running[job.job_id] = _Running(job, pool, demand, max(alone, 0.0), self.env.now, self._order)
        self._reshare()

    def _advance(self) -> None:
        dt = self.env.now - self._at
        if dt > 0:
            for r in self.running.values():
                r.left = max(0.0, r.left - dt * r.speed)
        self._at = self.env.now

    def _reshare(self) -> None:
        """Shares by pool, then inside each pool; wake up at the next job's end."""
        pools: dict[str, list[_Running]] = {}
        for r in self.running.values():
            pools.setdefault(r.pool, []).append(r)
        by_pool = fair_share([(p, float(_WEIGHTS.get(p, 1)), sum(r.demand for r in rs)) for p, rs in pools.items()],
                             self.n)
        for p, rs in pools.items():
            got = by_pool.get(p, 0.0)
            if p == BULK_POOL:  # FIFO inside: the earliest first
                for r in sorted(rs, key=lambda r: r.order):
                    a = min(r.demand, got)
                    got -= a
                    r.speed = a / r.demand
            else:
                share = fair_share([(r.job.job_id, 1.0, r.demand) for r in rs], got)
                for r in rs:
                    r.speed = share[r.job.job_id] / r.demand
        self._version += 1
        soon = min((r.left / r.speed for r in self.running.values() if r.speed > _EPS), default=None)
        if soon is not None:
            version = self._version
            self.env.timeout(soon).callbacks.append(lambda _ev: self._tick(version))

    def _tick(self, version: int) -> None:
        if version != self._version:
            return  # re-shared since: a later wake-up stands
        self._advance()
        done = sorted((r for r in self.running.values() if r.left <= 1e-7),
                      key=lambda r: r.order)
        for r in done:
            del self.running[r.job.job_id]
        self._reshare()
        for r in done:
            self.finish(r.job, self.env.now - r.started)
