"""Engine defects of, each with the test that failed before its fix. No Spark."""

from __future__ import annotations

from helpers_engine import config

from warehouse.events import JobFailed, JobFinished, PartitionArrived, PartitionDropped, StartJob
from warehouse.scheduler import Scheduler


def _run_all(s: Scheduler, jobs: list[StartJob], now: float, log: list[StartJob]) -> float:
    """Run every started job (and what it releases) to the end, one estimate each."""
    todo = list(jobs)
    while todo:
        job = todo.pop(0)
        log.append(job)
        now += max(job.estimate, 0.1)
        todo += s.handle(JobFinished(job_id=job.job_id, duration=job.estimate), now)
    return now


def _sliced(tracks: int = 2) -> tuple[Scheduler, float]:
    """A base table whose long partitions load in time slices (chop auto, §3.4), and a derived one."""
    streams = [{"name": f"s{i}", "period": 10} for i in range(2)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 1, "beta": 0.1}} for i in range(2)]
    tables.append({"name": "d", "sources": ["t1"], "sql": "SELECT 1", "granularity": 10,
                   "cost": {"alpha": 1, "beta": 0.01}})
    s = Scheduler(config(streams, tables, chop="auto", tracks=tracks), now=0, initial_freshness=0.0)
    now = 10.0
    for k in range(8):  # t0's jobs ran three times slower than estimated: slicing pays
        (j,) = s.handle(PartitionArrived(stream="s0", partition_id=f"x{k}", start=10 * k, end=10 * (k + 1)), now)
        now += 3 * j.estimate
        s.handle(JobFinished(job_id=j.job_id, duration=3 * j.estimate), now)
    return s, now


def test_time_slices_of_one_partition_make_no_derived_window_late() -> None:
    """Defect 1: each slice touched its partition from the partition's start, so every slice
    marked the dependents' correct windows for recompute. A slice touches only what it loaded."""
    s, now = _sliced()
    log: list[StartJob] = []
    now = _run_all(s, s.handle(PartitionArrived(stream="s1", partition_id="long", start=0, end=160), now), now, log)
    slices = [j for j in log if j.table == "t1"]
    assert len(slices) >= 4 and all(j.partitions == ("long",) for j in slices)
    assert [j for j in log if j.kind == "recompute"] == []
    d = {t.name: t for t in s.stats(now).tables}["d"]
    assert d.freshness == 160 and d.recompute_jobs == 0 and d.recompute_pending == 0


def test_a_partition_dropped_after_acceptance_leaves_arrived_and_the_backlog_at_once() -> None:
    """Defect 11: a quarantined accepted partition kept `arrived` and the backlog until newer data
    overtook it."""
    streams = [{"name": "s", "period": 10}, {"name": "u", "period": 10}]
    tables = [{"name": "a", "stream": "s", "cost": {"alpha": 1, "beta": 0.1}},
              {"name": "b", "stream": "s", "cost": {"alpha": 1, "beta": 0.1}},
              {"name": "o", "stream": "u", "cost": {"alpha": 1, "beta": 0.1}}]
    s = Scheduler(config(streams, tables, tracks=1), now=0, initial_freshness=0.0)
    (busy,) = s.handle(PartitionArrived(stream="u", partition_id="u0", start=0, end=10), 10)  # the one track
    s.handle(PartitionArrived(stream="s", partition_id="p0", start=0, end=10), 11)
    s.handle(PartitionArrived(stream="s", partition_id="p1", start=10, end=20), 21)
    before = {t.name: t for t in s.stats(22).tables}
    assert (before["a"].arrived, before["a"].backlog, before["a"].pending_partitions) == (20, 20, 2)
    assert s.handle(PartitionDropped(stream="s", partition_id="p1", reason="file changed"), 22) == []
    after = {t.name: t for t in s.stats(22).tables}
    for name in ("a", "b"):
        assert (after[name].arrived, after[name].backlog, after[name].pending_partitions) == (10, 10, 1)
    s.handle(PartitionDropped(stream="s", partition_id="p0", reason="gone"), 23)
    after = {t.name: t for t in s.stats(23).tables}
    assert (after["a"].arrived, after["a"].backlog, after["a"].pending_partitions, after["a"].state) == (
        0, 0, 0, "idle")
    assert s.stats(23).pending_jobs == 0
    assert s.handle(JobFinished(job_id=busy.job_id, duration=1.0), 24) == []  # nothing left for a or b


def test_a_partition_a_failed_job_found_unloadable_leaves_arrived_and_the_backlog() -> None:
    """Defect 11, the executor's path: JobFailed(bad_partitions) dropped the partition from the
    pending list but `arrived` (and so the backlog) kept its end."""
    streams = [{"name": "s", "period": 10}, {"name": "u", "period": 10}]
    tables = [{"name": "a", "stream": "s", "cost": {"alpha": 1, "beta": 0.1}},
              {"name": "o", "stream": "u", "cost": {"alpha": 1, "beta": 0.1}}]
    s = Scheduler(config(streams, tables, tracks=1), now=0, initial_freshness=0.0)
    (busy,) = s.handle(PartitionArrived(stream="u", partition_id="u0", start=0, end=10), 10)
    s.handle(PartitionArrived(stream="s", partition_id="p0", start=0, end=10), 11)
    s.handle(PartitionArrived(stream="s", partition_id="p1", start=10, end=20), 21)
    (job,) = s.handle(JobFinished(job_id=busy.job_id, duration=1.0), 22)
    assert job.partitions == ("p0", "p1")
    s.handle(JobFailed(job_id=job.job_id, reason="file changed", bad_partitions=("p1",)), 23)
    a = {t.name: t for t in s.stats(23).tables}["a"]
    assert (a.arrived, a.backlog, a.pending_partitions) == (10, 10, 1)


def test_lookahead_walks_the_heads_of_the_queues_not_every_entry() -> None:
    """Defect 13: Max Benefit with Lookahead (§3.1) took its first ten jobs by scanning every heap
    entry (and every table for the expected releases): O(n) per round. A walk of the heads
    looks at a few dozen entries whatever n is."""
    n = 2000
    streams = [{"name": f"s{i}", "period": 60 + i % 7} for i in range(n)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "priority": 1 + i % 5, "cost": {"alpha": 1, "beta": 0.1}}
              for i in range(n)]
    s = Scheduler(config(streams, tables, policy="lookahead"), now=0, initial_freshness=0.0)
    (first,) = s.handle(PartitionArrived(stream="s0", partition_id="p0", start=0, end=60), 60)
    for i in range(1, n):
        s.handle(PartitionArrived(stream=f"s{i}", partition_id=f"p{i}", start=0, end=60), 60 + i * 0.001)
    looked = 0
    valid = s._queues.valid

    def counting(entry: tuple, g: int) -> bool:
        nonlocal looked
        looked += 1
        return valid(entry, g)

    s._queues.valid = counting  # the ready queues ask it of every entry they look at
    (nxt,) = s.handle(JobFinished(job_id=first.job_id, duration=1.0), 62)
    assert nxt.kind == "base" and looked < 100, looked


def test_a_tracks_busy_time_counts_its_jobs_not_the_idle_gaps() -> None:
    """Found on the way (the track board): starting a job added the idle gap before it to the
    track's busy time, so a track running 1 s every 10 s was shown busy all the time."""
    s = Scheduler(config([{"name": "s", "period": 10}], [{"name": "t", "stream": "s", "cost": {"alpha": 1, "beta": 0}}]),
                  now=0, initial_freshness=0.0)
    for k in range(10):
        (j,) = s.handle(PartitionArrived(stream="s", partition_id=f"p{k}", start=10 * k, end=10 * k + 10), 10 * k + 10)
        s.handle(JobFinished(job_id=j.job_id, duration=1.0), 10 * k + 11)
    (j,) = s.handle(PartitionArrived(stream="s", partition_id="p10", start=100, end=110), 110)
    assert s.stats(110.5).tracks[0].busy_time == 10.5
