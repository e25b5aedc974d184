"""Beyond the paper: Random as §4.3 defines it, chopping that pays, time slices, reservation."""

from __future__ import annotations

import pytest

from policies.chopping import AUTO_C, SLOW, Pace, chop_pays
from policies.reservation import Upcoming, ValueRanking, hold_for
from tests.helpers_engine import config
from warehouse.events import JobFailed, JobFinished, PartitionArrived, Reconfigure, Tick
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


# ---- chopping that pays (§3.4 extended) ------------------------------------------------------------
def _pace(now: float, long: float = 1.0) -> Pace:
    p = Pace()
    p.now = now
    p._observed, p._estimated = long, 1.0
    return p


def test_chop_pays_while_slow_or_with_spare_capacity_and_in_overload_not_on_an_inversion():
    # spare capacity: the paper's c, raised where a piece of c periods would not pay its α (β·c·P > α)
    assert chop_pays(_pace(1.0), load=0.9, benefit=40, best_benefit=50, alpha=1, beta_period=10) == AUTO_C
    assert chop_pays(_pace(1.0), load=0.9, benefit=5, best_benefit=50, alpha=1, beta_period=10) == AUTO_C
    assert chop_pays(_pace(1.0), load=0.9, benefit=40, best_benefit=50, alpha=50, beta_period=10) == 5
    assert chop_pays(_pace(3.0), load=1.2, benefit=5, best_benefit=50) == AUTO_C  # transient slowdown
    # sustained overload: an inverted (low-value) backlog is loaded whole while the other tracks carry
    # what is worth more (1.8 ≤ 3 of 4), chopped to c where they cannot (1.8 > 1 of 2; 1.8·m = 3.6 > 3)
    assert chop_pays(_pace(1.0), load=1.1, benefit=5, best_benefit=50) is None
    carried = {"load_above": lambda b: 1.8 if b < 50 else 0.0, "alpha": 1, "beta_period": 10}
    assert chop_pays(_pace(1.0), load=1.1, benefit=5, best_benefit=50, tracks=4, **carried) is None
    assert chop_pays(_pace(1.0), load=1.1, benefit=5, best_benefit=50, tracks=2, **carried) == AUTO_C
    assert chop_pays(_pace(1.0, long=2.0), load=1.1, benefit=5, best_benefit=50, tracks=4, **carried) == AUTO_C  # ·m
    # ... otherwise chop only where a longer job would save under 1% in α: α = 1, β·P = 10 → c = 10
    assert chop_pays(_pace(1.0), load=1.1, benefit=40, best_benefit=50, alpha=1, beta_period=10) == 10
    assert chop_pays(_pace(1.0), load=1.1, benefit=40, best_benefit=50, alpha=0.01, beta_period=10) == AUTO_C


def test_the_value_ranking_gives_the_best_benefit_and_of_the_tables_worth_more_their_load_and_base_period():
    rank = ValueRanking([(40.0, 20.0, 0.3), (5.0, 10.0, 0.9), (50.0, None, 0.5)])  # the best one derived
    assert rank.best == 50.0 and ValueRanking(()).best == 0.0
    above = (60.0, 50.0, 45.0, 40.0, 5.0, 1.0)
    assert [rank.load_above(b) for b in above] == pytest.approx([0, 0, 0.5, 0.5, 0.8, 1.7])
    assert [rank.shortest_period_above(b) for b in above] == [None, None, None, None, 20.0, 10.0]


def _backlog(s: Scheduler, stream: str, n: int, period: float, now: float) -> None:
    for k in range(n):
        s.handle(PartitionArrived(stream=stream, partition_id=f"{stream}{k}", start=k * period,
                                  end=(k + 1) * period), now)


def test_auto_loads_a_backlog_in_long_jobs_in_sustained_overload():
    """Three tables with u = 0.4 on one track (load 1.2): a ten-period backlog is one job (a longer
    one would save over 1% in α: c = α/(0.01·β·P) = 10 periods), not three of c = 3."""
    streams = [{"name": f"s{i}", "period": 10} for i in range(3)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 3, "beta": 0.1}} for i in range(3)]
    s = Scheduler(config(streams, tables, chop="auto"), now=0, initial_freshness=0.0)
    (busy,) = s.handle(PartitionArrived(stream="s0", partition_id="x", start=0, end=10), 10)
    _backlog(s, "s1", 10, 10, 100)  # ten periods pending behind the running job
    (job,) = s.handle(JobFinished(job_id=busy.job_id, duration=busy.estimate), 101)
    assert (job.table, job.end - job.start, job.chopped) == ("t1", 100, False)


def test_auto_chops_to_c_periods_with_spare_capacity():
    streams = [{"name": f"s{i}", "period": 10} for i in range(2)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 1, "beta": 0.1}} for i in range(2)]
    s = Scheduler(config(streams, tables, chop="auto"), now=0, initial_freshness=0.0)
    (busy,) = s.handle(PartitionArrived(stream="s0", partition_id="x", start=0, end=10), 10)
    _backlog(s, "s1", 10, 10, 100)  # load 0.4: the first 3 periods land 70 s of β earlier, for one α
    (job,) = s.handle(JobFinished(job_id=busy.job_id, duration=busy.estimate), 101)
    assert (job.table, job.end - job.start, job.chopped) == ("t1", AUTO_C * 10, True)


def test_auto_chops_to_c_periods_while_jobs_run_slower_than_estimated():
    streams = [{"name": f"s{i}", "period": 10} for i in range(2)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 1, "beta": 0.1}} for i in range(2)]
    s = Scheduler(config(streams, tables, chop="auto"), now=0, initial_freshness=0.0)
    now = 10.0
    for k in range(8):  # a slowdown: every job takes three times its estimate
        (j,) = s.handle(PartitionArrived(stream="s0", partition_id=f"x{k}", start=10 * k, end=10 * (k + 1)), now)
        now += 3 * j.estimate
        s.handle(JobFinished(job_id=j.job_id, duration=3 * j.estimate), now)
    (busy,) = s.handle(PartitionArrived(stream="s0", partition_id="y", start=80, end=90), now)
    _backlog(s, "s1", 10, 10, now)
    (job,) = s.handle(JobFinished(job_id=busy.job_id, duration=3 * busy.estimate), now + 1)
    assert (job.table, job.end - job.start, job.chopped) == ("t1", AUTO_C * 10, True)


def test_the_pace_now_counts_the_jobs_of_settled_cost_models_only():
    p = Pace()
    p.observe(3.0, 1.0, settled=False)  # a prior's error: the long-run pace m, not `now`
    assert (p.now, p.long) == (1.0, 3.0)
    p.observe(3.0, 1.0, settled=True)
    assert p.now == 1.5


def test_a_machine_slower_than_the_prior_is_no_transient_slowdown():
    # twelve tables, two jobs each, every one three times its prior estimate: a slow machine whose
    # costs are not learned yet (240 tables on two cores ran 2-5x the prior all run, and
    # chop auto, taking that for a slowdown, chopped every job to c periods)
    streams = [{"name": f"s{i}", "period": 10} for i in range(12)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 1, "beta": 0.1}} for i in range(12)]
    s = Scheduler(config(streams, tables, chop="auto", tracks=1, learn_costs=True), now=0, initial_freshness=0.0)
    now = 10.0
    for k in range(2):
        for i in range(12):
            (j,) = s.handle(PartitionArrived(stream=f"s{i}", partition_id=f"p{i}.{k}", start=10 * k,
                                             end=10 * (k + 1)), now)
            now += 3 * j.estimate
            assert s.handle(JobFinished(job_id=j.job_id, duration=3 * j.estimate), now) == []
    assert s._pace.now == 1.0 and s._pace.long > 2.5
    # ... while those of one table, three times its learned estimate once it has settled, are one
    s, _ = _slow_scheduler(learn_costs=True)
    assert s._pace.now > SLOW


def test_auto_chops_a_low_priority_backlog_that_would_block_valuable_jobs():
    streams = [{"name": "lo_s", "period": 10}, {"name": "hi_s", "period": 10}]
    tables = [{"name": "lo", "stream": "lo_s", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}},
              {"name": "hi", "stream": "hi_s", "priority": 100, "cost": {"alpha": 1, "beta": 0.1}}]
    s = Scheduler(config(streams, tables, chop="auto", tracks=1), now=0, initial_freshness=0.0)
    (busy,) = s.handle(PartitionArrived(stream="hi_s", partition_id="h0", start=0, end=10), 10)
    _backlog(s, "lo_s", 10, 10, 100)
    (job,) = s.handle(JobFinished(job_id=busy.job_id, duration=busy.estimate), 101)
    # U_tot = 2 · 2/10 = 0.4 on one track: spare capacity, so the inversion is worth an extra α
    assert (job.table, job.end - job.start, job.chopped) == ("lo", AUTO_C * 10, True)


@pytest.mark.parametrize(("tracks", "low_tables", "whole"), [(2, 1, False), (4, 6, True)])
def test_auto_loads_an_inverted_backlog_whole_only_while_the_other_tracks_carry_the_valuable_tables(
    tracks: int, low_tables: int, whole: bool
):
    """Overload (Σu/N = 1.2 on 2 tracks, 1.1 on 4), five valuable tables with Σu = 2 (u = 0.4 each):
    on 2 tracks the one other track cannot carry them, so the low-priority backlog is chopped to c;
    on 4 the other three can, so it is loaded whole (amortised, §2.4)."""
    hi = [{"name": f"hi{i}", "stream": f"h{i}", "priority": 100, "cost": {"alpha": 1, "beta": 0.3}} for i in range(5)]
    lo = [{"name": f"lo{i}", "stream": f"l{i}", "priority": 1, "cost": {"alpha": 1, "beta": 0.3}}
          for i in range(low_tables)]
    streams = [{"name": t["stream"], "period": 10} for t in hi + lo]
    s = Scheduler(config(streams, hi + lo, chop="auto", tracks=tracks), now=0, initial_freshness=0.0)
    busy = [j for i in range(tracks) for j in s.handle(
        PartitionArrived(stream=f"h{i}", partition_id="x", start=0, end=10), 10)]
    assert len(busy) == tracks  # every track runs a valuable job
    _backlog(s, "l0", 10, 10, 100)
    (job,) = s.handle(JobFinished(job_id=busy[0].job_id, duration=busy[0].estimate), 101)
    assert (job.table, job.end - job.start, job.chopped) == ("lo0", 100 if whole else AUTO_C * 10, not whole)


# ---- time-sliced loading ------------------------------------------------------------------------------
def _slow_scheduler(**kw) -> tuple[Scheduler, float]:
    """Two tables; eight jobs of t0 ran three times slower than estimated (a transient slowdown)."""
    streams = [{"name": f"s{i}", "period": 10} for i in range(2)]
    tables = [{"name": f"t{i}", "stream": f"s{i}", "cost": {"alpha": 1, "beta": 0.1}} for i in range(2)]
    s = Scheduler(config(streams, tables, chop="auto", **kw), now=0, initial_freshness=0.0)
    now = 10.0
    for k in range(8):
        (j,) = s.handle(PartitionArrived(stream="s0", partition_id=f"x{k}", start=10 * k, end=10 * (k + 1)), now)
        now += 3 * j.estimate
        s.handle(JobFinished(job_id=j.job_id, duration=3 * j.estimate), now)
    return s, now


def test_a_long_partition_is_loaded_in_time_slices_each_its_own_watermark():
    s, now = _slow_scheduler()
    (job,) = s.handle(PartitionArrived(stream="s1", partition_id="backfill", start=0, end=100), now)
    windows = []
    while job is not None:
        windows.append((job.start, job.end, job.new_freshness, job.partitions, job.chopped))
        now += 3 * job.estimate
        started = s.handle(JobFinished(job_id=job.job_id, duration=3 * job.estimate), now)
        job = started[0] if started else None
    assert windows == [(0, 30, 30, ("backfill",), True), (30, 60, 60, ("backfill",), True),
                       (60, 90, 90, ("backfill",), True), (90, 100, 100, ("backfill",), False)]
    st = {t.name: t for t in s.stats(now).tables}["t1"]
    assert (st.freshness, st.pending_partitions, st.state) == (100, 0, "idle")


def test_a_failed_time_slice_is_retried_from_the_same_watermark():
    s, now = _slow_scheduler(retry_backoff=1)
    (job,) = s.handle(PartitionArrived(stream="s1", partition_id="backfill", start=0, end=100), now)
    (job,) = s.handle(JobFinished(job_id=job.job_id, duration=3 * job.estimate), now + 10)
    assert (job.start, job.end) == (30, 60)
    assert s.handle(JobFailed(job_id=job.job_id, reason="boom"), now + 11) == []
    (retry,) = s.handle(Tick(), now + 12)
    assert (retry.start, retry.end, retry.partitions) == (30, 60, ("backfill",))


def test_late_data_below_a_partly_loaded_partition_is_loaded_before_the_next_slice():
    s, now = _slow_scheduler()
    (job,) = s.handle(PartitionArrived(stream="s1", partition_id="big", start=0, end=100), now)
    s.handle(PartitionArrived(stream="s1", partition_id="late", start=0, end=20), now)  # late, below F
    (job,) = s.handle(JobFinished(job_id=job.job_id, duration=3 * job.estimate), now + 10)
    assert job.partitions == ("late",) and job.new_freshness == 30
    (job,) = s.handle(JobFinished(job_id=job.job_id, duration=3 * job.estimate), now + 20)
    assert (job.start, job.end, job.partitions) == (30, 60, ("big",))


# ---- track reservation by lookahead (§3.1 Lookahead, §3.2 reservation, extended) ----------------------
def test_hold_for_keeps_a_track_only_when_the_valuable_job_would_wait_behind_the_long_one():
    k = [Upcoming(release=8.0, weight=1000.0, cost=2.0)]
    # one track: K would wait 101 − 8 = 93 s behind J (gain 93,000) against J starting 10 s later (10,000)
    assert hold_for(0.0, 101.0, 1000.0, k, free_at=[]) == 8.0
    assert hold_for(0.0, 101.0, 1000.0, k, free_at=[5.0]) is None  # another track is free by then
    assert hold_for(0.0, 101.0, 20_000.0, k, free_at=[]) is None  # J is worth more than K's wait
    assert hold_for(0.0, 101.0, 1000.0, [], free_at=[]) is None


def _long_and_short(**kw) -> Scheduler:
    """One track; `hi` (P = 10, priority 100, E(P) = 2 s) and `lo` (P = 1000, priority 1, E(P) = 101 s)."""
    streams = [{"name": "hs", "period": 10}, {"name": "ls", "period": 1000}]
    tables = [{"name": "hi", "stream": "hs", "priority": 100, "cost": {"alpha": 1, "beta": 0.1}},
              {"name": "lo", "stream": "ls", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}}]
    return Scheduler(config(streams, tables, **kw), now=0, initial_freshness=0.0)


def _drive(s: Scheduler) -> list[tuple[float, str]]:
    """hi arrives every 10 s from t = 10, lo once at t = 11 with 1000 s of data; jobs take their
    estimate; returns (start time, table) of every job started up to t = 400."""
    started: list[tuple[float, str]] = []
    running: dict[int, tuple[float, float]] = {}  # job id → (end time, duration)
    events = [(10.0 * k, "hi") for k in range(1, 41)] + [(11.0, "lo")]
    while True:
        nxt = min([e[0] for e in events] + [r[0] for r in running.values()] + [s.next_wakeup() or 1e18])
        if nxt > 400:
            return started
        out = []
        for jid, (end, duration) in list(running.items()):
            if end == nxt:
                del running[jid]
                out += s.handle(JobFinished(job_id=jid, duration=duration), nxt)
        for e in [e for e in events if e[0] == nxt]:
            events.remove(e)
            if e[1] == "hi":
                out += s.handle(PartitionArrived(stream="hs", partition_id=f"h{nxt}", start=nxt - 10, end=nxt), nxt)
            else:
                out += s.handle(PartitionArrived(stream="ls", partition_id="l", start=0, end=1000), nxt)
        out += s.handle(Tick(), nxt)
        for j in out:
            started.append((nxt, j.table))
            running[j.job_id] = (nxt + j.estimate, j.estimate)


def test_the_default_holds_a_track_for_the_periodic_valuable_job_but_not_for_longer_than_the_long_job():
    s = _long_and_short()
    started = _drive(s)
    # lo (101 s, pending from t = 12) is held while hi's releases are due, but never more than 101 s
    # in all: at 112 the next hold would last until 120 > 12 + 101, so it starts then
    assert [t for t, name in started if name == "lo"] == [112.0]
    his = [t for t, name in started if name == "hi"]
    assert his[:11] == [10.0 * k for k in range(1, 12)]  # hi never waited while lo was held


def test_the_paper_policies_never_hold_a_track():
    started = _drive(_long_and_short(policy="max-benefit"))
    assert [t for t, name in started if name == "lo"] == [12.0]  # as soon as hi's first job is done


def test_a_held_track_asks_for_a_wakeup_at_the_expected_release():
    """If the expected partition does not come, a Tick at its release time ends the hold."""
    s = _long_and_short()
    (hi,) = s.handle(PartitionArrived(stream="hs", partition_id="h10", start=0, end=10), 10)
    assert s.handle(PartitionArrived(stream="ls", partition_id="l", start=0, end=1000), 11) == []
    assert s.handle(JobFinished(job_id=hi.job_id, duration=hi.estimate), 12) == []  # held for hi at 20
    assert s.next_wakeup() == 20
    (lo,) = s.handle(Tick(), 20.5)  # hi's partition did not come: nothing is expected any more
    assert lo.table == "lo"


# ---- the overdue queue: an aging bound (scheduler.overdue_periods) ----------------------------------
def _behind_th(s: Scheduler, job, steps: int, arrivals=()):
    """One track where `th` (stream `h`) is pending again whenever a job ends: at 2, 3, … a
    partition of `h` arrives and the running job ends; (now, job started). `arrivals`: (time,
    event) handed over first at that time."""
    started, extra = [], dict(arrivals)
    for k in range(steps):
        now = 2.0 + k
        if now in extra:
            s.handle(extra[now], now)
        s.handle(PartitionArrived(stream="h", partition_id=f"h{k + 1}", start=1 + k, end=2 + k), now)
        (job,) = s.handle(JobFinished(job_id=job.job_id, duration=1), now)
        started.append((now, job))
    return started


@pytest.mark.parametrize("overdue", [None, 2.0])
def test_an_overdue_job_goes_before_more_valuable_ones_and_only_then(overdue):
    """One track, Max-Benefit: `h` (priority 100) is pending again whenever a job ends, so `l`
    (priority 1, period 10) never ranks first. With `overdue_periods: 2` its job (released at t = 1;
    the table fresh since 0) starts at the first decision from t = 20 on (0 + 2·10), and `h` has
    every other decision."""
    streams = [{"name": "h", "period": 10}, {"name": "l", "period": 10}]
    tables = [{"name": "th", "stream": "h", "priority": 100}, {"name": "tl", "stream": "l", "priority": 1}]
    s = Scheduler(config(streams, tables, policy="max-benefit", overdue_periods=overdue), now=0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="h", partition_id="h0", start=0, end=1), 1)
    assert s.handle(PartitionArrived(stream="l", partition_id="l0", start=0, end=10), 1) == []
    starts = []
    for now, j in _behind_th(s, job, 40):
        starts.append((now, j.table))
        assert j.overdue == (j.table == "tl")
    low = [now for now, table in starts if table == "tl"]
    counted = {t.name: t.jobs_overdue for t in s.stats(42).tables}
    if overdue is None:
        assert low == []  # starved for as long as `h` is pending
        assert counted == {"th": 0, "tl": 0}
    else:
        assert low == [20.0]
        assert all(table == "th" for now, table in starts if now != 20.0)
        assert counted == {"th": 0, "tl": 1}  # (freshet_jobs_overdue_total)


@pytest.mark.parametrize("chop", [None, "auto", 5.0])
def test_an_overdue_job_loads_one_period_and_the_rest_is_released_anew(chop):
    """`l` (period 10) has a backlog of three partitions, (0, 30], when its job goes overdue at
    t = 20 (fresh since 0, `overdue_periods: 2`): the overdue job loads (0, 10] only, whatever the
    chopping (warehouse.overdue.OVERDUE_CHOP); the rest is released when it ends, at 21, and its
    next job, (10, 20], goes overdue at 41, two periods after that load — not at once, and not
    before."""
    streams = [{"name": "h", "period": 10}, {"name": "l", "period": 10}]
    tables = [{"name": "th", "stream": "h", "priority": 100}, {"name": "tl", "stream": "l", "priority": 1}]
    s = Scheduler(config(streams, tables, policy="max-benefit", overdue_periods=2.0, chop=chop), now=0,
                  initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="h", partition_id="h0", start=0, end=1), 1)
    for i in range(3):
        assert s.handle(PartitionArrived(stream="l", partition_id=f"l{i}", start=10 * i, end=10 * (i + 1)), 1) == []
    low = []
    for now, j in _behind_th(s, job, 45):
        if j.table == "tl":
            assert j.overdue and j.chopped
            low.append((now, j.start, j.end, len(j.arrivals)))
    assert low == [(20.0, 0.0, 10.0, 1), (41.0, 10.0, 20.0, 1)]


def test_an_overdue_derived_job_computes_one_period_of_its_window():
    """`tl` loads (0, 30] at t = 2; `dl` over it (priority 1) is released when that commits, at 3,
    and never ranks above `th`. At 20 it is overdue — two periods since its freshness last changed
    (0), not since its release (that would be 23): the wait for its source counts — and computes
    (0, 10] only, not the (0, 30] its sources allow (warehouse.overdue.OVERDUE_CHOP through the
    derived window's chop)."""
    streams = [{"name": "h", "period": 10}, {"name": "l", "period": 10}]
    tables = [{"name": "th", "stream": "h", "priority": 100}, {"name": "tl", "stream": "l", "priority": 100},
              {"name": "dl", "sources": ["tl"], "priority": 1}]
    s = Scheduler(config(streams, tables, policy="max-benefit", overdue_periods=2.0), now=0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="h", partition_id="h0", start=0, end=1), 1)
    for i in range(3):
        s.handle(PartitionArrived(stream="l", partition_id=f"l{i}", start=10 * i, end=10 * (i + 1)), 1)
    seen = []
    for now, j in _behind_th(s, job, 30):
        if j.table != "th":
            seen.append((now, j.table, j.start, j.end, j.overdue, j.chopped))
    assert seen == [(2.0, "tl", 0.0, 30.0, False, False), (20.0, "dl", 0.0, 10.0, True, True)]


def test_a_derived_table_is_overdue_in_units_of_its_granularity():
    """`dg` (granularity 60 over a 10-s stream) can get fresher once a minute: overdue after 2 of
    its minutes without getting fresher (at 120), not 2 of its stream's periods (20)."""
    streams = [{"name": "h", "period": 10}, {"name": "l", "period": 10}]
    tables = [{"name": "th", "stream": "h", "priority": 100}, {"name": "tl", "stream": "l", "priority": 100},
              {"name": "dg", "sources": ["tl"], "priority": 1, "granularity": 60}]
    s = Scheduler(config(streams, tables, policy="max-benefit", overdue_periods=2.0), now=0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="h", partition_id="h0", start=0, end=1), 1)
    s.handle(PartitionArrived(stream="l", partition_id="l0", start=0, end=60), 1)
    seen = [(now, j.overdue) for now, j in _behind_th(s, job, 125) if j.table == "dg"]
    assert seen == [(120.0, True)]


def test_a_base_table_after_its_streams_pause_is_not_overdue_at_once():
    """`tl`'s stream is silent until 50: its wait begins at most a period before its data came
    (40), so it is overdue at 60 (40 + 2·10), not at once for the 50 s without a load."""
    streams = [{"name": "h", "period": 10}, {"name": "l", "period": 10}]
    tables = [{"name": "th", "stream": "h", "priority": 100}, {"name": "tl", "stream": "l", "priority": 1}]
    s = Scheduler(config(streams, tables, policy="max-benefit", overdue_periods=2.0), now=0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="h", partition_id="h0", start=0, end=1), 1)
    late = PartitionArrived(stream="l", partition_id="l0", start=40, end=50)
    seen = [(now, j.overdue) for now, j in _behind_th(s, job, 70, arrivals=[(50.0, late)]) if j.table == "tl"]
    assert seen == [(60.0, True)]


def test_overdue_slack_adds_seconds_to_the_periods():
    """`overdue_periods: 1, overdue_slack: 15s` is overdue 10 + 15 s after the wait began: `tl`'s
    data from 40 (its stream silent before), overdue at 65, not at 50 as with the periods alone."""
    streams = [{"name": "h", "period": 10}, {"name": "l", "period": 10}]
    tables = [{"name": "th", "stream": "h", "priority": 100}, {"name": "tl", "stream": "l", "priority": 1}]
    for slack, due in ((0.0, 50.0), (15.0, 65.0)):
        s = Scheduler(config(streams, tables, policy="max-benefit", overdue_periods=1.0, overdue_slack=slack), now=0,
                      initial_freshness=0.0)
        (job,) = s.handle(PartitionArrived(stream="h", partition_id="h0", start=0, end=1), 1)
        late = PartitionArrived(stream="l", partition_id="l0", start=40, end=50)
        seen = [(now, j.overdue) for now, j in _behind_th(s, job, 80, arrivals=[(50.0, late)]) if j.table == "tl"]
        assert seen == [(due, True)]


def test_a_retry_or_a_recompute_waits_from_its_release():
    """The overdue deadline (warehouse.overdue.deadline) of a derived table with an update to make
    counts from its freshness's last change; after a failure, or with nothing but windows to
    recompute, from the release."""
    from warehouse.overdue import deadline

    streams = [{"name": "l", "period": 10}]
    tables = [{"name": "tl", "stream": "l"}, {"name": "dl", "sources": ["tl"]}]
    s = Scheduler(config(streams, tables, overdue_periods=2.0), now=0, initial_freshness=0.0)
    (job,) = s.handle(PartitionArrived(stream="l", partition_id="l0", start=0, end=30), 1)
    s.handle(JobFinished(job_id=job.job_id, duration=1), 2)  # tl fresh to 30: dl has an update
    dl = s._tables["dl"]
    assert deadline(dl, 2.0, 2.0) == 0.0 + 20  # fresh since 0: the wait for tl counts
    dl.jobs.consecutive_failures = 1
    assert deadline(dl, 2.0, 2.0) == 2.0 + 20
    dl.jobs.consecutive_failures = 0
    dl.freshness = 30.0  # (as if computed to the edge: only a recompute could be left)
    assert deadline(dl, 2.0, 2.0) == 2.0 + 20
    assert deadline(dl, 2.0, 2.0, 35.0) == 2.0 + 20 + 35  # overdue_slack: seconds on top of the periods


def test_validate_says_whether_overdue_jobs_go_first() -> None:
    from ops.validate import _text, describe

    streams = [{"name": "h", "period": 10}]
    tables = [{"name": "th", "stream": "h"}]
    assert "overdue jobs: off" in _text(describe(config(streams, tables, tracks=4)))
    says = _text(describe(config(streams, tables, tracks=8, overdue_periods=3)))
    assert "overdue jobs: a table 3 of its periods without getting fresher goes first, at most 4 at once" in says
    says = _text(describe(config(streams, tables, tracks=8, overdue_periods=3, overdue_slack="35s")))
    assert "a table 3 of its periods and 35 s without getting fresher goes first" in says


def test_the_overdue_queue_is_rebuilt_by_a_reload():
    """A reload that turns the bound on gives the jobs already waiting their place by their tables'
    wait (fresh since 0; not the reload's time); a reload that turns it off empties the queue."""
    streams = [{"name": "h", "period": 10}, {"name": "l", "period": 10}]
    tables = [{"name": "th", "stream": "h", "priority": 100}, {"name": "tl", "stream": "l", "priority": 1}]
    s = Scheduler(config(streams, tables, policy="max-benefit"), now=0, initial_freshness=0.0)
    s.handle(PartitionArrived(stream="h", partition_id="h0", start=0, end=1), 1)
    s.handle(PartitionArrived(stream="l", partition_id="l0", start=0, end=10), 1)
    s.handle(Reconfigure(config=config(streams, tables, policy="max-benefit", overdue_periods=3.0)), 5)
    assert s._overdue.heap == [(30.0, s._tables["tl"].queue.seq, "tl")]  # 0 + 3·10
    s.handle(Reconfigure(config=config(streams, tables, policy="max-benefit")), 6)
    assert s._overdue.heap == []
