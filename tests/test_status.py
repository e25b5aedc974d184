"""`freshet status`: order, backlog column and LAST, rendered from real /v1/tables rows (ops.api.table_view)."""

from __future__ import annotations

from ops.api import table_view
from ops.status import render
from tests.helpers_ops import make_table
from warehouse.scheduler import Recovered, Scheduler

T0 = 1_700_000_000.0


def body(*tables) -> dict:
    return {"tables": [table_view(t, T0, T0) for t in tables]}


def test_most_over_target_first_then_stalest_then_never_loaded():
    tables = [
        make_table("stalest_no_target", freshness=T0 - 5000),            # 5000 s, no target
        make_table("a_bit_over", freshness=T0 - 700, target_staleness=600.0),  # 1.17× target
        make_table("far_over", freshness=T0 - 300, target_staleness=60.0),     # 5× target
        make_table("within", freshness=T0 - 100, target_staleness=600.0),
        make_table("never", target_staleness=60.0),
    ]
    text = render(body(*tables))
    names = [ln.split()[0] for ln in text.splitlines()[1:6]]
    assert names == ["far_over", "a_bit_over", "stalest_no_target", "within", "never"]
    assert "2 over target: far_over, a_bit_over" in text


def test_backlog_column_is_true_while_a_job_runs():
    running = make_table("syslog_raw", freshness=T0 - 60, state="running", running_job=7, running_track=0,
                         backlog=7860.0, pending_delta=7680.0, pending_partitions=141, running_partitions=3)
    text = render(body(running))
    assert text.splitlines()[0].split()[-2:] == ["BACKLOG", "LAST"]
    line = text.splitlines()[1]
    assert "running" in line and "2h11m/141" in line


def test_last_after_a_restart_is_the_recovered_load_not_blank():
    from tests.helpers_engine import config

    cfg = config([{"name": "m", "period": 60}], [{"name": "m_raw", "stream": "m"}, {"name": "new_raw", "stream": "m"}])
    s = Scheduler(cfg, now=T0, recovered={"m_raw": Recovered(freshness=T0 - 60)})
    snap = s.stats(T0)
    text = render({"tables": [table_view(t, snap.now, T0) for t in snap.tables]})
    by = {ln.split()[0]: ln for ln in text.splitlines()[1:3]}
    assert by["m_raw"].rstrip().endswith("ok (recovered)")
    assert by["new_raw"].rstrip().endswith("-")  # never loaded: nothing to report
