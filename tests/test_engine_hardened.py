"""Engine defects, each with the test that failed before its fix: a table's counters that could
raise, the bulk limit that did not hold, maintenance timers that grew with every reload, a back-off
that outlived the SQL it was for, queries that changed state, and a reload that lost the rest of a
partition loaded in time slices. No Spark, no SimPy."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from ops.cores import machine_cores
from policies.bulk import bulk_limit
from policies.chopping import Pace
from tests.helpers_engine import config
from warehouse.backoff import backoff_for
from warehouse.config import load_config, parse_config, with_cores
from warehouse.cost import CostModel, RowRate
from warehouse.errors import SchedulerMisuse
from warehouse.events import JobFailed, JobFinished, PartitionArrived, Reconfigure, Refresh, StartJob, Tick
from warehouse.freshness import floor_to
from warehouse.recompute import ceil_to, full_pays, window_count
from warehouse.scheduler import Recovered, Scheduler

ROOT = Path(__file__).resolve().parent.parent
COST = {"alpha": 1, "beta": 0.1}


# ---- no arithmetic on one table's counters ends the process --------------------------------------
def test_the_back_off_is_capped_at_any_count_of_failures() -> None:
    """base·2^(failures−1) was computed before the cap: at 1,025 failures in a row, OverflowError."""
    assert [backoff_for(n, 5.0, 600.0) for n in (1, 2, 3, 7, 8)] == [5.0, 10.0, 20.0, 320.0, 600.0]
    for n in (1_024, 1_025, 1_100, 10**6, 10**100):
        assert backoff_for(n, 5.0, 600.0) == 600.0
    assert backoff_for(1_025, 1e-300, 1e300) == math.ldexp(1e-300, 1_024)  # the doubling, exact, below the cap
    assert backoff_for(5_000, 5.0, math.inf) == math.inf


def test_a_table_that_fails_without_end_keeps_the_scheduler_running() -> None:
    """1,100 failures of one table's job in a row: each retried after the ceiling, the other table
    loaded meanwhile — handle never raises."""
    streams = [{"name": "s", "period": 10}, {"name": "u", "period": 10}]
    tables = [{"name": "bad", "stream": "s", "cost": COST}, {"name": "ok", "stream": "u", "cost": COST}]
    s = Scheduler(config(streams, tables, tracks=2, retry_backoff=1, retry_backoff_max=8), now=0, initial_freshness=0.0)
    now = 10.0
    (job,) = s.handle(PartitionArrived(stream="s", partition_id="p", start=0, end=10), now)
    for k in range(1_100):
        assert s.handle(JobFailed(job_id=job.job_id, reason="boom"), now) == []
        assert s.next_wakeup() == now + (2.0 ** k if k < 3 else 8.0)
        now = s.next_wakeup()
        (job,) = s.handle(Tick(), now)
    (other,) = s.handle(PartitionArrived(stream="u", partition_id="q", start=0, end=10), now)
    s.handle(JobFinished(job_id=other.job_id, duration=1), now + 1)
    stats = {t.name: t for t in s.stats(now + 1).tables}
    assert stats["bad"].consecutive_failures == 1_100 and stats["ok"].freshness == 10


def test_learned_costs_and_row_rates_stay_finite_whatever_a_job_reports() -> None:
    """A job reporting n or a duration near a float's range made α, β NaN (then ⌈NaN⌉ raised in a
    recompute's cost); rows over a tiny span made the rate inf, over an infinite one log(0) raised."""
    for n, d in ((1e308, 1.0), (1e308, 1e308), (0.0, 1e308), (math.nan, 1.0)):
        c = CostModel(1.0, 0.1)
        for _ in range(10):
            c.observe(n, d)
        assert math.isfinite(c.alpha) and math.isfinite(c.beta) and math.isfinite(c.estimate(1e300))
    for rows, span in ((2**63 - 1, 5e-324), (1, math.inf), (1, 1e308)):
        r = RowRate()
        for _ in range(3):
            r.observe(rows, span)
        assert r.rate is not None and 0 < r.rate < math.inf and math.isfinite(r.work(10, 1.0))
    pace = Pace()
    for _ in range(3):
        pace.observe(1e300, 1e-300, settled=True)
    assert math.isfinite(pace.now)
    with pytest.raises(SchedulerMisuse, match="2\\^63"):
        PartitionArrived(stream="s", partition_id="p", start=0, end=1, rows=10**400)


def test_window_arithmetic_takes_any_float() -> None:
    """floor/ceil to a granularity, and the window and piece counts, raised OverflowError where the
    quotient left a float's range."""
    assert floor_to(1.7e9, 1e-300) == 1.7e9 and ceil_to(1.7e9, 1e-300) == 1.7e9
    assert floor_to(17.0, 5.0) == 15.0 and ceil_to(17.0, 5.0) == 20.0
    assert window_count(1e300, 1e-300, 1.0) == 2**53 and window_count(30.0, 10.0, 1.0) == 3
    assert full_pays(1.0, 0.1, 1e300, 1e-300, 1e300, 3.0) in (True, False)


# ---- the bulk limit: one definition, every job, and `auto` on local[*] ----------------------------
BULK_STREAMS = [{"name": f"s_{n}", "period": 10} for n in ("b1", "b2", "v")]
BULK_TABLES = [{"name": n, "stream": f"s_{n}", "priority": 1, "cost": COST} for n in ("b1", "b2")] + [
    {"name": "v", "stream": "s_v", "priority": 100, "cost": {"alpha": 0.5, "beta": 0.01}}]


def _bulk_scheduler(**extra: Any) -> Scheduler:
    """Three tracks on local[2] (bulk limit auto: 1); a job estimated over 5 s is bulk."""
    sched = {"tracks": 3, "partitioner": "global", "learn_costs": False, "chop": None, "inheritance": "none",
             "bulk_cost": 5}
    cfg = parse_config({"streams": BULK_STREAMS, "tables": BULK_TABLES, "scheduler": sched,
                        "spark": {"master": "local[2]"}, **extra})
    return Scheduler(cfg, now=0.0, initial_freshness=0.0)


def _bulk_running(s: Scheduler) -> int:
    return sum(j.bulk for j in s.running.values())


def test_a_refreshed_bulk_job_waits_for_the_bulk_limit() -> None:
    """An operator's refresh started its job past the check while the board counted it bulk: two
    bulk loads on local[2] (limit 1). It keeps its place: first when the bulk job ends."""
    s = _bulk_scheduler()
    (first,) = s.handle(PartitionArrived(stream="s_b1", partition_id="b1-0", start=0, end=100), 100.0)
    assert first.bulk
    assert s.handle(PartitionArrived(stream="s_b2", partition_id="b2-0", start=0, end=100), 100.0) == []
    assert s.handle(Refresh(table="b2"), 101.0) == []
    assert _bulk_running(s) == 1 and s.refresh_pending("b2")
    (nxt,) = s.handle(JobFinished(job_id=first.job_id, duration=11.0), 111.0)
    assert (nxt.table, nxt.bulk) == ("b2", True) and not s.refresh_pending("b2")


def test_a_bulk_maintenance_job_waits_for_the_bulk_limit() -> None:
    """OPTIMIZE of a table that loaded 200 s (E = 21 s, bulk) started beside a running bulk load."""
    s = _bulk_scheduler(maintenance={"optimize_every": 1})
    (load,) = s.handle(PartitionArrived(stream="s_b2", partition_id="b2-0", start=0, end=200), 200.0)
    started = s.handle(JobFinished(job_id=load.job_id, duration=21.0), 221.0)
    (opt,) = started
    assert (opt.kind, opt.bulk) == ("optimize", True)
    s.handle(JobFinished(job_id=opt.job_id, duration=21.0), 242.0)
    (load,) = s.handle(PartitionArrived(stream="s_b2", partition_id="b2-1", start=200, end=400), 400.0)
    (other,) = s.handle(PartitionArrived(stream="s_b1", partition_id="b1-0", start=0, end=400), 400.0) or [None]
    assert other is None  # the bulk limit: b1's load waits
    assert s.handle(JobFinished(job_id=load.job_id, duration=21.0), 421.0)[0].table == "b1"  # due, b2 waits
    assert _bulk_running(s) == 1
    assert [j.kind for j in s.running.values()] == ["base"]


def test_bulk_limit_auto_resolves_local_star_from_the_cores_the_shell_counted() -> None:
    """`auto` gave no limit for local[*], the master every shipped config uses."""
    assert bulk_limit("auto", "local[*]") is None  # the engine never asks the machine
    assert bulk_limit("auto", "local[*]", 4) == 3 and bulk_limit("auto", "local[*, 3]", 1) == 1
    assert bulk_limit("auto", None, 8) == 7  # Spark Connect with `spark.cores` said
    assert bulk_limit("auto", "spark://h:7077") is None  # a cluster whose cores nobody said: no limit
    assert bulk_limit(2, "local[*]", 16) == 2
    shipped = load_config(ROOT / "examples" / "netmon.yaml")
    assert shipped.spark.master == "local[*]" and shipped.scheduler.bulk_limit == "auto"
    resolved = with_cores(shipped, 4)
    assert resolved.spark.cores == 4 and with_cores(resolved, 8).spark.cores == 4  # said once: kept
    s = Scheduler(resolved, now=0.0)
    assert s._bulk.cap == 3
    remote = parse_config({**_minimal(), "spark": {"remote": "sc://h:15002"}})
    assert with_cores(remote, 4).spark.cores is None  # the machine's cores are not the server's
    said = parse_config({**_minimal(), "spark": {"remote": "sc://h:15002", "cores": 6}})
    assert bulk_limit("auto", said.spark.master, said.spark.cores) == 5


def _minimal() -> dict:
    return {"streams": [{"name": "s", "period": 10}], "tables": [{"name": "t", "stream": "s"}]}


def test_machine_cores_are_the_affinity_bounded_by_a_cgroup_quota(tmp_path: Path) -> None:
    assert machine_cores(tmp_path) >= 1  # no cgroup files: the CPUs this process may run on
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert machine_cores(tmp_path) == min(2, machine_cores(tmp_path / "none"))  # ⌈1.5⌉, as the JVM
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert machine_cores(tmp_path) == machine_cores(tmp_path / "none")


# ---- maintenance timers do not grow with reloads ---------------------------------------------------
def test_reloads_arm_no_more_maintenance_timers() -> None:
    """Upkeep.configure pushed one timer per table with a vacuum clock on every reload."""
    streams = [{"name": f"s{i}", "period": 10} for i in range(20)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "cost": COST} for i in range(20)]
    cfg = parse_config({"streams": streams, "tables": tables, "maintenance": {"vacuum_every": 1000},
                        "scheduler": {"tracks": 2, "chop": None}})
    recovered = {f"t{i}": Recovered(0.0, first_commit=float(i)) for i in range(20)}
    s = Scheduler(cfg, now=0.0, recovered=recovered)
    armed = len(s._upkeep.timers)
    for k in range(500):
        s.handle(Reconfigure(config=cfg), 1.0 + k * 0.01)
    assert len(s._upkeep.timers) == armed == 20
    assert s.next_wakeup() == 1000.0


# ---- a changed SQL ends its table's back-off -------------------------------------------------------
def _derived(sql: str) -> Any:
    return parse_config({
        "streams": [{"name": "s", "period": 10}],
        "tables": [{"name": "raw", "stream": "s", "cost": COST},
                   {"name": "d", "sources": ["raw"], "sql": sql, "priority": 5, "cost": COST}],
        "scheduler": {"tracks": 2, "chop": None, "learn_costs": False, "retry_backoff": 5, "retry_backoff_max": 160}})


def test_a_reload_that_changes_a_failing_tables_sql_ends_its_back_off() -> None:
    s = Scheduler(_derived("SELECT bad"), now=0.0, initial_freshness=0.0)
    (raw,) = s.handle(PartitionArrived(stream="s", partition_id="p0", start=0, end=10), 10.0)
    (d,) = s.handle(JobFinished(job_id=raw.job_id, duration=1), 11.0)
    now = 11.0
    for _ in range(6):  # 5, 10, 20, 40, 80, 160 s
        assert s.handle(JobFailed(job_id=d.job_id, reason="AnalysisException"), now) == []
        now = s.next_wakeup()
        (d,) = s.handle(Tick(), now)
    s.handle(JobFailed(job_id=d.job_id, reason="AnalysisException"), now)
    assert s.next_wakeup() == now + 160
    # a reload that changes only d's priority leaves the back-off as it is
    assert s.handle(Reconfigure(config=_derived("SELECT bad").model_copy()), now + 1) == []
    # the SQL fixed: d's job starts now, its failures forgotten
    (fixed,) = s.handle(Reconfigure(config=_derived("SELECT good")), now + 2)
    assert (fixed.table, fixed.kind) == ("d", "derived")
    assert {t.name: t for t in s.stats(now + 2).tables}["d"].consecutive_failures == 0


# ---- queries change nothing --------------------------------------------------------------------------
def test_next_wakeup_is_a_query() -> None:
    """next_wakeup popped stale back-off and maintenance entries off their heaps."""
    streams = [{"name": "s", "period": 10}]
    s = Scheduler(config(streams, [{"name": "b", "stream": "s", "cost": COST}], retry_backoff=1, retry_backoff_max=8),
                  now=0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="s", partition_id="p", start=0, end=10), 10.0)
    s.handle(JobFailed(job_id=job.job_id), 10.0)  # back-off until 11
    # a refresh retries it now (its heap entry goes stale) and its job runs: no back-off is current
    (job,) = s.handle(Refresh(table="b"), 10.5)
    heap = list(s._backoffs.heap)
    assert s.next_wakeup() is None
    assert s._backoffs.heap == heap and s.next_wakeup() is None


def test_shape_is_a_query_and_running_is_read_only() -> None:
    """NextJob.shape wrote its memo into the table; `running` handed out the board's dict."""
    streams = [{"name": "s", "period": 10}]
    s = Scheduler(config(streams, [{"name": "b", "stream": "s", "cost": COST}], chop=3), now=0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="s", partition_id="p0", start=0, end=10), 10.0)
    s.handle(PartitionArrived(stream="s", partition_id="p1", start=10, end=20), 20.0)
    t = s._tables["b"]
    t.queue.shape = None
    before = copy.copy(t.queue)
    s._nextjob.shape(t)
    s._nextjob.candidate(t)
    assert t.queue.shape is None and all(getattr(t.queue, f) == getattr(before, f) for f in ("version", "keyed_rate", "release"))
    running = s.running
    with pytest.raises(TypeError):
        running[99] = job  # type: ignore[index]
    with pytest.raises(TypeError):
        del running[job.job_id]  # type: ignore[attr-defined]
    assert list(s.running) == [job.job_id]


# ---- a reload while a time slice runs --------------------------------------------------------------
def test_a_table_back_by_a_reload_loads_the_rest_of_a_partition_a_slice_of_it_was_loading() -> None:
    """The returning table took its last incarnation's time slice over as if it loaded the whole
    partition: the rest of it was never loaded (and the landing zone kept it for good)."""
    streams = [{"name": "s0", "period": 1}, {"name": "s1", "period": 1}]
    tables = [{"name": "a", "stream": "s0", "cost": {"alpha": 0.1, "beta": 1}},
              {"name": "b", "stream": "s1", "cost": {"alpha": 0.1, "beta": 1}}]
    full = config(streams, tables, chop="auto", tracks=1, partitioner="auto")
    part = config(streams[:1], tables[:1], chop="auto", tracks=1, partitioner="auto")
    s = Scheduler(full, now=0.0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="s1", partition_id="long", start=0, end=70), 70.0)
    assert job.partitions == ("long",) and job.end < 70  # a time slice (§3.4)
    s.handle(Reconfigure(config=part), 70.5)
    s.handle(Reconfigure(config=full, recovered={"b": Recovered(0.0, 0.0, 0.0)}), 70.6)
    assert s.handle(PartitionArrived(stream="s1", partition_id="long", start=0, end=70), 70.6) == []  # re-delivered
    loaded: list[StartJob] = []
    now, todo = 71.0, s.handle(JobFinished(job_id=job.job_id, duration=1), 71.0)
    loaded.append(job)
    while todo:
        j = todo.pop(0)
        loaded.append(j)
        now += 1
        todo += s.handle(JobFinished(job_id=j.job_id, duration=1), now)
    assert loaded[-1].end == 70 and all(a.end == b.start for a, b in zip(loaded, loaded[1:], strict=False))
    b = {t.name: t for t in s.stats(now).tables}["b"]
    assert b.freshness == 70 and b.pending_partitions == 0
