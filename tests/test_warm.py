"""lake.warm's own logic, without Spark (a recording stand-in session): one request per table,
the newest; the heaviest pool first; a failure is a no-op. tests/test_delta.py shows, with Spark
and Delta, that a warmed snapshot spares the next job its state reconstruction."""

from __future__ import annotations

import threading
from typing import Any

from policies.bulk import BULK_POOL, pool_for
from warehouse.lake.warm import SnapshotWarmer


class Recording:
    """Runs `DESCRIBE DETAIL` by recording (path, pool); the first call waits for `go`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.go, self.entered = threading.Event(), threading.Event()
        self.pool: str | None = None
        self.sparkContext = self

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802 — SparkContext's name
        if key == "spark.scheduler.pool":
            self.pool = value

    def sql(self, text: str) -> Any:
        self.entered.set()
        self.go.wait(10)
        if "broken" in text:
            raise RuntimeError("DELTA_MISSING_DELTA_TABLE")
        self.calls.append((text.removeprefix("DESCRIBE DETAIL delta.`").removesuffix("`"), self.pool))
        return self

    def collect(self) -> list[Any]:
        return []


def test_the_warmer_keeps_one_request_per_table_and_warms_the_heaviest_pool_first() -> None:
    spark = Recording()
    w = SnapshotWarmer(lambda: spark)
    hot, mid = pool_for(100, 1, False), pool_for(4, 1, False)
    w.warm("/wh/first", mid)  # taken at once; waits for `go` inside its DESCRIBE DETAIL
    assert spark.entered.wait(10)
    w.warm("/wh/bulk", BULK_POOL)
    w.warm("/wh/broken", hot)
    w.warm("/wh/mid", mid)
    w.warm("/wh/hot", hot)
    w.warm("/wh/mid", mid)  # again: still one request
    spark.go.set()
    assert w.idle(10)
    assert spark.calls == [("/wh/first", mid), ("/wh/hot", hot), ("/wh/mid", mid), ("/wh/bulk", BULK_POOL)]
    assert w.warmed == 4  # the broken table's failure changed nothing
    w.warm("/wh/hot", hot)
    assert w.idle(10) and spark.calls[-1] == ("/wh/hot", hot) and w.warmed == 5
