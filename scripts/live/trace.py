"""The benchmark's arrival trace: generated from a seed, saved as JSON, replayed in real time.

Times in the trace are seconds from the replay's start t0. Each stream s sends partitions
`(start, end]` every period P_s (the first one ends at a seeded phase in (0, P_s]); a partition is
produced — written ahead under a staging directory, renamed into the landing zone — at wall time t0 + end, so its newest event time is the
wall-clock time it was produced at, as with a real source. During the burst `[b0, b1)` the
bursting streams send `burst_factor` times as many rows. The rows themselves are drawn from a
per-partition seed, so every contestant receives byte-for-byte the same data (shifted to its own
t0).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scripts.live.spec import KEYS, Spec, build, bursting
from warehouse.landing.intake import MANIFEST

__all__ = ["Part", "Trace", "generate", "partition_rows", "replay", "stage", "write_partition"]


@dataclass(frozen=True, slots=True)
class Part:
    stream: str
    index: int  # per stream, from 0
    start: float  # relative to t0
    end: float
    rows: int

    @property
    def pid(self) -> str:
        return f"p{self.index:05d}"


@dataclass(slots=True)
class Trace:
    seed: int
    duration: float
    burst: tuple[float, float]
    burst_factor: float
    parts: list[Part] = field(default_factory=list)
    warmup: float = 0.0  # replayed but not measured: the benchmark window is [warmup, duration]
    kind: str = "bulk"  # which streams burst (spec.TRACE_KINDS)
    tables: int = 15  # the warehouse's size (spec.build)

    @property
    def spec(self) -> Spec:
        return build(self.tables)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({**asdict(self), "parts": [asdict(p) for p in self.parts]}, indent=0))

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        d = json.loads(Path(path).read_text())
        return cls(seed=d["seed"], duration=d["duration"], burst=tuple(d["burst"]), burst_factor=d["burst_factor"],
                   parts=[Part(**p) for p in d["parts"]], warmup=d.get("warmup", 0.0), kind=d.get("kind", "bulk"),
                   tables=d.get("tables", 15))

    def rows_offered(self, lo: float, hi: float) -> int:
        return sum(p.rows for p in self.parts if lo < p.end <= hi)


def generate(seed: int, duration: float, burst: tuple[float, float], burst_factor: float,
             warmup: float = 0.0, kind: str = "bulk", tables: int = 15) -> Trace:
    """Partitions of every stream of the warehouse of `tables` tables (`spec.build`) over
    `[0, duration]`, ordered by arrival (end); in the burst, the streams `spec.bursting(s, kind)`
    send `burst_factor` times their rows."""
    import numpy as np

    rng = np.random.default_rng(seed)
    parts: list[Part] = []
    for s in build(tables).streams:
        bursts = bursting(s, kind)
        end, start, k = float(rng.uniform(0.2, 1.0) * s.period), 0.0, 0
        while end <= duration:
            factor = burst_factor if bursts and burst[0] < end <= burst[1] else 1.0
            rows = max(1, int(round(s.rate * (end - start) * factor)))
            parts.append(Part(s.name, k, round(start, 3), round(end, 3), rows))
            start, end, k = end, end + s.period, k + 1
    parts.sort(key=lambda p: (p.end, p.stream))
    return Trace(seed, duration, burst, burst_factor, parts, warmup, kind, tables)


def partition_rows(trace: Trace, part: Part, t0: float) -> Any:
    """The partition's rows as a pyarrow Table (ts, key, value), event times in (t0+start, t0+end]:
    sorted, the last one exactly at t0+end (so the data's newest event time is the partition's end)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng([trace.seed, trace.spec.stream_index(part.stream), part.index])
    lo, hi = _us(t0, part.start), _us(t0, part.end)
    ts = np.sort(rng.integers(lo + 1, hi + 1, size=part.rows, dtype=np.int64))
    ts[-1] = hi
    return pa.table({
        "ts": pa.array(ts, type=pa.timestamp("us", tz="UTC")),
        "key": pa.array(rng.integers(0, KEYS, size=part.rows, dtype=np.int32)),
        "value": pa.array(np.round(rng.normal(50.0, 10.0, size=part.rows), 3)),
    })


def _us(t0: float, t: float) -> int:
    """t0 + t in integer microseconds: the rows and the manifest agree to the microsecond."""
    return int(round(t0 * 1e6)) + int(round(t * 1e6))


def _iso_us(us: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)).isoformat().replace("+00:00", "Z")


def write_partition(landing: Path, part: Part, table: Any, t0: float) -> None:
    """Data file first (a hidden temp name, then renamed: file-source readers such as Spark's
    streaming source ignore names starting with '.'), the manifest last (docs/warehouse.md §3)."""
    import pyarrow.parquet as pq

    d = landing / part.stream / part.pid
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / ".part-0.parquet.tmp"
    pq.write_table(table, tmp, coerce_timestamps="us")
    os.replace(tmp, d / "part-0.parquet")
    manifest = {"start": _iso_us(_us(t0, part.start)), "end": _iso_us(_us(t0, part.end)), "files": ["part-0.parquet"],
                "rows": table.num_rows}
    mtmp = d / "._partition.json.tmp"
    mtmp.write_text(json.dumps(manifest))
    os.replace(mtmp, d / MANIFEST)


def stage(trace: Trace, staging: str | Path, t0: float) -> float:
    """Write every partition of the trace, whole, under `staging` before the replay starts (same
    file system as the landing zone): the replay then only renames each directory into the landing
    zone at its instant, so producing a burst of millions of rows costs the contestant's two cores
    nothing while it runs. Returns the seconds it took."""
    began = time.time()
    staging = Path(staging)
    for part in trace.parts:
        write_partition(staging, part, partition_rows(trace, part, t0), t0)
    return time.time() - began


def replay(trace: Trace, staging: str | Path, landing: str | Path, t0: float,
           stop: threading.Event | None = None) -> dict[str, float]:
    """Make every partition arrive at t0 + its end (real time): its directory, written ahead by
    `stage`, is renamed from `staging` into the landing zone, complete, at that instant.
    Returns {"max_lag": s, "partitions": n}."""
    landing = Path(landing)
    for s in trace.spec.streams:
        (landing / s.name).mkdir(parents=True, exist_ok=True)
    lag = 0.0
    n = 0
    for part in trace.parts:
        wait = t0 + part.end - time.time()
        if wait > 0 and (stop.wait(wait) if stop is not None else time.sleep(wait)):
            break
        if stop is not None and stop.is_set():
            break
        lag = max(lag, time.time() - (t0 + part.end))
        os.replace(Path(staging) / part.stream / part.pid, landing / part.stream / part.pid)
        n += 1
    return {"max_lag": lag, "partitions": n}
