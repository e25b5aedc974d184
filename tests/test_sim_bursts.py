"""Per-class phases in the simulator (`sim.bursts`): a named table's data is `factor` times as dense
for hours at a time, so a job pays β·factor for the part of its window inside a burst; the other
tables and a config without bursts are unchanged, and utilization counts the bursts' mean. No Spark."""

from __future__ import annotations

import io

import pytest

from sim.simulator import Simulation, _burst_time, prepare
from sim.trace import TraceWriter, parse_trace
from sim.workload import config_of, utilization
from warehouse.errors import ConfigError

BURST = {"tables": ["a"], "factor": 3.0, "normal": 600.0, "slow": 300.0, "offset": 200.0}


def _data(bursts: list[dict] | None = None) -> dict:
    """Two tables of one stream each, every 60 s, α = 0: a job's time is β·n·(b + u)."""
    return {"streams": [{"name": "sa", "period": 60.0}, {"name": "sb", "period": 60.0}],
            "tables": [{"name": "a", "stream": "sa", "cost": {"alpha": 0.0, "beta": 0.1}},
                       {"name": "b", "stream": "sb", "cost": {"alpha": 0.0, "beta": 0.1}}],
            "scheduler": {"tracks": 2, "policy": "max-benefit", "partitioner": "global", "chop": None},
            "sim": {"b": 0.5, **({"bursts": bursts} if bursts else {})}}


def _jobs(data: dict) -> dict[tuple[str, float, float], float]:
    buf = io.StringIO()
    cfg = prepare(config_of(data), 5)
    Simulation(cfg, seed=5, writer=TraceWriter(buf)).run(until=3000.0)
    return {(j.table, j.start, j.end): j.duration for j in parse_trace(buf.getvalue().splitlines()).jobs}


def _in_burst(t0: float, t1: float) -> float:
    """Seconds of (t0, t1] inside BURST's bursts: (200 + 600 + 900k, 200 + 900(k + 1)]."""
    out = 0.0
    for k in range(-1, 10):  # the cycle runs before its offset too: a burst ends at 200
        lo, hi = 200.0 + 600.0 + 900.0 * k, 200.0 + 900.0 * (k + 1)
        out += max(0.0, min(t1, hi) - max(t0, lo))
    return out


def test_a_tables_jobs_pay_the_bursts_density_for_the_part_of_their_window_inside_one():
    plain, burst = _jobs(_data()), _jobs(_data([BURST]))
    assert plain.keys() == burst.keys()  # one track per table: the same jobs, the same draws
    inside = straddling = 0
    for (table, start, end), d in plain.items():
        n = end - start
        extra = _in_burst(start, end) if table == "a" else 0.0
        assert burst[(table, start, end)] == pytest.approx(d * (n + 2.0 * extra) / n)
        inside += extra == pytest.approx(n)
        straddling += 0 < extra < n - 1e-9
    assert inside > 5 and straddling >= 2  # the case both ways


def test_burst_time_counts_the_burst_part_of_each_cycle():
    assert _burst_time(0.0, 600.0, 900.0) == 0.0
    assert _burst_time(700.0, 600.0, 900.0) == 100.0
    assert _burst_time(900.0, 600.0, 900.0) == 300.0
    assert _burst_time(2500.0, 600.0, 900.0) == 600.0 + 100.0
    assert _burst_time(-100.0, 600.0, 900.0) == -300.0 + 200.0  # before the cycle's start: the one before


def test_utilization_counts_the_bursts_mean_density():
    base = utilization(config_of(_data()))
    # a's β is 3× for a third of the cycle: (600 + 3·300) / 900 = 5/3; b unchanged
    assert utilization(config_of(_data([BURST]))) == pytest.approx(base * (5 / 3 + 1) / 2)


def test_a_burst_naming_an_unknown_table_is_refused_by_name():
    with pytest.raises(ConfigError, match="sim.bursts names table.*nope"):
        Simulation(prepare(config_of(_data([{**BURST, "tables": ["nope"]}])), 1), seed=1)
    with pytest.raises(ConfigError, match="factor"):
        config_of(_data([{**BURST, "factor": 0}]))
