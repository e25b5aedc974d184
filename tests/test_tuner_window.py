"""Scripts/tuner_window.py with `--hours` and `--paper`: the paper lines run statically on
the same seeds and horizon as the tuned default, and its ratio is to the best of them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts import tuner_window  # noqa: E402
from sim.experiments import PAPER_LINES  # noqa: E402


def test_a_longer_run_is_divided_by_the_best_paper_line_at_its_own_horizon(capsys):
    assert tuner_window.main(["--points", "dag:1.0", "--seeds", "1", "--workers", "1", "--hours", "1.5",
                              "--paper", "--variant", "t"]) == 0
    out = capsys.readouterr().out
    rows = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    paper = {r["line"]: r["lateness"] for r in rows if "line" in r}
    assert set(paper) == {ln.label for ln in PAPER_LINES}
    (mine,) = [r for r in rows if "line" not in r]
    assert all(r["horizon"] == 5400.0 for r in rows)
    best = min(paper, key=paper.__getitem__)
    m = re.search(r"# t dag U=1: ([\d.]+) / ([\d.]+) \((.+?)\) = ([\d.]+)", out)
    assert m is not None, out
    assert m.group(3) == best and float(m.group(2)) == round(paper[best], 3)
    assert float(m.group(4)) == round(mine["lateness"] / paper[best], 3)


def test_hours_without_the_paper_lines_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        tuner_window.main(["--points", "dag:1.0", "--hours", "48"])
    assert e.value.code == 2
    assert "--hours needs --paper" in capsys.readouterr().err


def test_the_judge_finds_no_difference_between_the_default_and_itself():
    from scripts import tuner_judge

    rows = tuner_judge.judge("dag", 1.0, 1, {}, every=1.0, hours=2.5, truth_seeds=1)
    assert [r["hour"] for r in rows] == [1.0, 2.0]
    for r in rows:
        assert r["jobs"] > 0
        assert r["model"] == r["truth"] == r["switch_next"] == r["switch_to_end"] == 1.0


def test_the_judge_sees_a_worse_setting_over_the_rest_of_the_run():
    from scripts import tuner_judge

    # one track's worth of the default's two, held back by chopping every backlog into small pieces
    rows = tuner_judge.judge("dag", 1.0, 1, {"tracks": 1, "chop": 1.0}, every=1.0, hours=3.0, truth_seeds=1)
    assert all(r["switch_to_end"] > 1.05 and r["truth"] > 1.05 and r["model"] > 1.05 for r in rows)
