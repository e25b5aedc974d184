"""scripts.live.waits against a hand-written Spark event log: per table, its update jobs, the
Spark jobs they ran, the state reconstructions among them and the waits for a task slot."""

from __future__ import annotations

import json

from scripts.live.waits import WARM, read_waits

T = 1_796_235_600_000  # 2026-12-02 18:20:00 UTC, in ms


def _job(job: int, at: int, desc: str, stages: list[int]) -> str:
    return json.dumps({"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": T + at,
                       "Stage IDs": stages, "Properties": {"spark.job.description": desc}})


def _task(stage: int, at: int) -> str:
    return json.dumps({"Event": "SparkListenerTaskStart", "Stage ID": stage, "Task Info": {"Launch Time": T + at}})


def test_waits_count_each_tables_spark_jobs_reconstructions_and_waits_for_a_slot() -> None:
    log = [
        _job(0, 0, "Delta: freshet base job 7: b01: Compute snapshot for version: 3", [0]),
        _task(0, 2_500), _task(0, 2_600),  # waited 2.5 s for its first task
        _job(1, 3_000, "freshet base job 7: b01", [1, 2]),
        _task(2, 3_400),  # its second stage ran the first task: 0.4 s
        _job(2, 4_000, "freshet base job 8: b01", [3]), _task(3, 4_000),
        _job(3, 5_000, "freshet: warm the snapshot of /wh/b01: Compute snapshot for version: 5", [4]),
        _task(4, 6_000),
        _job(4, 7_000, "some other application's job", [5]), _task(5, 9_000),
        _job(5, 65_000, "freshet derived job 9: d_join", [6]), _task(6, 66_000),  # 18:21:05
    ]
    w = read_waits(log)
    b01 = w["b01"]
    assert b01.jobs == {7, 8} and b01.cold == {7} and b01.spark_jobs == 3 and b01.snapshot_jobs == 1
    assert abs(b01.wait - 2.9) < 1e-9 and abs(b01.snapshot_wait - 2.5) < 1e-9
    assert w[WARM].spark_jobs == 1 and w[WARM].snapshot_jobs == 1 and w[WARM].jobs == set() and w[WARM].wait == 1.0
    assert set(w) == {"b01", WARM, "d_join"}  # another application's job is not counted
    assert set(read_waits(log, since="18:21:00")) == {"d_join"} and "d_join" not in read_waits(log, until="18:20:59")
