"""Metrics of docs/operations.md §3, round-tripped through prometheus_client's text parser."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ops.metrics import SnapshotHolder, extrapolate, register_metrics
from tests.helpers_ops import make_stats, make_table

T0 = 1_700_000_000.0


class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def scrape(registry: CollectorRegistry) -> dict[str, dict[tuple, float]]:
    """name → {sorted label items → value}, from the real exposition text."""
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def snapshot() -> object:
    cpu_raw = make_table(
        "cpu_raw", freshness=T0 - 30, safe_freshness=T0 - 90, arrived=T0 - 10, staleness=30.0, priority=2.0,
        inherited_priority=10.0, state="running", running_job=4, running_track=0, jobs_released=5, jobs_overdue=2,
        jobs_completed=3, jobs_failed=1, alpha=2.5, beta=0.02, target_staleness=60.0, time_within_target=100.0,
        observed_time=200.0, weighted_staleness=1000.0, pending_delta=20.0, pending_partitions=2)
    cpu_5min = make_table("cpu_5min", kind="derived", priority=10.0, inherited_priority=10.0, state="pending")
    return make_stats(T0, [cpu_raw, cpu_5min], tracks=2)


@pytest.fixture
def setup():
    reg = CollectorRegistry()
    holder = SnapshotHolder()
    clock = FakeClock(T0)
    m = register_metrics(reg, holder.get, clock)
    holder.publish(snapshot())
    return reg, holder, clock, m


def test_staleness_is_computed_at_scrape_time(setup):
    reg, _holder, clock, _m = setup
    first = scrape(reg)
    key = (("table", "cpu_raw"),)
    assert first["freshet_table_staleness_seconds"][key] == pytest.approx(30.0)
    clock.t = T0 + 45  # no new snapshot, the wall clock moved
    later = scrape(reg)
    assert later["freshet_table_staleness_seconds"][key] == pytest.approx(75.0)
    # a table never loaded has no staleness sample (unknown, not zero)
    assert (("table", "cpu_5min"),) not in later["freshet_table_staleness_seconds"]
    assert later["freshet_table_freshness_timestamp_seconds"][key] == T0 - 30
    assert later["freshet_table_arrived_timestamp_seconds"][key] == T0 - 10
    assert later["freshet_table_safe_freshness_timestamp_seconds"][key] == T0 - 90
    assert later["freshet_snapshot_age_seconds"][()] == pytest.approx(45.0)


def test_objective_and_target_are_extrapolated_exactly(setup):
    reg, _holder, clock, _m = setup
    clock.t = T0 + 40  # S goes 30 → 70; the target (60) is crossed after 30 s
    s = scrape(reg)
    key = (("table", "cpu_raw"),)
    # area: 1000 + p·(30·40 + 40²/2) = 1000 + 2·2000
    assert s["freshet_weighted_staleness_area_seconds_total"][()] == pytest.approx(5000.0)
    assert s["freshet_weighted_staleness_seconds"][()] == pytest.approx(2.0 * 70)
    assert s["freshet_table_time_within_target_seconds_total"][key] == pytest.approx(130.0)
    assert s["freshet_table_observed_seconds_total"][key] == pytest.approx(240.0)
    assert s["freshet_table_time_within_target_ratio"][key] == pytest.approx(130.0 / 240.0)
    assert s["freshet_table_staleness_target_seconds"][key] == 60.0


def test_extrapolate_without_target_or_freshness():
    t = make_table("x", freshness=None, weighted_staleness=3.0)
    e = extrapolate(t, T0, T0 + 100)
    assert e.staleness is None and e.weighted_staleness_area == 3.0
    # backwards clock never shrinks anything
    t2 = make_table("y", freshness=T0 - 5, weighted_staleness=3.0)
    assert extrapolate(t2, T0, T0 - 50).weighted_staleness_area == 3.0


def test_counters_priorities_costs_tracks(setup):
    reg, _holder, _clock, _m = setup
    s = scrape(reg)
    raw = (("table", "cpu_raw"),)
    assert s["freshet_table_priority"][raw] == 2.0
    assert s["freshet_table_inherited_priority"][raw] == 10.0
    assert s["freshet_jobs_released_total"][raw] == 5
    assert s["freshet_jobs_overdue_total"][raw] == 2
    assert s["freshet_jobs_completed_total"][(("status", "ok"), ("table", "cpu_raw"))] == 3
    assert s["freshet_jobs_completed_total"][(("status", "failed"), ("table", "cpu_raw"))] == 1
    assert s["freshet_cost_alpha_seconds"][raw] == 2.5
    assert s["freshet_cost_beta"][raw] == 0.02
    assert s["freshet_table_pending_partitions"][raw] == 2
    assert s["freshet_table_state"][(("state", "running"), ("table", "cpu_raw"))] == 1
    assert s["freshet_table_state"][(("state", "idle"), ("table", "cpu_raw"))] == 0
    assert s["freshet_pending_jobs"][()] == 1
    assert s["freshet_running_jobs"][()] == 1
    assert s["freshet_track_busy"][(("track", "0"),)] == 1
    assert s["freshet_track_busy"][(("track", "1"),)] == 0
    assert s["freshet_cluster_pending_jobs"][(("cluster", "0"), ("tracks", "0,1"))] == 1
    assert s["freshet_track_plan_utilization"][()] == 0.5


def test_shell_instruments_histogram_and_counters(setup):
    reg, _holder, _clock, m = setup
    m.job_done("cpu_raw", "base", 1.5, rows=120)
    m.job_done("cpu_raw", "base", 40.0, rows=30)
    m.partitions_quarantined.labels(stream="router_cpu").inc()
    with m.decision_seconds.time():
        pass
    s = scrape(reg)
    lab = (("kind", "base"), ("table", "cpu_raw"))
    assert s["freshet_job_duration_seconds_count"][lab] == 2
    assert s["freshet_job_duration_seconds_sum"][lab] == pytest.approx(41.5)
    assert s["freshet_job_duration_seconds_bucket"][(("kind", "base"), ("le", "2.0"), ("table", "cpu_raw"))] == 1
    assert s["freshet_rows_loaded_total"][(("table", "cpu_raw"),)] == 150
    assert s["freshet_partitions_quarantined_total"][(("stream", "router_cpu"),)] == 1
    assert s["freshet_scheduler_decision_seconds_count"][()] == 1


def test_partitions_under_a_directory_of_no_stream_are_a_gauge_per_directory(setup):
    reg, _holder, _clock, m = setup
    m.unknown_directories({"router-cpu": 3, "tmp": 1})
    s = scrape(reg)["freshet_landing_unknown_partitions"]
    assert s == {(("directory", "router-cpu"),): 3, (("directory", "tmp"),): 1}
    m.unknown_directories({"router-cpu": 4})  # `tmp` is gone: its series too
    assert scrape(reg)["freshet_landing_unknown_partitions"] == {(("directory", "router-cpu"),): 4}
    m.unknown_directories({})
    assert "freshet_landing_unknown_partitions" not in scrape(reg)  # no directory, no sample


def test_names_follow_conventions(setup):
    reg, *_ = setup
    fams = list(text_string_to_metric_families(generate_latest(reg).decode()))
    names = {f.name for f in fams}
    for required in ("freshet_table_staleness_seconds", "freshet_table_freshness_timestamp_seconds",
                     "freshet_table_priority", "freshet_table_inherited_priority",
                     "freshet_weighted_staleness_seconds", "freshet_jobs_released", "freshet_jobs_completed",
                     "freshet_job_duration_seconds", "freshet_pending_jobs", "freshet_track_busy",
                     "freshet_rows_loaded", "freshet_partitions_quarantined", "freshet_scheduler_decision_seconds",
                     "freshet_cost_alpha_seconds", "freshet_cost_beta", "freshet_table_arrived_timestamp_seconds",
                     "freshet_table_staleness_target_seconds", "freshet_table_time_within_target_seconds"):
        assert required in names, required
    for f in fams:
        assert f.name.startswith("freshet_")
        if f.type == "counter":
            assert not f.name.endswith("_total")  # the parser strips it; the samples carry it
            assert all(s.name.endswith(("_total", "_created")) for s in f.samples)


def test_no_snapshot_yet_exports_only_shell_metrics():
    reg = CollectorRegistry()
    register_metrics(reg, lambda: None, FakeClock(T0))
    s = scrape(reg)
    assert "freshet_table_staleness_seconds" not in s
    assert "freshet_start_time_seconds" in s


# ---- every series from the first scrape; a backlog that tells the truth while a job runs ----------
def _engine_config():
    from tests.helpers_engine import config

    return config(
        [{"name": "m", "period": 60}, {"name": "idle_feed", "period": 300}],
        [{"name": "m_raw", "stream": "m", "target_staleness": 600},
         {"name": "idle_raw", "stream": "idle_feed"},
         {"name": "m_5m", "sources": ["m_raw"], "granularity": 300}],
        chop=3)


def test_every_stream_and_table_series_exists_at_zero_from_the_first_scrape():
    """Counters a stream or table can ever have are exported at 0 before their first event, so
    `increase()` (FreshetPartitionsQuarantined) sees the first quarantine (defect 4)."""
    from warehouse.scheduler import Scheduler

    cfg = _engine_config()
    reg, holder = CollectorRegistry(), SnapshotHolder()
    m = register_metrics(reg, holder.get, FakeClock(T0))
    m.declare(cfg)
    holder.publish(Scheduler(cfg, now=T0).stats(T0))
    s = scrape(reg)
    for stream in ("m", "idle_feed"):
        for name in ("freshet_partitions_quarantined_total", "freshet_partitions_duplicate_total",
                     "freshet_partitions_arrived_total"):
            assert s[name][(("stream", stream),)] == 0, (name, stream)
    for table, kind in (("m_raw", "base"), ("idle_raw", "base"), ("m_5m", "derived")):
        t = (("table", table),)
        assert s["freshet_rows_loaded_total"][t] == 0
        assert s["freshet_job_duration_seconds_count"][(("kind", kind), ("table", table))] == 0
        assert s["freshet_jobs_released_total"][t] == 0
        for status in ("ok", "failed"):
            assert s["freshet_jobs_completed_total"][(("status", status), ("table", table))] == 0
        for name in ("freshet_table_backlog_seconds", "freshet_table_pending_delta_seconds",
                     "freshet_table_pending_partitions", "freshet_table_running_partitions",
                     "freshet_table_consecutive_failures", "freshet_table_loaded_delta_seconds_total"):
            assert s[name][t] == 0, (name, table)
    assert s["freshet_loop_errors_total"][(("loop", "intake_scan"),)] == 0
    assert s["freshet_config_reloads_total"][(("result", "rejected"),)] == 0


def test_backlog_is_true_while_a_job_runs():
    """141 one-minute partitions wait behind a running job: the backlog says so (it read 0)."""
    from warehouse.events import JobFinished, PartitionArrived
    from warehouse.scheduler import Scheduler

    cfg = _engine_config()
    s = Scheduler(cfg, now=T0)
    (j0,) = s.handle(PartitionArrived(stream="m", partition_id="p0", start=T0 - 60, end=T0, rows=1), T0)
    s.handle(JobFinished(job_id=j0.job_id, duration=1), T0 + 1)  # F(m_raw) = T0
    started = []
    for i in range(1, 142):
        started += s.handle(PartitionArrived(stream="m", partition_id=f"p{i}", start=T0 + 60 * (i - 1),
                                             end=T0 + 60 * i, rows=1), T0 + 60 * 141)
    (job,) = [j for j in started if j.table == "m_raw"]  # started on p1's arrival, alone
    now = T0 + 60 * 141 + 5
    reg, holder = CollectorRegistry(), SnapshotHolder()
    register_metrics(reg, holder.get, FakeClock(now)).declare(cfg)
    holder.publish(s.stats(now))
    m = scrape(reg)
    raw = (("table", "m_raw"),)
    assert m["freshet_table_state"][(("state", "running"), ("table", "m_raw"))] == 1
    assert m["freshet_table_backlog_seconds"][raw] == 141 * 60  # 2h21m: arrived − F, the running job's too
    assert m["freshet_table_pending_partitions"][raw] == 141
    assert m["freshet_table_running_partitions"][raw] == 1
    assert m["freshet_table_pending_delta_seconds"][raw] == 140 * 60  # not taken by a job: not 0
    # the next job is chopped at c·P = 3 minutes (§3.4); the gauges are not
    (job2,) = [j for j in s.handle(JobFinished(job_id=job.job_id, duration=1), now + 1) if j.table == "m_raw"]
    assert len(job2.partitions) == 3
    st = {t.name: t for t in s.stats(now + 2).tables}["m_raw"]
    assert (st.backlog, st.pending_partitions, st.running_partitions, st.pending_delta) == (
        140 * 60, 140, 3, 137 * 60)


def test_last_result_after_a_restart_says_the_delta_log_loaded_it():
    from warehouse.scheduler import Recovered, Scheduler

    cfg = _engine_config()
    s = Scheduler(cfg, now=T0, recovered={"m_raw": Recovered(freshness=T0 - 60)})
    st = {t.name: t for t in s.stats(T0).tables}
    assert st["m_raw"].last_result == "ok (recovered)"
    assert st["idle_raw"].last_result is None  # never loaded: nothing to say


def test_rollout_rounds_are_exported_only_under_rollout():
    from warehouse.rollout import RolloutStats

    reg = CollectorRegistry()
    holder = SnapshotHolder()
    register_metrics(reg, holder.get, FakeClock(T0))
    holder.publish(snapshot())
    assert "freshet_rollout_rounds_total" not in scrape(reg)
    holder.publish(make_stats(T0, [make_table("t")], rollout=RolloutStats(decisions=7, overrides=2, fallbacks=1)))
    got = scrape(reg)["freshet_rollout_rounds_total"]
    assert got == {(("outcome", "all"),): 7, (("outcome", "override"),): 2, (("outcome", "fallback"),): 1}
