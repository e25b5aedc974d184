"""Maintenance jobs and operator actions in the engine (warehouse.upkeep, Scheduler hooks): events
in, decisions out — no Spark, no SimPy."""

from __future__ import annotations

from typing import Any

from warehouse.config import parse_config
from warehouse.events import (
    JobFailed,
    JobFinished,
    PartitionArrived,
    Reconfigure,
    Refresh,
    Resume,
    StartJob,
    Suspend,
    Tick,
)
from warehouse.scheduler import Recovered, Scheduler


def cfg(policy: dict[str, Any] | None = None, tracks: int = 1, **table_extra: Any) -> Any:
    return parse_config({
        "streams": [{"name": "s", "period": 10}, {"name": "u", "period": 10}],
        "tables": [
            {"name": "raw", "stream": "s", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}, **table_extra},
            {"name": "other", "stream": "u", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}},
            {"name": "roll", "sources": ["raw"], "sql": "SELECT 1", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}},
        ],
        "scheduler": {"tracks": tracks, "partitioner": "global", "learn_costs": False, "chop": None,
                      "inheritance": "none", "retry_backoff": 1, "retry_backoff_max": 30},
        "maintenance": policy or {},
    })


def arrive(s: Scheduler, stream: str, k: int, now: float) -> list[StartJob]:
    return s.handle(PartitionArrived(stream=stream, partition_id=f"{stream}{k}", start=k * 10.0,
                                     end=(k + 1) * 10.0), now)


def finish(s: Scheduler, job: StartJob, now: float, **kw: Any) -> list[StartJob]:
    return s.handle(JobFinished(job_id=job.job_id, duration=1.0, **kw), now)


def drain(s: Scheduler, jobs: list[StartJob], now: float) -> list[StartJob]:
    """Finish update jobs until only maintenance jobs (or nothing) are started; return those."""
    seen: list[StartJob] = []
    while jobs:
        job = jobs.pop(0)
        if job.kind in ("optimize", "vacuum"):
            seen.append(job)
            continue
        jobs += finish(s, job, now)
    return seen


def test_optimize_after_every_n_commits_of_the_table_and_not_before() -> None:
    s = Scheduler(cfg({"optimize_every": 3}), now=0.0, initial_freshness=0.0)
    maint: list[StartJob] = []
    for k in range(2):
        maint += drain(s, arrive(s, "s", k, 10.0 * (k + 1)), 10.0 * (k + 1))
    assert not [j for j in maint if j.table == "raw"]  # 2 commits of raw: not yet
    maint += drain(s, arrive(s, "s", 2, 30.0), 30.0)
    opt = [j for j in maint if j.table == "raw"]
    assert [j.kind for j in opt] == ["optimize"]
    # the job covers the data loaded since the table's origin and moves no freshness
    assert opt[0].start == 0.0 and opt[0].end == opt[0].new_freshness == 30.0
    assert s.stats(30.0).tables[0].upkeep.commits_since_optimize == 3  # counted until it ends
    finish(s, opt[0], 31.0, files=1)
    raw = next(t for t in s.stats(31.0).tables if t.name == "raw")
    assert raw.upkeep.commits_since_optimize == 0 and raw.upkeep.last_optimize == 31.0 and raw.upkeep.files == 1
    assert raw.jobs_completed == 3  # maintenance is not an update job


def test_an_update_job_never_overlaps_maintenance_of_its_table() -> None:
    s = Scheduler(cfg({"optimize_every": 1}, tracks=2), now=0.0, initial_freshness=0.0)
    (job,) = arrive(s, "s", 0, 10.0)
    started = finish(s, job, 11.0)
    opt = next(j for j in started if j.table == "raw" and j.kind == "optimize")
    # data arrives for raw while its OPTIMIZE runs: a track is free, yet raw's update waits
    jobs = arrive(s, "s", 1, 20.0)
    assert [j for j in jobs if j.table == "raw"] == []
    assert next(t for t in s.stats(20.0).tables if t.name == "raw").state == "running"
    after = finish(s, opt, 21.0)
    assert [(j.table, j.kind) for j in after if j.table == "raw"] == [("raw", "base")]


def test_maintenance_is_low_priority_update_jobs_take_the_track_first() -> None:
    s = Scheduler(cfg({"optimize_every": 1}), now=0.0, initial_freshness=0.0)
    (job,) = arrive(s, "s", 0, 10.0)
    assert arrive(s, "u", 0, 10.5) == []  # the one track is busy
    nxt = finish(s, job, 11.0)
    assert [(j.table, j.kind) for j in nxt] == [("other", "base")]  # not raw's optimize
    nxt = finish(s, nxt[0], 12.0)
    assert [(j.table, j.kind) for j in nxt] == [("roll", "derived")]  # an update job still outranks it
    nxt = finish(s, nxt[0], 13.0)
    assert [(j.table, j.kind) for j in nxt] == [("raw", "optimize")]  # now the track is free of updates


def test_vacuum_every_duration_wakes_the_scheduler_and_waits_for_running_readers() -> None:
    s = Scheduler(cfg({"vacuum_every": 100}, tracks=2), now=0.0, initial_freshness=0.0)
    (job,) = arrive(s, "s", 0, 10.0)
    roll = finish(s, job, 11.0)  # the first commit starts raw's vacuum clock at 11
    assert [j.table for j in roll] == ["roll"]
    assert s.next_wakeup() == 111.0
    # at 111 raw's VACUUM is due, but roll's derived job (which pinned a version of raw) still runs
    assert s.handle(Tick(), 111.0) == []
    after = finish(s, roll[0], 112.0)
    vac = [j for j in after if j.kind == "vacuum"]
    assert [j.table for j in vac] == ["raw"] and vac[0].start == vac[0].end
    finish(s, vac[0], 113.0, bytes_reclaimed=500, files=3)
    raw = next(t for t in s.stats(113.0).tables if t.name == "raw")
    assert raw.upkeep.last_vacuum == 113.0 and raw.upkeep.bytes_reclaimed == 500
    assert raw.upkeep.next_vacuum == 213.0
    assert s.next_wakeup() == 212.0  # roll's own clock: its first commit was at 112


def test_a_failed_maintenance_job_never_backs_off_the_tables_updates() -> None:
    s = Scheduler(cfg({"optimize_every": 1}, tracks=2), now=0.0, initial_freshness=0.0)
    (job,) = arrive(s, "s", 0, 10.0)
    (opt,) = [j for j in finish(s, job, 11.0) if j.table == "raw"]
    assert opt.kind == "optimize"
    jobs = s.handle(JobFailed(job_id=opt.job_id, reason="disk full"), 12.0)
    raw = next(t for t in s.stats(12.0).tables if t.name == "raw")
    assert raw.state != "backoff" and raw.consecutive_failures == 0
    assert raw.upkeep.jobs_failed == (("optimize", 1),)
    jobs += arrive(s, "s", 1, 13.0)
    assert ("raw", "base") in [(j.table, j.kind) for j in jobs]
    assert s.next_wakeup() == 12.0 + 30  # the retry, after the back-off ceiling


def test_recovered_history_carries_over_a_restart() -> None:
    rec = {"raw": Recovered(freshness=50.0, origin=0.0, commits_since_optimize=4, optimized_through=20.0,
                            last_vacuum=5.0, first_commit=1.0)}
    s = Scheduler(cfg({"optimize_every": 5, "vacuum_every": 1000}), now=60.0, recovered=rec)
    raw = next(t for t in s.stats(60.0).tables if t.name == "raw")
    assert raw.upkeep.commits_since_optimize == 4 and raw.upkeep.next_vacuum == 1005.0
    jobs = drain(s, arrive(s, "s", 5, 61.0), 61.0)
    assert [(j.kind, j.start, j.end) for j in jobs if j.table == "raw"] == [("optimize", 20.0, 60.0)]
    # already due when the daemon starts: the first round runs it
    rec = {"raw": Recovered(freshness=50.0, origin=0.0, commits_since_optimize=5, optimized_through=20.0),
           "roll": Recovered(freshness=50.0, origin=0.0)}
    s = Scheduler(cfg({"optimize_every": 5}), now=60.0, recovered=rec)
    assert [(j.table, j.kind) for j in s.handle(Tick(), 60.0)] == [("raw", "optimize")]


def test_per_table_override_disables_maintenance_for_one_table() -> None:
    s = Scheduler(cfg({"optimize_every": 1}, maintenance={"optimize_every": None}), now=0.0,
                  initial_freshness=0.0)
    (job,) = arrive(s, "s", 0, 10.0)
    jobs = drain(s, finish(s, job, 11.0), 11.0)
    assert [j.table for j in jobs] == ["roll"]  # raw never, roll (global policy) after its commit


# ---- operator actions --------------------------------------------------------------------------------
def test_suspend_stops_jobs_keeps_arrivals_and_dependents_wait_then_resume_loads_all_in_one_job() -> None:
    s = Scheduler(cfg(), now=0.0, initial_freshness=0.0)
    assert s.handle(Suspend(table="raw"), 1.0) == []
    assert arrive(s, "s", 0, 10.0) == [] and arrive(s, "s", 1, 20.0) == []
    raw = next(t for t in s.stats(20.0).tables if t.name == "raw")
    assert raw.suspended and raw.state == "idle" and raw.pending_partitions == 2
    roll = next(t for t in s.stats(20.0).tables if t.name == "roll")
    assert roll.freshness == 0.0 and roll.state == "idle"  # at its trailing edge
    assert s.handle(Refresh(table="raw"), 21.0) == []  # no job while suspended, even asked
    jobs = s.handle(Resume(table="raw"), 22.0)
    assert [(j.table, j.start, j.end, len(j.arrivals)) for j in jobs] == [("raw", 0.0, 20.0, 2)]
    assert not next(t for t in s.stats(22.0).tables if t.name == "raw").suspended


def test_suspending_a_pending_table_takes_it_out_of_the_queue() -> None:
    s = Scheduler(cfg(), now=0.0, initial_freshness=0.0)
    (job,) = arrive(s, "u", 0, 10.0)  # other runs on the one track
    arrive(s, "s", 0, 11.0)  # raw pending
    s.handle(Suspend(table="raw"), 12.0)
    assert s.stats(12.0).pending_jobs == 0
    assert finish(s, job, 13.0) == []
    assert [j.table for j in s.handle(Resume(table="raw"), 14.0)] == ["raw"]


def test_refresh_puts_the_tables_next_job_ahead_of_the_queue() -> None:
    s = Scheduler(cfg(), now=0.0, initial_freshness=0.0)
    (job,) = arrive(s, "u", 0, 10.0)
    arrive(s, "u", 1, 11.0)  # other's next job waits, with more benefit than raw's
    for k in range(3):
        arrive(s, "u", 2 + k, 12.0)
    arrive(s, "s", 0, 12.0)
    assert s.handle(Refresh(table="raw"), 13.0) == [] and s.refresh_pending("raw")
    nxt = finish(s, job, 14.0)
    assert [j.table for j in nxt] == ["raw"] and not s.refresh_pending("raw")


def test_refresh_of_an_up_to_date_table_is_a_no_op_and_of_a_backoff_retries_now() -> None:
    s = Scheduler(cfg(), now=0.0, initial_freshness=0.0)
    assert s.handle(Refresh(table="raw"), 1.0) == [] and not s.refresh_pending("raw")
    (job,) = arrive(s, "s", 0, 10.0)
    s.handle(JobFailed(job_id=job.job_id, reason="x"), 11.0)  # back-off until 12
    (again,) = s.handle(Refresh(table="raw"), 11.5)
    assert again.table == "raw" and again.kind == "base"


# ---- the simulator: maintenance jobs compete for the tracks with their costs --------------------------
def test_simulated_maintenance_takes_track_time_and_costs_staleness() -> None:
    from sim.simulator import simulate
    from sim.workload import TableClass, build_workload

    data = build_workload([TableClass(count=4, period=100.0, alpha=1.0, beta=0.1, depth=2)],
                          scheduler={"tracks": 2})
    off = simulate(parse_config(data), seed=3, until=20_000.0).to_json()
    on = simulate(parse_config({**data, "maintenance": {"optimize_every": 5, "vacuum_every": 2000}}),
                  seed=3, until=20_000.0).to_json()
    assert off["maintenance_jobs"] == 0 and off["maintenance_busy_fraction"] == 0.0
    # 8 tables × (≈200 commits / 5 optimizes + 10 vacuums each): hundreds of jobs, with their drawn times
    assert on["maintenance_jobs"] > 300 and on["maintenance_busy_fraction"] > 0.05
    assert on["busy_fraction"] > off["busy_fraction"]
    assert on["weighted_staleness"] > off["weighted_staleness"]  # they delay update jobs (non-preemptible)


def test_a_tables_maintenance_state_follows_its_name_across_reloads() -> None:
    """A table's OPTIMIZE count is its own (Table.upkeep): a reload that turns a base table into a
    derived one keeps it; one that removes the table drops it, and the table added back starts
    from what storage holds."""
    base = {"streams": [{"name": "s", "period": 10}],
            "scheduler": {"tracks": 1, "partitioner": "global", "learn_costs": False, "chop": None},
            "maintenance": {"optimize_every": 5}}
    raw = {"name": "raw", "stream": "s", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}}
    as_base = {"name": "x", "stream": "u", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}}
    as_derived = {"name": "x", "sources": ["raw"], "sql": "SELECT 1", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}}

    def commits(s: Scheduler) -> int:
        (st,) = [t for t in s.stats(100.0).tables if t.name == "x"]
        assert st.upkeep is not None
        return st.upkeep.commits_since_optimize

    two = {**base, "streams": [*base["streams"], {"name": "u", "period": 10}], "tables": [raw, as_base]}
    s = Scheduler(parse_config(two), now=0.0, initial_freshness=0.0)
    for k in range(2):
        drain(s, arrive(s, "u", k, 10.0 * (k + 1)), 10.0 * (k + 1))
    assert commits(s) == 2
    s.handle(Reconfigure(config=parse_config({**base, "tables": [raw, as_derived]})), 30.0)
    assert commits(s) == 2  # the same table, of another kind
    s.handle(Reconfigure(config=parse_config({**base, "tables": [raw]})), 31.0)
    s.handle(Reconfigure(config=parse_config({**base, "tables": [raw, as_derived]}),
                         recovered={"x": Recovered(freshness=20.0, commits_since_optimize=1)}), 32.0)
    assert commits(s) == 1  # removed and added back: what storage holds
