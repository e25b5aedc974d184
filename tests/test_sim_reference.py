"""The minimal reference simulator (scripts/sim_reference.py) runs the same model as the simulator
(§4.1): the same jobs and weighted staleness, to the bit, on the workloads `scripts/bench_sim.py`
times; it names what it does not model. The real Scheduler in SimPy; no Spark."""

from __future__ import annotations

import pytest

from scripts.sim_reference import run_reference
from sim.simulator import Simulation, prepare
from sim.workload import TableClass, build_workload, config_of, with_utilization

BENCH = {"policy": "max-benefit", "partitioner": "proportional", "k": 10, "allocation": "all",
         "aggressive": True, "inheritance": "max", "chop": 3}
SLOW = {"slowdown": {"factor": 3, "normal": 1000, "slow": 1000}}


@pytest.mark.parametrize("tables,tracks,u", [(30, 4, None), (30, 4, 0.9), (60, 8, 1.1)])
def test_the_reference_simulator_runs_the_same_model(tables, tracks, u):
    data = build_workload([TableClass(tables)], scheduler={"tracks": tracks, **BENCH}, sim=SLOW)
    if u is not None:
        data = with_utilization(data, u)
    cfg = prepare(config_of(data), 3)
    st = Simulation(cfg, seed=3).run(events=6000)
    ref = run_reference(cfg, 3, 6000)
    assert (ref["events"], ref["jobs"], ref["horizon"]) == (st.events, st.jobs, st.horizon)
    assert ref["ws"] == st.weighted_staleness  # to the bit: the same jobs at the same times
    assert ref["jobs"] > 1000


def test_the_reference_simulator_names_what_it_does_not_model():
    data = build_workload([TableClass(3, depth=2)], scheduler={"tracks": 2, "policy": "edf", "chop": None})
    with pytest.raises(ValueError, match="derived tables.*policy edf.*chop None"):
        run_reference(prepare(config_of(data), 1), 1, 100)
