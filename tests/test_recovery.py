"""Exactly-once under SIGKILL (DESIGN.md §4.4): a loader process killed at random instants across
many loads, restarted each time from the Delta logs alone, ends with every partition loaded exactly
once and every derived table equal to its SQL over its sources up to its freshness.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import MINUTE, T0, warehouse_dict, write_minutes
from test_delta import expected_base, sql_over_full_sources, table_rows

from warehouse.config import parse_config
from warehouse.lake.recovery import recover

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys
from warehouse.config import parse_config
from ops.testing import run_until_idle
from warehouse.lake.session import get_spark
cfg = parse_config(json.loads(sys.argv[1]))
spark = get_spark(cfg.spark)
print("READY", flush=True)
report, _ = run_until_idle(cfg, spark, retry_failed=True, timeout=120,
                           on_event=lambda e: print("EVENT", type(e).__name__, flush=True))
print("DONE", report.jobs, report.failed, flush=True)
"""


def start_child(data: dict, log: Path, code: str = CHILD) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code, json.dumps(data)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=log.open("ab"), text=True)


def wait_line(proc: subprocess.Popen, prefix: str, timeout: float) -> str | None:
    """The first stdout line starting with `prefix`, or None if the process ends first."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return None
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no {prefix!r} within {timeout}s")


def test_sigkill_at_random_instants_loads_everything_exactly_once(spark, tmp_path: Path) -> None:
    rng = random.Random(20261126)
    data = warehouse_dict(tmp_path, chop=1.0)  # one partition per base job: many small commits
    cfg = parse_config(data)
    minutes = 8
    write_minutes(cfg, "m", 0, minutes // 2)
    write_minutes(cfg, "a", 0, minutes // 2)
    log = tmp_path / "child.log"
    kills, more_written, t_start = 0, False, time.monotonic()
    while True:
        child = start_child(data, log)
        assert wait_line(child, "READY", 120) is not None, log.read_text()[-3000:]
        if kills < 3 and time.monotonic() - t_start < 60:
            # let it get going (k job outcomes), then kill it at a random instant: mid-read,
            # mid-commit, between the commit and its report, mid-archive
            for _ in range(rng.randint(1, 4)):
                if wait_line(child, "EVENT", 120) is None:
                    break
            time.sleep(rng.uniform(0.0, 2.0))
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                child.wait()
                kills += 1
        else:
            done = wait_line(child, "DONE", 240)
            child.wait(timeout=60)
            assert done is not None, log.read_text()[-3000:]
        if not more_written:  # more data arrives while the loader is down
            write_minutes(cfg, "m", minutes // 2, minutes // 2)
            write_minutes(cfg, "a", minutes // 2, minutes // 2)
            more_written = True
            continue
        if child.returncode == 0:  # it finished: everything is loaded
            break
    assert kills >= 1

    # every partition loaded exactly once, row for row
    assert table_rows(spark, cfg, "m_raw", ["id", "k", "v"]) == expected_base("m", range(minutes), ["id", "k", "v"])
    assert table_rows(spark, cfg, "a_raw", ["id", "k", "sev"]) == expected_base("a", range(minutes), ["id", "k", "sev"])
    state = recover(cfg)
    assert sorted(state.tables["m_raw"].partitions) == [f"m-{i:04d}" for i in range(minutes)]
    assert state.tables["m_raw"].freshness == T0 + minutes * MINUTE
    # every derived table equals its SQL over its sources, up to its freshness — and is complete
    assert state.tables["m_5m"].freshness == T0 + (minutes // 5) * 5 * MINUTE
    assert state.tables["a_m"].freshness == T0 + minutes * MINUTE
    for name in ("m_5m", "a_m"):
        cols, expected = sql_over_full_sources(spark, cfg, name, state.tables[name].freshness)
        assert table_rows(spark, cfg, name, cols) == expected, name
    assert not any((Path(cfg.warehouse.landing) / "m").iterdir())
