"""The diagnostic scripts the docs point to refuse bad arguments with argparse's one-line error,
naming the argument and what is wrong, not a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts import bound_gap, rollout_horizon, tuner_cost, tuner_screen  # noqa: E402
from scripts.revtree import export  # noqa: E402


@pytest.mark.parametrize(("main", "argv", "says"), [
    (tuner_screen.main, ["--point", "nosuch:1.0"], "argument --point: unknown workload 'nosuch' (one of batch,"),
    (tuner_cost.main, ["--against", "HEAD", "--point", "dag"], "argument --point: WORKLOAD:U, U expected a positive number, got ''"),
    (tuner_cost.main, ["--against", "HEAD", "--point", "dag:-1"], "argument --point: WORKLOAD:U, U expected a positive number, got '-1'"),
    (rollout_horizon.main, ["--workloads", "nosuch"], "argument --workloads: unknown 'nosuch' (of classes,"),
    (rollout_horizon.main, ["--lines", "mb,bogus"], "argument --lines: unknown 'bogus' (of mb, old,"),
])
def test_a_bad_argument_is_named(main, argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "says"), [
    (["--only", "unseen,bogus"], "argument --only: unknown 'bogus' (of beyond, unseen,"),
    (["--xs", "abc"], "argument --xs: expected a positive number, got 'abc'"),
    (["--xs", "1,0"], "argument --xs: expected a positive number, got '0'"),
])
def test_bound_gap_names_a_bad_argument(argv, says, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bound_gap.py", *argv])
    with pytest.raises(SystemExit) as e:
        bound_gap.main()
    assert e.value.code == 2 and says in capsys.readouterr().err


def test_against_a_revision_that_is_no_commit(tmp_path):
    with pytest.raises(SystemExit, match="'no-such-rev' is not a commit of this repository"):
        export("no-such-rev", tmp_path)
