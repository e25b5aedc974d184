"""A base table's update job (§2.1 of *Scalable Scheduling of Updates in Streaming Data
Warehouses*): the job's partitions appended to the table in one commit (docs/warehouse.md §4).

Read top to bottom, `run_base` is the pipeline:

1. **plan** from what the table's log records: the partitions not loaded yet, and of a partition
   a time slice cut (§3.4, policies.chopping.time_slice) only the rows after what earlier slices
   committed, up to the job's end; the new freshness F and safe freshness F′ (§2.2);
2. **read** the partitions' files with the stream's schema (`lake.read`), in the job's read
   session (short splits for a bulk job or a big file: `lake.session.read_session`), and add the
   partition column;
3. **commit**: one idempotent append `(freshet/<table>, ms(F))` whose `userMetadata` names the
   partitions, their windows and fingerprints, and the writer (fenced first: `lake.commit`), found
   and kept by `lake.commit.finish`.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from warehouse.config import TableConfig
from warehouse.events import StartJob
from warehouse.lake.commit import Lake, finish
from warehouse.lake.delta import (
    append_idempotent,
    next_txn_version,
    table_path,
    time_column,
    window_filter,
    with_partition_column,
)
from warehouse.lake.outcome import JobOutcome
from warehouse.lake.read import read_partitions
from warehouse.lake.session import BIG_FILE_ROWS, read_session
from warehouse.lake.stateful import change_feed

if TYPE_CHECKING:
    from warehouse.lake.recovery import TableState

__all__ = ["run_base"]

log = logging.getLogger("freshet.executor")


def run_base(lake: Lake, job: StartJob, tc: TableConfig, t0: float) -> JobOutcome:
    """Append the rows of `job`'s partitions not committed yet (the module docstring)."""
    assert tc.stream is not None
    # 1. plan: what is left to load, from what the log records
    st = lake.table_state(tc.name)
    parts = [p for p in job.arrivals if p.partition_id not in st.partitions]
    # loaded through: the partitions earlier time slices committed part of
    loaded = {p.partition_id: st.slices[p.partition_id] for p in parts if p.partition_id in st.slices}
    parts = [p for p in parts if loaded.get(p.partition_id, p.start) < min(p.end, job.end)]
    if not parts:
        return lake.noop(job, t0, st, "its partitions (or this slice of them) are already committed")
    whole = [p for p in parts if p.end <= job.end and p.partition_id not in loaded]  # read in full
    cut = [p for p in parts if p not in whole]  # read from where earlier slices stopped, to the job's end
    fingerprints = {p.partition_id: p.fingerprint for p in parts if p.end <= job.end}  # loaded in full now
    slices = {p.partition_id: job.end for p in parts if p.end > job.end}  # loaded through the job's end
    freshness = job.new_freshness if st.freshness is None else max(job.new_freshness, st.freshness)
    safe = job.new_safe_freshness if st.safe_freshness is None else max(job.new_safe_freshness, st.safe_freshness)
    txn = next_txn_version(freshness, st.txn_version)
    meta = {"kind": "base", "job_id": job.job_id, "partitions": fingerprints, "freshness": freshness,
            "safe_freshness": min(safe, freshness), "window": [job.start, job.end],
            "windows": {p.partition_id: [p.start, p.end] for p in parts}}  # the intake's overlap check, after a restart
    if slices:
        meta["slices"] = slices
    if job.late:
        log.warning("table %s: loading late partition(s) %s (the derived windows computed without "
                    "them are recomputed after this load; a derived table holds nothing before its "
                    "origin, so data older than that stays out of it: docs/warehouse.md §8)",
                    tc.name, ", ".join(job.late))

    def done(now: TableState) -> bool:  # the log holds this job's partitions and slices
        return all(p in now.partitions for p in fingerprints) and all(
            p in now.partitions or now.slices.get(p, -math.inf) >= c for p, c in slices.items())

    tcol = time_column(lake.config, tc)
    path = table_path(lake.config, tc.name)
    big = any(p.rows >= BIG_FILE_ROWS * max(len(p.files), 1) for p in parts)  # a file of that many rows, on average
    with read_session(lake.spark, job.bulk or big) as session:
        # 2. read: the whole partitions at once, each cut one from where the slices stopped
        df = (read_partitions(lake.config, session, tc.stream, [f for p in whole for f in p.files])
              if whole or not cut else None)
        for p in cut:
            rows = read_partitions(lake.config, session, tc.stream, list(p.files))
            part = window_filter(rows, tc, tcol, loaded.get(p.partition_id, p.start), min(p.end, job.end))
            df = part if df is None else df.unionByName(part)
        assert df is not None
        df = with_partition_column(df, tc, tcol, freshness)
        # 3. commit: one idempotent append (a base table feeding a stateful one is created with
        # Delta's change data feed, from which the stateful job reads late rows)
        feed = change_feed(lake.config, tc)
        properties = feed if feed and lake.log.version(path) is None else None
        meta = lake.sign(meta)  # the fence, then the writer (lake.commit)
        append_idempotent(df, path, table=tc.name, txn_version=txn, metadata=meta, partition_by=tc.partition_by,
                          properties=properties)
    return finish(lake, job, t0, st, path, txn, meta, done=done, replayed="the write: already committed",
                  missing="this job's work is not in the log", declared_rows=0 if cut else sum(p.rows for p in whole))
