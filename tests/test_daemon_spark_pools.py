"""Freshet's fair-scheduler pools are declared when the session starts: a
pool per priority class, `freshet-00-p1024` … `freshet-10-p1` weighted 1024 … 1 with minShare 1,
and `freshet-bulk` (weight 1, minShare 0, FIFO inside) — so Spark never makes one on first use with its "scheduler pool … has
not been configured" warning, and a valuable job gets the task slots ahead of a bulk load."""

from __future__ import annotations

import pytest

from policies.bulk import BULK_POOL, pool_weights
from warehouse.lake.session import fair_pools

pytestmark = [pytest.mark.spark]


def test_the_pools_file_declares_the_priority_pools_and_the_bulk_pool() -> None:
    import xml.etree.ElementTree as ET

    root = ET.parse(fair_pools()).getroot()
    pools = {p.get("name"): (p.findtext("schedulingMode"), int(p.findtext("weight") or 0), int(p.findtext("minShare") or 0))
             for p in root.iter("pool")}
    assert pools[BULK_POOL] == ("FIFO", 1, 0)
    assert pools["freshet-10-p1"] == ("FAIR", 1, 1) and pools["freshet-00-p1024"] == ("FAIR", 1024, 1)
    assert set(pools) == set(pool_weights())


def test_the_session_has_every_pool_with_its_weight_before_any_job(spark) -> None:
    sc = spark.sparkContext
    assert sc.getConf().get("spark.scheduler.allocation.file") == fair_pools().as_uri()
    jsc = sc._jsc.sc()
    for name, weight in pool_weights().items():
        assert jsc.getPoolForName(name).isDefined(), name
        assert jsc.getPoolForName(name).get().weight() == weight
    assert not jsc.getPoolForName("track-0").isDefined()  # the per-track pools are gone


def test_a_valuable_job_takes_the_next_free_slot_from_a_bulk_load(spark) -> None:
    """Spark's fair scheduler serves first a pool below its minShare, and breaks ties — two pools
    with no task running — by pool name. So the priority pools declare minShare 1 and the bulk pool
    0: a valuable job whose pool runs nothing gets the next slot a bulk task frees, even while a
    third job holds the other core (with minShare 0 everywhere the bulk pool won every such tie by
    its name, and the valuable job waited for the third job's task)."""
    import threading
    import time

    from policies.bulk import pool_for

    sc = spark.sparkContext

    def run(pool: str, tasks: int, seconds: float) -> None:
        sc.setLocalProperty("spark.scheduler.pool", pool)
        try:
            sc.parallelize(range(tasks), tasks).foreach(lambda _: time.sleep(seconds))
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]

    run(pool_for(2, 1, False), 2, 0.0)  # the Python workers started before the clock runs
    hold = threading.Thread(target=run, args=(pool_for(128, 1, False), 1, 5.0))  # one core, 5 s
    bulk = threading.Thread(target=run, args=(pool_for(1, 1, True), 40, 0.25))  # the other, task by task
    hold.start()
    time.sleep(0.5)
    bulk.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    run(pool_for(64, 1, False), 2, 0.05)
    took = time.monotonic() - t0
    hold.join()
    bulk.join()
    assert took < 2.0, f"the valuable job waited {took:.1f} s: behind the bulk load's tasks, until the 5 s task ended"
