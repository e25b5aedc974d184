"""lake.warm's own logic, without Spark (a recording stand-in session): one request per table,
the newest; the heaviest pool first; a failure is a no-op; several tables at once on its threads,
one table never beside itself. tests/test_delta.py shows, with Spark
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


class Concurrent:
    """Runs `DESCRIBE DETAIL` by recording the path; every call waits for `go`, counting how many
    wait at once."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.go = threading.Event()
        self.lock = threading.Lock()
        self.inside = self.most = 0
        self.sparkContext = self

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802 — SparkContext's name
        pass

    def sql(self, text: str) -> Any:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        self.go.wait(10)
        with self.lock:
            self.inside -= 1
            self.calls.append(text.removeprefix("DESCRIBE DETAIL delta.`").removesuffix("`"))
        return self

    def collect(self) -> list[Any]:
        return []


def test_the_warmer_warms_tables_at_once_on_its_threads_and_one_table_once_at_a_time() -> None:
    import time

    def until(n: int) -> int:
        deadline = time.monotonic() + 10
        while spark.inside < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return spark.inside

    spark = Concurrent()
    w = SnapshotWarmer(lambda: spark, threads=3)
    w.warm("/wh/a", None)
    w.warm("/wh/b", None)
    assert until(2) == 2  # two tables warmed at once
    w.warm("/wh/a", None)  # a newer commit of a table being warmed: after that warm-up, not beside it
    time.sleep(0.2)
    assert spark.inside == 2  # the third thread is free and leaves it
    w.warm("/wh/c", None)
    assert until(3) == 3  # … and takes another table
    spark.go.set()
    assert w.idle(10)
    assert spark.most == 3 and sorted(spark.calls) == ["/wh/a", "/wh/a", "/wh/b", "/wh/c"] and w.warmed == 4
