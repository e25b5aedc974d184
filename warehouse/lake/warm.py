"""Warming a table's Delta snapshot after a commit, off the path of the job that waits for it.

Every Freshet write carries a Delta txn (`txnAppId`, `txnVersion`: exactly once, docs/warehouse.md §5).
Delta 4.4 checks it with `OptimisticTransaction.txnVersion`, which reads `Snapshot.setTransactions`
from a state reconstruction of the table's whole log — three Spark jobs, six stages on a small
table — although the checksum file holds the same list. Each commit makes a new snapshot, so every
job paid that reconstruction before its write, each stage waiting for a core behind whatever else
runs (a derived job: 8 Spark jobs, 14 stages; 5 and 8 with the snapshot warm, measured on the test
warehouse's band join).

`SnapshotWarmer` does it right after the commit instead, in threads of its own and in the pool of
the job that committed: `DESCRIBE DETAIL` computes the snapshot's state (its file count and size),
which Delta caches on the snapshot object (`DeltaLog` keeps it until the next commit). The next
job of the table — and a derived job reading it at that version — finds it computed. Best effort:
a failure is logged and changes nothing (the next job computes the state itself, as before).

One thread per track: each track commits at most one job at a time. With one thread for all of
them, a slow two-core machine in a burst warmed too late — each warm-up's three Spark jobs wait
for a core behind bulk tasks — and a valuable table's next job paid the reconstruction itself
(the live benchmark's 15 tables: 9 of `b01`'s 11 jobs, 8 of `b02`'s 11, docs/benchmarks.md).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from warehouse.lake.delta import sql_path
from warehouse.lake.session import job_description

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SnapshotWarmer"]

log = logging.getLogger("freshet.executor")


class SnapshotWarmer:
    """`threads` background threads that run `DESCRIBE DETAIL` on the tables handed to `warm`: the
    newest request per table only, one warm-up of a table at a time, the table of the heaviest pool
    first (then the oldest request)."""

    def __init__(self, spark: Callable[[], SparkSession], threads: int = 1) -> None:
        self._spark = spark
        self._threads = max(1, threads)
        self._pending: dict[str, str | None] = {}  # path → the pool to warm it in
        self._running: set[str] = set()  # the paths being warmed
        self._cv = threading.Condition()
        self._started = 0  # threads started (on the first request)
        self.warmed = 0  # snapshots warmed (tests, logs)

    def warm(self, path: str, pool: str | None) -> None:
        """Compute the state of `path`'s latest snapshot soon, in `pool`."""
        with self._cv:
            self._pending.pop(path, None)  # re-queued at the end: the newest commit is the one to warm
            self._pending[path] = pool
            while self._started < self._threads:
                self._started += 1
                threading.Thread(target=self._run, name=f"freshet-warm-{self._started}", daemon=True).start()
            self._cv.notify()

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is pending or running (tests); whether it got there."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._pending and not self._running, timeout)

    def _next(self) -> str | None:
        # the heaviest pool first: its names sort so (policies.bulk), the bulk pool last
        ready = [p for p in self._pending if p not in self._running]
        return min(ready, key=lambda p: self._pending[p] or "") if ready else None

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._next() is not None)
                path = self._next()
                assert path is not None
                pool = self._pending.pop(path)
                self._running.add(path)
            try:
                spark = self._spark()
                with job_description(spark, f"freshet: warm the snapshot of {path}", pool=pool):
                    spark.sql(f"DESCRIBE DETAIL {sql_path(path)}").collect()
                with self._cv:
                    self.warmed += 1
            except Exception as err:  # noqa: BLE001 — best effort: the next job computes it itself
                log.debug("could not warm the Delta snapshot of %s: %s", path, err)
            finally:
                with self._cv:
                    self._running.discard(path)
                    self._cv.notify_all()
