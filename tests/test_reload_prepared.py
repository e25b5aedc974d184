"""A reload's layout prepared off the loop (warehouse.blueprint) applied to a Scheduler gives the
engine exactly the state and the decisions that laying every table out again gives, and preparing
it leaves the live Scheduler alone."""

from __future__ import annotations

from typing import Any

from tests.helpers_engine import config
from warehouse.blueprint import blueprint, changed
from warehouse.events import JobFailed, JobFinished, PartitionArrived, Reconfigure, StartJob, Suspend, Tick
from warehouse.scheduler import Recovered, Scheduler

T0 = 1_000.0


def _cfg(*, changed_sql: bool = False, priorities: int = 1, added: bool = False, removed: bool = False,
         c_derived: bool = False, s2_time: bool = False) -> Any:
    streams = [{"name": "s1", "period": "5m"}, {"name": "s2", "period": "5m", "time_column": "t2" if s2_time else "ts"}]
    streams += [] if c_derived else [{"name": "s3", "period": "5m"}]
    tables: list[dict] = [
        {"name": "a", "stream": "s1", "priority": priorities, "cost": {"alpha": 1, "beta": 0.01}},
        {"name": "a2", "stream": "s1", "priority": 2, "cost": {"alpha": 1, "beta": 0.01},
         "maintenance": {"optimize_every": 2}},  # a second reader of s1, with maintenance
        {"name": "b", "stream": "s2", "priority": 3 if priorities == 1 else 1, "target_staleness": "10m"},
        {"name": "c", "sources": ["a"], "granularity": "5m", "sql": "SELECT ts, v FROM a"} if c_derived else
        {"name": "c", "stream": "s3", "priority": 1},
        {"name": "d", "sources": ["a", "b"], "granularity": "5m", "priority": priorities,
         "sql": "SELECT ts, v FROM a JOIN b USING (ts)" + (" WHERE v > 0" if changed_sql else "")},
        {"name": "e", "sources": ["c"], "granularity": "5m",
         "sql": "SELECT ts, v FROM c" + (" WHERE v < 9" if changed_sql else "")},
    ]
    if removed:
        tables = [t for t in tables if t["name"] != "e"]
    if added:
        streams.append({"name": "s4", "period": "5m"})
        tables += [{"name": "f", "stream": "s4", "priority": 4},
                   {"name": "g", "sources": ["a", "f"], "granularity": "5m", "sql": "SELECT ts, v FROM a JOIN f USING (ts)"}]
    return config(streams, tables, tracks=2, partitioner="proportional", learn_costs=True)


def _arrival(stream: str, i: int) -> PartitionArrived:
    return PartitionArrived(stream=stream, partition_id=f"{stream}-{i}", start=T0 + 300 * i, end=T0 + 300 * (i + 1),
                            rows=100 + i)


def _driven() -> tuple[Scheduler, float]:
    """A scheduler with run state: jobs running, one table in back-off, one suspended, a derived
    table with work, learned costs, maintenance counts."""
    s = Scheduler(_cfg(), now=T0)
    now = T0
    running: list[StartJob] = []
    for i in range(5):
        now += 300
        for stream in ("s1", "s2", "s3"):
            running += s.handle(_arrival(stream, i), now)
        pending, running = running, []
        while pending:
            job = pending.pop(0)
            now += 7
            if i == 4 and job.table == "a2":
                running.append(job)  # runs across the reload
            elif i >= 3 and job.table in ("b", "e"):  # they back off: their jobs are what a reload may change
                pending += s.handle(JobFailed(job_id=job.job_id, reason="boom"), now)
            else:
                pending += s.handle(JobFinished(job_id=job.job_id, duration=3.0 + i, rows=10), now)
    s.handle(Suspend(table="c"), now)
    assert running, "a job runs across the reload"
    states = {r.name: r.state for r in s.stats(now).tables}
    assert states["e"] == states["b"] == "backoff"
    return s, now


def _same(x: Scheduler, y: Scheduler, now: float) -> None:
    assert x.stats(now) == y.stats(now)
    assert x.plan_stats() == y.plan_stats()
    assert x.next_wakeup() == y.next_wakeup()
    assert x.costs() == y.costs()


def _follow(x: Scheduler, y: Scheduler, now: float) -> None:
    """The same events from here give the same decisions and state (every job finishes, data arrives)."""
    for i in range(5, 10):
        now += 300
        for stream in ("s1", "s2", "s3", "s4"):
            if stream in {st.name for st in x.config.streams}:
                assert x.handle(_arrival(stream, i), now) == y.handle(_arrival(stream, i), now)
        for job_id in sorted(x.running):
            now += 5
            ev = JobFinished(job_id=job_id, duration=4.0, rows=10)
            assert x.handle(ev, now) == y.handle(ev, now)
        assert x.handle(Tick(), now) == y.handle(Tick(), now)
        _same(x, y, now)


def _reloads() -> list[dict[str, bool | int]]:
    return [{"priorities": 3},  # re-weighed only
            {"changed_sql": True},  # e's job in back-off changes: retried; d's SQL: old windows stale
            {"added": True, "priorities": 2},  # tables added next to existing ones (rewired)
            {"c_derived": True},  # c replaced by a derived table: e, whose parameters stay, reads the new one
            {"s2_time": True},  # b's job changes (its stream's time column), not its parameters: retried
            {"removed": True, "changed_sql": True, "added": True}]


def test_a_prepared_reconfigure_gives_the_state_of_laying_every_table_out_again() -> None:
    for change in _reloads():
        live, now = _driven()
        ref, _ = _driven()
        new = _cfg(**change)  # type: ignore[arg-type]
        now += 1  # (the back-offs stand)
        bp = blueprint(new, live.costs(), live.blueprint)  # as the reload thread makes it
        assert bp.changes is not None and changed(bp, live.blueprint) is bp.changes  # compared off the loop
        recovered = {"f": Recovered(freshness=T0 + 900)}  # f is added over data: g (over a and f) has work at once
        got = live.handle(Reconfigure(config=new, recovered=recovered, blueprint=bp), now)
        ref._bp = None  # the path before blueprints: every table laid out again (and the plan made on the loop)
        want = ref.handle(Reconfigure(config=new, recovered=recovered), now)
        assert got == want, change
        _same(live, ref, now)
        _follow(live, ref, now)


def test_preparing_a_reload_leaves_the_live_scheduler_alone() -> None:
    live, now = _driven()
    before, costs, laid = live.stats(now), live.costs(), live.blueprint
    bp = blueprint(_cfg(added=True, changed_sql=True, priorities=5), costs, laid)
    assert live.stats(now) == before and live.costs() == costs and live.blueprint is laid
    assert bp.changes is not None and {"f", "g", "d", "a"} <= bp.changes.touch  # a: a new dependent (g)
    assert "b" in bp.changes.reweigh  # its priority alone changed


def test_a_plan_made_ahead_from_costs_that_moved_since_is_redone_later() -> None:
    """A job finished between the reload's start and its switch: its cost model moved, so the
    plan made ahead is marked for a repartition (as after a drift, §3.2) — not kept as if current."""
    live, now = _driven()
    bp = blueprint(_cfg(priorities=3), {n: (a + 1.0, b) for n, (a, b) in live.costs().items()}, live.blueprint)
    live.handle(Reconfigure(config=bp.config, blueprint=bp), now + 1)
    assert live._plan_dirty
    fresh, _ = _driven()
    fresh.handle(Reconfigure(config=bp.config, blueprint=blueprint(bp.config, fresh.costs(), fresh.blueprint)), now + 1)
    assert not fresh._plan_dirty
