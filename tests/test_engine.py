"""The Scheduler's own behaviour: releases, derived windows, failures, misuse, repartitioning, costs."""

from __future__ import annotations

import pytest

from tests.helpers_engine import config
from warehouse.cost import CostModel, Peers, RowRate
from warehouse.errors import PartitionRefused, SchedulerMisuse
from warehouse.events import JobFailed, JobFinished, PartitionArrived, Reconfigure, Tick
from warehouse.freshness import StalenessMeter
from warehouse.scheduler import Recovered, Scheduler

STREAMS = [{"name": "a", "period": 60, "lateness": 30}, {"name": "b", "period": 60}]
TABLES = [
    {"name": "ra", "stream": "a"},
    {"name": "rb", "stream": "b"},
    {"name": "j", "sources": ["ra", "rb"], "priority": 10, "granularity": 60},
]


def arrive(s, stream, pid, start, end, now, **kw):
    return s.handle(PartitionArrived(stream=stream, partition_id=pid, start=start, end=end, **kw), now)


def test_derived_window_is_the_floored_safe_trailing_edge():
    s = Scheduler(config(STREAMS, TABLES, tracks=4), now=0, initial_freshness=0.0)
    (ja,) = arrive(s, "a", "a1", 0, 150, 150)
    (jb,) = arrive(s, "b", "b1", 0, 100, 150)
    assert ja.new_safe_freshness == 120  # F − lateness (§2.2)
    assert s.handle(JobFinished(job_id=ja.job_id, duration=1), 151) == []
    (jd,) = s.handle(JobFinished(job_id=jb.job_id, duration=1), 152)
    # TE = min(F'_ra = 120, F'_rb = 100) = 100, floored to 60
    assert (jd.kind, jd.start, jd.end, jd.sources) == ("derived", 0.0, 60.0, ("ra", "rb"))
    s.handle(JobFinished(job_id=jd.job_id, duration=1), 153)
    # a punctuation moves the safe freshness past the lateness bound
    (jb2,) = arrive(s, "b", "b2", 100, 200, 200, safe_through=200)
    assert jb2.new_safe_freshness == 200
    (jd2,) = s.handle(JobFinished(job_id=jb2.job_id, duration=1), 201)
    assert (jd2.start, jd2.end) == (60.0, 120.0)


def test_failed_job_keeps_its_data_and_retries_after_backoff():
    cfg = config(STREAMS, TABLES, tracks=2, retry_backoff=5, retry_backoff_max=20)
    s = Scheduler(cfg, now=0, initial_freshness=0.0)
    (j,) = arrive(s, "b", "b1", 0, 60, 60)
    assert s.handle(JobFailed(job_id=j.job_id, reason="spark died"), 61) == []
    assert s.next_wakeup() == 66
    assert arrive(s, "b", "b2", 60, 120, 62) == []  # merged while backing off
    st = {t.name: t for t in s.stats(62).tables}["rb"]
    assert (st.state, st.pending_partitions, st.last_result) == ("backoff", 2, "failed: spark died")
    assert s.handle(Tick(), 65.9) == []
    (retry,) = s.handle(Tick(), 66)
    assert retry.partitions == ("b1", "b2")
    s.handle(JobFailed(job_id=retry.job_id), 67)
    assert s.next_wakeup() == 67 + 10  # exponential
    (again,) = s.handle(Tick(), 77)
    s.handle(JobFinished(job_id=again.job_id, duration=1), 78)
    st = {t.name: t for t in s.stats(78).tables}["rb"]
    assert (st.freshness, st.jobs_failed, st.consecutive_failures, st.last_result) == (120, 2, 0, "ok")


def test_duplicate_partition_ids_are_ignored():
    s = Scheduler(config(STREAMS, TABLES, tracks=1), now=0, initial_freshness=0.0)
    (j,) = arrive(s, "b", "b1", 0, 60, 60)
    assert arrive(s, "b", "b1", 0, 60, 61) == []
    assert s.duplicate_partitions == 1


def test_late_partition_is_loaded_and_flagged():
    s = Scheduler(config(STREAMS, TABLES, tracks=1), now=0, initial_freshness=0.0)
    (j,) = arrive(s, "b", "b2", 60, 120, 120)
    s.handle(JobFinished(job_id=j.job_id, duration=1), 121)
    (late,) = arrive(s, "b", "b1", 0, 60, 130)  # below F' = 120: beyond the lateness bound
    assert late.late == ("b1",) and late.new_freshness == 120 and late.delta_f == 0
    assert s.late_partitions == 1


def test_misuse_is_reported_and_changes_nothing():
    s = Scheduler(config(STREAMS, TABLES, tracks=1), now=0, initial_freshness=0.0)
    with pytest.raises(SchedulerMisuse, match="job 42 is not running"):
        s.handle(JobFinished(job_id=42, duration=1), 1)
    with pytest.raises(PartitionRefused, match="'p' of stream 'zz': no table reads this stream"):
        arrive(s, "zz", "p", 0, 1, 1)  # input, not a bug: the daemon quarantines it
    with pytest.raises(SchedulerMisuse, match="end <= start"):
        PartitionArrived(stream="a", partition_id="p", start=5, end=5)
    assert s.stats(2).jobs_released == 0


def test_time_never_runs_backwards():
    s = Scheduler(config(STREAMS, TABLES, tracks=1), now=100, initial_freshness=0.0)
    (j,) = arrive(s, "b", "b1", 0, 60, 110)
    s.handle(JobFinished(job_id=j.job_id, duration=1), 105)  # a wall clock stepped back
    assert s.stats(0).now == 110


def test_recovered_state_releases_lagging_derived_tables():
    rec = {"ra": Recovered(600, 570), "rb": Recovered(600, 600), "j": Recovered(120)}
    s = Scheduler(config(STREAMS, TABLES, tracks=1), now=1000, recovered=rec)
    (j,) = s.handle(Tick(), 1000)
    assert (j.table, j.start, j.end) == ("j", 120, 540)


def test_reconfigure_adds_and_removes_tables_and_changes_priorities():
    s = Scheduler(config(STREAMS, TABLES, tracks=2), now=0, initial_freshness=0.0)
    (jb,) = arrive(s, "b", "b1", 0, 60, 60)
    tables = [TABLES[0], {**TABLES[1], "priority": 7}, {"name": "rb2", "sources": ["rb"], "priority": 3}]
    s.handle(Reconfigure(config=config(STREAMS, tables, tracks=3)), 61)
    st = {t.name: t for t in s.stats(61).tables}
    assert set(st) == {"ra", "rb", "rb2"} and st["rb"].priority == 7 and st["rb"].running_job == jb.job_id
    assert len(s.stats(61).tracks) == 3
    (d,) = s.handle(JobFinished(job_id=jb.job_id, duration=1), 62)
    assert d.table == "rb2" and d.end == 60


def test_reconfigure_starts_a_re_added_table_from_its_recovered_state():
    """A table re-added over an existing Delta table is not 'never loaded' (the log is the truth)."""
    s = Scheduler(config(STREAMS, TABLES, tracks=2), now=1000, recovered={"ra": Recovered(600, 570, 0),
                                                                            "rb": Recovered(600, 600, 0)})
    tables = [*TABLES, {"name": "rb2", "sources": ["rb"], "granularity": 60}]
    jobs = s.handle(Reconfigure(config=config(STREAMS, tables, tracks=2), recovered={"rb2": Recovered(600, 600, 0)}), 1001)
    st = {t.name: t for t in s.stats(1001).tables}
    assert st["rb2"].freshness == 600 and not any(j.table == "rb2" for j in jobs)
    # without the recovered state it would replay its history from the sources' origin
    fresh = Scheduler(config(STREAMS, TABLES, tracks=2), now=1000, recovered={"rb": Recovered(600, 600, 0)})
    (replay,) = [j for j in fresh.handle(Reconfigure(config=config(STREAMS, tables, tracks=2)), 1001) if j.table == "rb2"]
    assert (replay.start, replay.end) == (0, 600)


def test_noop_jobs_do_not_train_the_cost_model():
    cfg = config(STREAMS, TABLES, tracks=1, learn_costs=True)
    s = Scheduler(cfg, now=0, initial_freshness=0.0)
    before = {t.name: (t.alpha, t.beta) for t in s.stats(0).tables}["rb"]
    (j,) = arrive(s, "b", "b1", 0, 60, 60)
    s.handle(JobFinished(job_id=j.job_id, duration=0.001, committed=False), 61)  # a replay: nothing appended
    assert {t.name: (t.alpha, t.beta) for t in s.stats(61).tables}["rb"] == before
    (j2,) = arrive(s, "b", "b2", 60, 120, 120)
    s.handle(JobFinished(job_id=j2.job_id, duration=30.0), 150)
    assert {t.name: (t.alpha, t.beta) for t in s.stats(150).tables}["rb"] != before


def test_drift_in_learned_costs_repartitions():
    streams = [{"name": f"s{i}", "period": 10} for i in range(3)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 1, "beta": 0}} for i in range(3)]
    s = Scheduler(config(streams, tables, tracks=2, partitioner="proportional", learn_costs=True), now=0,
                  initial_freshness=0.0)
    before = s.plan
    now = 0.0
    for k in range(1, 30):
        now = 10.0 * k
        for i in range(3):
            for j in arrive(s, f"s{i}", f"{i}-{k}", now - 10, now, now):
                s.handle(JobFinished(job_id=j.job_id, duration=8.0 if j.table == "t0" else 1.0), now + 0.5)
    assert s.plan is not before
    st = {t.name: t for t in s.stats(now).tables}
    assert st["t0"].alpha + st["t0"].beta * 10 == pytest.approx(8.0, rel=0.2)


def test_cost_model_single_observation_and_outliers():
    m = CostModel(alpha=1.0, beta=0.1)
    m.observe(100, 21.0)  # one job: 2× the prior's 11 s
    assert 11 < m.estimate(100) < 21 and m.alpha > 0 and m.beta > 0
    exact = CostModel(alpha=1.0, beta=0.1, prior_weight=1e-6)
    for n in (10, 50, 100, 200, 10, 70):
        exact.observe(n, 2.0 + 0.05 * n)
    assert exact.alpha == pytest.approx(2.0, rel=0.01) and exact.beta == pytest.approx(0.05, rel=0.01)
    robust = CostModel(alpha=1.0, beta=0.1)
    for n in range(10, 200, 10):
        robust.observe(n, 1.0 + 0.1 * n)
    robust.observe(100, 10_000.0)  # a stalled job
    assert robust.estimate(100) == pytest.approx(11.0, rel=0.5)
    frozen = CostModel(alpha=1.0, beta=0.1, learn=False)
    frozen.observe(100, 99.0)
    assert frozen.estimate(100) == 11.0


def test_cost_model_a_slow_first_job_is_overhead_not_a_per_second_cost():
    """Live: b00 (p=100) loaded 3 s of data in 61.5 s on a cold, loaded JVM. Split
    between α and β, that made β = 8 s per second of data, Max-Benefit's p·ΔF/E(ΔF) ≤ p/β = 12
    fell below a p=5 table's, and b00 never ran again. Jobs of one size cannot identify β."""
    m = CostModel(alpha=1.0, beta=0.1)
    m.observe(3.0, 61.5)
    assert m.beta == pytest.approx(0.1) and m.alpha > 30
    assert m.estimate(60) < 2 * 61.5  # a minute of backlog costs about one more job, not 20
    for _ in range(5):  # warm now: the fast jobs pull α down; nothing says more data costs more
        m.observe(10.0, 5.0)
    assert m.beta <= 0.1 and m.estimate(60) < 61.5 / 2
    spread = CostModel(alpha=1.0, beta=0.1)
    for n in (10, 100, 10, 100, 10, 100):  # sizes that vary do teach β
        spread.observe(n, 2.0 + 0.5 * n)
    assert spread.beta > 0.3


def test_cost_model_two_jobs_do_not_make_a_slope():
    """Live, 240 tables: b185 (p=100, a 10-s stream) ran 1.05 s at n = 5 and 3.48 s at n = 10. The
    slope between the two made β = 0.23 (its peers 0.09); p·ΔF/E(ΔF) ≤ p/β = 442 stayed below the
    658 of every p=100 table with one fresh partition, and b185 never ran again. From the third job
    on, sizes that vary teach β as before."""
    m = CostModel(alpha=1.0, beta=0.1)
    m.observe(5.0, 1.054)
    m.observe(10.0, 3.48)
    assert m.beta == pytest.approx(0.1) and 100 / m.beta > 100 * 10 / 1.52
    m.observe(40.0, 2.0)  # its backlog's job, when it runs: a wider spread of n, a real slope
    assert m.n_obs == 3 and m.beta != pytest.approx(0.1)


def test_a_cold_first_job_does_not_make_a_table_look_expensive():
    """Live, 240 tables: b75 (p = 60, a 20-s stream) ran one job at the start, 5.2 s for 6 rows, the
    first on a cold JVM; its peers' warm jobs took about 0.5 s. Taken for α (3.8 s), b75 needed
    several times its peers' staleness to rank first (p·ΔF/E(ΔF)), was not chosen again in the
    run, and its estimate was never corrected. A cold job may lower E(n), never raise it."""
    streams = [{"name": "s75", "period": 20}, {"name": "s76", "period": 20}]
    cost = {"alpha": 1.0, "beta": 0.01}
    tables = [{"name": n, "stream": f"s{n[1:]}", "priority": 60, "cost": cost} for n in ("b75", "b76")]
    s = Scheduler(config(streams, tables, tracks=2, learn_costs=True), now=0, initial_freshness=0.0)
    prior = 1.0 + 0.01 * 20
    for n in ("75", "76"):  # the first job of each: on the cold JVM
        (j,) = arrive(s, f"s{n}", f"{n}-1", 0, 20, 20)
        s.handle(JobFinished(job_id=j.job_id, duration=5.2 if n == "75" else 0.5, cold=True), 21)
    e = {t.name: t.alpha + t.beta * 20 for t in s.stats(21).tables}
    assert e["b75"] == pytest.approx(prior) and e["b76"] < prior  # lowered by a cold job, never raised
    m = CostModel(1.0, 0.01)
    m.observe(20.0, 0.5, cold=True)
    m.observe(20.0, 5.2)  # a warm job as slow: that is the table's cost, and it counts
    assert m.estimate(20.0) > 2.0
    unfixed = CostModel(1.0, 0.01)
    unfixed.observe(20.0, 5.2)
    assert unfixed.estimate(20.0) > 3 * prior  # what a cold start did to α before


def test_an_untried_table_starts_from_what_its_tried_peers_learned():
    """Live, 240 tables: b77, b96 and b158 (p = 60, 10-s streams) ran first 170 s into a 190-s run
    while their peers of priority 60 ran 6-10 jobs each. Untried, they were estimated at the default
    prior, E(n) = 1 + 0.1·n, several times their peers' learned costs: p·ΔF/E(ΔF) ≤ p/β = 600 stayed
    below every tried peer's, so they were not chosen, and nothing corrected the estimate (at the next
    run, with cold jobs left out, b47 and b171 ran once, cold, at the start: still at the default).
    A table on the default prior leans on its settled peers' medians; one with a prior of its own keeps it."""
    streams = [{"name": f"s{i}", "period": 10} for i in range(4)]
    tables = [{"name": f"b{i}", "stream": f"s{i}", "priority": 60} for i in range(3)]
    tables.append({"name": "own", "stream": "s3", "priority": 60, "cost": {"alpha": 1.0, "beta": 0.1}})
    s = Scheduler(config(streams, tables, tracks=1, learn_costs=True), now=0, initial_freshness=0.0)
    (j,) = arrive(s, "s2", "2-0", 0, 2, 2)  # b2's one job at the start, on the cold JVM: 5.9 s for 2 s
    s.handle(JobFinished(job_id=j.job_id, duration=5.9, cold=True), 8)
    now = 8.0
    for k, n in enumerate((10, 20, 10, 30, 10, 20)):  # b0 and b1 learn: E(n) = 0.2 + 0.01·n
        now += n
        for i in (0, 1):
            (j,) = arrive(s, f"s{i}", f"{i}-{k}", now - n, now, now)
            s.handle(JobFinished(job_id=j.job_id, duration=0.2 + 0.01 * n), now)
    st = {t.name: t for t in s.stats(now + 1).tables}
    e40 = {n: t.alpha + t.beta * 40 for n, t in st.items()}
    assert e40["b0"] < 1.0 and e40["b1"] < 1.0  # learned: under a second for 40 s of data
    assert e40["b2"] == pytest.approx((e40["b0"] + e40["b1"]) / 2, rel=0.1)  # its settled peers' medians
    assert (st["own"].alpha, st["own"].beta) == (1.0, 0.1)  # a prior of its own is kept
    # one track: b1's job runs; b0 (10 s of data) and b2 (untried: all 110 s) wait. Max-Benefit
    # takes b2 first now; on the default prior (12 s for its 110 s: ≤ p/β = 600) it took b0
    now += 10
    (run,) = arrive(s, "s1", "1-x", now - 10, now, now)
    assert not arrive(s, "s0", "0-x", now - 10, now, now) and not arrive(s, "s2", "2-x", now - 10, now, now)
    (nxt,) = s.handle(JobFinished(job_id=run.job_id, duration=0.3), now + 0.3)
    assert nxt.table == "b2"


def test_a_kind_with_no_settled_table_leans_on_every_settled_one():
    """Live, 240 tables at 3cc1b34 (base tables alone sharing what they learned): no band join had
    run, so the 16 stayed at the default prior while every base table's estimate fell to its
    learned one, and none of them ran in the whole run. A kind with no settled table takes the
    medians of every settled model; once one of its own settles, its own kind's."""
    base = [CostModel(1.0, 0.1) for _ in range(3)]
    joins = [CostModel(1.0, 0.1) for _ in range(2)]
    Peers([base, joins])
    for n in (10, 20, 30):
        for m in base[:2]:
            m.observe(n, 0.2 + 0.01 * n)
    assert base[2].estimate(60) == pytest.approx(base[0].estimate(60), rel=0.2) and base[2].estimate(60) < 2.0
    assert (joins[0].alpha, joins[0].beta) == (base[2].alpha, base[2].beta)  # every settled model's
    for n in (10, 20, 30):
        joins[0].observe(n, 3.0 + 0.05 * n)
    assert joins[1].estimate(60) == pytest.approx(joins[0].estimate(60), rel=0.25)  # its own kind's now
    assert joins[1].estimate(60) > 4.0
    assert base[2].estimate(60) < 2.0


def test_cost_model_a_few_bulk_loads_do_not_erase_alpha():
    """Live: five jobs of n = 20 s (0.4–0.9 s), then bulk loads of
    n ≈ 10^5 s (4–14 s). With the prior's weight scaled by the mean n (23,000), β0 = 0.1 was a
    2,300-s pseudo-job, the fit crossed below zero, and α went to 0: E(10) = 0.0003 s."""
    m = CostModel(alpha=1.0, beta=0.1)
    for n, d in [(4.5, 7.8), (20, 0.9), (20, 0.9), (20, 0.4), (20, 0.4), (20, 0.8),
                 (146_217, 4.2), (133_770, 5.5), (122_491, 5.9), (112_262, 6.5), (102_977, 13.9)]:
        m.observe(n, d)
    assert 0.5 < m.estimate(10) < 5  # the per-job overhead stays
    assert 2 < m.estimate(120_000) < 20 and m.beta < 1e-3  # a bulk load: seconds, not hours


def test_row_rate_is_a_typical_rate_a_burst_barely_moves():
    r = RowRate()
    assert r.work(5000, 10.0) == 10.0  # no rows known yet: n is the event time
    for _ in range(50):
        r.observe(1000, 10.0)  # 100 rows/s
    r.observe(0, 10.0)  # an empty partition says nothing about the rate
    assert r.rate == pytest.approx(100.0)
    assert r.work(1000, 10.0) == pytest.approx(10.0)  # typical data: n = ΔF
    for _ in range(20):  # a burst of 20 partitions at 8000× the rows
        r.observe(8_000_000, 10.0)
    assert 100 < r.rate < 600  # a geometric mean: 20 of ~100 partitions weigh 8000^0.18
    assert r.work(8_000_000, 10.0) > 10_000  # a burst partition is a bulk load, not a 10-s job


def test_base_job_cost_counts_rows_so_a_bulk_load_waits_for_small_valuable_jobs():
    """Live: a burst partition of 8 M rows was estimated from its 10 s of event time
    (1.7 s) and ran 21 s; Max-Benefit put it before small jobs of tables worth more per second."""
    streams = [{"name": "big", "period": 10}, {"name": "small", "period": 10}]
    tables = [{"name": "bulk", "stream": "big", "priority": 2, "cost": {"alpha": 0.5, "beta": 0.01}},
              {"name": "fresh", "stream": "small", "priority": 1, "cost": {"alpha": 0.5, "beta": 0.01}}]
    s = Scheduler(config(streams, tables, tracks=1, policy="max-benefit"), now=0, initial_freshness=0.0)
    now = 0.0
    for k in range(1, 6):  # typical partitions: 1,000 rows per 10 s on both streams
        now = 10.0 * k
        for st in ("big", "small"):
            for j in arrive(s, st, f"{st}{k}", now - 10, now, now, rows=1000):
                assert j.work == pytest.approx(10.0)  # typical data: n = ΔF
                s.handle(JobFinished(job_id=j.job_id, duration=0.6), now)
    (blocker,) = arrive(s, "big", "hold", 50, 55, 55, rows=500)  # keeps the one track busy
    assert arrive(s, "big", "burst", 55, 60, 60, rows=4_000_000) == []
    assert arrive(s, "small", "s6", 50, 60, 60, rows=1000) == []
    (nxt,) = s.handle(JobFinished(job_id=blocker.job_id, duration=0.6), 60)
    # blind to rows, bulk (p = 2, ΔF = 5) outranks fresh (p = 1, ΔF = 10) at equal E; counting
    # rows its E is 0.5 + 0.01·40,000 s
    assert nxt.table == "fresh"
    (bulk,) = s.handle(JobFinished(job_id=nxt.job_id, duration=0.6), 61)
    # 4 M rows at ~100 rows/s (the burst itself nudged the typical rate to 109 rows/s)
    assert bulk.table == "bulk" and bulk.work == pytest.approx(40_000, rel=0.1)
    assert bulk.estimate == pytest.approx(0.5 + 0.01 * bulk.work)


def test_learned_cost_of_a_base_table_is_per_row():
    streams = [{"name": "s", "period": 10}]
    tables = [{"name": "t", "stream": "s", "cost": {"alpha": 1.0, "beta": 0.1}}]
    s = Scheduler(config(streams, tables, tracks=1, learn_costs=True), now=0, initial_freshness=0.0)
    for k in range(1, 40):  # true cost: 0.5 s + 10 µs a row; every fifth partition is 50× bigger
        rows = 50_000 if k % 5 == 0 else 1000
        (j,) = arrive(s, "s", f"p{k}", 10.0 * (k - 1), 10.0 * k, 10.0 * k, rows=rows)
        s.handle(JobFinished(job_id=j.job_id, duration=0.5 + 1e-5 * rows), 10.0 * k + 1)
    (j,) = arrive(s, "s", "big", 390, 400, 400, rows=100_000)
    assert j.estimate == pytest.approx(0.5 + 1e-5 * 100_000, rel=0.25)  # 1.5 s; blind to rows: ~0.6 s


def test_staleness_meter_time_within_target():
    m = StalenessMeter(target=5.0)
    m.start(0.0, 0.0)
    m.set_freshness(8.0, 10.0)  # S: 0→10 (within for 5 s), then 2
    within, observed = m.time_within(14.0)  # S: 2→6 over (10, 14] (within for 3 s)
    assert (within, observed) == (8.0, 14.0)
    assert m.integral(14.0) == pytest.approx(50 + 16)


def test_new_derived_table_is_computed_from_the_sources_origin():
    rec = {"ra": Recovered(600, 600, origin=0), "rb": Recovered(600, 600, origin=60)}
    tables = [TABLES[0], TABLES[1], {**TABLES[2], "name": "fresh"}]
    s = Scheduler(config(STREAMS, tables, tracks=1, chop=3), now=1000, recovered=rec)
    (j,) = s.handle(Tick(), 1000)
    assert (j.table, j.start, j.end, j.chopped) == ("fresh", 0, 180, True)  # backfill, chopped to 3·P


def test_dag_ancestors_dependents_order_and_periods():
    """§2.1 / §2.4 on the paper's Fig. 1 shape: T1, T2 → T3; T3, T2 → T4 (T1 every 5, T2 every 60)."""
    from warehouse.dag import Dag

    dag = Dag.build({"T1": (), "T2": (), "T3": ("T1", "T2"), "T4": ("T3", "T2")}, {"T1": 5, "T2": 60})
    assert dag.ancestors("T4") == {"T1", "T2", "T3"}
    assert dag.descendants("T1") == {"T3", "T4"}
    assert dag.order.index("T3") < dag.order.index("T4")
    assert dag.periods() == {"T1": 5, "T2": 60, "T3": 60, "T4": 60}
    with pytest.raises(ValueError, match="cycle"):
        Dag.build({"a": ("b",), "b": ("a",)}, {})


def test_reconfigure_that_removes_pending_work_keeps_the_queue_consistent():
    rec = {"ra": Recovered(600, 600), "rb": Recovered(600, 600), "j": Recovered(0)}
    s = Scheduler(config(STREAMS, TABLES, tracks=1), now=1000, recovered=rec)
    assert s.stats(1000).pending_jobs == 1  # j is released, not started yet
    streams = [*STREAMS, {"name": "c", "period": 60}]
    tables = [TABLES[0], TABLES[1], {"name": "rc", "stream": "c"}, {**TABLES[2], "sources": ["rc"]}]
    assert s.handle(Reconfigure(config=config(streams, tables, tracks=1)), 1001) == []  # rc has no data: nothing for j
    assert s.stats(1001).pending_jobs == 0 and sum(s._queues.queued) == 0
    (j,) = s.handle(PartitionArrived(stream="c", partition_id="c1", start=0, end=60), 1002)
    assert j.table == "rc"


@pytest.mark.parametrize("refused", [False, True])
def test_a_refused_job_is_known_not_committed_an_unknown_outcome_may_be(refused):
    """A derived job that fails may have committed (an unknown outcome): its window is in doubt
    until its retry says (Derived.unsure), and the retry covers it first. One the executor refused
    before writing (`JobFailed.refused`: a schema change it may not make) wrote nothing: no doubt,
    so a rewrite asked later (e.g. `rebuild: true`) is not held behind a retry that fails again."""
    s = Scheduler(config(STREAMS, TABLES, tracks=4), now=0, initial_freshness=0.0)
    (ja,) = arrive(s, "a", "a1", 0, 150, 150)
    (jb,) = arrive(s, "b", "b1", 0, 100, 150)
    s.handle(JobFinished(job_id=ja.job_id, duration=1), 151)
    (jd,) = s.handle(JobFinished(job_id=jb.job_id, duration=1), 152)
    assert jd.table == "j"
    s.handle(JobFailed(job_id=jd.job_id, reason="no", refused=refused), 153)
    derived = s._tables["j"].derived
    assert (derived.unsure is None) is refused


def test_beyond_the_sizes_a_table_has_run_a_load_costs_per_row():
    """Live, 60 tables at 99a0f98: b03 (p = 10, a 20-s stream of ~1,000 rows) had only run one-partition
    jobs; its backlog of three 2,000,000-row burst partitions (n ≈ 96,000 s at its typical rate) was
    estimated at 3,698 s by a β fitted to jobs of one size, and it waited for an idle warehouse while
    four tables loaded such bursts in 2.9–6.0 s. Beyond the largest n a table has run, E(n) goes on
    at `row` seconds a row: here 1 µs × 50 rows/s × (96,000 − m)."""
    rate = RowRate()
    rate.observe(1000, 20.0)  # 50 rows a second
    m = CostModel(1.0, 0.1, row=1e-6, rate=rate)
    assert m.estimate(20.0) == pytest.approx(1.0 + 1e-6 * 50 * 20)  # untried: α and a cost per row
    for n, d in ((20.0, 0.6), (22.0, 1.4), (19.0, 0.5), (21.0, 0.4)):  # one size: β is noise
        m.observe(n, d)
    assert m._top == pytest.approx(22.0, rel=0.1)
    top = m._top
    burst = 6_000_000 / 50  # three burst partitions at the typical rate: n = 120,000
    assert m.estimate(burst) == pytest.approx(m.alpha + m.beta * top + 1e-6 * 50 * (burst - top))
    assert 5.0 < m.estimate(burst) < 12.0
    extrapolated = CostModel(1.0, 0.1)  # the same jobs, β carried out to the burst: the old estimate
    for n, d in ((20.0, 0.6), (22.0, 1.4), (19.0, 0.5), (21.0, 0.4)):
        extrapolated.observe(n, d)
    assert extrapolated.estimate(burst) > 100 * m.estimate(burst)
    m.observe(burst, 6.0)  # the burst ran: its own line now covers that size
    assert m._top == burst and m.estimate(burst) == pytest.approx(m.alpha + m.beta * burst)
    for _ in range(400):  # and forgets it as its jobs do (0.97^400: its weight is gone)
        m.observe(20.0, 0.5)
    assert m._top < 30.0
    derived = CostModel(1.0, 0.1, rate=rate)  # no cost per row (a derived table, row_cost 0): β, as before
    assert derived.estimate(burst) == 1.0 + 0.1 * burst
