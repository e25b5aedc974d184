"""The lower bound on weighted staleness (sim.bound): hand-worked optima, the simulator never below
it, and where it shows (`freshet sim run`, the experiment tables, scripts/sim_same.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops.cli import main as freshet
from scripts.sim_same import same_report
from sim.bound import loose, lower_bound
from sim.experiments import EXPERIMENTS, run_experiment
from sim.simulator import Simulation, ideal_config, prepare
from sim.workload import TableClass, build_workload, config_of, with_utilization
from tests.helpers_engine import SHORT_ROLLOUT
from warehouse.config import Partitioner, Policy

NO_SLOWDOWN = {"slowdown": {"factor": 1.0, "normal": 1000.0, "slow": 0.0}}


def _one(tracks: int = 1, chop: Any = None, **tables: tuple[float, float, float]) -> Any:
    """Base tables NAME=(priority, α, β), each fed every 100 s; b = 0.5 (so c = b + ½ = 1)."""
    return config_of({
        "streams": [{"name": f"s_{n}", "period": 100.0} for n in tables],
        "tables": [{"name": n, "stream": f"s_{n}", "priority": p, "cost": {"alpha": a, "beta": b}}
                   for n, (p, a, b) in tables.items()],
        "scheduler": {"tracks": tracks, "chop": chop, "autotune": "off"},
        "sim": {"b": 0.5, **NO_SLOWDOWN},
    })


# ---- hand-worked optima (long-run weighted staleness per second) ------------------------------------
def test_one_table_without_contention_is_the_sawtooth_with_its_own_job():
    """P = 100, α = 1, β = 0.1, c = 1, one track. Batches are whole partitions (x ≥ 100); the track
    is used 0.11 at x = 100, so λ* = 0 and the bound is x/2 + c·E(x) = 50 + 11 = 61 — the ideal run's
    §4.1 average staleness: each partition waits its half period and its own job."""
    b = lower_bound(_one(a=(1.0, 1.0, 0.1)))
    assert b.weighted_staleness == pytest.approx(61.0, rel=1e-9)
    assert b.lam == 0.0 and b.batches == {"a": pytest.approx(100.0)}


def test_one_table_on_a_full_track_batches_just_enough():
    """α = 95: one partition's job (105 s) is longer than its period, so the track is the limit.
    min x/2 + 95 + 0.1x + λ(95/x + 0.1) over x ≥ 100 is at x* = √(95λ/0.6); capacity 95/x + 0.1 = 1
    gives x* = 95/0.9 = 105.5̅ and λ* = 0.6·x*²/95 = 70.37; the bound is 0.6·x* + 95 = 158⅓."""
    b = lower_bound(_one(a=(1.0, 95.0, 0.1)))
    assert b.weighted_staleness == pytest.approx(158.0 + 1.0 / 3.0, rel=1e-6)
    assert b.batches["a"] == pytest.approx(95.0 / 0.9, rel=1e-3)  # (λ is found to 0.3%)
    assert b.lam == pytest.approx(0.6 * (95.0 / 0.9) ** 2 / 95.0, rel=1e-3)


def test_two_priorities_share_one_track_by_the_price_of_a_track_second():
    """A (p = 1) and B (p = 4), α = 45, β = 0.1, one track: 0.55 each at x = 100, 1.1 > 1.
    x_i* = √(45λ/(0.6 p_i)): B's would be half A's, under 100, so B stays at x = 100 (0.55 of
    the track) and A gets what is left, 45/x_A + 0.1 = 0.45: x_A = 900/7, λ* = x_A²/75.
    Bound = 1·(0.6·900/7 + 45) + 4·(50 + 45 + 10) = 855/7 + 420 = 3795/7 ≈ 542.14."""
    b = lower_bound(_one(a=(1.0, 45.0, 0.1), b=(4.0, 45.0, 0.1)))
    assert b.weighted_staleness == pytest.approx(3795.0 / 7.0, rel=1e-6)
    assert b.batches["a"] == pytest.approx(900.0 / 7.0, rel=1e-3)
    assert b.batches["b"] == pytest.approx(100.0)
    assert b.lam == pytest.approx((900.0 / 7.0) ** 2 / 75.0, rel=1e-3)


def test_more_tracks_never_raise_the_bound_and_least_draw_is_below_mean():
    cfg = config_of(with_utilization(build_workload([TableClass(8)], scheduler={"tracks": 2}), 1.0))
    vals = [lower_bound(cfg, tracks=n).weighted_staleness for n in (1, 2, 4, 8)]
    assert all(a >= b - 1e-9 * a for a, b in zip(vals, vals[1:], strict=False))
    assert vals[0] > 1.5 * vals[-1]  # one track at U = 2 (relative to 2 tracks): the capacity binds
    assert lower_bound(cfg, draw="least").weighted_staleness < lower_bound(cfg).weighted_staleness


def test_bad_arguments_are_named():
    cfg = _one(a=(1.0, 1.0, 0.1))
    with pytest.raises(ValueError, match="draw"):
        lower_bound(cfg, draw="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="horizon"):
        lower_bound(cfg, horizon=0.0)


def test_the_search_evaluating_ahead_finds_what_it_finds_one_at_a_time(monkeypatch):
    """The λ search evaluates a grid extension's points several at a time (`_AHEAD`) and takes only
    those a one-at-a-time search reaches: the same bound, multipliers and batches to the last bit —
    on a full track (λ > 0), on spare tracks (λ = 0: the grid runs down to its end), and with
    slowdowns (a μ search around each λ search) and a join passing θ."""
    import sim.bound as bound

    slow = {"slowdown": {"factor": 2.0, "normal": 400.0, "slow": 300.0}, "delay": 7.0}
    base = {"streams": [{"name": "s0", "period": 50.0}, {"name": "s1", "period": 100.0}],
            "tables": [{"name": "b0", "stream": "s0", "priority": 10.0, "cost": {"alpha": 3.0, "beta": 0.1}},
                       {"name": "b1", "stream": "s1", "priority": 1.0, "cost": {"alpha": 9.0, "beta": 0.2}}],
            "scheduler": {"tracks": 1, "chop": 3.0, "autotune": "off"}, "sim": slow}
    join = {**base, "tables": [*base["tables"], {"name": "d0", "sources": ["b0", "b1"], "priority": 5.0,
                                                 "sql": "SELECT * FROM b0 JOIN b1 ON b1.ts = b0.ts",
                                                 "cost": {"alpha": 6.0, "beta": 0.1}}]}
    two = _one(a=(1.0, 45.0, 0.1), b=(4.0, 45.0, 0.1))
    runs = [(two, 1, None, "mean"), (two, 2, 1200.0, "least"), (config_of(base), 2, None, "mean"),
            (config_of(base), 1, 1200.0, "least"), (config_of(join), 1, 1200.0, "least")]
    ahead = [lower_bound(cfg, tracks=n, horizon=h, draw=d) for cfg, n, h, d in runs]
    monkeypatch.setattr(bound, "_AHEAD", 1)
    assert [lower_bound(cfg, tracks=n, horizon=h, draw=d) for cfg, n, h, d in runs] == ahead
    assert [b.lam > 0 for b in ahead] == [True, False, False, False, True]
    assert ahead[-1].mu > 0 and 0 < ahead[-1].theta < 1


# ---- against the simulator ---------------------------------------------------------------------------
def _staleness(cfg: Any, seed: int, until: float) -> float:
    return Simulation(prepare(cfg, seed), seed=seed).run(until=until).weighted_staleness


@pytest.mark.parametrize("classes", [
    (TableClass(10),),  # Table 2's jobs, periodic, without slowdowns
    (TableClass(5, period=60.0, priorities=10.0, name="a"), TableClass(5, period=300.0, alpha=4.0, name="b")),
    (TableClass(4, depth=3, priorities=(1.0, 2.0, 5.0)),),  # chains: a derived table after its source
])
def test_without_contention_the_bound_is_the_ideal_run(classes):
    """One track per table (the ideal of §4.1): the bound with the least draw is below the run, and
    the bound on the expected staleness is within 2% of it (the draws' noise, the ends of the run)."""
    cfg = config_of(with_utilization(build_workload(classes, scheduler={"chop": None}, sim=NO_SLOWDOWN), 0.6))
    ideal = ideal_config(cfg)
    until = 200 * 300.0
    measured = _staleness(ideal, 3, until)
    n = ideal.scheduler.tracks
    assert lower_bound(cfg, tracks=n, horizon=until, draw="least").weighted_staleness <= measured
    assert lower_bound(cfg, tracks=n, horizon=until).weighted_staleness == pytest.approx(measured, rel=0.02)


@pytest.mark.parametrize("policy", [p for p in get_args(Policy)])
def test_table2_at_high_utilization_every_policy_is_above_the_bound(policy):
    """Table 2's 30 jobs with its slowdowns on 4 tracks at U = 0.9 (the paper's setting): the bound
    on the expected staleness is below every policy's run (seed 1, 3,000 s: normal, slow, normal)."""
    sched = {"tracks": 4, "policy": policy, "autotune": "off", "rollout": SHORT_ROLLOUT}
    data = with_utilization(build_workload([TableClass(30)], scheduler=sched,
                                           sim={"slowdown": {"factor": 3.0, "normal": 1000.0, "slow": 1000.0}}), 0.9)
    cfg = config_of(data)
    until = 3_000.0
    measured = _staleness(cfg, 1, until)
    assert lower_bound(cfg, horizon=until).weighted_staleness < measured


@st.composite
def _workloads(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 3))
    periods = [draw(st.sampled_from((50.0, 100.0, 250.0))) for _ in range(n)]
    streams = [{"name": f"s{i}", "period": periods[i]} for i in range(n)]
    cost = st.fixed_dictionaries({"alpha": st.floats(0.2, 40.0), "beta": st.floats(0.0, 0.4)})
    tables = [{"name": f"b{i}", "stream": f"s{i}", "priority": draw(st.sampled_from((1.0, 10.0))),
               "cost": draw(cost)} for i in range(n)]
    shape = draw(st.sampled_from(("none", "chain", "join") if n > 1 else ("none", "chain")))
    if shape == "chain":
        tables.append({"name": "d0", "sources": ["b0"], "sql": "SELECT * FROM b0", "priority": 5.0,
                       "cost": draw(cost)})
    elif shape == "join":
        tables.append({"name": "d0", "sources": ["b0", "b1"], "sql": "SELECT * FROM b0 JOIN b1 ON b1.ts = b0.ts",
                       "priority": 5.0, "cost": draw(cost)})
    sim: dict[str, Any] = {"b": draw(st.sampled_from((0.0, 0.5, 1.0))), "jitter": draw(st.sampled_from((0.0, 0.3))),
                           "delay": draw(st.sampled_from((0.0, 7.0)))}
    if draw(st.booleans()):
        sim["slowdown"] = {"factor": draw(st.sampled_from((2.0, 4.0))), "normal": 400.0, "slow": 300.0}
    if draw(st.booleans()):
        sim["bursts"] = [{"tables": ["b0"], "factor": draw(st.sampled_from((0.5, 3.0))), "normal": 500.0,
                          "slow": 250.0}]
    if draw(st.booleans()):
        sim["cores"] = 1
    chop = draw(st.sampled_from((None, 1.0, 3.0, "auto")))
    part = draw(st.sampled_from(get_args(Partitioner)))
    return {"streams": streams, "tables": tables, "sim": sim,
            "scheduler": {"tracks": 1, "chop": chop, "partitioner": part, "autotune": "off"}}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_workloads(), seed=st.integers(0, 50))
def test_no_policy_beats_the_bound_on_any_tracks(data, seed):
    """Random small workloads (bases, a chain or a join; slowdowns, bursts, jitter, delay, shared
    cores, chopping): at 1, 2 and one-per-table tracks, every policy's run is at or above the bound
    with the least draw (`draw="least"`, which holds for every run, not only on average)."""
    cfg = config_of(data)
    until = 12 * max(s["period"] for s in data["streams"])
    for tracks in sorted({1, 2, len(data["tables"])}):
        bound = lower_bound(cfg, tracks=tracks, horizon=until, draw="least").weighted_staleness
        for policy in get_args(Policy):
            sched = {**data["scheduler"], "tracks": tracks, "policy": policy}
            run = config_of({**data, "scheduler": sched})
            measured = _staleness(run, seed, until)
            assert bound <= measured * (1 + 1e-9) + 1e-6, (tracks, policy, bound, measured)


def test_a_feed_much_longer_than_the_horizon_leaves_the_bound_positive():
    """A daily feed in a run of a few hours: its head allowance (X²/8, X = 86,400 s) once exceeded
    its whole share of the horizon and took the bound to 0 for the whole workload
    (examples/netmon.yaml at 2,000 events). No table's staleness is negative: it counts 0, and the
    five-minute table's sawtooth is still there, below the run."""
    data = {"streams": [{"name": "fast", "period": 300}, {"name": "daily", "period": 86400}],
            "tables": [{"name": "f", "stream": "fast", "priority": 5, "cost": {"alpha": 2, "beta": 0.004}},
                       {"name": "d", "stream": "daily", "cost": {"alpha": 3, "beta": 0.0001}}],
            "scheduler": {"tracks": 2, "autotune": "off"}, "sim": {"b": 0.5, **NO_SLOWDOWN}}
    cfg = prepare(config_of(data), 1)
    sim = Simulation(cfg, seed=1)
    st = sim.run(until=20_000.0)
    b = lower_bound(cfg, horizon=20_000.0)
    assert 0 < b.weighted_staleness <= st.weighted_staleness
    assert loose(cfg, 20_000.0) == ["the period of d beside the horizon"] and loose(cfg, 200_000.0) == []
    # the fast table alone over the horizon: at least its sawtooth, P/2 per second, less its head
    assert b.weighted_staleness >= 5 * (150 * 20_000 - 300**2 / 8) * 0.99


# ---- where it shows ----------------------------------------------------------------------------------
def test_sim_run_prints_the_bound_and_json_carries_it(capsys, tmp_path):
    import yaml

    data = with_utilization(build_workload([TableClass(6)], scheduler={"tracks": 2, "autotune": "off"}), 0.9)
    cfg = tmp_path / "w.yaml"
    cfg.write_text(yaml.safe_dump(data))
    assert freshet(["sim", "run", "--config", str(cfg), "--events", "600", "--seed", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    b = out["bound"]
    assert 0 < b["weighted_staleness"] < out["weighted_staleness"]
    assert b["ratio"] == pytest.approx(out["weighted_staleness"] / b["weighted_staleness"], rel=1e-6)
    assert b["relative"] == pytest.approx(b["weighted_staleness"] / out["ideal_weighted_staleness"], rel=1e-6)
    assert b["tracks"] == 2 and b["draw"] == "mean" and set(b["batches"]) == {f"t{i}" for i in range(6)}
    assert freshet(["sim", "run", "--config", str(cfg), "--events", "600", "--seed", "2"]) == 0
    text = capsys.readouterr().out
    assert f"lower bound {b['weighted_staleness']:.6g} on 2 tracks" in text and "× the bound" in text
    assert b["loose"] == [] and "loose here" not in text
    # what the bound relaxes to nothing is named beside it: here a derived table's granularity
    data["tables"].append({"name": "d", "sources": ["t0"], "granularity": "15m"})
    cfg.write_text(yaml.safe_dump(data))
    assert freshet(["sim", "run", "--config", str(cfg), "--events", "600", "--seed", "2"]) == 0
    assert "(loose here: the bound does not model granularity of d)" in capsys.readouterr().out
    assert "least" not in b  # the run is above the mean-draw bound: nothing more to say
    # a replayed trace has no bound, and the text says why
    trace = tmp_path / "t.jsonl"
    assert freshet(["sim", "run", "--config", str(cfg), "--events", "200", "--write-trace", str(trace)]) == 0
    capsys.readouterr()
    assert freshet(["sim", "run", "--config", str(cfg), "--trace", str(trace)]) == 0
    assert "lower bound: none for a replayed trace" in capsys.readouterr().out
    assert freshet(["sim", "run", "--config", str(cfg), "--trace", str(trace), "--utilization", "1"]) == 2
    assert "--utilization scales a generated workload's costs" in capsys.readouterr().err
    trace.write_text('{"bogus": 1}\n')  # a trace's errors are headed as the trace's, not the config's
    assert freshet(["sim", "run", "--config", str(cfg), "--trace", str(trace)]) == 2
    assert capsys.readouterr().err.startswith(f"freshet: invalid trace\n{trace}: line 1: neither an arrival")


def test_a_run_whose_draws_beat_the_mean_bound_gets_the_least_draw_bound(capsys):
    """The bound is on the staleness expected over the duration draws; a short run with short draws
    beats it (`classes`, 300 events, seed 4: 0.962× it), and is then shown the least-draw bound, which
    no run beats."""
    classes = Path(__file__).resolve().parents[1] / "sim" / "workloads" / "unseen" / "classes.yaml"
    args = ["sim", "run", "--config", str(classes), "--events", "300", "--seed", "4", "--autotune", "off"]
    assert freshet([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    b = out["bound"]
    assert out["weighted_staleness"] < b["weighted_staleness"]
    least = b["least"]["weighted_staleness"]
    assert least < out["weighted_staleness"]
    assert b["least"]["ratio"] == pytest.approx(out["weighted_staleness"] / least, rel=1e-6)
    assert freshet(args) == 0
    assert f"with every draw at its shortest the bound is {least:.6g}" in capsys.readouterr().out


def test_an_experiment_table_has_the_bound_line(tmp_path):
    from sim.experiments import write_outputs

    res = run_experiment(EXPERIMENTS["fig7-priorities"], events=1500, seeds=1, workers=1, xs=(0.6, 1.0))
    assert all(r["relative_bound"] > 0 and r["bound_weighted_staleness"] > 0 for r in res.rows)
    ((label, d),) = res.bounds()  # the lines share the workload: one line, the least of theirs
    assert label == "lower bound" and set(d) == {0.6, 1.0}
    assert 0.9 < d[0.6] < 1.02  # the tracks do not bind on average: about the ideal run
    curves = {label: dict(pts) for label, pts in res.curves().items()}
    assert all(c[1.0] > d[1.0] for c in curves.values())
    paths = write_outputs(res, tmp_path)
    assert "| *lower bound* |" in paths["summary"].read_text()
    assert "relative_bound" in paths["csv"].read_text().splitlines()[0]


def test_sim_same_compares_everything_but_the_bound():
    base = json.dumps({"a": 1, "b": [1.5]}, sort_keys=True).encode()
    assert same_report(base, base)
    assert same_report(base, json.dumps({"a": 1, "b": [1.5], "bound": {"x": 1}}).encode())
    assert not same_report(base, json.dumps({"a": 1, "b": [1.5], "other": 2}).encode())
    assert not same_report(base, json.dumps({"a": 2, "b": [1.5], "bound": None}).encode())
    # the bound is computed beside the run, from the config: a better bound is the same run
    bound = json.dumps({"a": 1, "bound": {"x": 1}}).encode()
    assert same_report(bound, json.dumps({"a": 1, "bound": {"x": 2, "loose": ["sim.jitter 0.5"]}}).encode())
    assert not same_report(bound, json.dumps({"a": 2, "bound": {"x": 1}}).encode())
