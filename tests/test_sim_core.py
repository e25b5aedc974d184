"""The simulator shell (§4.1): arrivals, drawn durations, slowdowns, the ideal run, determinism,
trace replay and the `freshet sim` command line. Real SimPy, the real Scheduler; no Spark."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from ops.cli import main as freshet
from sim.simulator import Simulation, generated_arrivals, ideal_config, prepare, simulate
from sim.trace import TraceWriter, parse_trace, read_trace
from sim.workload import TableClass, build_workload, config_of, utilization, with_utilization
from warehouse.config import SimConfig, StreamConfig
from warehouse.errors import ConfigError

TABLE2_SLOW = {"slowdown": {"factor": 3, "normal": 1000, "slow": 1000}}


def _cfg(n=10, tracks=4, u=0.8, sim=None, **sched):
    data = build_workload([TableClass(n)], scheduler={"tracks": tracks, **sched}, sim=sim or TABLE2_SLOW)
    return config_of(with_utilization(data, u))


# ---- workloads ---------------------------------------------------------------------------------
def test_table2_utilization_is_offered_work_over_capacity():
    cfg = config_of(build_workload([TableClass(30)], scheduler={"tracks": 4}, sim=TABLE2_SLOW))
    # Σ E(P)/P = 30·(1 + 0.1·100)/100 = 3.3; (b+½) = 1; m = 2000/(1000 + 1000/3) = 1.5; N = 4
    assert utilization(cfg) == pytest.approx(3.3 * 1.0 * 1.5 / 4)
    assert utilization(config_of(with_utilization(cfg.model_dump(mode="json", by_alias=True), 0.7))) == (
        pytest.approx(0.7))


def test_chains_have_the_priorities_of_their_levels():
    data = build_workload([TableClass(2, depth=3, priorities=(0.001, 1, 100), name="c")])
    cfg = config_of(data)
    assert [t.name for t in cfg.tables] == ["c0", "c0_d1", "c0_d2", "c1", "c1_d1", "c1_d2"]
    assert cfg.table("c0_d2").sources == ["c0_d1"] and cfg.table("c0_d2").priority == 100
    assert cfg.table("c1").stream == "c_s1" and cfg.table("c1").priority == 0.001


# ---- arrivals ------------------------------------------------------------------------------------
def test_arrivals_are_periodic_with_a_random_phase_and_carry_data_up_to_arrival():
    s = StreamConfig(name="s", period=100)
    gen = generated_arrivals(s, SimConfig(), seed=3)
    arr = [next(gen) for _ in range(50)]
    assert 0 <= arr[0].time < 100 and arr[0].start == 0.0
    for a, b in zip(arr, arr[1:], strict=False):
        assert b.time - a.time == pytest.approx(100)
        assert b.start == a.end and b.end == b.time  # no gaps, data up to the arrival time
    other = next(generated_arrivals(StreamConfig(name="t", period=100), SimConfig(), seed=3))
    assert other.time != arr[0].time  # phases differ per stream


def test_delay_and_jitter():
    s = StreamConfig(name="s", period=100)
    gen = generated_arrivals(s, SimConfig(delay=30, jitter=0.2), seed=1)
    arr = [next(gen) for _ in range(200)]
    assert all(a.end == pytest.approx(a.time - 30) for a in arr)
    gaps = [b.time - a.time for a, b in zip(arr, arr[1:], strict=False)]
    assert min(gaps) >= 80 - 1e-9 and max(gaps) <= 120 + 1e-9 and max(gaps) - min(gaps) > 10


# ---- the executor ----------------------------------------------------------------------------------
def _trace_of(cfg, seed=1, events=3000):
    import io

    buf = io.StringIO()
    res = simulate(cfg, seed=seed, events=events, writer=TraceWriter(buf))
    return res, parse_trace(buf.getvalue().splitlines())


def test_durations_are_uniform_in_b_E_to_1_plus_b_E_times_S_when_slow():
    cfg = _cfg(n=6, tracks=2, u=0.7)
    alpha, beta = cfg.cost_prior(cfg.tables[0]).alpha, cfg.cost_prior(cfg.tables[0]).beta
    _, trace = _trace_of(cfg, events=4000)
    normal, slow = [], []
    for j in trace.jobs:
        ratio = j.duration / (alpha + beta * (j.end - j.start))
        start = j.time - j.duration
        (slow if start % 2000 >= 1000 else normal).append(ratio)
    assert len(normal) > 200 and len(slow) > 200
    assert min(normal) >= 0.5 - 1e-9 and max(normal) <= 1.5 + 1e-9
    assert min(slow) >= 1.5 - 1e-9 and max(slow) <= 4.5 + 1e-9
    assert sum(normal) / len(normal) == pytest.approx(1.0, abs=0.06)  # mean of U[b, 1+b] with b=½
    assert sum(slow) / len(slow) == pytest.approx(3.0, abs=0.2)


def test_completions_lower_staleness_and_the_integral_is_exact():
    """One table, one track, no randomness in arrivals: check ∫S against a hand computation."""
    data = build_workload([TableClass(1, alpha=1.0, beta=0.0)], scheduler={"tracks": 1},
                          sim={"b": 0.0, "slowdown": {"factor": 1, "normal": 1000, "slow": 0}})
    cfg = prepare(config_of(data), 0)
    sim = Simulation(cfg, seed=0)
    st = sim.run(events=2)  # first arrival at φ, its job runs 0.5·1 = 0.5 s (b=0, u∈[0,1))
    arr = next(generated_arrivals(cfg.streams[0], cfg.sim, 0))
    dur = 1.0 * (0.0 + random.Random("0/duration/t0").random())
    assert st.horizon == pytest.approx(arr.time + dur)
    # F = 0 until the job ends at φ + d, then F = φ: ∫S = (φ+d)²/2
    assert st.weighted_staleness == pytest.approx((arr.time + dur) ** 2 / 2)


# ---- relative lateness -------------------------------------------------------------------------------
@pytest.mark.parametrize("sim", [TABLE2_SLOW, {"slowdown": {"factor": 1, "normal": 1000, "slow": 0}}])
def test_relative_lateness_is_one_without_contention(sim):
    """tracks ≥ tables: every job starts when released, exactly as in the ideal run."""
    cfg = _cfg(n=8, tracks=8, u=0.3, sim=sim, partitioner="global")
    res = simulate(cfg, seed=5, events=6000)
    assert res.relative_lateness == pytest.approx(1.0, abs=1e-12)
    cfg = _cfg(n=8, tracks=8, u=0.3, sim=sim, partitioner="proportional", chop=3)
    res = simulate(cfg, seed=5, events=6000)
    assert res.relative_lateness == pytest.approx(1.0, abs=0.01)


def test_contention_makes_lateness_exceed_one_and_grow_with_utilization():
    low = simulate(_cfg(n=20, tracks=2, u=0.5), seed=2, events=8000).relative_lateness
    high = simulate(_cfg(n=20, tracks=2, u=0.95), seed=2, events=8000).relative_lateness
    assert 1.0 < low < high


def test_ideal_config_has_a_track_per_table_and_no_chopping():
    cfg = ideal_config(_cfg(n=7, tracks=2, chop=3, partitioner="proportional"))
    assert cfg.scheduler.tracks == 7 and cfg.scheduler.partitioner == "global" and cfg.scheduler.chop is None


# ---- determinism, the command line, traces ---------------------------------------------------------
@pytest.fixture
def table2_file(tmp_path):
    import yaml

    data = with_utilization(build_workload([TableClass(12)], scheduler={"tracks": 3, "autotune": "off"},
                                           sim=TABLE2_SLOW), 0.9)  # the tuner: tests/test_selftune.py
    p = tmp_path / "w.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _run_json(capsys, *argv):
    assert freshet(["sim", "run", *argv, "--json"]) == 0
    return capsys.readouterr().out


def test_same_seed_same_bytes_other_seed_other_result(capsys, table2_file):
    a = _run_json(capsys, "--config", str(table2_file), "--events", "4000", "--seed", "7")
    b = _run_json(capsys, "--config", str(table2_file), "--events", "4000", "--seed", "7")
    c = _run_json(capsys, "--config", str(table2_file), "--events", "4000", "--seed", "8")
    assert a == b and a != c
    out = json.loads(a)
    for key in ("relative_lateness", "weighted_staleness", "ideal_weighted_staleness", "utilization", "events"):
        assert key in out
    assert out["events"] == 4000 and out["relative_lateness"] > 1
    assert out["utilization"] == pytest.approx(0.9)
    assert set(out["per_table"]) == {f"t{i}" for i in range(12)}
    assert {"staleness", "jobs", "mean_delta_f"} <= set(out["per_table"]["t0"])
    assert sum(t["jobs"] for t in out["per_table"].values()) == out["jobs"]


def test_cli_overrides_reach_the_scheduler(capsys, table2_file):
    out = json.loads(_run_json(capsys, "--config", str(table2_file), "--events", "2000", "--policy", "edf",
                               "--partitioner", "edf-partitioned", "--tracks", "5", "--inheritance", "none",
                               "--chop", "none"))
    assert (out["policy"], out["partitioner"], out["tracks"], out["inheritance"], out["chop"]) == (
        "edf", "edf-partitioned", 5, "none", None)


def test_trace_replay_equals_the_generated_run(capsys, tmp_path, table2_file):
    trace = tmp_path / "run.jsonl"
    gen = _run_json(capsys, "--config", str(table2_file), "--events", "5000", "--seed", "3",
                    "--write-trace", str(trace))
    replay = _run_json(capsys, "--config", str(table2_file), "--events", "5000", "--seed", "3",
                       "--trace", str(trace))
    assert json.loads(gen)["chopped_jobs"] > 0 or json.loads(gen)["relative_lateness"] > 1
    # the same run, byte for byte but for the lower bound (sim.bound), which a replayed trace has not:
    # its arrivals need not follow the config's periods
    gen_out, replay_out = json.loads(gen), json.loads(replay)
    assert gen_out.pop("bound") is not None and replay_out.pop("bound") is None
    assert replay == gen.replace(json.dumps(json.loads(gen)["bound"], sort_keys=True), "null")
    assert replay_out == gen_out
    t = read_trace(trace)
    assert sum(len(v) for v in t.arrivals.values()) + len(t.jobs) == 5000
    # a replay under another policy uses the same arrivals; unmatched windows fall back to E(n) draws
    other = json.loads(_run_json(capsys, "--config", str(table2_file), "--events", "5000", "--seed", "3",
                                 "--trace", str(trace), "--policy", "random"))
    assert other["policy"] == "random" and other["events"] == 5000
    assert other["weighted_staleness"] != json.loads(gen)["weighted_staleness"]


def test_a_hand_written_trace_replays_measured_durations(capsys, tmp_path):
    import yaml

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"streams": [{"name": "s", "period": 10}],
                                   "tables": [{"name": "t", "stream": "s"}], "scheduler": {"tracks": 1}}))
    tr = tmp_path / "t.jsonl"
    tr.write_text("\n".join([
        '{"freshet_trace": 1}',
        '# epoch seconds, as the daemon writes them',
        '{"time": 1000.0, "stream": "s", "start": 990.0, "end": 1000.0, "rows": 5}',
        '{"time": 1004.0, "table": "t", "start": 990.0, "end": 1000.0, "duration": 4.0}',
        '{"time": 1010.0, "stream": "s", "start": 1000.0, "end": 1010.0, "rows": 5}',
        '{"time": 1017.0, "table": "t", "start": 1000.0, "end": 1010.0, "duration": 7.0}',
    ]) + "\n")
    out = json.loads(_run_json(capsys, "--config", str(cfg), "--trace", str(tr)))
    # starts at 990 with F = 990; loads end at 1004 (F=1000) and 1017 (F=1010)
    expect = 14 ** 2 / 2 + (4 * 13 + 13 ** 2 / 2)
    assert out["events"] == 4 and out["horizon"] == pytest.approx(27.0)
    assert out["weighted_staleness"] == pytest.approx(expect)
    assert out["per_table"]["t"]["longest_gap"] == pytest.approx(14.0)  # 990 → 1004 without a fresher load


def test_the_longest_gap_counts_the_windows_ends_and_only_what_is_inside() -> None:
    from warehouse.freshness import longest_gap

    assert longest_gap([], 0.0, 10.0) == 10.0  # never fresher: the whole window
    assert longest_gap([3.0, 7.0], 0.0, 10.0) == 4.0
    assert longest_gap([-5.0, 2.0, 9.0, 30.0], 0.0, 10.0) == 7.0  # marks outside the window ignored


def test_bad_traces_are_reported_by_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"time": 1, "stream": "s", "start": 5, "end": 2}\nnot json\n{"x": 1}\n'
                 '{"time": "soon", "table": "t", "start": 0, "end": 1, "duration": 1}\n')
    with pytest.raises(ConfigError) as e:
        read_trace(p)
    msg = str(e.value)
    assert "line 1" in msg and "line 2: not JSON" in msg and "line 3" in msg and "line 4: `time`" in msg


def test_a_trace_for_an_unknown_stream_is_a_config_error(tmp_path):
    tr = parse_trace(['{"time": 1, "stream": "nope", "start": 0, "end": 1}'])
    with pytest.raises(ConfigError, match="nope"):
        Simulation(prepare(_cfg(n=2), 0), trace=tr)


def test_experiment_list_and_unknown_name(capsys):
    assert freshet(["sim", "experiment", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("fig4-slowdown", "fig5-basic", "fig6-uniform", "fig7-priorities", "fig8-hierarchy",
                 "fig9-heterogeneous", "fig10-proportional", "fig11-chopping"):
        assert name in out
    assert freshet(["sim", "experiment", "fig5-basik"]) == 2
    assert "did you mean 'fig5-basic'" in capsys.readouterr().err


def test_missing_config_names_the_file(capsys, tmp_path):
    assert freshet(["sim", "run", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_a_bad_flag_is_named_not_blamed_on_the_file(capsys):
    from pathlib import Path

    table2 = Path(__file__).resolve().parents[1] / "sim" / "workloads" / "table2.yaml"
    assert freshet(["sim", "run", "--config", str(table2), "--k", "0", "--no-aggressive"]) == 2
    err = capsys.readouterr().err
    assert "table2.yaml with --k 0.0 --no-aggressive: scheduler.k: Input should be greater than 0" in err


def test_staleness_accrues_even_when_idle():
    """§2.3: staleness grows between loads; the average is about P/2 + E for an idle system."""
    res = simulate(_cfg(n=4, tracks=4, u=0.05, sim={"b": 0.5}), seed=1, events=4000)
    for t in res.run.per_table.values():
        assert 50 < t["staleness"] < 60 and math.isclose(t["mean_delta_f"], 100, rel_tol=0.02)


def test_the_table2_workload_file_is_the_papers_table2(capsys):
    from pathlib import Path

    from warehouse.config import load_config

    path = Path(__file__).resolve().parent.parent / "sim" / "workloads" / "table2.yaml"
    cfg = load_config(path)
    assert len(cfg.tables) == 30 and cfg.scheduler.tracks == 4
    assert (cfg.sim.alpha, cfg.sim.beta, cfg.sim.b, cfg.sim.slowdown.factor) == (1, 0.1, 0.5, 3)
    assert {s.period for s in cfg.streams} == {100}
    assert utilization(cfg) == pytest.approx(1.2375)
    out = json.loads(_run_json(capsys, "--config", str(path), "--events", "3000", "--autotune", "off"))
    assert out["partitioner"] == "proportional" and out["policy"] == "max-benefit"
    assert out["relative_lateness"] > 1.5  # overloaded at U ≈ 1.24


def test_a_trace_replay_with_maintenance_ends_when_its_arrivals_are_drained(tmp_path):
    """`freshet sim run --trace FILE` without --events/--until ends once every arrival (and action)
    of the trace is handed over and no update job runs, waits or backs off (docs/simulator.md);
    maintenance keeps falling due for ever and no longer keeps it running. Before: it never ended."""
    import subprocess
    import sys

    import yaml

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"streams": [{"name": "s", "period": 10}],
                                   "tables": [{"name": "t", "stream": "s"},
                                              {"name": "d", "sources": ["t"], "sql": "SELECT ts FROM t"}],
                                   "maintenance": {"optimize_every": 1, "vacuum_every": 15},
                                   "scheduler": {"tracks": 2}}))
    tr = tmp_path / "t.jsonl"
    tr.write_text("".join(f'{{"time": {1000 + 10 * i}, "stream": "s", "start": {990 + 10 * i}, '
                          f'"end": {1000 + 10 * i}, "rows": 5}}\n' for i in range(6)))
    r = subprocess.run([sys.executable, "-m", "ops.cli", "sim", "run", "--config", str(cfg), "--trace", str(tr),
                        "--json"], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1],
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # the last arrival at 1050 is loaded into t and then d within a few seconds: the run ends there
    assert 60 <= out["horizon"] < 100
    assert {k: v["jobs"] for k, v in out["per_table"].items()} == {"t": 6, "d": 6}
    assert out["maintenance_jobs"] > 0


def test_a_trace_for_streams_the_config_lacks_is_named_by_its_file(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("streams: [{name: s, period: 10}]\ntables: [{name: t, stream: s}]\n")
    tr = tmp_path / "t.jsonl"
    tr.write_text('{"time": 10, "stream": "nosuch", "start": 0, "end": 10}\n')
    assert freshet(["sim", "run", "--config", str(cfg), "--trace", str(tr)]) == 2
    assert f"{tr}: arrivals for stream(s) not in the config: nosuch" in capsys.readouterr().err
