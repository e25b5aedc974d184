"""scripts/tuner_screen.py: the screen's replays run on to their end, the run's decisions unchanged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sim.autotune as autotune  # noqa: E402
from scripts import tuner_screen  # noqa: E402
from scripts.tuner_cost import point  # noqa: E402
from sim.selftune import attach  # noqa: E402
from sim.simulator import simulate  # noqa: E402
from warehouse.config import parse_config  # noqa: E402


def test_the_figures_of_two_made_up_replays():
    cur = [float(k + 1) for k in range(autotune.CHECKS - 1)]  # the setting in force: 30 in all
    worse = {"trail": [1.2 * c for c in cur], "total": 36.0, "above": 25.5, "floor": [0.0] * len(cur)}
    better = {"trail": [0.5 * c for c in cur], "total": 15.0, "above": 25.5, "floor": [0.0] * len(cur)}
    out = tuner_screen.report([{"current": cur, "total": 30.0, "replays": [worse, better]}])
    assert tuner_screen.stop(worse) == 22 and tuner_screen.stop(better) is None  # 1.2·22 is the first past 25.5
    assert out["replays"] == 2 and out["through"] == 1
    assert out["checkpoints_run"] == pytest.approx((22 + 24) / 48, abs=1e-3)
    assert out["spread"]["0-0.8"] == 1 and out["spread"]["1.15-inf"] == 1
    rule = {(r["k"], r["ratio"]): r for r in out["rules"]}
    assert rule[(4, 1.1)] == {"k": 4, "ratio": 1.1, "checkpoints": round((4 + 24) / 46, 3), "lost": 0}
    assert rule[(4, 1.3)]["checkpoints"] == 1.0  # 1.2× never reaches 1.3×
    assert out["floor_above"] == 0


def test_a_tuned_run_keeps_its_decisions_and_the_floor_stays_under_every_rest(capsys):
    cfg = parse_config(point("fanout", 1.2), source="fanout:1.2")
    plain = simulate(cfg, seed=1, events=1000, tuner=attach).to_json()
    assert tuner_screen.main(["--point", "fanout:1.2", "--events", "1000"]) == 0
    assert autotune.score is tuner_screen.SCORE  # put back
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert out["relative_lateness"] == plain["relative_lateness"]
    assert out["autotune"]["simulations"] == plain["autotune"]["simulations"]
    assert out["replays"] > 50 and out["floor_above"] == 0
    assert sum(out["spread"].values()) == out["replays"]
