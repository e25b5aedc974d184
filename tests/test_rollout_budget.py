"""Rollout's event budget (warehouse.rollout.covered): the look-ahead is shortened to what a
candidate's share of the budget is expected to cover, counting the jobs the tracks finish."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from warehouse.rollout import reach

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_scheduler import run  # noqa: E402


def test_the_look_ahead_the_budget_covers_by_hand() -> None:
    """Events in h seconds: arrive·h partitions and min(drain·h, ready + release·h) finished jobs."""
    assert reach(10.0, 100.0, arrive=1.0, release=1.0, ready=5.0, drain=2.0) == 10.0  # 10 + 15 fit
    # the tracks finish 4 a second while there is work: 30 events in 30 / (1 + 4) = 6 s
    assert reach(100.0, 30.0, arrive=1.0, release=0.5, ready=50.0, drain=4.0) == pytest.approx(6.0)
    # 10 jobs ready, then one every 2 s: the tracks wait for work after 10 / 3.5 s; 13.3 + 16.7 = 30
    assert reach(100.0, 30.0, arrive=1.0, release=0.5, ready=10.0, drain=4.0) == pytest.approx(40 / 3)
    assert reach(100.0, 30.0, arrive=0.0, release=0.0, ready=40.0, drain=float("inf")) == 0.0  # nothing fits


def test_a_saturated_warehouse_weighs_its_rounds_within_a_small_budget() -> None:
    """300 base tables on 8 busy tracks (scripts/bench_scheduler.py's workload: every track busy,
    2-3 s jobs), 60 simulated events a decision: the horizon the budget covers counts the jobs the
    tracks finish, so few rounds run past their share — counting a finished job per period of each
    table instead, most did (1,351 of 1,408 rounds at 1,000 tables) — and some rounds are overridden."""
    got = run(300, 8, 3000, policy="rollout", rollout={"budget_events": 60})["rollout"]
    assert got.decisions > 300 and got.fallbacks <= 0.1 * got.decisions and got.overrides > 0
