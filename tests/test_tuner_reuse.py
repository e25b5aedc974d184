"""What the tuner may skip (sim.reuse, sim.autotune step 5): an unchanged window is not
simulated again, in the simulator and in the daemon; after clear keeps it backs off and screens
the last full screen's best, with the same verdicts and the same run; a workload change or a near
miss screens the whole grid again; a replay stopped past the screen's bar is a lower bound and one
below it the exact figure. Simulations are counted where they are made (Simulation.__init__)."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from ops.autotune import AutoTuner
from sim.autotune import Rules, current_setting, evaluate, replay, window_of
from sim.selftune import SEEDS, SimTuner, attach
from sim.simulator import Simulation, prepare, simulate
from sim.trace import TraceWriter, parse_trace
from sim.tune import candidates
from sim.workload import TableClass, build_workload, config_of, with_utilization
from warehouse.config import FreshetConfig

# the two priority classes of tests/test_autotune.py
TWO_CLASSES = (TableClass(6, period=60, priorities=10, alpha=0.5, beta=0.05, name="hi"),
               TableClass(3, period=600, priorities=1, alpha=10, beta=0.2, name="lo"))
FIFO = {"policy": "fifo", "partitioner": "global", "chop": None, "autotune": "apply"}
HOUR = 3600.0


def _config(u: float = 1.0, **scheduler) -> FreshetConfig:
    return config_of(with_utilization(build_workload(TWO_CLASSES, scheduler={"tracks": 2, **scheduler},
                                                     sim={"b": 0.5}), u))


def _lines(cfg: FreshetConfig, events: int = 2000, seed: int = 7) -> list[str]:
    buf = io.StringIO()
    simulate(cfg, seed=seed, events=events, writer=TraceWriter(buf))
    return buf.getvalue().splitlines()


@pytest.fixture(scope="module")
def calm() -> tuple[FreshetConfig, list[str]]:
    """The default, where it is best (a keep: tests/test_autotune.py)."""
    cfg = _config()
    return cfg, _lines(cfg)


@pytest.fixture()
def simulations(monkeypatch) -> list[int]:
    """Every Simulation built from now on (one per replay)."""
    made: list[int] = []
    real = Simulation.__init__

    def counted(self, *args, **kwargs):
        made.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Simulation, "__init__", counted)
    return made


def test_an_unchanged_window_is_not_simulated_again(calm, simulations):
    from sim.autotune import Memo

    cfg, lines = calm
    window = window_of(parse_trace(lines), cfg, HOUR)
    first = evaluate(cfg, window, Rules(), now=window.end)
    assert first.result == "keep" and first.screen == "full" and len(simulations) == first.runs > 40
    assert isinstance(first.memo, Memo)
    simulations.clear()
    again = evaluate(cfg, window, Rules(), now=window.end + 600, memo=first.memo)
    assert (again.result, again.screen, again.runs, len(simulations)) == ("keep", "unchanged", 0, 0)
    # a window that moved on is judged again
    later = window_of(parse_trace(lines), cfg, HOUR, end=window.end - 300)
    assert evaluate(cfg, later, Rules(), now=later.end, memo=first.memo).screen == "full"
    assert len(simulations) > 40
    # and the rule is the memo's alone: without one, the same window is simulated as the first time
    simulations.clear()
    assert evaluate(cfg, window, Rules(), now=window.end).runs == len(simulations) == first.runs


def test_settings_alike_replay_alike_to_the_last_bit(calm):
    """A screen replays one setting of each behaviour (sim.autotune.alike): over the whole grid,
    each setting's own replay makes the track plan `alike` says it would, settings alike score
    the same to the last bit at every checkpoint, and there are far fewer behaviours than settings."""
    from sim.autotune import alike, replayed, score

    cfg, lines = calm
    window = window_of(parse_trace(lines), cfg, HOUR)
    probe = replayed(cfg, window, current_setting(cfg), 1)
    grid = candidates(cfg)
    runs: dict[tuple, set[tuple[float, ...]]] = {}
    for s in grid:
        sim = replayed(cfg, window, s, 1)
        key = alike(probe, cfg, s)
        assert sim.sched.plan.behaviour() == key[1], s
        trail: list[float] = []
        total = score(sim, window, trail=trail)
        runs.setdefault(key, set()).add((total, *trail))
    assert all(len(figures) == 1 for figures in runs.values())
    assert len(runs) < 0.6 * len(grid), (len(runs), len(grid))


def test_a_replay_past_the_bar_stops_there_and_one_below_it_is_exact(calm):
    cfg, lines = calm
    window = window_of(parse_trace(lines), cfg, HOUR)
    mine = current_setting(cfg)
    exact = replay(cfg, window, mine, 1)
    assert replay(cfg, window, mine, 1, above=1.01 * exact) == exact
    cut = replay(cfg, window, mine, 1, above=0.5 * exact)
    assert 0.5 * exact < cut < exact


def test_a_simulated_run_where_the_setting_keeps_winning_simulates_far_less():
    """The default where it is best, about 2.7 simulated hours judged every 10 minutes: every
    verdict a keep, the run the run without a tuner, and after a few clear keeps most evaluations
    simulate nothing or the last full screen's best only."""
    cfg = _config()
    tuned = simulate(cfg, seed=3, events=1500, tuner=attach)
    at = tuned.extra["autotune"]
    judged = at["results"]["keep"]
    assert set(at["results"]) <= {"keep", "too_few_jobs"} and at["switches"] == [] and judged >= 10
    assert tuned.run.weighted_staleness == simulate(cfg, seed=3, events=1500).run.weighted_staleness
    grid = len(candidates(prepare(cfg, 3))) + 1  # a full screen: the grid and the setting in force
    assert at["simulations"] < 0.5 * judged * grid, (at["simulations"], judged, grid)


def test_backing_off_keeps_the_verdicts_of_judging_every_window_in_full():
    """The same run with the rule (the default rules) and without it (`calm` never reached): the
    same verdicts, the same run to the last digit, and far fewer simulations."""
    cfg = prepare(_config(), 3)
    out = {}
    for name, rules in (("rule", Rules.of(cfg, SEEDS)), ("none", Rules.of(cfg, SEEDS, calm=10**9))):
        sim = Simulation(cfg, seed=3)
        tuner = SimTuner(sim, cfg, rules)
        out[name] = (tuner, sim.run(events=1500))
    rule, none = out["rule"][0], out["none"][0]
    assert set(none.screens) == {"full"} and rule.screens["backoff"] > 0 and rule.screens["narrow"] > 0
    assert rule.results == none.results and rule.switches == none.switches == []
    assert out["rule"][1].weighted_staleness == out["none"][1].weighted_staleness
    assert rule.runs < 0.5 * none.runs, (rule.runs, none.runs)


def test_a_workload_change_or_a_near_miss_screens_the_whole_grid_again():
    from sim.autotune import Memo
    from sim.reuse import drifted

    rules = Rules()
    sig = {"rate:a": 60.0, "cost:*": 1.0, "cost:t": 1.0}
    ranking = [{"policy": "max-benefit"}]
    calm = Memo(key="k", kept=True, signature=sig, streak=rules.calm, waited=0, ranking=ranking)
    assert calm.plan(rules, "other", sig) == "backoff"  # the first evaluation after `calm` clear keeps
    assert Memo(**{**calm.__dict__, "waited": 1}).plan(rules, "other", sig) == "narrow"
    assert calm.plan(rules, "k", sig) == "unchanged"
    assert calm.plan(rules, "other", {**sig, "cost:t": 2.5}) == "full"  # one table's jobs slower: a new workload
    assert calm.plan(rules, "other", {**sig, "cost:*": 1.5}) == "full"  # all jobs slower
    assert calm.plan(rules, "other", {**sig, "rate:a": 30.0}) == "full"  # half the arrivals
    assert calm.plan(rules, "other", {**sig, "cost:t": 1.5, "rate:a": 50.0}) == "backoff"  # within noise
    assert not drifted({**sig, "cost:t": 1.2}, sig, rules.drift, rules.drift_table)
    assert Memo(**{**calm.__dict__, "waited": 1, "narrowed": rules.rescreen}).plan(rules, "other", sig) == "full"
    assert Memo.from_json(calm.to_json()) == calm  # what the daemon's evaluation process gets and gives back
    # after a change, clear keeps count only on windows wholly after it (a straddling one holds both)
    seen = calm.after(rules, "full", "k1", {**sig, "cost:*": 2.0}, ranking, "keep", True, (0.0, 3600.0))
    assert (seen.streak, seen.changed) == (0, 3600.0)
    straddling = seen.after(rules, "full", "k2", {**sig, "cost:*": 2.0}, ranking, "keep", True, (600.0, 4200.0))
    assert straddling.streak == 0
    after = straddling.after(rules, "full", "k3", {**sig, "cost:*": 2.0}, ranking, "keep", True, (3600.0, 7200.0))
    assert after.streak == 1 and after.changed == 3600.0


def test_a_narrowed_screen_with_a_near_miss_widens_to_the_whole_grid(simulations):
    """FIFO losing by more than the margin: an evaluation that would only screen the last full
    screen's best finds one of them within reach and screens the whole grid, deciding as a fresh one."""
    from sim.autotune import Memo
    from sim.reuse import signature

    cfg = _config(1.05, **FIFO)
    window = window_of(parse_trace(_lines(cfg)), cfg, HOUR)
    fresh = evaluate(cfg, window, Rules(), now=window.end)
    assert fresh.result == "switch"
    rules = Rules()
    best = [s for s in candidates(cfg) if s == fresh.choice]
    memo = Memo(key="another window", kept=True, signature=signature(cfg, window), streak=rules.calm,
                waited=1, ranking=best)
    assert memo.plan(rules, "another", signature(cfg, window)) == "narrow"
    simulations.clear()
    d = evaluate(cfg, window, rules, now=window.end, memo=memo)
    assert (d.screen, d.result, d.choice) == ("full", "switch", fresh.choice) and len(simulations) == d.runs
    assert d.memo == Memo()  # a switch: the next evaluation starts afresh


def test_the_daemon_hands_the_memo_to_its_next_evaluation(calm, tmp_path: Path):
    cfg, lines = calm
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cfg = cfg.model_copy(update={"scheduler": cfg.scheduler.model_copy(update={"autotune_window": HOUR,
                                                                              "autotune_every": 600.0})})
    tuner = AutoTuner(cfg, str(path), CollectorRegistry(), [].append, now=-600.0, busy=None, nice=0)
    seen = []
    for now in (0.0, 600.0):  # the trace file did not grow between the two
        tuner.poll(now)
        t0 = time.monotonic()
        while tuner.running and time.monotonic() - t0 < 120:
            time.sleep(0.05)
            tuner.poll(now + 1.0)
        assert not tuner.running
        seen.append(tuner.last)
    assert [d["result"] for d in seen] == ["keep", "keep"]
    assert seen[0]["runs"] > 40 and seen[1]["runs"] == 0
    assert [d["screen"] for d in seen] == ["full", "unchanged"]
    assert tuner.memo is not None and tuner.memo["key"] == seen[0]["memo"]["key"]
    tuner.reconfigured(cfg, 700.0)  # a reload: another config, judged afresh
    assert tuner.memo is None
    tuner.close()


def test_the_grid_holds_amortized_and_not_rollout():
    """amortized is a candidate under every partitioner and chop, as the other policies are; rollout
    is not (one replay under it costs what a hundred or more of the others do), nor whittle and
    aoi-quadratic (measured to cost the tuner on `batch`, docs/experiments.md)."""
    cfg = _config()
    grid = candidates(cfg)
    policies = {s["policy"] for s in grid}
    assert policies == {"auto", "max-benefit", "edf-p", "amortized"}
    per = {p: sum(1 for s in grid if s["policy"] == p) for p in policies}
    assert len(set(per.values())) == 1 and per["amortized"] == 36
