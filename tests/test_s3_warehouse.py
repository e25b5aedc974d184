"""The warehouse on object storage: the real daemon with `warehouse.root: s3a://freshet-test/wh` on a
real S3 API (moto's server, tests/helpers_s3.py) through the Hadoop S3A connector. A base table
and a derived one are loaded; the daemon is SIGKILLed while a job runs, restarted (recovery reads
the Delta logs on the bucket), and runs until caught up. delta-rs, reading the same bucket, audits
it: every row once, the derived table equal to its SQL computed here in plain Python. A second
test puts the landing zone on the bucket instead (`warehouse.landing: s3a://…`, the tables local):
producers' partitions, a retry and a bad one, loaded from s3a:// URIs once each."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import BUCKET_SQL, MINUTE, SPARK_CONF, T0, parse_config, rows_for, write_minutes

from tests.helpers_live import free_port, wait_for
from tests.helpers_s3 import CREDENTIALS, S3Server, upload

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
MINUTES = 10  # one-minute partitions of stream m, four rows each


def _config(tmp: Path, server: S3Server) -> dict[str, Any]:
    return {
        "warehouse": {"root": f"s3a://{server.bucket}/wh", "landing": str(tmp / "landing"), "s3": server.s3_settings()},
        "streams": [{"name": "m", "period": "1m", "schema": {"ts": "timestamp", "k": "string", "v": "double",
                                                              "id": "long"}}],
        "tables": [
            {"name": "m_raw", "stream": "m", "partition_by": "hour", "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "m_5m", "sources": ["m_raw"], "granularity": "5m", "sql": BUCKET_SQL,
             "cost": {"alpha": 1, "beta": 0.01}},
        ],
        "scheduler": {"tracks": 2, "retry_backoff": "1s", "retry_backoff_max": "4s"},
        "spark": {"master": "local[2]", "conf": SPARK_CONF},
    }


def _expected_5m(minutes: int) -> set[tuple[float, str, int, float]]:
    """BUCKET_SQL over the rows written, in plain Python: (5-minute end, k) → count, rounded sum."""
    groups: dict[tuple[float, str], list[float]] = defaultdict(list)
    for i in range(minutes):
        cols = rows_for("m", T0 + i * MINUTE, T0 + (i + 1) * MINUTE, 0)
        for ts, k, v in zip(cols["ts"], cols["k"], cols["v"], strict=True):
            groups[(math.ceil(ts.timestamp() / 300) * 300.0, k)].append(v)
    return {(ts, k, len(vs), round(sum(vs), 6)) for (ts, k), vs in groups.items()}


def test_a_daemon_killed_mid_run_on_s3_loses_nothing_and_loads_nothing_twice(s3: S3Server,
                                                                              tmp_path: Path) -> None:
    data = _config(tmp_path, s3)
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = parse_config(data)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "daemon.log"
    env = {**os.environ, **CREDENTIALS, "PYTHONPATH": str(ROOT)}

    def start() -> subprocess.Popen:
        with log_path.open("a") as log:
            return subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(path),
                                     "--listen", f"127.0.0.1:{port}", "--poll", "0.3", "--log-format", "json"],
                                    cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def table(proc: subprocess.Popen, name: str) -> dict[str, Any]:
        assert proc.poll() is None, log_path.read_text()[-4000:]
        return httpx.get(f"{url}/v1/tables/{name}", timeout=5).json()

    write_minutes(cfg, "m", 0, 4)
    proc = start()
    try:
        wait_for("the first base load on S3", lambda: (table(proc, "m_raw")["freshness"] or 0) >= T0 + 2 * MINUTE,
                 timeout=240)
        write_minutes(cfg, "m", 4, MINUTES - 4)
        wait_for("a job running", lambda: any(table(proc, t)["state"] == "running" for t in ("m_raw", "m_5m")),
                 timeout=60, every=0.05)
        os.killpg(proc.pid, signal.SIGKILL)  # the daemon and its Spark driver JVM
        proc.wait(30)
        assert "s3a://" in log_path.read_text()  # it did run on the bucket
        proc = start()
        end = T0 + MINUTES * MINUTE
        wait_for("both tables caught up after the restart",
                 lambda: table(proc, "m_raw")["freshness"] == end and table(proc, "m_5m")["freshness"] == end,
                 timeout=240)
        _stop(proc, log_path)
    finally:
        _reap(proc)

    from deltalake import DeltaTable

    opts = s3.storage_options()
    base = DeltaTable(f"s3://{s3.bucket}/wh/m_raw", storage_options=opts).to_pyarrow_table().to_pylist()
    ids = [r["id"] for r in base]
    expected_ids = [int(T0 + i * MINUTE) * 100 + j for i in range(MINUTES) for j in range(4)]
    assert sorted(ids) == sorted(expected_ids)  # every row once: none lost, none twice
    derived = DeltaTable(f"s3://{s3.bucket}/wh/m_5m", storage_options=opts).to_pyarrow_table().to_pylist()
    got = {(r["ts"].timestamp(), r["k"], r["n"], round(r["v_sum"], 6)) for r in derived}
    assert len(derived) == len(got) and got == _expected_5m(MINUTES)
    assert not (tmp_path / "data").exists()  # nothing went to a local root
    # one writer at a time, provable from the logs: every Freshet commit names the lease holder that
    # made it; the restarted daemon took the lease over (epoch 2) and the epochs never go back
    for name in ("m_raw", "m_5m"):
        history = DeltaTable(f"s3://{s3.bucket}/wh/{name}", storage_options=opts).history()
        metas = [(h["version"], json.loads(h["userMetadata"])) for h in history if h.get("userMetadata")]
        leaders = [m["leader"] for _, m in sorted(metas, key=lambda vm: vm[0]) if m.get("freshet")]
        assert leaders and all(isinstance(x.get("id"), str) and x["epoch"] in (1, 2) for x in leaders), leaders
        epochs = [x["epoch"] for x in leaders]
        assert epochs == sorted(epochs) and epochs[-1] == 2, epochs
        assert len({x["id"] for x in leaders}) == len(set(epochs))  # one holder per epoch
        assert name != "m_raw" or epochs[0] == 1  # the first daemon loaded it before the kill
    assert any(k.startswith("wh/m_raw/_delta_log/") for k in s3.keys("wh/"))


def _stop(proc: subprocess.Popen[bytes], log_path: Path) -> None:
    """SIGTERM: the daemon finishes its job and exits 0."""
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 0, log_path.read_text()[-4000:]


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Whatever happened, nothing of the daemon's process group is left running."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


@pytest.mark.parametrize("root", ["local", "bucket"])
def test_a_landing_zone_on_a_bucket_is_loaded_once(s3: S3Server, tmp_path: Path, root: str) -> None:
    """The daemon with `warehouse.landing: s3a://freshet-test/landing`, the tables on a local root
    (S3A set up for the landing zone alone) or in the same bucket (the daemon's own files in
    `warehouse.state`): the base job reads each partition's files from the bucket through S3A,
    the intake archives them to `landing/_loaded/`, answers a producer's retry of an archived
    partition as a duplicate and quarantines a bad one with its reason."""
    data = _config(tmp_path, s3)
    in_bucket = root == "bucket"
    data["warehouse"] = {"root": f"s3a://{s3.bucket}/wh" if in_bucket else str(tmp_path / "data"),
                         "landing": f"s3a://{s3.bucket}/landing", "s3": s3.s3_settings(),
                         **({"state": str(tmp_path / "state")} if in_bucket else {})}
    data["tables"] = data["tables"][:1]  # m_raw: the base table
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(data))
    stage = parse_config({**data, "warehouse": {"root": str(tmp_path / "data"), "landing": str(tmp_path / "stage")}})
    ids = write_minutes(stage, "m", 0, 6)
    [bad] = write_minutes(stage, "m", 20, 1, pid_prefix="bad-")
    manifest = tmp_path / "stage" / "m" / bad / "_partition.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "rows": 99}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "daemon.log"
    env = {**os.environ, **CREDENTIALS, "PYTHONPATH": str(ROOT)}

    def fresh() -> float:
        assert proc.poll() is None, log_path.read_text()[-4000:]
        return httpx.get(f"{url}/v1/tables/m_raw", timeout=5).json()["freshness"] or 0

    upload(s3, tmp_path / "stage", "landing", "m", ids[:3])
    with log_path.open("a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "run", "--config", str(path),
                                 "--listen", f"127.0.0.1:{port}", "--poll", "0.3", "--log-format", "json"],
                                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for("the first partitions loaded and archived", lambda: fresh() >= T0 + 3 * MINUTE
                 and not s3.keys(f"landing/m/{ids[0]}/"), timeout=240)
        upload(s3, tmp_path / "stage", "landing", "m", [*ids[3:], ids[0], bad])  # ids[0]: the producer's retry
        wait_for("caught up, the retry archived, the bad one quarantined",
                 lambda: fresh() == T0 + 6 * MINUTE and not s3.keys("landing/m/")
                 and f"landing/_quarantine/m/{bad}/reason" in s3.keys("landing/_quarantine/"), timeout=120)
        _stop(proc, log_path)
    finally:
        _reap(proc)

    from deltalake import DeltaTable

    table = DeltaTable(f"s3://{s3.bucket}/wh/m_raw", storage_options=s3.storage_options()) if in_bucket \
        else DeltaTable(str(tmp_path / "data" / "m_raw"))
    rows = table.to_pyarrow_table().to_pylist()
    assert sorted(r["id"] for r in rows) == [int(T0 + i * MINUTE) * 100 + j for i in range(6) for j in range(4)]
    keys = s3.keys("landing/")
    assert {k.split("/")[3] for k in keys if k.startswith("landing/_loaded/m/")} == {*ids, f"{ids[0]}.1"}
    reason = s3.client().get_object(Bucket=s3.bucket, Key=f"landing/_quarantine/m/{bad}/reason")["Body"].read()
    assert b"row count" in reason
