"""scripts/tuner_screen.py: the screen's replays run to their end, each handing the screen what
sim.autotune.score would, so the tuned run and its decisions are unchanged."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sim.autotune as autotune  # noqa: E402
from scripts import tuner_screen  # noqa: E402
from scripts.tuner_cost import point  # noqa: E402
from sim.autotune import current_setting, replay, replayed, window_of  # noqa: E402
from sim.selftune import attach  # noqa: E402
from sim.simulator import simulate  # noqa: E402
from sim.trace import TraceWriter, parse_trace  # noqa: E402
from sim.workload import TableClass, build_workload, config_of, with_utilization  # noqa: E402
from warehouse.config import parse_config  # noqa: E402


def test_the_figures_of_three_made_up_replays():
    cur = [float(k + 1) for k in range(autotune.CHECKS - 1)]  # the setting in force: 30 in all
    bar, none = 25.5, [0.0] * len(cur)
    worse = {"trail": [1.2 * c for c in cur], "total": 36.0, "above": bar, "floor": none}  # stopped at 22
    better = {"trail": [0.5 * c for c in cur], "total": 15.0, "above": bar, "floor": none}  # through, beats 20%
    late = {"trail": [0.8 * c for c in cur], "total": 26.0, "above": bar, "floor": none}  # to the end, past the bar
    out = tuner_screen.report([{"current": cur, "total": 30.0, "replays": [worse, better, late]}])
    assert [tuner_screen.stop(r) for r in (worse, better, late)] == [22, None, None]  # 1.2·22 is the first past 25.5
    assert (out["replays"], out["ran_to_end"], out["through"], out["beat_margin"]) == (3, 2, 1, 1)
    assert out["checkpoints_run"] == pytest.approx((22 + 24 + 24) / 72, abs=1e-3)
    assert out["spread"] == {"<=0.8": 1, "0.8-0.85": 0, "0.85-0.95": 1, "0.95-1.05": 0, "1.05-1.15": 0, ">1.15": 1}
    rule = {(r["k"], r["ratio"]): r for r in out["rules"]}
    assert rule[(4, 1.1)] == {"k": 4, "ratio": 1.1, "checkpoints": round((4 + 24 + 24) / 70, 3), "lost": 0,
                              "lost_margin": 0}
    assert rule[(4, 1.3)]["checkpoints"] == 1.0  # 1.2× never reaches 1.3×
    assert out["through_behind"] == pytest.approx(0.5) and out["floor_above"] == 0


def test_the_wrapper_hands_the_screen_what_score_does():
    """One replay of a two-class workload under a bar that stops it and one it comes through:
    the same figure and the same trail from sim.autotune.score and from the script's wrapper."""
    classes = (TableClass(6, period=60, priorities=10, alpha=0.5, beta=0.05, name="hi"),
               TableClass(3, period=600, priorities=1, alpha=10, beta=0.2, name="lo"))
    cfg = config_of(with_utilization(build_workload(classes, scheduler={"tracks": 2}, sim={"b": 0.5}), 1.0))
    buf = io.StringIO()
    simulate(cfg, seed=7, events=800, writer=TraceWriter(buf))
    window = window_of(parse_trace(buf.getvalue().splitlines()), cfg, 3600.0)
    mine = current_setting(cfg)
    exact = replay(cfg, window, mine, 1)
    for above in (0.5 * exact, 1.1 * exact):
        want: list[float] = []
        got: list[float] = []
        v = tuner_screen.SCORE(replayed(cfg, window, mine, 1), window, above=above, trail=want)
        screens = tuner_screen.Screens()
        screens.evaluations.append({"current": [], "total": exact, "replays": []})
        assert screens.score(replayed(cfg, window, mine, 1), window, above=above, trail=got) == v
        assert got == want
        assert (v > above and len(got) < autotune.CHECKS - 1) if above < exact else v == exact
        assert screens.evaluations[0]["replays"][0]["total"] == exact  # run to its end all the same


def test_a_tuned_run_keeps_its_decisions_and_the_floor_stays_under_every_rest(capsys):
    cfg = parse_config(point("fanout", 1.2), source="fanout:1.2")
    plain = simulate(cfg, seed=1, events=1000, tuner=attach).to_json()
    assert tuner_screen.main(["--point", "fanout:1.2", "--events", "1000"]) == 0
    assert autotune.score is tuner_screen.SCORE  # put back
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert out["relative_lateness"] == plain["relative_lateness"]
    assert out["autotune"] == {k: plain["autotune"][k] for k in ("evaluations", "results", "screens", "simulations")}
    assert out["replays"] > 50 and out["floor_above"] == 0
    assert sum(out["spread"].values()) == out["replays"]
