"""The live benchmark's machinery (issue 11, scripts/bench_live.py): the staleness integral from a
Delta log against a hand-computed example, the log reader (delta-rs) against a real Delta table
written by Spark, and a minute-long run of two contestants checked through its JSON."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.live import measure, spec  # noqa: E402
from scripts.live.trace import generate, partition_rows  # noqa: E402


def test_staleness_hand_computed() -> None:
    """Window [0, 100], fresh at 0; commits at 10 (events to 5), 40 (to 35), 70 (older data, to 30:
    F stays 35), 80 (no rows). S: 0→10 on [0,10), 5→35 on [10,40), 5→65 on [40,100]:
    ∫S = 50 + 600 + 2100 = 2750; max 65; S ≤ 20 for 10 + 15 + 15 = 40 s of 100."""
    log = [measure.Commit(0, 10.0, 5.0), measure.Commit(1, 40.0, 35.0), measure.Commit(2, 70.0, 30.0),
           measure.Commit(3, 80.0, None)]
    f = measure.staleness(log, 0.0, 100.0, 20.0)
    assert f.area == pytest.approx(2750.0)
    assert f.max_staleness == pytest.approx(65.0)
    assert f.within == pytest.approx(0.4)
    assert measure.weighted({"t": f}, {"t": 2.0}, 0.0, 100.0) == pytest.approx(55.0)
    # the same log seen over [40, 100] only, with F from the commits before it (35)
    g = measure.staleness(log, 40.0, 100.0, 20.0, f0=0.0)
    assert g.area == pytest.approx(2100.0)
    # before any commit the table is as stale as the time since f0
    h = measure.staleness([], 40.0, 100.0, None, f0=0.0)
    assert h.area == pytest.approx(60 * (40 + 100) / 2)
    assert h.max_staleness == pytest.approx(100.0)


def test_trace_is_seeded_and_rows_end_at_the_partition_end() -> None:
    a = generate(3, 60.0, (10.0, 30.0), 10.0)
    b = generate(3, 60.0, (10.0, 30.0), 10.0)
    assert a.parts == b.parts and len(a.parts) > 12
    burst = [p for p in a.parts if p.stream == "s03" and 10 < p.end <= 30]
    quiet = [p for p in a.parts if p.stream == "s03" and not 10 < p.end <= 30]
    assert burst and quiet and burst[0].rows > 5 * quiet[0].rows
    t0 = 1_800_000_000.0
    rows = partition_rows(a, a.parts[0], t0)
    ts = rows.column("ts").to_pylist()
    assert rows.num_rows == a.parts[0].rows
    assert max(ts) == dt.datetime.fromtimestamp(t0 + a.parts[0].end, dt.UTC)
    assert min(ts) > dt.datetime.fromtimestamp(t0 + a.parts[0].start, dt.UTC)


def test_the_bound_is_the_sawtooth_of_the_periods() -> None:
    """With every partition committed as it arrives, a base table is P/2 stale on average (Fig. 2's
    sawtooth); a roll-up is staler than its source (its windows close every granule)."""
    from scripts.bench_live import bound

    b = bound(generate(5, 700.0, (300.0, 360.0), 10.0, 100.0))
    m = b["mean_staleness"]
    assert m["b00"] == pytest.approx(5.0, abs=0.2) and m["b02"] == pytest.approx(7.5, abs=0.4)
    assert m["d_rollup"] > m["b04"] and m["d_agg"] > m["b03"] and m["d_join"] >= max(m["b01"], m["b02"]) - 0.5
    prios = spec.priorities()
    assert b["weighted_staleness"] == pytest.approx(sum(prios[t] * v for t, v in m.items()), rel=1e-3)


def test_reuse_refuses_a_run_over_another_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scripts import bench_live

    generate(3, 60.0, (10.0, 30.0), 10.0).save(tmp_path / "a.json")
    generate(4, 60.0, (10.0, 30.0), 10.0).save(tmp_path / "b.json")
    (tmp_path / "prev.json").write_text(json.dumps({"trace": str(tmp_path / "a.json"), "contestants": []}))
    with pytest.raises(SystemExit) as e:
        bench_live.main(["--only", "freshet", "--reuse", str(tmp_path / "prev.json"), "--trace",
                         str(tmp_path / "b.json"), "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and "replayed another trace" in capsys.readouterr().err


@pytest.mark.spark
def test_commits_read_from_a_spark_written_delta_log(spark, tmp_path: Path) -> None:
    """Two appends through Spark: delta-rs reads each commit's time and newest event time."""
    path = str(tmp_path / "t")
    base = 1_800_000_000
    for newest in (base + 10, base + 25):
        rows = [(dt.datetime.fromtimestamp(t, dt.UTC), 1, 1.0) for t in (newest - 5, newest)]
        spark.createDataFrame(rows, "ts timestamp, key int, value double").write.format("delta").mode("append").save(path)
    log = measure.commits(path)
    assert [c.max_event for c in log] == [base + 10, base + 25]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [c.time for c in log] == pytest.approx([h["timestamp"].timestamp() for h in history], abs=1.0)
    assert log[0].time <= log[1].time


@pytest.mark.spark
@pytest.mark.slow
def test_two_contestants_on_a_short_trace(tmp_path: Path) -> None:
    """freshet and cron on a 30 s trace (10 s warm-up): the JSON has the issue's layout, every contestant's
    tables are Delta tables under its root, and the figures agree with the per-table ones."""
    out = tmp_path / "bench"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_live.py"), "--only", "freshet,cron",
                           "--shape", "10,5,5,10,20", "--out", str(out), "--json", str(out / "r.json")],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads((out / "r.json").read_text())
    assert r["window"] == [10.0, 30.0] and r["time_column"] == "ts"
    assert r["priorities"] == spec.priorities()
    assert [c["name"] for c in r["contestants"]] == ["freshet", "cron"]
    never = sum(r["priorities"].values()) * (10.0 + 30.0) / 2  # Σp·S averaged if nothing were ever loaded
    summary = {c["name"]: {"status": c["status"], "error": c["error"], "load": c["load_average"],
                           "commits": {t: v["commits"] for t, v in c["tables"].items()}} for c in r["contestants"]}
    for c in r["contestants"]:
        assert c["status"] == "ok", summary
        assert Path(c["root"]).is_absolute() and Path(c["root"], "b00", "_delta_log").is_dir()
        assert c["tables"]["b00"]["commits"] >= 1, summary
        assert r["bound"]["weighted_staleness"] <= c["weighted_staleness"] < never
        again = sum(t["priority"] * t["mean_staleness"] for t in c["tables"].values())
        assert again == pytest.approx(c["weighted_staleness"], rel=1e-3, abs=1.0)
        assert c["cpu_seconds"] > 1 and c["peak_rss_bytes"] > 100 * 2**20
    # freshness from the log = the newest event time in the data (delta-rs, independently)
    from deltalake import DeltaTable

    fr = r["contestants"][0]
    assert fr["twin"]["error"] is None and fr["twin"]["predicted_one_track_per_table"] > 0, fr["twin"]
    newest = max(DeltaTable(str(Path(fr["root"], "b00"))).to_pyarrow_table(columns=["ts"]).column("ts").to_pylist())
    assert max(c.max_event for c in measure.commits(Path(fr["root"], "b00"))) == newest.timestamp()
    assert all(Path(p).is_file() for p in r["plots"])
    # --reuse: the same run measured again from its kept Delta tables gives the same figures
    from scripts import bench_live

    assert bench_live.main(["--only", "", "--reuse", str(out / "r.json"), "--trace", str(out / "trace.json"),
                            "--out", str(out), "--json", str(out / "again.json")]) == 0
    again = json.loads((out / "again.json").read_text())
    assert [(c["name"], c["weighted_staleness"], c["reused_from"]) for c in again["contestants"]] == [
        (c["name"], c["weighted_staleness"], str(out / "r.json")) for c in r["contestants"]]
