"""A demo producer: realistic network-monitoring partitions written into the landing zone (§2.1).

`freshet demo produce --config examples/netmon.yaml [--speed 60] [--backfill 6h] [--duration 10m]`
writes, for every stream of the config, one partition `(start, end]` per stream period, the way a
real feed would (data files first, `_partition.json` last and atomically — docs/warehouse.md §3).
Warehouse time runs `--speed` times faster than the wall clock, starting `--backfill` ago, until it
catches up with the wall clock; from then on it runs in real time (a warehouse never holds data
from the future). The daemon runs the same loop in a thread for `freshet run --demo`:

    stop = threading.Event()
    threading.Thread(target=produce, args=(config,), kwargs={"speed": 60, "stop": stop}).start()

Streams named like the netmon example (router_cpu, syslog, link_alerts, inventory) get
hand-written generators; any other stream gets plausible values for its declared schema.

A restarted producer continues each stream after what is already there (`resume_points`): the
newest event time its base tables hold according to the Delta log, and the newest partition
waiting in the landing zone. It never writes a partition id again, so a restart of
`freshet run --demo` quarantines nothing; warehouse time restarts at the newest of those points
when that is later than `--backfill` ago.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.config import FreshetConfig, StreamConfig, load_config, parse_duration
from warehouse.config_storage import landing_on_s3
from warehouse.errors import ConfigError
from warehouse.landing.intake import MANIFEST, partition_id
from warehouse.times import iso, parse_time

if TYPE_CHECKING:
    from warehouse.lake.recovery import RecoveryState

__all__ = ["Producer", "add_arguments", "generate", "main", "produce", "resume_points", "write_partition"]

ROUTERS = [f"{role}{n}.{site}" for site in ("nyc", "chi", "dal", "sfo", "atl", "sea") for role, n in
           (("cr", 1), ("cr", 2), ("ar", 1), ("ar", 2))]
SITES = {"nyc": "New York NY", "chi": "Chicago IL", "dal": "Dallas TX", "sfo": "San Francisco CA",
         "atl": "Atlanta GA", "sea": "Seattle WA"}
INTERFACES = [f"{kind}0/0/{i}" for kind in ("TenGigE", "HundredGigE") for i in range(4)]


def _ts(rng: random.Random, start: float, end: float, n: int) -> list[dt.datetime]:
    """n event times in (start, end], microsecond precision, sorted."""
    span_us = max(1, int(round((end - start) * 1e6)))
    base = int(round(start * 1e6))
    return [dt.datetime.fromtimestamp((base + rng.randint(1, span_us)) / 1e6, dt.UTC) for _ in range(n)]


def _router_cpu(rng: random.Random, start: float, end: float) -> dict[str, list[Any]]:
    rows: dict[str, list[Any]] = {"ts": [], "router": [], "cpu_pct": [], "mem_pct": [], "load_1m": []}
    step = 60.0  # each router samples once a minute
    t = math.floor(start / step) * step + step
    while t <= end:
        if t > start:
            for i, r in enumerate(ROUTERS):
                diurnal = 15 * math.sin(2 * math.pi * ((t / 86400.0) + i / len(ROUTERS)))
                cpu = min(100.0, max(1.0, 35 + (10 if r.startswith("cr") else 0) + diurnal + rng.gauss(0, 6)))
                rows["ts"].append(dt.datetime.fromtimestamp(t - rng.uniform(0, 2), dt.UTC))
                rows["router"].append(r)
                rows["cpu_pct"].append(round(cpu, 2))
                rows["mem_pct"].append(round(min(99.0, 55 + 0.2 * cpu + rng.gauss(0, 3)), 2))
                rows["load_1m"].append(round(max(0.0, cpu / 25 + rng.gauss(0, 0.3)), 2))
        t += step
    return rows


_SYSLOG = [
    (3, "LINK", "ifmgr", "%LINK-3-UPDOWN: Interface {ifc}, changed state to down"),
    (5, "LINK", "ifmgr", "%LINK-5-UPDOWN: Interface {ifc}, changed state to up"),
    (4, "BGP", "bgpd", "%BGP-4-MSGDUMP: unsupported or mal-formatted message received from 10.{a}.{b}.1"),
    (5, "BGP", "bgpd", "%BGP-5-ADJCHANGE: neighbor 10.{a}.{b}.1 Up"),
    (6, "SEC", "sshd", "%SEC_LOGIN-6-LOGIN_SUCCESS: Login Success [user: noc] [Source: 10.9.{a}.{b}]"),
    (2, "PLATFORM", "envmon", "%PLATFORM-2-TEMP_CRITICAL: Linecard {b} temperature critical"),
    (6, "SYS", "config", "%SYS-6-CONFIG_I: Configured from console by noc"),
    (4, "QOS", "qosmgr", "%QOS-4-DROPS: Output drops on {ifc} exceeded threshold"),
]


def _syslog(rng: random.Random, start: float, end: float) -> dict[str, list[Any]]:
    n = max(0, int(rng.gauss(0.7 * (end - start), 5)))
    rows: dict[str, list[Any]] = {"ts": _ts(rng, start, end, n), "router": [], "facility": [], "severity": [],
                                  "program": [], "message": []}
    for _ in range(n):
        sev, fac, prog, msg = rng.choices(_SYSLOG, weights=(3, 3, 2, 4, 6, 0.3, 2, 3))[0]
        rows["router"].append(rng.choice(ROUTERS))
        rows["facility"].append(fac)
        rows["severity"].append(sev)
        rows["program"].append(prog)
        rows["message"].append(msg.format(ifc=rng.choice(INTERFACES), a=rng.randint(0, 255), b=rng.randint(1, 8)))
    return rows


def _link_alerts(rng: random.Random, start: float, end: float) -> dict[str, list[Any]]:
    n = sum(1 for _ in range(int(end - start) // 10) if rng.random() < 0.25)
    rows: dict[str, list[Any]] = {"ts": _ts(rng, start, end, n), "router": [], "interface": [], "alert": [],
                                  "severity": [], "utilization_pct": []}
    for _ in range(n):
        alert, sev = rng.choice([("LINK_DOWN", 1), ("HIGH_UTILIZATION", 2), ("CRC_ERRORS", 3), ("FLAPPING", 2),
                                 ("OPTICAL_POWER_LOW", 3)])
        rows["router"].append(rng.choice(ROUTERS))
        rows["interface"].append(rng.choice(INTERFACES))
        rows["alert"].append(alert)
        rows["severity"].append(sev)
        rows["utilization_pct"].append(round(rng.uniform(85, 100) if alert == "HIGH_UTILIZATION"
                                             else rng.uniform(0, 80), 1))
    return rows


def _inventory(rng: random.Random, start: float, end: float) -> dict[str, list[Any]]:
    t = dt.datetime.fromtimestamp(end, dt.UTC)
    return {
        "ts": [t] * len(ROUTERS),
        "router": list(ROUTERS),
        "site": [SITES[r.split(".")[1]] for r in ROUTERS],
        "model": ["ASR-9922" if r.startswith("cr") else "NCS-5501" for r in ROUTERS],
        "os_version": ["IOS-XR 7.9.2" if (hash(r) + int(end // 86400)) % 5 else "IOS-XR 7.11.1" for r in ROUTERS],
        "interfaces": [48 if r.startswith("cr") else 24 for r in ROUTERS],
    }


GENERATORS: dict[str, Callable[[random.Random, float, float], dict[str, list[Any]]]] = {
    "router_cpu": _router_cpu, "syslog": _syslog, "link_alerts": _link_alerts, "inventory": _inventory,
}


def _generic(stream: StreamConfig, rng: random.Random, start: float, end: float) -> dict[str, list[Any]]:
    n = rng.randint(5, 50)
    cols: dict[str, list[Any]] = {}
    for c, typ in stream.schema_.items():
        t = typ.lower()
        if c == stream.time_column:
            cols[c] = _ts(rng, start, end, n)
        elif t == "string":
            cols[c] = [rng.choice(ROUTERS) for _ in range(n)]
        elif t in ("double", "float"):
            cols[c] = [round(rng.uniform(0, 100), 3) for _ in range(n)]
        elif t in ("int", "integer", "long"):
            cols[c] = [rng.randint(0, 1000) for _ in range(n)]
        elif t == "boolean":
            cols[c] = [rng.random() < 0.5 for _ in range(n)]
        elif t == "timestamp":
            cols[c] = _ts(rng, start, end, n)
        elif t == "date":
            cols[c] = [dt.datetime.fromtimestamp(end, dt.UTC).date()] * n
        else:
            cols[c] = [None] * n
    return cols


def generate(stream: StreamConfig, start: float, end: float, rng: random.Random) -> Any:
    """A pyarrow Table of realistic rows for `stream` with event times in (start, end]."""
    import pyarrow as pa

    from warehouse.landing.intake import _arrow_type

    gen = GENERATORS.get(stream.name)
    cols = gen(rng, start, end) if gen and set(stream.schema_) == set(gen(rng, start, start + 1)) else None
    if cols is None:
        cols = _generic(stream, rng, start, end)
    schema = pa.schema([(c, _arrow_type(t)) for c, t in stream.schema_.items()])
    return pa.table({c: cols[c] for c in stream.schema_}, schema=schema)


def write_partition(landing: str | Path, stream: str, pid: str, start: float, end: float, table: Any,
                    *, safe_through: float | None = None, files: int = 1) -> Path:
    """Write `table` as parquet under `landing/<stream>/<pid>/`, then `_partition.json` last (§4.3)."""
    import pyarrow.parquet as pq

    d = Path(landing) / stream / pid
    d.mkdir(parents=True, exist_ok=True)
    names = []
    n = table.num_rows
    chunks = max(1, files) if n else 0
    for i in range(chunks):
        lo, hi = n * i // chunks, n * (i + 1) // chunks
        name = f"part-{i}.parquet"
        pq.write_table(table.slice(lo, hi - lo), d / name, coerce_timestamps="us")
        names.append(name)
    manifest: dict[str, Any] = {"start": iso(start), "end": iso(end), "files": names, "rows": n}
    if safe_through is not None:
        manifest["safe_through"] = iso(safe_through)
    tmp = d / "._partition.json.tmp"
    tmp.write_text(json.dumps(manifest))
    tmp.replace(d / "_partition.json")
    return d


def demo_landing(config: FreshetConfig) -> Path:
    """The local landing zone the demo producer writes into; ConfigError for a bucket (the demo
    writes files, it is no S3 producer)."""
    if landing_on_s3(config.warehouse.landing):
        raise ConfigError(f"the demo producer writes into a local landing zone, and warehouse.landing is the "
                          f"bucket {config.warehouse.landing!r}: run the demo with a local landing directory")
    return Path(config.warehouse.landing)


def resume_points(config: FreshetConfig, state: RecoveryState | None = None) -> dict[str, float]:
    """stream → the newest event time already produced: the largest freshness of the stream's base
    tables in their Delta logs (`state`, else read with `recover`), or the largest `end` of a
    manifest waiting in `landing/<stream>/`, whichever is later. Streams with nothing are absent."""
    if state is None:
        from warehouse.lake.recovery import recover

        state = recover(config)
    out: dict[str, float] = {}

    def seen(stream: str, end: float | None) -> None:
        if end is not None:
            out[stream] = max(end, out.get(stream, end))

    for t in config.tables:
        if t.stream and t.name in state.tables:
            seen(t.stream, state.tables[t.name].freshness)
    landing = demo_landing(config)
    for s in config.streams:
        for manifest in (landing / s.name).glob(f"*/{MANIFEST}"):
            try:
                seen(s.name, parse_time(json.loads(manifest.read_text())["end"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not ours to judge: the intake quarantines it
    return out


class Producer:
    """Writes each stream's partitions at its period, `speed` times faster than real time."""

    def __init__(self, config: FreshetConfig, *, speed: float = 60.0, start: float | None = None,
                 seed: int = 0, clock: Callable[[], float] = time.time, echo: bool = False,
                 after: dict[str, float] | None = None) -> None:
        if speed <= 0:
            raise ConfigError(f"--speed must be positive, got {speed}")
        self.config = config
        self.landing = demo_landing(config)
        self.speed = speed
        self.clock = clock
        self.wall0 = clock()
        self.t0 = start if start is not None else self.wall0 - 6 * 3600.0
        self.rng = random.Random(seed)
        self.echo = echo
        after = after or {}
        if after:  # a restart: warehouse time resumes where the newest stream stopped
            self.t0 = min(self.wall0, max(self.t0, *after.values()))
        # the first partition of each stream is the last one complete at t0 (a daily feed starts
        # with the latest dump, so every table fills in a short demo), or the one right after
        # what the stream already produced
        self.next_end = {s.name: after[s.name] + s.period if s.name in after
                         else math.floor(self.t0 / s.period) * s.period for s in config.streams}
        self.written = 0

    def warehouse_time(self) -> float:
        """Event time now: compressed by `speed`, never ahead of the wall clock."""
        wall = self.clock()
        return min(wall, self.t0 + (wall - self.wall0) * self.speed)

    def step(self) -> int:
        """Write every partition whose end has passed; returns how many were written."""
        now = self.warehouse_time()
        n = 0
        for s in self.config.streams:
            while self.next_end[s.name] <= now:
                end = self.next_end[s.name]
                start = end - s.period
                table = generate(s, start, end, self.rng)
                write_partition(self.landing, s.name, partition_id(end), start, end, table)
                if self.echo:
                    print(f"{s.name}/{partition_id(end)}: {table.num_rows} rows ({iso(start)}, {iso(end)}]",
                          flush=True)
                self.next_end[s.name] = end + s.period
                n += 1
        self.written += n
        return n

    def sleep_hint(self) -> float:
        """Wall seconds until the next partition is due."""
        now = self.warehouse_time()
        due = min(self.next_end.values(), default=now + 1) - now
        rate = self.speed if now < self.clock() - 1 else 1.0
        return max(0.05, min(1.0, due / rate))


def produce(config: FreshetConfig, *, speed: float = 60.0, start: float | None = None,
            duration: float | None = None, stop: threading.Event | None = None, seed: int = 0,
            echo: bool = False, after: dict[str, float] | None = None) -> int:
    """Run a Producer until `stop` is set or `duration` wall seconds pass; returns partitions written.

    `after`: where each stream resumes (`resume_points`)."""
    p = Producer(config, speed=speed, start=start, seed=seed, echo=echo, after=after)
    stop = stop or threading.Event()
    deadline = None if duration is None else time.monotonic() + duration
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        p.step()
        stop.wait(p.sleep_hint())
    return p.written


# ---- CLI ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="demo_command", required=True)
    pr = sub.add_parser("produce", help="write realistic partitions into the landing zone")
    pr.add_argument("--config", required=True, help="the warehouse config (e.g. examples/netmon.yaml)")
    pr.add_argument("--speed", type=float, default=60.0, help="warehouse seconds per wall second (default 60)")
    pr.add_argument("--backfill", default="6h", help="warehouse time starts this long ago (default 6h)")
    pr.add_argument("--start", default=None, help="or: warehouse time starts at this ISO-8601 time")
    pr.add_argument("--duration", default=None, help="stop after this much wall time (e.g. 30s, 10m)")
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--quiet", action="store_true", help="do not print each partition")


def _parse_start(args: argparse.Namespace, now: float) -> float:
    value = args.start
    if value is None:
        try:
            return now - parse_duration(args.backfill)
        except ValueError as e:
            raise ConfigError(f"--backfill: {e}") from None
    try:
        return parse_time(value)
    except ValueError as e:
        raise ConfigError(f"--start: {e}") from None


def main(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if not config.streams:
        raise ConfigError("the config declares no streams to produce", source=args.config)
    start = _parse_start(args, time.time())
    duration = None
    if args.duration is not None:
        try:
            duration = parse_duration(args.duration)
        except ValueError as e:
            raise ConfigError(f"--duration: {e}") from None
    after = resume_points(config)
    resumed = f", resuming {len(after)} streams after what is already there" if after else ""
    print(f"producing into {Path(config.warehouse.landing).resolve()} at {args.speed:g}x from {iso(start)}"
          f"{resumed} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        n = produce(config, speed=args.speed, start=start, duration=duration, seed=args.seed, echo=not args.quiet,
                    after=after)
    except KeyboardInterrupt:
        return 0
    print(f"wrote {n} partitions", file=sys.stderr)
    return 0
