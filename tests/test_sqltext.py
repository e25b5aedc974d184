"""Binding :window_start / :window_end into derived SQL (warehouse/sqltext.py): pure text."""

from __future__ import annotations

import pytest
from conftest import BAND_SQL, T0

from warehouse.sqltext import bind_window, timestamp_literal, uses_window


def test_timestamp_literal_is_exact_utc():
    assert timestamp_literal(T0) == "TIMESTAMP '2025-11-24 16:00:00.000000+00:00'"
    assert timestamp_literal(T0 + 0.000001) == "TIMESTAMP '2025-11-24 16:00:00.000001+00:00'"
    assert timestamp_literal(0) == "TIMESTAMP '1970-01-01 00:00:00.000000+00:00'"


def test_markers_are_bound_outside_literals_comments_and_casts():
    sql = ("SELECT ':window_start' AS s, \"x:window_end\" AS d, `a:window_end` AS q, ts::string AS c "
           "-- :window_start in a comment\n"
           "FROM t /* :window_end */ WHERE ts > :window_start AND ts <= :window_end AND k != ':x\\':window_end'")
    out = bind_window(sql, T0, T0 + 60)
    assert out.count("TIMESTAMP '") == 2
    assert "ts > TIMESTAMP '2025-11-24 16:00:00.000000+00:00' AND ts <= TIMESTAMP '2025-11-24 16:01:00.000000+00:00'" in out
    for kept in ("':window_start'", '"x:window_end"', "`a:window_end`", "ts::string", "-- :window_start",
                 "/* :window_end */", "':x\\':window_end'"):
        assert kept in out, kept
    assert uses_window(sql) and not uses_window("SELECT ':window_start' FROM t -- :window_end")
    assert bind_window("SELECT :window_startx, :other", 0, 1) == "SELECT :window_startx, :other"


@pytest.mark.spark
def test_bound_sql_runs_on_spark_with_the_exact_window(spark):
    session = spark.newSession()
    session.conf.set("spark.sql.session.timeZone", "America/New_York")  # the literal carries its zone
    row = session.sql(bind_window("SELECT unix_micros(:window_start) AS a, unix_micros(:window_end) AS b, "
                                  "hour(:window_start) AS h", T0, T0 + 0.25)).collect()[0]
    assert (row.a, row.b, row.h) == (int(T0 * 1e6), int(T0 * 1e6) + 250_000, 11)  # 16:00Z is 11:00 in New York
    assert uses_window(BAND_SQL)
