"""What the Scheduler answers without changing anything (warehouse.scheduler): its snapshot for
metrics, the API and the simulator, Σ p_i ∫ S_i dτ (§2.3), its cost models, its track plan and what
another setting's partitioner would make of the same profiles (§3.2). The state it reads is the
Scheduler's, declared here; only the Scheduler's door changes it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from warehouse.blueprint import Blueprint, plan_profiles
from warehouse.stats import SchedulerStats, TrackPlanStats, plan_row, snapshot
from warehouse.table import Table, base_periods

if TYPE_CHECKING:
    from tracks.plan import TrackPlan
    from warehouse.board import TrackBoard
    from warehouse.config import SchedulerConfig
    from warehouse.upkeep import Upkeep

__all__ = ["Views"]


class Views:
    """The Scheduler's queries (a base of `warehouse.scheduler.Scheduler`, which owns the state)."""

    plan: TrackPlan
    _tables: dict[str, Table]
    _by_idx: list[Table]
    _board: TrackBoard
    _upkeep: Upkeep
    _bp: Blueprint | None
    _first: Any
    _initial: Any
    _now: float
    _events: int
    _released: int
    _completed: int
    _failed: int
    _late: int
    _duplicates: int

    def refresh_mode(self, table: str) -> tuple[str, str]:
        """("full" | "incremental", why) for a derived table (`freshet validate` shows it)."""
        t = self._tables[table]
        return t.derived.describe() if t.derived is not None else ("append", "a base table appends what arrives")

    @property
    def blueprint(self) -> Blueprint | None:
        """The blueprint the tables are laid out from (warehouse.blueprint): immutable; a reload
        prepares its own against it off the loop."""
        return self._bp

    def costs(self) -> dict[str, tuple[float, float]]:
        """Each table's cost model (α, β) now (§2.4): a reload plans its tracks ahead from them
        (warehouse.blueprint). A query."""
        return {t.name: (t.cost.alpha, t.cost.beta) for t in self._by_idx}

    def weighted_staleness(self, now: float) -> float:
        """Σ_i p_i ∫ S_i dτ from the start (or each table's first load) to `now` (§2.3)."""
        return sum(t.priority * t.meter.integral(now) for t in self._by_idx)

    def stats(self, now: float) -> SchedulerStats:
        """A frozen snapshot for metrics, the API and the simulator."""
        now = max(now, self._now)
        return snapshot(self._by_idx, self._board, self.plan, self._upkeep.stats, now,  # Σ p_i ∫ S_i dτ: of the rows
                        recovered=self._initial is None, released=self._released, completed=self._completed,
                        failed=self._failed, events=self._events, rollout=getattr(self._first, "stats", None))

    def plan_stats(self) -> TrackPlanStats:
        return plan_row(self.plan)

    def plan_for(self, sc: SchedulerConfig) -> TrackPlan:
        """The track plan `sc`'s partitioner makes from the profiles the plan in force was made from (§3.2)."""
        return plan_profiles(sc, [t.profile for t in self._by_idx], base_periods(self._by_idx))[0]

    @property
    def late_partitions(self) -> int:
        """Partitions that arrived at or below their table's safe freshness (loaded anyway)."""
        return self._late

    @property
    def duplicate_partitions(self) -> int:
        return self._duplicates
