"""The phase oracle's mechanics (scripts/tuner_oracle.py): the phases it reads from a
workload's slowdown and bursts, and its switches at their boundaries through Reconfigure."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts import tuner_oracle as oracle  # noqa: E402
from sim.simulator import Simulation  # noqa: E402
from sim.workload import config_of  # noqa: E402
from warehouse.events import Reconfigure  # noqa: E402

H = 3600.0
EDF = {"policy": "edf-p", "partitioner": "edf-partitioned", "aggressive": False, "chop": None}
MB = {"policy": "max-benefit", "partitioner": "global", "chop": 3.0}


def _data(sim: dict) -> dict:
    return {"streams": [{"name": "a", "period": 120.0}, {"name": "b", "period": 1800.0}],
            "tables": [{"name": "ta", "stream": "a", "priority": 10.0, "cost": {"alpha": 40.0, "beta": 0.1}},
                       {"name": "tb", "stream": "b", "priority": 1.0, "cost": {"alpha": 300.0, "beta": 0.1}}],
            "scheduler": {"tracks": 1, "autotune": "off"}, "sim": {"b": 0.5, **sim}}


def test_phases_follow_the_slowdown_and_each_burst_with_its_offset():
    slow = config_of(_data({"slowdown": {"factor": 2.0, "normal": 3 * H, "slow": 2 * H}}))
    assert oracle.phases(slow, 11 * H) == [(0.0, (False,)), (3 * H, (True,)), (5 * H, (False,)),
                                           (8 * H, (True,)), (10 * H, (False,))]
    turns = config_of(_data({"bursts": [{"tables": ["ta"], "factor": 4.0, "normal": "6h", "slow": "6h",
                                         "offset": "6h"},
                                        {"tables": ["tb"], "factor": 4.0, "normal": "6h", "slow": "6h"}]}))
    got = oracle.phases(turns, 20 * H)
    assert got == [(0.0, (True, False)), (6 * H, (False, True)), (12 * H, (True, False)), (18 * H, (False, True))]
    assert oracle.phase_name(turns, got[1][1]) == "burst tb"


def test_a_plan_switches_once_at_each_boundary_where_the_setting_changes(monkeypatch):
    data = _data({})
    seen: list[tuple[float, str]] = []
    real = Simulation._handle

    def spy(self, event, now, count=True):
        if isinstance(event, Reconfigure):
            seen.append((now, event.config.scheduler.policy))
        return real(self, event, now, count)

    monkeypatch.setattr(Simulation, "_handle", spy)
    until = 6 * H
    mixed = oracle.run(data, 1, until, [(0.0, MB), (2 * H, MB), (3 * H, EDF), (4 * H, MB)])
    assert seen == [(3 * H, "edf-p"), (4 * H, "max-benefit")]
    seen.clear()
    static = oracle.run(data, 1, until, [(0.0, MB), (3 * H, MB)])
    assert seen == []
    assert static == oracle.run(data, 1, until, [(0.0, MB)])  # same seed, no switch: the same run
    assert mixed != static
