"""The tuned peers of the live benchmark (scripts/live/): what they are told (inherited
priorities, valuable and bulk work), the fair-scheduler allocation file Spark reads, each query's
pool and trigger, and every contestant's settings as the benchmark's JSON records them. No Spark:
the peers themselves run in `scripts/bench_live.py --only <name>`."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts import bench_live  # noqa: E402
from scripts.live import contestants, priority_cron, spec, streaming_tuned, tuning  # noqa: E402
from warehouse.config import load_config  # noqa: E402


def _config(tmp_path: Path, **kw: str):  # noqa: ANN202
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(spec.DEFAULT.freshet_config(str(tmp_path / "w"), str(tmp_path / "l"), **kw)))
    return load_config(path)


def test_inherited_priorities_split_valuable_from_bulk(tmp_path: Path) -> None:
    config = _config(tmp_path)
    ip = tuning.inherited(config)
    assert ip["b04"] == 40.0 and ip["b03"] == 20.0 and ip["b02"] == 50.0  # through d_rollup, d_agg, d_join
    assert ip["b05"] == 5.0 and ip["b00"] == 100.0
    valuable = {t for t, v in tuning.is_valuable(config).items() if v}
    assert valuable == {"b00", "b01", "b02", "b03", "b04", "d_rollup", "d_join", "d_agg"}


def test_streaming_tuned_pools_and_plans(tmp_path: Path) -> None:
    config = _config(tmp_path)
    path = tuning.write_allocation(streaming_tuned.pools(config), tmp_path)
    pools = {p.get("name"): p for p in ET.parse(path).getroot().iter("pool")}  # what Spark's FairSchedulableBuilder reads
    # Spark serves idle pools in name order: the names sort by inherited priority
    assert list(pools) == ["q00-b00", "q01-b01", "q02-b02", "q03-d_join", "q04-b04", "q05-d_rollup", "q06-b03",
                           "q07-d_agg", "bulk"]
    assert pools["q00-b00"].findtext("minShare") == "2" and pools["q00-b00"].findtext("weight") == "100"
    assert pools["q05-d_rollup"].findtext("weight") == "40" and pools["q05-d_rollup"].findtext("minShare") == "1"
    assert pools["bulk"].findtext("weight") == "1" and pools["bulk"].findtext("schedulingMode") == "FIFO"
    assert pools["bulk"].findtext("minShare") == "0"  # never ahead of an idle valuable pool (minShare 1)
    plans = streaming_tuned.plans(config)
    assert plans["b00"].pool == "q00-b00" and plans["b00"].trigger == "1 second" and plans["b00"].max_files is None
    assert plans["b04"].pool == "q04-b04" and plans["b04"].max_files == 1  # valuable, but its source bursts
    assert plans["b11"].pool == "bulk" and plans["b11"].trigger == "5 seconds" and plans["b11"].max_files == 1
    assert plans["d_join"].pool == "q03-d_join" and plans["d_join"].max_files is None


def test_streaming_grouped_has_two_base_queries(tmp_path: Path) -> None:
    """The restructured peer: the valuable streams in one query (the top pool), the bulk streams in
    another (the bulk pool, one landing file per stream and batch on average); derived tables
    keep their own queries and pools."""
    from scripts.live import streaming_grouped

    groups = streaming_grouped.groups(_config(tmp_path))
    assert groups["valuable"]["streams"] == {f"s{i:02d}": f"b{i:02d}" for i in range(5)}
    assert groups["valuable"]["pool"] == "q00-b00" and groups["valuable"]["trigger"] == "1 second"
    assert groups["bulk"]["streams"] == {f"s{i:02d}": f"b{i:02d}" for i in range(5, 12)}
    assert groups["bulk"]["pool"] == "bulk" and groups["bulk"]["max_files"] == 7
    got = streaming_grouped.settings(_config(tmp_path))
    assert set(got["derived_queries"]) == {"d_rollup", "d_join", "d_agg"}
    assert got["derived_queries"]["d_join"]["pool"] == "q03-d_join"


def test_priority_cron_pools_are_the_executor_track_pools(tmp_path: Path) -> None:
    config = _config(tmp_path)
    names = [p.name for p in priority_cron.pools()]
    assert names == ["track-0", "track-1"]  # the executor runs a job of track k in pool track-<k>
    assert priority_cron.workers(config) == {"valuable": 3, "bulk": 1}


def test_every_contestant_records_its_settings(tmp_path: Path) -> None:
    assert set(bench_live.CONTESTANTS) == set(contestants.FRESHET) | set(contestants.PEER_MODULES)
    assert set(bench_live.PEERS) == set(contestants.PEER_MODULES)
    for name in bench_live.CONTESTANTS:
        config = _config(tmp_path, **contestants.FRESHET.get(name, contestants.FRESHET["freshet"]))
        got = contestants.settings(name, config)
        assert got and json.loads(json.dumps(got)) == got, name
    edfp = contestants.settings("freshet-edfp", _config(tmp_path, **contestants.FRESHET["freshet-edfp"]))
    assert edfp["scheduler"]["policy"] == "edf-p" and edfp["scheduler"]["autotune"] == "off"


@pytest.mark.spark
def test_streaming_tuned_runs_each_query_in_its_pool(tmp_path: Path) -> None:
    """The real peer (a subprocess, as the benchmark runs it): one partition each for s00 (valuable)
    and s05 (bulk) lands; both tables commit; Spark's event log shows every job of query b00 in
    pool q00-b00 and every job of b05 in `bulk` — the pool set on the thread that started it."""
    import os
    import signal
    import subprocess
    import time

    from scripts.live.trace import generate, partition_rows, write_partition

    ev = tmp_path / "events"
    ev.mkdir()
    cfg = spec.DEFAULT.freshet_config(str(tmp_path / "w"), str(tmp_path / "l"))
    cfg["spark"]["conf"].update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": ev.as_uri(),
                                 "spark.eventLog.compress": "false"})
    (tmp_path / "freshet.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "scripts.live.streaming_tuned", "--config",
                                 str(tmp_path / "freshet.yaml"), "--ready", str(tmp_path / "ready"),
                                 "--work", str(tmp_path / "work")],
                                env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 300
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None, (tmp_path / "log").read_text()[-3000:]
            assert time.time() < deadline, "not ready after 300 s"
            time.sleep(0.5)
        trace = generate(7, 60.0, (20.0, 30.0), 1.0, 10.0)
        t0 = time.time() - 60
        for stream in ("s00", "s05"):
            part = next(p for p in trace.parts if p.stream == stream)
            write_partition(tmp_path / "l", part, partition_rows(trace, part, t0), t0)
        logs = [tmp_path / "w" / t / "_delta_log" / f"{1:020d}.json" for t in ("b00", "b05")]
        while not all(p.exists() for p in logs):
            assert proc.poll() is None, (tmp_path / "log").read_text()[-3000:]
            assert time.time() < deadline, "b00/b05 not committed"
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
    pools: dict[str, set[str | None]] = {}
    for f in ev.rglob("events_*"):
        for line in f.read_text().splitlines():
            e = json.loads(line)
            if e.get("Event") == "SparkListenerJobStart":
                props = e.get("Properties", {})
                query = (props.get("spark.job.description") or "").split("\n")[0]
                pools.setdefault(query, set()).add(props.get("spark.scheduler.pool"))
    assert pools.get("b00") == {"q00-b00"}, pools
    assert pools.get("b05") == {"bulk"}, pools
