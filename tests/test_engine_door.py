"""One engine, one door (docs/architecture.md): `Scheduler.handle(event, now)` is the only way its state
changes — operator actions included — queries change nothing, every state is in `TRANSITIONS`,
and a trace records the actions so its replay applies them. No Spark."""

from __future__ import annotations

import io
import random

import pytest
from conftest import saturated_config

from sim.simulator import Simulation
from sim.trace import ActionRecord, TraceWriter, parse_trace
from warehouse.config import parse_config
from warehouse.errors import SchedulerMisuse
from warehouse.events import (
    JobFinished,
    PartitionArrived,
    Reconfigure,
    Refresh,
    Resume,
    StartJob,
    Suspend,
)
from warehouse.scheduler import TRANSITIONS, JobState, MaintenanceState, Mode, Scheduler


def _cfg(policy: str = "auto", n: int = 12, tracks: int = 3):
    return saturated_config(n, tracks, 7, policy=policy)


def _drive(s: Scheduler, periods: list[float], ask: bool) -> list[tuple]:
    """A saturated run; with `ask`, every query is asked between events. The decisions."""
    rng = random.Random(3)
    running: list[tuple[float, int, StartJob]] = []
    nxt = [rng.uniform(0, p) for p in periods]
    k = [0] * len(periods)
    out: list[tuple] = []
    now = 0.0
    for _ in range(600):
        i = min(range(len(periods)), key=lambda j: nxt[j])
        if running and running[0][0] <= nxt[i]:
            now, _, job = running.pop(0)
            jobs = s.handle(JobFinished(job_id=job.job_id, duration=job.estimate), now)
        else:
            now = nxt[i]
            jobs = s.handle(PartitionArrived(stream=f"s{i}", partition_id=f"{i}-{k[i]}", start=k[i] * periods[i],
                                             end=(k[i] + 1) * periods[i], rows=100), now)
            k[i] += 1
            nxt[i] += periods[i]
        for j in jobs:
            running.append((now + j.estimate, j.job_id, j))
        running.sort()
        out.extend((now, j.table, j.kind, j.start, j.end, j.track) for j in jobs)
        if ask:
            s.stats(now)
            s.next_wakeup()
            s.weighted_staleness(now)
            s.plan_stats()
            for t in s._by_idx:  # the candidate of each table (§3.1) is a query too
                s.is_suspended(t.name)
                s.refresh_pending(t.name)
                s.refresh_mode(t.name)
                if t.state.phase == "pending":
                    s._candidate(t)
    return out


@pytest.mark.parametrize("policy", ["auto", "max-benefit", "lookahead", "aoi-quadratic", "whittle", "amortized"])
def test_queries_change_nothing_the_decisions_are_the_same_with_or_without_them(policy: str) -> None:
    cfg, periods = _cfg(policy)
    quiet = _drive(Scheduler(cfg, now=0.0, initial_freshness=0.0), periods, ask=False)
    asked = _drive(Scheduler(cfg, now=0.0, initial_freshness=0.0), periods, ask=True)
    assert len(quiet) > 100 and asked == quiet


def test_the_side_doors_are_gone_and_every_state_is_in_the_transition_table() -> None:
    for name in ("suspend", "resume", "refresh", "recompute", "reconfigure"):
        assert not hasattr(Scheduler, name), name
    seen = {k[0] for k in TRANSITIONS} | set(TRANSITIONS.values())
    assert set(JobState) | set(Mode) | set(MaintenanceState) <= seen
    s = Scheduler(_cfg()[0], now=0.0, initial_freshness=0.0)
    with pytest.raises(SchedulerMisuse, match="unknown event"):
        s.handle(object(), 1.0)  # type: ignore[arg-type]
    with pytest.raises(SchedulerMisuse, match="unknown table 'nope'"):
        s.handle(Suspend(table="nope"), 1.0)


def test_held_is_a_state_entered_by_handling_an_event() -> None:
    """Reservation (policies.reservation) holds a long job back: the table is HELD, and only an
    event got it there."""
    cfg = parse_config({
        "streams": [{"name": "fast", "period": 10}, {"name": "slow", "period": 600}],
        "tables": [{"name": "f", "stream": "fast", "priority": 100, "cost": {"alpha": 1, "beta": 0.01}},
                   {"name": "l", "stream": "slow", "priority": 1, "cost": {"alpha": 1, "beta": 0.5}}],
        "scheduler": {"tracks": 1, "policy": "auto", "learn_costs": False, "chop": None}})
    s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="fast", partition_id="f0", start=0, end=10), 10.0)
    s.handle(JobFinished(job_id=job.job_id, duration=1.0), 11.0)
    assert s.handle(PartitionArrived(stream="slow", partition_id="l0", start=0, end=600), 12.0) == []
    assert s._tables["l"].state is JobState.HELD and s.stats(12.0).pending_jobs == 1
    assert next(t for t in s.stats(12.0).tables if t.name == "l").state == "pending"
    (f1,) = s.handle(PartitionArrived(stream="fast", partition_id="f1", start=10, end=20), 20.0)
    assert f1.table == "f"


def _replay_cfg():
    return parse_config({
        "streams": [{"name": "s", "period": 10}],
        "tables": [{"name": "raw", "stream": "s", "priority": 1, "cost": {"alpha": 1, "beta": 0.01}}],
        "scheduler": {"tracks": 1, "learn_costs": False, "chop": None}})


def test_a_trace_records_operator_actions_and_its_replay_applies_them() -> None:
    buf = io.StringIO()
    w = TraceWriter(buf)
    for k in range(20):
        w._write({"time": (k + 1) * 10.0 + 0.5, "stream": "s", "partition": f"p{k}", "start": k * 10.0,
                  "end": (k + 1) * 10.0})
    w.action(ActionRecord.of(50.0, Suspend(table="raw", reason="night")))
    w.action(ActionRecord.of(150.0, Resume(table="raw")))
    w.action(ActionRecord.of(151.0, Refresh(table="raw")))
    trace = parse_trace(buf.getvalue().splitlines())
    assert [(a.time, a.action, a.reason) for a in trace.actions] == [
        (50.0, "suspend", "night"), (150.0, "resume", ""), (151.0, "refresh", "")]
    assert trace.actions[0].event() == Suspend(table="raw", reason="night")
    out = io.StringIO()
    sim = Simulation(_replay_cfg(), trace=trace, writer=TraceWriter(out, write_header=False))
    sim.run()
    jobs = [r for r in parse_trace(out.getvalue().splitlines()).jobs]
    starts = [j.time - j.duration for j in jobs]
    assert not [t for t in starts if 51.0 < t < 150.0]  # suspended: nothing started
    after = next(j for j in jobs if j.time - j.duration >= 150.0)  # resumed: all that waited in one job
    assert (after.start, after.end) == (40.0, 140.0)  # p14 (end 150) arrives at 150.5


def test_a_bad_action_line_is_reported_by_line_number() -> None:
    from warehouse.errors import ConfigError

    with pytest.raises(ConfigError, match="line 2: unknown action 'explode'"):
        parse_trace(['{"time": 1, "stream": "s", "start": 0, "end": 1}', '{"time": 2, "action": "explode", "table": "t"}'])


def test_maintenance_due_is_a_state_entered_and_left_by_handling_events() -> None:
    """Maintenance due (warehouse.upkeep) is the table's `MaintenanceState`, moved by TRANSITIONS: due after
    the commit that makes it so, waiting while the one track runs an update job, current again
    when its OPTIMIZE starts — or when a reload turns its maintenance off."""
    def cfg(optimize_every):
        return parse_config({
            "streams": [{"name": "a", "period": 10}, {"name": "b", "period": 10}],
            "tables": [{"name": "a", "stream": "a", "priority": 10, "cost": {"alpha": 1, "beta": 0.01}},
                       {"name": "b", "stream": "b", "cost": {"alpha": 1, "beta": 0.01}}],
            "maintenance": {"optimize_every": optimize_every, "vacuum_every": None},
            "scheduler": {"tracks": 1, "policy": "max-benefit", "learn_costs": False, "chop": None}})

    for turned_off in (False, True):
        s = Scheduler(cfg(2), now=0.0, initial_freshness=0.0)
        a = s._tables["a"]
        now = 0.0
        for i in range(2):
            (ja,) = s.handle(PartitionArrived(stream="a", partition_id=f"a{i}", start=i * 10, end=i * 10 + 10), now + 10)
            assert s.handle(PartitionArrived(stream="b", partition_id=f"b{i}", start=i * 10, end=i * 10 + 10),
                            now + 10) == []  # the track is busy
            (jb,) = s.handle(JobFinished(job_id=ja.job_id, duration=1.0), now + 11)
            assert jb.table == "b"  # update jobs first: maintenance takes a track left idle
            if i == 0:
                assert s.handle(JobFinished(job_id=jb.job_id, duration=1.0), now + 12) == []
                assert a.maintenance is MaintenanceState.CURRENT  # one commit of two
            now += 10
        # a's second commit made its OPTIMIZE due; b's job holds the one track
        assert a.maintenance is MaintenanceState.DUE and a.state is JobState.IDLE and "a" in s._due
        if turned_off:
            s.handle(Reconfigure(config=cfg(None)), now + 1.5)
            assert s.handle(JobFinished(job_id=jb.job_id, duration=1.0), now + 2) == []
            assert a.maintenance is MaintenanceState.CURRENT and s._tables["b"].maintenance is MaintenanceState.CURRENT and not s._due
            continue
        (opt,) = s.handle(JobFinished(job_id=jb.job_id, duration=1.0), now + 2)
        assert opt.kind == "optimize" and opt.table == "a"
        assert a.maintenance is MaintenanceState.CURRENT and a.state is JobState.MAINTAINING and "a" not in s._due
        assert s._tables["b"].maintenance is MaintenanceState.DUE and list(s._due) == ["b"]  # its second commit: it waits its turn


def test_a_table_state_is_written_only_by_the_transition_helpers() -> None:
    """The one door, read from the source: in the engine, a table's job state, mode and maintenance state are
    assigned only inside `Scheduler._transition`, `_mode` and `_maintenance` (TRANSITIONS)."""
    import ast
    from pathlib import Path

    allowed = {("scheduler.py", "_transition", "state"), ("scheduler.py", "_mode", "mode"),
               ("scheduler.py", "_maintenance", "maintenance")}
    found = set()
    for path in Path(__file__).resolve().parents[1].joinpath("warehouse").glob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
                found |= {(path.name, fn.name, t.attr) for t in targets
                          if isinstance(t, ast.Attribute) and t.attr in ("state", "mode", "maintenance")}
    assert found == allowed


@pytest.mark.parametrize("sql", [False, True])
def test_adopting_a_running_job_after_a_reload_is_a_transition(sql: bool, monkeypatch) -> None:
    """A table removed and re-added by two reloads while its job runs takes that job over (one
    writer per table, §4.4) — by a move of TRANSITIONS, like every change of its state; with a
    changed SQL the derived table's recompute job is adopted as a recompute."""
    def cfg(with_d: bool, version: str = "SELECT 1"):
        tables = [{"name": "raw", "stream": "s", "priority": 1, "cost": {"alpha": 1, "beta": 0.01}}]
        if with_d:
            tables.append({"name": "d", "sources": ["raw"], "sql": version, "granularity": 10})
        return parse_config({"streams": [{"name": "s", "period": 10}], "tables": tables,
                             "scheduler": {"tracks": 1, "learn_costs": False, "chop": None}})

    moves: list[tuple[str, str]] = []
    real = Scheduler._transition

    def spy(self, t, kind):
        moves.append((t.name, kind))
        real(self, t, kind)

    monkeypatch.setattr(Scheduler, "_transition", spy)
    s = Scheduler(cfg(True), now=0.0, initial_freshness=0.0)
    (load,) = s.handle(PartitionArrived(stream="s", partition_id="p0", start=0, end=10), 10.0)
    (first,) = s.handle(JobFinished(job_id=load.job_id, duration=1.0), 11.0)
    assert first.table == "d"
    if sql:  # d's window is committed; a new SQL version makes it a recompute
        s.handle(JobFinished(job_id=first.job_id, duration=1.0, sql_version=first.sql_version), 12.0)
        (first,) = s.handle(Reconfigure(config=cfg(True, "SELECT 2")), 13.0)
        assert first.kind == "recompute"
    s.handle(Reconfigure(config=cfg(False)), 14.0)
    moves.clear()
    assert s.handle(Reconfigure(config=cfg(True, "SELECT 2" if sql else "SELECT 1")), 15.0) == []
    d = s._tables["d"]
    assert d.state is (JobState.RECOMPUTING if sql else JobState.RUNNING)
    assert moves[0] == ("d", "adopt recompute" if sql else "adopt")
    s.handle(JobFinished(job_id=first.job_id, duration=1.0, sql_version=first.sql_version), 16.0)
    assert first.job_id not in s.running
    if not sql:  # (the re-added d starts from `initial_freshness`: after the recompute its update job runs)
        assert d.state is JobState.IDLE and d.freshness == 10.0
