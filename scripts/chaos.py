"""Kill storm: the real daemon (`python -m ops.cli run`) on a generated warehouse is
SIGKILLed at random instants and restarted each time; afterwards an independent reader (delta-rs,
the `deltalake` package — not Freshet's code, not Spark) audits every table.

The warehouse: three streams with different periods (s1 1m, s2 90s, s3 3m), a base table each,
and three derived tables: `s1_5m` (a 5-minute roll-up of s1), `s3_15m` (a 15-minute roll-up of
s3) and `s2_band` (each s2 row joined with the s1 rows of the same key in the 5 minutes before
it: two sources, a 5-minute lookback). Before each restart the producer lands the next three
event-minutes of every stream (6 partitions), and now and then a bad partition: bad JSON, a
missing file, a row-count mismatch, rows outside the window, a wrong column type, a path out of
the partition directory, an end in the future, a window overlapping a loaded partition, and a
loaded id re-sent with other content.

Each kill picks an instant at random from one of six kinds, each kind once in every six kills (in
a random order): during recovery (before /readyz answers 200), inside a base append or a derived
job (after the daemon logs `job started` for one, plus a random 0–1.2× the median job duration
seen so far: reading, writing or committing), just after a commit (0–0.5 s after `job finished`:
archiving, reporting, the next job starting), during a SIGHUP reload (sent with a changed priority,
killed 0–1 s later), or at a random moment 0–20 s after ready. After the last kill the daemon runs
until every table is caught up and is stopped with SIGTERM. The audit then checks, per partition,
rows expected vs found (0 lost, 0 duplicated, nothing foreign), every derived table equal to its
SQL computed here in plain Python over the rows the producer wrote, up to the freshness its
Delta log records, and every bad partition in `landing/_quarantine/` with a reason.

    python scripts/chaos.py --kills 100 [--json out.json] [--workdir DIR] [--seed S]

Exit status 0 when the audit passes, 1 when it does not.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PERIODS = {"s1": 60, "s2": 90, "s3": 180}  # seconds
CYCLE = 180  # event seconds landed per restart: 3 + 2 + 1 partitions
ROWS = 5  # rows per partition
KEYS = ("r1", "r2", "r3")
BAD_KINDS = ("bad_json", "missing_file", "row_count", "outside_window", "wrong_type", "path_escape",
             "future", "overlap", "conflict")
KILL_KINDS = ("recovery", "append", "derived", "commit", "reload", "random")
SCHEMA = {"ts": "timestamp", "pid": "string", "seq": "long", "key": "string", "v": "double"}

S1_5M = ("SELECT timestamp_seconds(CAST(ceil(unix_micros(ts) / 300000000.0) AS BIGINT) * 300) AS ts, key, "
         "count(*) AS n, sum(v) AS v_sum FROM s1_raw GROUP BY 1, 2")
S3_15M = ("SELECT timestamp_seconds(CAST(ceil(unix_micros(ts) / 900000000.0) AS BIGINT) * 900) AS ts, key, "
          "count(*) AS n, max(v) AS v_max FROM s3_raw GROUP BY 1, 2")
S2_BAND = ("SELECT a.ts, a.key, a.pid, a.seq, count(b.ts) AS n_recent, coalesce(sum(b.v), 0.0) AS v_recent "
           "FROM s2_raw a LEFT JOIN s1_raw b ON b.key = a.key AND b.ts > a.ts - INTERVAL 5 MINUTES "
           "AND b.ts <= a.ts WHERE a.ts > :window_start AND a.ts <= :window_end "
           "GROUP BY a.ts, a.key, a.pid, a.seq")
GRANULARITY = {"s1_5m": 300, "s3_15m": 900, "s2_band": 60}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def config_dict(work: Path, port: int, *, priority: int = 5) -> dict[str, Any]:
    conf = {"spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false", "spark.driver.memory": "768m",
            "spark.databricks.delta.snapshotPartitions": "1"}
    return {
        "version": 1,
        "warehouse": {"root": str(work / "data"), "landing": str(work / "landing")},
        "listen": f"127.0.0.1:{port}",
        "streams": [{"name": s, "period": f"{p}s", "lateness": 0, "time_column": "ts", "format": "parquet",
                     "schema": SCHEMA} for s, p in PERIODS.items()],
        "tables": [
            {"name": "s1_raw", "stream": "s1", "priority": 1, "partition_by": "hour", "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "s2_raw", "stream": "s2", "priority": priority, "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "s3_raw", "stream": "s3", "priority": 2, "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "s1_5m", "sources": ["s1_raw"], "granularity": "5m", "sql": S1_5M, "priority": 3,
             "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "s3_15m", "sources": ["s3_raw"], "granularity": "15m", "sql": S3_15M, "priority": 1,
             "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "s2_band", "sources": ["s2_raw", "s1_raw"], "granularity": "1m", "lookback": "5m",
             "sql": S2_BAND, "priority": 8, "cost": {"alpha": 1, "beta": 0.01}},
        ],
        "scheduler": {"tracks": 2, "chop": 3, "retry_backoff": "1s", "retry_backoff_max": "5s"},
        "spark": {"master": "local[2]", "conf": conf},
    }


# ---------------------------------------------------------------- the producer
@dataclass
class Row:
    ts: float
    pid: str
    seq: int
    key: str
    v: float


@dataclass
class Producer:
    """Lands partitions the way a source does (files, then the manifest last, atomically) and
    remembers what it sent: the good partitions' rows and the bad partitions' ids."""

    landing: Path
    t0: float
    rng: random.Random
    rows: dict[str, dict[str, list[Row]]] = field(default_factory=lambda: {s: {} for s in PERIODS})
    windows: dict[str, dict[str, tuple[float, float]]] = field(default_factory=lambda: {s: {} for s in PERIODS})
    bad: dict[str, tuple[str, str]] = field(default_factory=dict)  # "stream/pid" → (kind, stream)
    cycles: int = 0
    landed_end: dict[str, float] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        """What was sent, for `--audit` of a work directory later."""
        path.write_text(json.dumps({"t0": self.t0, "cycles": self.cycles, "bad": self.bad,
                                    "windows": self.windows,
                                    "rows": {s: {pid: [r.__dict__ for r in rs] for pid, rs in d.items()}
                                             for s, d in self.rows.items()}}))

    @classmethod
    def load(cls, path: Path) -> Producer:
        raw = json.loads(path.read_text())
        p = cls(path.parent / "landing", raw["t0"], random.Random(0))
        p.cycles = raw["cycles"]
        p.bad = {k: tuple(v) for k, v in raw["bad"].items()}
        p.windows = {s: {pid: tuple(w) for pid, w in d.items()} for s, d in raw["windows"].items()}
        p.rows = {s: {pid: [Row(**r) for r in rs] for pid, rs in d.items()} for s, d in raw["rows"].items()}
        return p

    def _write(self, stream: str, pid: str, start: float, end: float, rows: list[Row], *,
               manifest: Any = None, types: dict[str, Any] | None = None) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        d = self.landing / stream / pid
        d.mkdir(parents=True, exist_ok=True)
        types = types or {}
        arrays = {
            "ts": pa.array([int(round(r.ts * 1e6)) for r in rows], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "pid": pa.array([r.pid for r in rows], pa.string()),
            "seq": pa.array([r.seq for r in rows], pa.int64()),
            "key": pa.array([r.key for r in rows], pa.string()),
            "v": pa.array([r.v for r in rows], pa.float64()),
        }
        for col, ty in types.items():
            arrays[col] = arrays[col].cast(ty)
        pq.write_table(pa.table(arrays), d / "part-0.parquet")
        if manifest is None:
            manifest = {"start": iso(start), "end": iso(end), "files": ["part-0.parquet"], "rows": len(rows)}
        tmp = d / "._partition.json.tmp"
        tmp.write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
        tmp.replace(d / "_partition.json")

    def _rows(self, pid: str, start: float, end: float) -> list[Row]:
        span = int(end - start)
        ts = sorted(start + self.rng.randint(1, span * 1000) / 1000.0 for _ in range(ROWS))
        return [Row(t, pid, i, self.rng.choice(KEYS), float(self.rng.randint(0, 1000))) for i, t in enumerate(ts)]

    def land_cycle(self, every: int = 7) -> None:
        """The next CYCLE event seconds of every stream; every `every`-th cycle (from the second)
        one s1 slot is a bad partition instead (so its window is a gap no good partition covers)."""
        c = self.cycles
        lo, hi = self.t0 + c * CYCLE, self.t0 + (c + 1) * CYCLE
        for stream, period in PERIODS.items():
            n = CYCLE // period
            for i in range(n):
                start, end = lo + i * period, lo + (i + 1) * period
                pid = f"{stream}-{int((start - self.t0) // period):05d}"
                if stream == "s1" and i == 0 and c >= 1 and (c - 1) % every == 0:
                    self._land_bad(stream, pid, start, end, BAD_KINDS[((c - 1) // every) % len(BAD_KINDS)])
                    continue
                rows = self._rows(pid, start, end)
                self._write(stream, pid, start, end, rows)
                self.rows[stream][pid] = rows
                self.windows[stream][pid] = (start, end)
            self.landed_end[stream] = hi
        self.cycles += 1

    def _land_bad(self, stream: str, pid: str, start: float, end: float, kind: str) -> None:
        import pyarrow as pa

        rows = self._rows(pid, start, end)
        good = {"start": iso(start), "end": iso(end), "files": ["part-0.parquet"], "rows": len(rows)}
        if kind == "bad_json":
            self._write(stream, pid, start, end, rows, manifest='{"start": "' + iso(start) + '", "end": ')
        elif kind == "missing_file":
            self._write(stream, pid, start, end, rows, manifest={**good, "files": ["part-0.parquet", "part-9.parquet"]})
        elif kind == "row_count":
            self._write(stream, pid, start, end, rows, manifest={**good, "rows": len(rows) + 1})
        elif kind == "outside_window":
            rows[-1].ts = end + 30
            self._write(stream, pid, start, end, rows)
        elif kind == "wrong_type":
            self._write(stream, pid, start, end, rows, types={"v": pa.float32()})
        elif kind == "path_escape":
            self._write(stream, pid, start, end, rows, manifest={**good, "files": ["../../s2/x.parquet"]})
        elif kind == "future":
            pid = f"{stream}-future-{self.cycles}"
            fs = time.time() + 86400
            self._write(stream, pid, fs, fs + 60, self._rows(pid, fs, fs + 60))
        elif kind == "overlap":  # the gap's window widened over the previous (loaded) partition
            pid = f"{stream}-overlap-{self.cycles}"
            self._write(stream, pid, start - 30, end, self._rows(pid, start - 30, end))
        elif kind == "conflict":  # an id loaded (and archived) earlier, sent again with other content
            done = [q for q in sorted(self.rows[stream]) if (self.landing / "_loaded" / stream / q).is_dir()]
            if not done:  # nothing archived yet: never write into a pending partition's directory
                return self._land_bad(stream, pid, start, end, "row_count")
            pid = done[0]
            s, e = self.windows[stream][pid]
            self._write(stream, pid, s, e, self._rows(pid, s, e))
        self.bad[f"{stream}/{pid}"] = (kind, stream)


# ---------------------------------------------------------------- the daemon under test
class Daemon:
    """One `freshet run` subprocess (its own session, so its Spark JVM can be reaped with it)."""

    def __init__(self, work: Path, port: int, log_path: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.cwd = work
        self.log_path = log_path
        self.offset = log_path.stat().st_size if log_path.exists() else 0
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        env.pop("FRESHET_API_TOKEN", None)
        self.log_fh = log_path.open("ab")
        self.t_spawn = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "run", "--config", str(work / "freshet.yaml"), "--log-format", "json",
             "--poll", "0.5", "--grace", "30", "--trace", str(work / "trace.jsonl")],
            cwd=work, env=env, stdout=self.log_fh, stderr=subprocess.STDOUT, start_new_session=True)
        self.t_ready: float | None = None

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, None
        except (OSError, ValueError):
            return 0, None

    def ready(self) -> bool:
        if self.t_ready is None and self.get("/readyz", 1.0)[0] == 200:
            self.t_ready = time.monotonic()
        return self.t_ready is not None

    def new_lines(self) -> list[dict[str, Any]]:
        with self.log_path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        cut = data.rfind(b"\n") + 1
        self.offset += cut
        out = []
        for line in data[:cut].splitlines():
            if line.startswith(b"{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the daemon (only it, as a crash would); then make sure its JVM is gone too."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._reap()

    def _reap(self) -> None:
        # the JVM exits on its own when its stdin (the daemon) closes; wait for it, then SIGKILL
        # whatever is left of this daemon's session (processes this script started)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _group_alive(self.proc.pid):
            time.sleep(0.2)
        if _group_alive(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log_fh.close()

    def stop(self, timeout: float = 120) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(30)
        self._reap()
        return rc


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # zombies count as gone
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def wait_until(pred: Any, timeout: float, every: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every)
    return False


# ---------------------------------------------------------------- the storm
@dataclass
class KillRecord:
    n: int
    kind: str
    landed_at: str  # what the daemon was doing: the kind actually hit
    after_spawn: float
    ready_seconds: float | None  # this daemon's spawn → /readyz 200 (None: killed before)


def storm(work: Path, kills: int, seed: int, out: Any = print, max_minutes: float | None = None) -> dict[str, Any]:
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    t0 = math.floor((time.time() - 3 * 86400) / 900) * 900
    producer = Producer(work / "landing", t0, random.Random(seed + 1))
    cfg_path = work / "freshet.yaml"
    priority = 5
    cfg_path.write_text(yaml.safe_dump(config_dict(work, port, priority=priority), sort_keys=False))
    log_path = work / "daemon.log"
    records: list[KillRecord] = []
    ready_times: list[float] = []
    kill_to_ready: list[float] = []
    last_kill: float | None = None
    started = time.monotonic()
    n = 0
    every = max(1, min(7, kills // len(BAD_KINDS)))
    durations: dict[str, list[float]] = {"base": [], "derived": []}
    deck: list[str] = []
    while n < kills and (max_minutes is None or time.monotonic() - started < max_minutes * 60):
        producer.land_cycle(every)
        producer.save(work / "produced.json")
        d = Daemon(work, port, log_path)
        if not deck:  # every kind once per len(KILL_KINDS) kills, in a random order
            deck = rng.sample(KILL_KINDS, len(KILL_KINDS))
        kind = deck.pop()
        typical = statistics.median(ready_times) if ready_times else 8.0
        if kind == "reload":
            priority = 13 - priority  # 5 ↔ 8: the reload changes something
            tmp = cfg_path.with_suffix(".tmp")
            tmp.write_text(yaml.safe_dump(config_dict(work, port, priority=priority), sort_keys=False))
        hit = _approach(d, kind, rng, typical, log_path, durations)
        if d.t_ready is not None:
            ready_times.append(d.t_ready - d.t_spawn)
            if last_kill is not None:
                kill_to_ready.append(d.t_ready - last_kill)
        if not d.alive():
            raise RuntimeError(f"daemon exited by itself with {d.proc.returncode}; log: {log_path}")
        after = time.monotonic() - d.t_spawn
        d.kill()
        last_kill = time.monotonic()
        n += 1
        records.append(KillRecord(n, kind, hit, round(after, 3),
                                  None if d.t_ready is None else round(d.t_ready - d.t_spawn, 3)))
        out(f"kill {n:3d}/{kills}: {kind:8s} hit {hit:11s} at {after:6.2f}s after spawn"
            + (f" (ready after {d.t_ready - d.t_spawn:5.2f}s)" if d.t_ready else ""))

    # the last run: everything landed is loaded and every derived table catches up, then SIGTERM
    d = Daemon(work, port, log_path)
    if not wait_until(lambda: d.ready() or not d.alive(), 300):
        raise RuntimeError(f"final daemon not ready; log: {log_path}")
    ready_times.append(d.t_ready - d.t_spawn)
    if last_kill is not None:
        kill_to_ready.append(d.t_ready - last_kill)
    expected = expected_freshness(producer)
    caught_up = wait_until(lambda: _caught_up(d, expected), 900, 1.0)
    tables = {t["name"]: t for t in (d.get("/v1/tables")[1] or {}).get("tables", [])}
    metrics = _metrics(d)
    rc = d.stop()
    storm_seconds = time.monotonic() - started
    report = audit(work, producer)
    report.update({
        "kills": n,
        "kills_requested": kills,
        "kill_kinds": dict(Counter(r.landed_at for r in records)),
        "kill_kinds_aimed": dict(Counter(r.kind for r in records)),
        "storm_seconds": round(storm_seconds, 1),
        "ready_seconds": _summary(ready_times),
        "kill_to_ready_seconds": _summary(kill_to_ready),
        "caught_up": caught_up,
        "final_exit_code": rc,
        "final_tables": {k: {"freshness": v.get("freshness"), "last_result": v.get("last_result"),
                             "jobs_failed": v.get("jobs_failed")} for k, v in tables.items()},
        "quarantined_metric": metrics.get("freshet_partitions_quarantined_total", 0.0),
        "records": [r.__dict__ for r in records],
        "seed": seed,
        "workdir": str(work),
    })
    report["passed"] = bool(report["passed"] and caught_up and rc == 0)
    report["completed"] = n == kills  # False: --max-minutes stopped the kills early
    return report


def _approach(d: Daemon, kind: str, rng: random.Random, typical: float, log_path: Path,
              durations: dict[str, list[float]]) -> str:
    """Wait for the instant to kill `d` at, per `kind`; what it was doing then. `durations`
    collects the job durations the daemons log (base, derived), to aim inside a running job."""
    if kind == "recovery":
        at = rng.uniform(0.2, 0.95) * typical
        wait_until(lambda: d.ready() or time.monotonic() - d.t_spawn >= at or not d.alive(), at + 60)
        return "after ready" if d.ready() else "recovery"
    if not wait_until(lambda: d.ready() or not d.alive(), 300):
        raise RuntimeError(f"daemon not ready within 300 s; log: {log_path}")
    if not d.alive():
        raise RuntimeError(f"daemon exited with {d.proc.returncode}; log: {log_path}")
    hit = kind

    def saw(msg: str, want: str | None = None) -> bool:
        found = False
        for e in d.new_lines():
            if e.get("msg") == "job finished" and e.get("kind") in durations:
                durations[e["kind"]].append(float(e.get("duration") or 0.0))
            found = found or (e.get("msg") == msg and (want is None or e.get("kind") == want))
        return found

    if kind in ("append", "derived"):  # inside a running job: reading, writing, committing
        want = "base" if kind == "append" else "derived"
        if not wait_until(lambda: saw("job started", want), 60, 0.05):
            hit = "idle"
        typical_job = statistics.median(durations[want][-20:]) if durations[want] else 6.0
        time.sleep(rng.uniform(0.0, 1.2 * typical_job))
    elif kind == "commit":  # just after a commit: archiving, reporting, the next job starting
        if not wait_until(lambda: saw("job finished"), 90, 0.05):
            hit = "idle"
        time.sleep(rng.uniform(0.0, 0.5))
    elif kind == "reload":  # the new config was written beside the file; swap it in, then SIGHUP
        cfg = d.cwd / "freshet.yaml"
        cfg.with_suffix(".tmp").replace(cfg)
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(rng.uniform(0.0, 1.0))
    else:
        time.sleep(rng.uniform(0.0, 20.0))
    return hit


def _summary(xs: list[float]) -> dict[str, float | int | None]:
    if not xs:
        return {"n": 0, "median": None, "max": None}
    return {"n": len(xs), "median": round(statistics.median(xs), 3), "max": round(max(xs), 3),
            "min": round(min(xs), 3)}


def _metrics(d: Daemon) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(d.url + "/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = defaultdict(float)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name] += s.value
    return dict(out)


def expected_freshness(p: Producer) -> dict[str, float | None]:
    """Where every table must end once everything landed is loaded (plain arithmetic); None: a
    derived table whose first window is not complete yet."""
    last = {s: max(e for _, e in p.windows[s].values()) for s in PERIODS}
    f: dict[str, float | None] = {"s1_raw": last["s1"], "s2_raw": last["s2"], "s3_raw": last["s3"]}
    for name, src in (("s1_5m", last["s1"]), ("s3_15m", last["s3"]), ("s2_band", min(last["s1"], last["s2"]))):
        edge = math.floor(src / GRANULARITY[name]) * GRANULARITY[name]
        f[name] = edge if edge > p.t0 else None
    return f


def _caught_up(d: Daemon, expected: dict[str, float | None]) -> bool:
    code, body = d.get("/v1/tables")
    if code != 200 or not body:
        return False
    have = {t["name"]: t.get("freshness") for t in body["tables"]}
    return all(have.get(k) is None if v is None else have.get(k) is not None and have[k] >= v
               for k, v in expected.items())


# ---------------------------------------------------------------- the independent audit (delta-rs)
def _read(path: Path) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table()


def _seconds(col: Any) -> list[float]:
    import pyarrow as pa

    return [v / 1e6 if v is not None else None
            for v in col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()]


def _freshness(path: Path) -> float | None:
    """The largest `freshness` in the table's commit metadata, read with delta-rs."""
    from deltalake import DeltaTable

    best = None
    for h in DeltaTable(str(path)).history():
        meta = h.get("userMetadata")
        if meta:
            f = json.loads(meta).get("freshness")
            if f is not None:
                best = f if best is None else max(best, f)
    return best


def audit(work: Path, p: Producer) -> dict[str, Any]:
    data = work / "data"
    problems: list[str] = []
    base: dict[str, Any] = {}
    loaded_rows: dict[str, list[Row]] = {}
    for stream in PERIODS:
        table = f"{stream}_raw"
        t = _read(data / table)
        ts = _seconds(t.column("ts"))
        found = Counter(zip(t.column("pid").to_pylist(), t.column("seq").to_pylist(), strict=True))
        rows = [Row(a, b, c, k, v) for a, b, c, k, v in zip(ts, t.column("pid").to_pylist(), t.column("seq").to_pylist(),
                                                          t.column("key").to_pylist(), t.column("v").to_pylist(), strict=True)]
        loaded_rows[stream] = rows
        expected = {(r.pid, r.seq): r for rs in p.rows[stream].values() for r in rs}
        # still waiting in the landing zone (an audit before the daemon caught up): not lost
        sdir = work / "landing" / stream
        waiting = {d.name for d in sdir.iterdir() if (d / "_partition.json").is_file()} if sdir.is_dir() else set()
        lost = [k for k in expected if found.get(k, 0) == 0 and k[0] not in waiting]
        pending_rows = sum(1 for k in expected if found.get(k, 0) == 0 and k[0] in waiting)
        dup = sum(c - 1 for c in found.values() if c > 1)
        foreign = [k for k in found if k not in expected]
        wrong = sum(1 for r in rows if (r.pid, r.seq) in expected
                    and (abs(expected[(r.pid, r.seq)].ts - r.ts) > 1e-3 or expected[(r.pid, r.seq)].v != r.v
                         or expected[(r.pid, r.seq)].key != r.key))
        per_partition_bad = sum(1 for pid, rs in p.rows[stream].items()
                                if sum(found.get((pid, r.seq), 0) for r in rs) not in (len(rs), 0)
                                or (pid not in waiting and sum(found.get((pid, r.seq), 0) for r in rs) != len(rs)))
        base[table] = {"partitions": len(p.rows[stream]), "rows_expected": len(expected), "rows_found": t.num_rows,
                       "lost": len(lost), "duplicated": dup, "foreign": len(foreign), "altered": wrong,
                       "partitions_wrong": per_partition_bad, "rows_pending": pending_rows,
                       "partitions_pending": len(waiting & set(p.rows[stream]))}
        if lost or dup or foreign or wrong or per_partition_bad or t.num_rows + pending_rows != len(expected):
            problems.append(f"{table}: {base[table]}")

    # derived tables: their SQL, computed here over the rows the producer wrote (good ones only)
    good = {s: sorted((r for rs in p.rows[s].values() for r in rs), key=lambda r: r.ts) for s in PERIODS}
    derived: dict[str, Any] = {}
    for name, cols, fn in (("s1_5m", ("ts", "key", "n", "v_sum"), _exp_s1_5m),
                           ("s3_15m", ("ts", "key", "n", "v_max"), _exp_s3_15m),
                           ("s2_band", ("ts", "key", "pid", "seq", "n_recent", "v_recent"), _exp_s2_band)):
        path = data / name
        got: Counter[tuple] = Counter()
        f = None
        if (path / "_delta_log").is_dir():
            f = _freshness(path)
            t = _read(path)
            got_cols = [(_seconds(t.column(c)) if c == "ts" else t.column(c).to_pylist()) for c in cols]
            got = Counter(tuple(_norm(x) for x in row) for row in zip(*got_cols, strict=True))
        exp = Counter(tuple(_norm(x) for x in row) for row in fn(good, f)) if f is not None else Counter()
        missing, extra = exp - got, got - exp
        derived[name] = {"freshness": iso(f) if f else None, "rows_expected": sum(exp.values()),
                         "rows_found": sum(got.values()), "missing": sum(missing.values()),
                         "extra": sum(extra.values()), "equal": not missing and not extra}
        if missing or extra:
            problems.append(f"{name}: {derived[name]}; e.g. missing {list(missing)[:2]} extra {list(extra)[:2]}")

    # bad partitions: each in the quarantine with a reason; nothing else quarantined
    qroot = work / "landing" / "_quarantine"
    quarantined = {f"{s.name}/{d.name}": d for s in qroot.iterdir() if s.is_dir() for d in s.iterdir()} \
        if qroot.exists() else {}
    q_ok, q_missing, reasons = 0, [], {}
    for key, (kind, _stream) in p.bad.items():
        hits = [d for k, d in quarantined.items() if k == key or k.startswith(key + ".")]
        texts = [(d / "reason").read_text().strip() for d in hits if (d / "reason").is_file()]
        if texts and all(texts):
            q_ok += 1
            reasons[kind] = texts[0][:160]
        else:
            q_missing.append(f"{key} ({kind})")
    unexpected = [k for k in quarantined if not any(k == b or k.startswith(b + ".") for b in p.bad)]
    if q_missing or unexpected:
        problems.append(f"quarantine: missing {q_missing}, unexpected {unexpected}")
    good_partitions = sum(len(v) for v in p.rows.values())
    return {
        "passed": not problems,
        "problems": problems,
        "partitions_good": good_partitions,
        "partitions_bad": len(p.bad),
        "partitions_total": good_partitions + len(p.bad),
        "rows_expected": sum(b["rows_expected"] for b in base.values()),
        "rows_found": sum(b["rows_found"] for b in base.values()),
        "lost": sum(b["lost"] for b in base.values()),
        "rows_pending": sum(b["rows_pending"] for b in base.values()),
        "duplicated": sum(b["duplicated"] for b in base.values()),
        "base": base,
        "derived": derived,
        "quarantined_with_reason": q_ok,
        "quarantine_unexpected": unexpected,
        "quarantine_reasons": reasons,
    }


def _norm(x: Any) -> Any:
    return round(x, 6) if isinstance(x, float) else x


def _bucket(ts: float, g: int) -> float:
    return math.ceil(ts / g) * g


def _exp_s1_5m(good: dict[str, list[Row]], f: float) -> list[tuple]:
    acc: dict[tuple[float, str], list[float]] = defaultdict(list)
    for r in good["s1"]:
        if r.ts <= f:
            acc[(_bucket(r.ts, 300), r.key)].append(r.v)
    return [(b, k, len(vs), sum(vs)) for (b, k), vs in acc.items()]


def _exp_s3_15m(good: dict[str, list[Row]], f: float) -> list[tuple]:
    acc: dict[tuple[float, str], list[float]] = defaultdict(list)
    for r in good["s3"]:
        if r.ts <= f:
            acc[(_bucket(r.ts, 900), r.key)].append(r.v)
    return [(b, k, len(vs), max(vs)) for (b, k), vs in acc.items()]


def _exp_s2_band(good: dict[str, list[Row]], f: float) -> list[tuple]:
    by_key: dict[str, list[Row]] = defaultdict(list)
    for r in good["s1"]:
        by_key[r.key].append(r)  # sorted by ts
    times = {k: [r.ts for r in rs] for k, rs in by_key.items()}
    out = []
    for a in good["s2"]:
        if a.ts > f:
            continue
        rs, ts = by_key.get(a.key, []), times.get(a.key, [])
        lo, hi = bisect.bisect_right(ts, a.ts - 300), bisect.bisect_right(ts, a.ts)
        band = rs[lo:hi]
        out.append((a.ts, a.key, a.pid, a.seq, len(band), float(sum(r.v for r in band))))
    return out


# ---------------------------------------------------------------- the command line
def print_report(r: dict[str, Any], out: Any = print) -> None:
    out("")
    out(f"kill storm: {r['kills']} of {r['kills_requested']} kills ({', '.join(f'{k} {v}' for k, v in sorted(r['kill_kinds'].items()))}) "
        f"in {r['storm_seconds']} s")
    out(f"partitions: {r['partitions_total']} ({r['partitions_good']} good, {r['partitions_bad']} bad)")
    out(f"rows expected {r['rows_expected']}, found {r['rows_found']}; lost {r['lost']}, duplicated {r['duplicated']}")
    for name, b in r["base"].items():
        out(f"  {name:8s} partitions {b['partitions']:4d} rows {b['rows_expected']:5d}/{b['rows_found']:5d} "
            f"lost {b['lost']} dup {b['duplicated']} foreign {b['foreign']} altered {b['altered']}")
    for name, dv in r["derived"].items():
        out(f"  {name:8s} freshness {dv['freshness']} rows {dv['rows_expected']}/{dv['rows_found']} "
            f"equal to its SQL: {dv['equal']}")
    out(f"bad partitions quarantined with a reason: {r['quarantined_with_reason']}/{r['partitions_bad']}"
        f" (unexpected quarantined: {len(r['quarantine_unexpected'])})")
    rs, kr = r["ready_seconds"], r["kill_to_ready_seconds"]
    out(f"recovery (restart → /readyz 200): median {rs['median']} s, max {rs['max']} s over {rs['n']} restarts")
    out(f"kill → ready again: median {kr['median']} s, max {kr['max']} s")
    out(f"caught up: {r['caught_up']}; final exit code {r['final_exit_code']}")
    if not r.get("completed", True):
        out(f"stopped early by --max-minutes after {r['kills']} kills")
    out("PASSED" if r["passed"] else "FAILED:\n  " + "\n  ".join(r["problems"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--workdir", type=Path, help="default: a new temporary directory (kept)")
    ap.add_argument("--json", type=Path, help="write the full report here")
    ap.add_argument("--max-minutes", type=float, help="stop killing after this long (then catch up and audit)")
    ap.add_argument("--audit", type=Path, metavar="WORKDIR", help="only audit a storm's work directory again")
    args = ap.parse_args(argv)
    if args.audit:
        report = audit(args.audit, Producer.load(args.audit / "produced.json"))
        print(json.dumps({k: v for k, v in report.items()}, indent=1, default=str))
        return 0 if report["passed"] else 1
    if args.workdir is None:
        import tempfile

        args.workdir = Path(tempfile.mkdtemp(prefix="freshet-chaos-"))
    print(f"work directory: {args.workdir}  (load average {os.getloadavg()[0]:.2f})", flush=True)
    report = storm(args.workdir, args.kills, args.seed, out=lambda s: print(s, flush=True),
                   max_minutes=args.max_minutes)
    report["load_average_end"] = os.getloadavg()
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    code = main()
    # delta-rs (the audit) can abort the interpreter at exit, its threads outliving it
    # ("terminate called without an active exception": delta-io/delta-rs#2184): flush and leave
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
