"""Beyond the paper (issue 12): Random as §4.3 defines it, chopping that pays, time slices, reservation."""

from __future__ import annotations

from tests.helpers_engine import config
from warehouse.events import JobFinished, PartitionArrived
from warehouse.scheduler import Scheduler


def test_random_picks_uniformly_among_the_released_set_at_each_decision():
    """§4.3: "chooses the next job to execute randomly among the jobs in the released set". One
    track, six tables always pending: the table just re-released must be picked 1/6 of the time,
    not more (a draw kept from release makes the jobs that drew high numbers wait on and on)."""
    n = 6
    streams = [{"name": f"s{i}", "period": 10} for i in range(n)]
    tables = [{"name": f"t{i}", "stream": f"s{i}"} for i in range(n)]
    s = Scheduler(config(streams, tables, policy="random", seed=3), now=0, initial_freshness=0.0)
    jobs = []
    for i in range(n):
        jobs += s.handle(PartitionArrived(stream=f"s{i}", partition_id="0", start=0, end=1), 1)
    (job,) = jobs
    picks_of_newest = 0
    decisions = 3000
    for k in range(decisions):
        now = 2.0 + k
        newest = job.table
        i = int(newest[1:])
        s.handle(PartitionArrived(stream=f"s{i}", partition_id=str(k + 1), start=job.end, end=job.end + 1), now)
        (job,) = s.handle(JobFinished(job_id=job.job_id, duration=1), now)
        picks_of_newest += job.table == newest
    assert abs(picks_of_newest / decisions - 1 / n) < 0.03
