"""A full rewrite (`rebuild: true`) after Delta cleaned up the table's old log loses no
row. The rewrite starts at the table's origin; recovery read it from the oldest *retained* commit,
so once `delta.logRetentionDuration` had removed the first commits, the overwrite dropped every
older row without an error. Real Spark and Delta; the log expired the way Delta's own tests do it
(DeltaRetentionSuite: log files older than the retention, then a checkpoint, whose post-commit
clean-up deletes them); the result audited with delta-rs, an independent reader."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import BUCKET_SQL, MINUTE, T0, warehouse_dict, write_minutes
from test_recompute_delta import Warehouse

from warehouse.config import parse_config
from warehouse.events import JobFailed
from warehouse.lake.delta import table_path
from warehouse.lake.recovery import LocalLog, SparkLog, recover

pytestmark = pytest.mark.spark

DAY = 86400.0


def expire_log(spark, path: str) -> None:
    """Age every file of the table's log past the default 30-day retention, then commit a
    checkpoint: Delta deletes the aged commits it no longer needs (MetadataCleanup)."""
    log = Path(path) / "_delta_log"
    old = time.time() - 60 * DAY
    for f in log.iterdir():
        os.utime(f, (old, old))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '1')")


def audit(path: str) -> tuple[list[float], int]:
    """(bucket ends, total rows counted) of an m_5m table, read by delta-rs."""
    from deltalake import DeltaTable

    t = DeltaTable(path).to_pyarrow_table(columns=["ts", "n"]).to_pylist()
    return sorted({r["ts"].timestamp() for r in t}), sum(r["n"] for r in t)


def test_a_rebuild_after_the_log_was_cleaned_up_keeps_every_row(spark, tmp_path: Path) -> None:
    d = warehouse_dict(tmp_path, chop=None)
    d["streams"] = [s for s in d["streams"] if s["name"] == "m"]
    d["tables"] = [t for t in d["tables"] if t["name"] in ("m_raw", "m_5m")]
    cfg = parse_config(d)
    w = Warehouse(cfg, spark)
    for i in range(4):  # four loads: m_5m commits (T0, T0+5m], … (T0+15m, T0+20m]
        write_minutes(cfg, "m", 5 * i, 5)
        assert w.run().failed == 0
    paths = {t: table_path(cfg, t) for t in ("m_raw", "m_5m")}
    for p in paths.values():
        expire_log(spark, p)
    assert not (Path(paths["m_5m"]) / "_delta_log" / f"{0:020d}.json").exists(), "Delta kept the old log"
    write_minutes(cfg, "m", 20, 5)  # one more load: the oldest retained commit is (T0+20m, T0+25m]
    assert w.run().failed == 0
    buckets = [T0 + 5 * MINUTE * k for k in range(1, 6)]
    assert audit(paths["m_5m"]) == (buckets, 100)

    # recovery, by either reader of the log, says where the data begins, not where the log does
    state = recover(cfg, LocalLog())
    assert state.tables["m_5m"].log_from > 0 and state.tables["m_raw"].log_from > 0
    from deltalake import DeltaTable

    first_row = min(t.timestamp() for t in DeltaTable(paths["m_raw"]).to_pyarrow_table(columns=["ts"])
                    .column("ts").to_pylist())
    assert state.tables["m_5m"].origin == T0 and T0 <= state.tables["m_raw"].origin < first_row
    assert recover(cfg, SparkLog(spark)).tables["m_5m"].origin == T0

    # a restart with a changed SQL and `rebuild: true`: a full rewrite, every bucket kept
    d["tables"][1]["sql"] = BUCKET_SQL.replace(", round(sum(v), 6) AS v_sum", "")
    d["tables"][1]["rebuild"] = True
    cfg2 = parse_config(d)
    w2 = Warehouse(cfg2, spark)
    write_minutes(cfg2, "m", 25, 5)  # data goes on arriving
    w2.run(retry=True)
    assert not [e for e in w2.events if isinstance(e, JobFailed)]
    assert audit(paths["m_5m"]) == ([*buckets, T0 + 30 * MINUTE], 120), "the rebuild dropped rows"
    dt = DeltaTable(paths["m_5m"])
    assert "v_sum" not in dt.schema().to_arrow().names  # it was the rebuild that ran
    assert any(c["operationParameters"].get("mode") == "Overwrite" for c in dt.history(3))
