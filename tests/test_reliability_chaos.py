"""The kill storm, CI-sized: `scripts/chaos.py --kills 6` — the real daemon
SIGKILLed six times at random instants, once in each kind (recovery, a base append, a derived job,
just after a commit, a SIGHUP reload, a random moment),
restarted each time, then audited with delta-rs: 0 rows lost, 0 duplicated, every derived table
equal to its SQL recomputed in plain Python, every bad partition quarantined with a reason.
The 100-kill storm is the same script: `python scripts/chaos.py --kills 100`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.chaos import KILL_KINDS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_a_kill_of_each_kind_loses_nothing_and_loads_nothing_twice(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "chaos.py"), "--kills", "6", "--seed", "7",
                          "--workdir", str(tmp_path / "storm"), "--json", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert out.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["kills"] == 6
    assert r["kill_kinds_aimed"] == {kind: 1 for kind in KILL_KINDS}
    assert r["partitions_good"] >= 28 and r["partitions_bad"] >= 5  # seed 7: 31 and 5
    assert r["rows_found"] == r["rows_expected"] > 0
    assert r["lost"] == 0 and r["duplicated"] == 0
    for name, b in r["base"].items():
        assert b["foreign"] == 0 and b["altered"] == 0 and b["partitions_wrong"] == 0, name
    for name, d in r["derived"].items():
        assert d["equal"], (name, d)
    assert r["derived"]["s2_band"]["rows_found"] > 0  # the two-source join with a lookback ran
    assert r["quarantined_with_reason"] == r["partitions_bad"] and not r["quarantine_unexpected"]
    assert r["caught_up"] and r["final_exit_code"] == 0
    assert r["passed"], r["problems"]
    assert run.returncode == 0
    assert "PASSED" in run.stdout
