"""The state the executor keeps after a commit (`TableState.committed`, the last step of every
job's pipeline, lake.commit.finish) is the state recovery reads back from the same commits
(lake.recovery._replay): what the next job plans from does not depend on whether the daemon
restarted in between. No Spark: the commits are the `txn` and `userMetadata` each pipeline writes.
"""

from __future__ import annotations

from typing import Any

from warehouse.lake.delta import app_id, commit_message
from warehouse.lake.recovery import TableState, _replay


def _planned_from(st: TableState) -> dict[str, Any]:
    """The fields a pipeline plans from."""
    return {"freshness": st.freshness, "safe_freshness": st.safe_freshness, "txn_version": st.txn_version,
            "delta_version": st.delta_version, "partitions": st.partitions, "slices": st.slices,
            "windows": st.windows, "origin": st.origin, "versions": st.versions.tuples(), "read": st.read,
            "rebuild": st.rebuild, "commits": st.commits}


def _both(table: str, commits: list[tuple[int, dict[str, Any]]]) -> tuple[TableState, TableState]:
    """(kept in memory commit after commit, replayed from the log) over `commits` of (txn, meta)."""
    kept = TableState()
    log = []
    for version, (txn, meta) in enumerate(commits):
        kept = kept.committed(meta, txn, version)
        log.append((version, [{"txn": {"appId": app_id(table), "version": txn}},
                              {"commitInfo": {"timestamp": 1000 * version, "operation": "WRITE",
                                              "userMetadata": commit_message(meta, txn)}}]))
    return kept, _replay(app_id(table), None, None, log)


def test_a_base_table_s_partitions_slices_and_windows_are_kept_as_recovery_reads_them():
    first = {"kind": "base", "job_id": 1, "partitions": {"p1": "f1"}, "freshness": 60.0, "safe_freshness": 50.0,
             "window": [0.0, 60.0], "windows": {"p1": [0.0, 60.0], "p2": [60.0, 180.0]}, "slices": {"p2": 120.0}}
    second = {"kind": "base", "job_id": 2, "partitions": {"p2": "f2"}, "freshness": 180.0, "safe_freshness": 170.0,
              "window": [120.0, 180.0], "windows": {"p2": [60.0, 180.0]}}
    kept, replayed = _both("raw", [(60_000, first), (180_000, second)])
    assert _planned_from(kept) == _planned_from(replayed)
    assert kept.partitions == {"p1": "f1", "p2": "f2"} and kept.slices == {} and kept.origin == 0.0


def test_derived_updates_and_a_recompute_keep_freshness_origin_and_sql_versions_as_recovery_reads_them():
    update = {"kind": "derived", "job_id": 3, "partitions": {}, "freshness": 600.0, "safe_freshness": 600.0,
              "window": [300.0, 600.0], "sources": {"raw": 4}, "sql_version": "v1"}
    recompute = {"kind": "recompute", "job_id": 4, "partitions": {}, "freshness": 600.0, "safe_freshness": 600.0,
                 "window": [300.0, 450.0], "sources": {"raw": 5}, "sql_version": "v2", "reasons": ["late"],
                 "late": ["p9"]}
    kept, replayed = _both("roll", [(600_000, update), (600_001, recompute)])
    assert _planned_from(kept) == _planned_from(replayed)
    assert list(kept.versions.tuples()) == [(300.0, 450.0, "v2"), (450.0, 600.0, "v1")]


def test_stateful_folds_a_late_fold_and_a_rebuild_s_swap_keep_the_versions_read_as_recovery_reads_them():
    fold = {"kind": "stateful", "job_id": 5, "partitions": {}, "freshness": 120.0, "safe_freshness": 120.0,
            "window": [60.0, 120.0], "sql_version": "i1", "sources": {"raw": 2}, "read": {"raw": 2}}
    late = {"kind": "stateful", "job_id": 6, "partitions": {}, "freshness": 120.0, "safe_freshness": 120.0,
            "late_since": {"raw": 2}, "reasons": ["late"], "late": ["p3"], "sources": {"raw": 3},
            "read": {"raw": 3}, "late_from": 30.0}
    progress = {"id": "abc", "from": 0.0, "to": 120.0, "done": 120.0, "versions": {"raw": 3}, "swapped": True}
    swap = {"kind": "stateful", "job_id": 7, "partitions": {}, "freshness": 120.0, "safe_freshness": 120.0,
            "window": [0.0, 120.0], "sources": {"raw": 4}, "read": {"raw": 4}, "sql_version": "i2",
            "reasons": ["rebuild"], "rebuild": progress}
    kept, replayed = _both("state", [(120_000, fold), (120_001, late), (120_002, swap)])
    assert _planned_from(kept) == _planned_from(replayed)
    assert kept.read == {"raw": 4} and kept.rebuild == progress and kept.origin == 0.0
