"""Every track's fair-scheduler pool is declared when the session starts (issue 13): the jobs of
track N run in pool `track-N` (`job_description`), and Spark no longer makes it on first use with
its "scheduler pool track-N has not been configured" warning at every start."""

from __future__ import annotations

import pytest

from warehouse.lake.session import POOLS, fair_pools

pytestmark = [pytest.mark.spark]


def test_the_pools_file_declares_one_pool_per_track(tmp_path) -> None:
    import xml.etree.ElementTree as ET

    root = ET.parse(fair_pools(3)).getroot()
    assert [p.get("name") for p in root.iter("pool")] == ["track-0", "track-1", "track-2"]
    assert {p.findtext("schedulingMode") for p in root.iter("pool")} == {"FIFO"}


def test_the_session_has_every_track_pool_before_any_job(spark) -> None:
    sc = spark.sparkContext
    assert sc.getConf().get("spark.scheduler.allocation.file") == fair_pools().as_uri()
    jsc = sc._jsc.sc()
    assert all(jsc.getPoolForName(f"track-{i}").isDefined() for i in (0, 1, POOLS - 1))
    assert not jsc.getPoolForName(f"track-{POOLS}").isDefined()  # only declared pools exist up front
