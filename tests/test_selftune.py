"""The tuner inside a simulation (sim.selftune): a simulated run under a losing setting
switches through the Scheduler's Reconfigure event and ends better; one under the default keeps
it; the tuned run is reproducible from its seed; `freshet sim run` shows what the tuner did."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from sim.autotune import Rules
from sim.selftune import SEEDS, SimTuner, attach
from sim.simulator import Simulation, prepare, simulate
from sim.workload import TableClass, build_workload, config_of, with_utilization
from warehouse.config import FreshetConfig
from warehouse.events import Reconfigure

# the workload of tests/test_autotune.py: two priority classes on two tracks; FIFO is run at U = 1.1,
# where the simulated run's hour windows find it losing by more than the default margin (20%)
# within two hours (at U = 1.05, only after nearly three)
TWO_CLASSES = (TableClass(6, period=60, priorities=10, alpha=0.5, beta=0.05, name="hi"),
               TableClass(3, period=600, priorities=1, alpha=10, beta=0.2, name="lo"))
FIFO = {"policy": "fifo", "partitioner": "global", "chop": None, "autotune": "apply", "autotune_every": 600}
EVENTS = 1500  # about 2.7 simulated hours: 16 evaluations, one every 10 minutes
SWITCHED = 1000  # about 1.8 hours: FIFO's switch at 1.5 hours (10-12 evaluations from 900 to 1,100 events)


def _data(u: float = 1.0, **scheduler) -> dict:
    return with_utilization(build_workload(TWO_CLASSES, scheduler={"tracks": 2, **scheduler}, sim={"b": 0.5}), u)


def _config(u: float = 1.0, **scheduler) -> FreshetConfig:
    return config_of(_data(u, **scheduler))


def test_a_simulated_run_switches_away_from_a_losing_setting_through_reconfigure(monkeypatch):
    cfg = _config(1.1, **FIFO)
    handled: list[Reconfigure] = []
    real = Simulation._handle

    def spy(self, event, *args, **kwargs):
        if isinstance(event, Reconfigure):
            handled.append(event)
        return real(self, event, *args, **kwargs)

    monkeypatch.setattr(Simulation, "_handle", spy)
    tuned = simulate(cfg, seed=3, events=EVENTS, tuner=attach)
    at = tuned.extra["autotune"]
    assert at["switches"], at
    first = at["switches"][0]
    assert first["from"].startswith("fifo") and not first["to"].startswith("fifo")
    assert first["time"] % cfg.scheduler.autotune_every == 0  # at the daemon's cadence
    assert len(handled) == len(at["switches"])  # through the Scheduler's one door
    assert handled[0].config.scheduler.policy != "fifo" and handled[0].config.scheduler.learn_costs is False
    assert at["simulations"] > 90 and at["simulated"] <= at["evaluations"]
    assert at["results"].get("cooldown", 0) > 0  # evaluations within the hour after the switch
    # the run is better for it than FIFO left alone (same seed: same arrivals and draws)
    plain = simulate(cfg, seed=3, events=EVENTS)
    assert "autotune" not in plain.extra
    assert tuned.run.weighted_staleness < 0.97 * plain.run.weighted_staleness


def test_a_simulated_run_keeps_the_default_where_it_is_best_and_is_reproducible():
    cfg = _config(autotune_every=1200)  # half the daemon's cadence: the same verdicts, half the cost
    assert cfg.scheduler.autotune == "apply"
    runs = [simulate(cfg, seed=3, events=EVENTS, tuner=attach) for _ in range(2)]
    at = runs[0].extra["autotune"]
    assert at["switches"] == [] and at["setting"].startswith("auto, auto, chop auto")
    assert at["results"].get("keep", 0) > 0 and at["simulated"] > 0
    assert set(at["results"]) <= {"keep", "too_few_jobs"}
    # seeded: the same figures, whatever the machine (only the measured CPU time differs)
    assert runs[0].to_json() == runs[1].to_json()
    # and the tuner changed nothing: the run is the run without it
    assert runs[0].run.weighted_staleness == simulate(cfg, seed=3, events=EVENTS).run.weighted_staleness


def test_no_tuner_where_the_user_chose_the_algorithm_or_on_the_ideal():
    chosen = prepare(_config(policy="max-benefit", partitioner="global", chop=None), 1)
    assert chosen.scheduler.autotune == "off"
    assert attach(Simulation(chosen, seed=1)) is None
    assert "autotune" not in simulate(chosen, seed=1, events=200, tuner=attach).extra


def test_freshet_sim_run_shows_the_tuner(tmp_path: Path):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(_data(1.1, **FIFO)))
    cmd = [sys.executable, "-m", "ops.cli", "sim", "run", "--config", str(path), "--events", str(SWITCHED),
           "--seed", "3"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "tuner: " in text and "switches: at 5400 s to" in text  # the --json form: the replay test below
    assert text.splitlines()[0].endswith("(at the start: the tuner switched, below)")  # the header is the start's


def test_choosing_the_algorithm_on_the_command_line_turns_the_tuner_off(tmp_path: Path, capsys):
    from ops.cli import main as freshet

    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(_data()))  # all auto: the tuner applies
    assert freshet(["sim", "run", "--config", str(path), "--events", "300", "--policy", "fifo", "--json"]) == 0
    assert "autotune" not in json.loads(capsys.readouterr().out)
    path.write_text(yaml.safe_dump(_data(autotune="apply")))  # said in the file: kept
    assert freshet(["sim", "run", "--config", str(path), "--events", "300", "--policy", "fifo", "--json"]) == 0
    assert "autotune" in json.loads(capsys.readouterr().out)
    assert freshet(["sim", "run", "--config", str(path), "--events", "300", "--autotune", "off", "--json"]) == 0
    assert "autotune" not in json.loads(capsys.readouterr().out)
    path.write_text(yaml.safe_dump(_data(autotune="recommend")))  # never switches: not simulated, and said so
    assert freshet(["sim", "run", "--config", str(path), "--events", "300"]) == 0
    assert "tuner: `recommend` never switches, so it is not simulated" in capsys.readouterr().out


def test_the_replay_of_a_tuned_runs_trace_is_that_run(tmp_path: Path, capsys):
    from ops.cli import main as freshet

    path, trace = tmp_path / "w.yaml", tmp_path / "run.jsonl"
    path.write_text(yaml.safe_dump(_data(1.1, **FIFO)))
    argv = ["sim", "run", "--config", str(path), "--events", str(SWITCHED), "--seed", "3", "--json"]
    assert freshet([*argv, "--write-trace", str(trace)]) == 0
    gen = capsys.readouterr().out
    assert freshet([*argv, "--trace", str(trace)]) == 0
    at = json.loads(gen)["autotune"]
    assert at["switches"] and at["evaluations"] >= 10
    # byte for byte but for the lower bound (sim.bound), which a replayed trace has not
    assert json.loads(gen)["bound"] is not None
    assert capsys.readouterr().out == gen.replace(json.dumps(json.loads(gen)["bound"], sort_keys=True), "null")


def test_an_hour_with_too_few_jobs_is_judged_on_a_longer_window():
    """About 300 jobs an hour here: with `min_jobs` 400 an hour never holds enough, so with stretch
    1 (the window is the hour) the tuner never judges; with stretch 3, the default (sim.autotune.
    window_of), it reaches back and judges once the run has 400 jobs (within three hours). (An
    hour's window every 10 minutes, the defaults, said explicitly.)"""
    cfg = prepare(_config(autotune_min_jobs=400, autotune_window=3600, autotune_every=600), 3)
    results = {}
    for stretch in (1.0, 3.0):
        sim = Simulation(cfg, seed=3)
        tuner = SimTuner(sim, cfg, Rules(min_jobs=400, seeds=SEEDS, stretch=stretch))
        sim.run(events=EVENTS)
        assert sim.jobs < 400 * sim.env.now / 3600  # fewer than 400 an hour
        results[stretch] = tuner.results
    assert set(results[1.0]) == {"too_few_jobs"}
    assert attach(Simulation(cfg, seed=3)).rules.stretch == 3.0  # the default
    judged = results[3.0]["keep"] + results[3.0]["switch"]
    assert judged >= 4 and results[3.0]["too_few_jobs"] >= 3, results[3.0]
