"""The bulk limit (policies.bulk): at most `scheduler.bulk_limit` bulk jobs run at once,
so a track — and a core — stays for the valuable tables' small jobs; and the fair-scheduler pool
each job's Spark work runs in. Engine tests: no Spark, no SimPy."""

from __future__ import annotations

import math

import pytest

from policies.bulk import BULK_POOL, bulk_limit, bulk_threshold, pool_for, pool_weights
from tests.helpers_engine import config
from warehouse.config import parse_config, with_cores
from warehouse.errors import ConfigError
from warehouse.events import JobFinished, PartitionArrived, StartJob
from warehouse.scheduler import Scheduler

BULK = ("b1", "b2", "b3")  # low priority; a 100 s partition costs 1 + 0.1·100 = 11 s
STREAMS = [{"name": f"s_{n}", "period": 10} for n in (*BULK, "v")]
TABLES = [{"name": n, "stream": f"s_{n}", "priority": 1, "cost": {"alpha": 1, "beta": 0.1}} for n in BULK] + [
    {"name": "v", "stream": "s_v", "priority": 100, "cost": {"alpha": 0.5, "beta": 0.01}}]


def scheduler(master: str, **sched: object) -> Scheduler:
    cfg = config(STREAMS, TABLES, tracks=4, **sched)
    cfg = cfg.model_copy(update={"spark": cfg.spark.model_copy(update={"master": master})})
    return Scheduler(cfg, now=0.0, initial_freshness=0.0)


def arrive(s: Scheduler, table: str, start: float, end: float, now: float) -> list[StartJob]:
    return s.handle(PartitionArrived(stream=f"s_{table}", partition_id=f"{table}-{end:g}", start=start, end=end), now)


def test_the_bulk_limit_holds_and_a_small_valuable_job_runs_beside_the_bulk_one() -> None:
    """local[2]: one bulk job at a time (bulk_limit auto = 2 − 1); the other bulk loads wait with
    tracks idle, and the valuable table's small jobs take those tracks at once."""
    s = scheduler("local[2]", bulk_cost=5)
    started: list[StartJob] = []
    for name in BULK:  # a burst: three 100 s partitions, each 11 s of work
        started += arrive(s, name, 0.0, 100.0, 100.0)
    assert [j.bulk for j in started] == [True]
    assert len(s.running) == 1 and len(s.stats(100.0).tracks) == 4
    small = arrive(s, "v", 90.0, 100.0, 100.5)
    assert [(j.table, j.bulk) for j in small] == [("v", False)]  # beside the bulk load, not behind it
    assert sum(j.bulk for j in s.running.values()) == 1
    # the small job ends; another one comes and runs; the bulk ones still wait
    assert s.handle(JobFinished(job_id=small[0].job_id, duration=0.6), 101.1) == []
    again = arrive(s, "v", 100.0, 110.0, 110.0)
    assert [j.table for j in again] == ["v"]
    # the bulk job ends: the next bulk load starts, still one at a time
    seen = {started[0].table}
    nxt = s.handle(JobFinished(job_id=started[0].job_id, duration=11.0), 111.0)
    while nxt:
        assert [j.bulk for j in nxt] == [True]
        assert sum(j.bulk for j in s.running.values()) == 1
        seen.add(nxt[0].table)
        nxt = s.handle(JobFinished(job_id=nxt[0].job_id, duration=11.0), 130.0 + len(seen))
    assert seen == set(BULK)  # every bulk load ran: held back, never dropped


def test_without_a_limit_the_bulk_loads_start_together() -> None:
    """The contrast (the behaviour before the limit): `bulk_limit: null`, or a master whose cores
    are unknown, starts all three on the idle tracks."""
    for s in (scheduler("local[2]", bulk_cost=5, bulk_limit=None), scheduler("local[*]", bulk_cost=5)):
        started = [j for name in BULK for j in arrive(s, name, 0.0, 100.0, 100.0)]
        assert sorted(j.table for j in started) == list(BULK)
        assert all(j.bulk for j in started)


def test_an_explicit_limit_and_the_auto_threshold() -> None:
    """bulk_limit 2 lets two run; with `bulk_cost: auto` the threshold is 4 × the median E(P)
    (here 4 × 2 s = 8 s): the 11 s loads are bulk, a one-period load (2 s) is not."""
    s = scheduler("local[2]", bulk_limit=2)
    started = [j for name in BULK for j in arrive(s, name, 0.0, 100.0, 100.0)]
    assert len(started) == 2 and all(j.bulk for j in started)
    t = scheduler("local[2]")
    first = arrive(t, "b1", 0.0, 10.0, 10.0) + arrive(t, "b2", 0.0, 10.0, 10.0)
    assert len(first) == 2 and not any(j.bulk for j in first)


def test_a_job_carries_its_tables_inherited_priority() -> None:
    s = scheduler("local[2]")
    (job,) = arrive(s, "v", 0.0, 10.0, 10.0)
    assert job.priority == 100.0


def test_bulk_limit_resolution() -> None:
    assert bulk_limit("auto", "local[2]") == 1
    assert bulk_limit("auto", "local[8, 3]") == 7
    assert bulk_limit("auto", "local[1]") == 1
    assert bulk_limit("auto", "local[*]") is None
    assert bulk_limit("auto", "spark://h:7077") is None
    assert bulk_limit("auto", None) is None  # Spark Connect: `remote`, no master
    assert bulk_limit(3, "local[2]") == 3
    assert bulk_limit(None, "local[2]") is None
    assert bulk_threshold("auto", [1.0, 2.0, 100.0]) == 8.0
    assert bulk_threshold("auto", []) == math.inf
    assert bulk_threshold(30.0, [1.0]) == 30.0


@pytest.mark.parametrize(("field", "value", "says"), [
    ("bulk_limit", 0, "a whole number of jobs ≥ 1, `auto` or null (no limit), got 0"),
    ("bulk_limit", "many", "got 'many'"),
    ("bulk_limit", 1.5, "got 1.5"),
    ("bulk_cost", "soon", "bad duration 'soon'"),
    ("bulk_cost", 0, "a duration > 0"),
])
def test_bad_bulk_settings_are_refused_naming_the_field(field: str, value: object, says: str) -> None:
    data = {"streams": STREAMS, "tables": TABLES, "scheduler": {field: value}}
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="w.yaml")
    assert f"w.yaml: scheduler.{field}: " in str(err.value) and says in str(err.value)
    assert len(str(err.value).splitlines()) == 1, str(err.value)  # one message, not one per type tried


def test_pools_by_priority() -> None:
    """Weight 2^round(log2(Ip / least)), declared up to 1024; bulk jobs in the bulk pool; the
    names sort heaviest first (Spark breaks ties between pools by name)."""
    weights = pool_weights()
    assert weights[BULK_POOL] == 1 and weights["freshet-00-p1024"] == 1024 and len(weights) == 12
    assert pool_for(1, 1, False) == "freshet-10-p1"
    assert pool_for(50, 1, False) == "freshet-04-p64"  # log2(50) = 5.6
    assert pool_for(20, 1, False) == "freshet-06-p16"
    assert pool_for(10**9, 1, False) == "freshet-00-p1024"
    assert pool_for(0.5, 1, False) == "freshet-10-p1"
    priority_pools = [n for n in weights if n != BULK_POOL]
    assert sorted(priority_pools) == sorted(priority_pools, key=lambda n: -weights[n])
    assert pool_for(50, 1, True) == BULK_POOL
    assert all(pool_for(p, 0.01, False) in weights for p in (0.01, 0.3, 7, 1e6))


def test_the_simulator_holds_the_limit_as_the_daemon_does() -> None:
    """The simulator drives the same engine: on a replayed burst, never two bulk jobs at once on
    local[2], while the valuable table's small jobs run beside them; its ideal run has no limit."""
    import io
    import json

    from sim.simulator import ideal_config, simulate
    from sim.trace import TraceWriter, parse_trace

    lines = [json.dumps({"time": 100.0, "stream": f"s_{n}", "start": 0.0, "end": 100.0}) for n in BULK]
    lines += [json.dumps({"time": t, "stream": "s_v", "start": t - 10.0, "end": t}) for t in range(10, 200, 10)]
    cfg = config(STREAMS, TABLES, tracks=4, bulk_cost=5)
    cfg = cfg.model_copy(update={"spark": cfg.spark.model_copy(update={"master": "local[2]"})})
    assert ideal_config(cfg).scheduler.bulk_limit is None
    buf = io.StringIO()
    simulate(cfg, trace=parse_trace(lines), until=200.0, writer=TraceWriter(buf))
    jobs = [json.loads(x) for x in buf.getvalue().splitlines()[1:] if '"duration"' in x]
    spans = {j["table"]: [] for j in jobs}
    for j in jobs:
        spans[j["table"]].append((j["time"] - j["duration"], j["time"]))
    bulk = sorted(s for n in BULK for s in spans[n])
    assert len(bulk) == 3 and all(a[1] <= b[0] + 1e-9 for a, b in zip(bulk, bulk[1:], strict=False))
    assert any(b[0] < v[0] < b[1] for b in bulk for v in spans["v"])  # small jobs during the bulk loads


def test_cores_shared_by_pool_weight() -> None:
    """sim.cores: alone, a job takes its drawn duration; a valuable small job beside a bulk load
    on two cores gets its one core at once (weight 64 against the bulk pool's 1) and the bulk
    load slows to the core left; two small jobs of one pool share equally."""
    import simpy

    from sim.cores import Cores, fair_share

    assert fair_share([("a", 1.0, 2.0), ("b", 64.0, 1.0)], 2.0) == {"b": 1.0, "a": 1.0}
    assert fair_share([("a", 1.0, 2.0), ("b", 1.0, 2.0)], 2.0) == {"a": 1.0, "b": 1.0}
    assert fair_share([("a", 1.0, 0.5), ("b", 3.0, 5.0)], 2.0) == {"a": 0.5, "b": 1.5}
    env = simpy.Environment()
    ended: dict[str, float] = {}
    cores = Cores(env, 2, 1.0, lambda job, took: ended.__setitem__(job.table, took))

    def job(i: int, table: str, priority: float, bulk: bool) -> StartJob:
        return StartJob(job_id=i, table=table, track=i, kind="base", start=0.0, end=1.0, new_freshness=1.0,
                        new_safe_freshness=1.0, priority=priority, bulk=bulk)

    cores.start(job(1, "bulk", 1.0, True), 10.0)  # 10 s alone on both cores
    env.run(until=2.0)
    cores.start(job(2, "v", 50.0, False), 1.0)  # 1 s alone on one core
    env.run(until=100.0)
    assert ended["v"] == pytest.approx(1.0)  # as fast as alone
    assert ended["bulk"] == pytest.approx(10.5)  # half speed for the 1 s the small job ran
    cores.start(job(3, "x", 50.0, False), 2.0)
    cores.start(job(4, "y", 50.0, False), 2.0)
    cores.start(job(5, "z", 50.0, False), 2.0)  # three one-core jobs on two cores: 2/3 speed each
    env.run(until=200.0)
    assert ended["x"] == ended["y"] == ended["z"] == pytest.approx(3.0)


def test_validate_shows_the_bulk_limit_in_force() -> None:
    from ops.validate import _text, describe

    for master, cores, limit, says in (
            ("local[2]", None, 1, "bulk jobs at once: 1 (auto)"),
            ("local[*]", 4, 3, "bulk jobs at once: 3 (auto)"),  # the cores `freshet validate` counted (with_cores)
            ("local[*]", None, None, "bulk jobs at once: no limit (auto: the cores are unknown, say spark.cores)")):
        cfg = config(STREAMS, TABLES, tracks=4)
        cfg = with_cores(cfg.model_copy(update={"spark": cfg.spark.model_copy(update={"master": master})}), cores)
        d = describe(cfg)
        assert d["plan"]["bulk_limit"] == limit
        assert says in _text(d)


def test_a_burst_is_bulk_even_as_a_tables_first_partition():
    """Live, 15 tables, trace 11 at 2fdf4ba: b09's first partition was a burst, 33.5 M rows over its
    120-s period, so its row rate was learned from it and the job looked like one ordinary period
    (E 0.7 s); b03's 8 M-row burst was costed 0.4 s by a β fitted to one size. Neither was bulk, both
    started at once with two tiny loads beside them, and those took 19-20 s on the two cores while
    b00 (p = 100) waited 21 s for a track. At 1 µs a row beyond the sizes a table has run, both are
    bulk (33 s and 8 s), and on local[2] one runs at a time."""
    streams = [{"name": n, "period": p} for n, p in (("s00", 10), ("s03", 20), ("s09", 120))]
    tables = [{"name": f"b{n[1:]}", "stream": n, "priority": p} for n, p in (("s00", 100), ("s03", 10), ("s09", 2))]
    cfg = config(streams, tables, tracks=4, learn_costs=True, bulk_cost="auto")
    cfg = cfg.model_copy(update={"spark": cfg.spark.model_copy(update={"master": "local[2]"})})
    s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    for k in range(1, 5):  # four ordinary periods of b00 and b03: 200 and 1,000 rows a partition
        now = 20.0 * k
        for stream, lo, hi, rows in (("s00", now - 20, now - 10, 200), ("s00", now - 10, now, 200),
                                     ("s03", now - 20, now, 1000)):
            ev = PartitionArrived(stream=stream, partition_id=f"{stream}-{hi:g}", start=lo, end=hi, rows=rows)
            for j in s.handle(ev, now):
                s.handle(JobFinished(job_id=j.job_id, duration=0.4, rows=rows), now + 0.5)
    now = 81.0
    burst = [j for stream, rows, lo, hi in (("s09", 33_480_330, 0.0, 120.0), ("s03", 8_000_000, 80.0, 100.0))
             for j in s.handle(PartitionArrived(stream=stream, partition_id=f"{stream}-burst", start=lo, end=hi,
                                                rows=rows), now)]
    assert [j.bulk for j in burst] == [True]  # one bulk load at a time on two cores
    waiting = {t.name: t for t in s.stats(now).tables}
    assert len(s.running) == 1
    (first,) = burst
    assert first.estimate == pytest.approx((33_480_330 if first.table == "b09" else 8_000_000) * 1e-6, rel=0.3)
    assert waiting["b03" if first.table == "b09" else "b09"].state != "running"
