"""Freshet's fair-scheduler pools are declared when the session starts (issue 13, issue 23): a
pool per priority class, `freshet-p1` … `freshet-p1024` weighted 1 … 1024, and `freshet-bulk`
(weight 1, FIFO inside) — so Spark never makes one on first use with its "scheduler pool … has
not been configured" warning, and a valuable job gets the task slots ahead of a bulk load."""

from __future__ import annotations

import pytest

from policies.bulk import BULK_POOL, pool_weights
from warehouse.lake.session import fair_pools

pytestmark = [pytest.mark.spark]


def test_the_pools_file_declares_the_priority_pools_and_the_bulk_pool() -> None:
    import xml.etree.ElementTree as ET

    root = ET.parse(fair_pools()).getroot()
    pools = {p.get("name"): (p.findtext("schedulingMode"), int(p.findtext("weight") or 0)) for p in root.iter("pool")}
    assert pools[BULK_POOL] == ("FIFO", 1)
    assert pools["freshet-p1"] == ("FAIR", 1) and pools["freshet-p1024"] == ("FAIR", 1024)
    assert set(pools) == set(pool_weights())


def test_the_session_has_every_pool_with_its_weight_before_any_job(spark) -> None:
    sc = spark.sparkContext
    assert sc.getConf().get("spark.scheduler.allocation.file") == fair_pools().as_uri()
    jsc = sc._jsc.sc()
    for name, weight in pool_weights().items():
        assert jsc.getPoolForName(name).isDefined(), name
        assert jsc.getPoolForName(name).get().weight() == weight
    assert not jsc.getPoolForName("track-0").isDefined()  # the per-track pools are gone
