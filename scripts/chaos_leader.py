#!/usr/bin/env python3
"""Leader kill storm: two real daemons (`freshet run`, one `--standby`) on one `s3a://` warehouse
on a loopback S3 API (moto's server, tests/helpers_s3.py), a producer landing a one-minute
partition of stream `m` every `--every` seconds. K times (`--kills`, default 20): wait until the
leader (the daemon the lease object names) has committed a load of its own and runs a job, SIGKILL
it — only it, as a crash would: its Spark JVM exits on its own when its stdin closes — and time the
standby's takeover (the lease object naming the standby) and its start (`/readyz` 200); then
restart the killed one as the new standby. After the last kill the producer stops, the leader
catches up, both stop with SIGTERM.

Then delta-rs (`deltalake`, reading the bucket — not Freshet's code, not Spark) audits:

* `m_raw`: every produced row exactly once (0 lost, 0 doubled, nothing foreign);
* `m_5m` (a 5-minute roll-up of `m_raw`): each bucket once, equal to the roll-up computed here in
  plain Python up to the freshness its log records;
* each table's log: every Freshet commit names its writer (`userMetadata.leader`) and the leader
  epochs never decrease with the version (0 interleaved); one owner per epoch; and `m_raw`'s log
  holds K + 1 epochs (every leader committed: the storm exercised each takeover).

    python scripts/chaos_leader.py [--kills 20] [--seed 0] [--every 2] [--lease-timeout 10]
                                   [--workdir DIR] [--json out.json]

Exit status 0 when every kill was taken over and the audit passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.chaos import _group_alive, wait_until  # noqa: E402 — the process-group check and poll of the kill storm
from tests.helpers_s3 import CREDENTIALS, S3Server, start_s3, stop_s3  # noqa: E402

T0 = 1_764_000_000.0  # 2025-11-24T16:00:00Z, a multiple of 5 minutes
MINUTE = 60.0
ROWS = 4  # rows per partition
ROLLUP = 300.0  # m_5m's buckets
SCHEMA = {"ts": "timestamp", "k": "string", "v": "double", "id": "long"}
BUCKET_SQL = ("SELECT timestamp_seconds(CAST(ceil(unix_micros(ts) / 300000000.0) AS BIGINT) * 300) AS ts, k, "
              "count(*) AS n, round(sum(v), 6) AS v_sum FROM m_raw GROUP BY 1, 2")
LEASE_KEY = "wh/_freshet/lease"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_dict(work: Path, server: S3Server, lease_timeout: float) -> dict[str, Any]:
    return {
        "warehouse": {"root": f"s3a://{server.bucket}/wh", "landing": str(work / "landing"),
                      "s3": server.s3_settings(), "lease_timeout": lease_timeout},
        "streams": [{"name": "m", "period": "1m", "schema": SCHEMA}],
        "tables": [
            {"name": "m_raw", "stream": "m", "partition_by": "hour", "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "m_5m", "sources": ["m_raw"], "granularity": "5m", "sql": BUCKET_SQL,
             "cost": {"alpha": 1, "beta": 0.01}},
        ],
        "scheduler": {"tracks": 1, "retry_backoff": 1.0},
        "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
                                                 "spark.driver.memory": "1g"}},
    }


# ---------------------------------------------------------------- the producer
def rows_of(i: int) -> list[dict[str, Any]]:
    """Partition `i`'s rows: event times in its minute `(T0 + 60i, T0 + 60(i+1)]`, ids unique."""
    start = T0 + i * MINUTE
    rng = random.Random(f"m-{i}")
    out = []
    for j in range(ROWS):
        t = start + rng.randint(1, 60_000) / 1000.0
        out.append({"ts": t, "k": rng.choice(["r1", "r2", "r3"]), "v": round(rng.uniform(0, 100), 3),
                    "id": int(start) * 100 + j})
    return out


class Producer(threading.Thread):
    """Lands partition 0, 1, 2, … of stream `m`, one every `every` seconds, until stopped."""

    def __init__(self, landing: Path, every: float) -> None:
        super().__init__(name="producer", daemon=True)
        self.landing, self.every = landing, every
        self.produced = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        import pyarrow as pa

        from ops.demo import write_partition

        schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("k", pa.string()), ("v", pa.float64()),
                            ("id", pa.int64())])
        while not self.stop_flag.is_set():
            i = self.produced
            rows = rows_of(i)
            table = pa.table({"ts": [dt.datetime.fromtimestamp(r["ts"], dt.UTC) for r in rows],
                              "k": [r["k"] for r in rows], "v": [r["v"] for r in rows],
                              "id": [r["id"] for r in rows]}, schema=schema)
            write_partition(self.landing, "m", f"m-{i:05d}", T0 + i * MINUTE, T0 + (i + 1) * MINUTE, table)
            self.produced = i + 1
            self.stop_flag.wait(self.every)


# ---------------------------------------------------------------- the daemons
class Node:
    """One `freshet run` subprocess in a session of its own."""

    def __init__(self, name: str, work: Path, standby: bool) -> None:
        self.name = name
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log_path = work / f"{name}.log"
        env = {**os.environ, **CREDENTIALS, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        env.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m")  # a faster JVM start
        env.pop("FRESHET_API_TOKEN", None)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ops.cli", "run", "--config", str(work / "freshet.yaml"), "--log-format",
                 "json", "--poll", "0.3", "--listen", self.url.removeprefix("http://"),
                 *(["--standby"] if standby else [])],
                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def get(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, None
        except (OSError, ValueError):
            return 0, None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        return self.alive() and self.get("/readyz")[0] == 200

    def standing_by(self) -> bool:
        return self.alive() and self.get("/healthz")[0] == 200 and self.get("/readyz")[0] == 503

    def table(self, name: str) -> dict[str, Any]:
        status, body = self.get(f"/v1/tables/{name}")
        return body if status == 200 and isinstance(body, dict) else {}

    def crash(self) -> None:
        """SIGKILL the daemon alone (its JVM exits when its stdin closes)."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def reap(self, timeout: float = 30.0) -> None:
        """Wait for whatever is left of this daemon's session (its JVM); then SIGKILL it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _group_alive(self.proc.pid):
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(30)
        self.reap(15)
        return rc


def holder(server: S3Server) -> dict[str, Any]:
    """The lease object's record ({} when absent or unreadable)."""
    try:
        body = server.client().get_object(Bucket=server.bucket, Key=LEASE_KEY)["Body"].read()
        data = json.loads(body)
    except Exception:  # noqa: BLE001 — absent, or moto busy: asked again
        return {}
    return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------- the storm
def storm(work: Path, server: S3Server, kills: int, seed: int, every: float, lease_timeout: float,
          out: Any = print) -> dict[str, Any]:
    rng = random.Random(seed)
    (work / "freshet.yaml").write_text(yaml.safe_dump(config_dict(work, server, lease_timeout)))
    producer = Producer(work / "landing", every)
    producer.start()
    nodes = {"a": Node("a", work, standby=False)}
    failures: list[str] = []
    takeovers: list[float] = []
    readies: list[float] = []
    try:
        leader = nodes["a"]
        if not wait_until(leader.ready, 300, 0.5):
            raise SystemExit(f"daemon a not ready after 300 s: {leader.log_path.read_text()[-3000:]}")
        nodes["b"] = Node("b", work, standby=True)
        standby = nodes["b"]
        if not wait_until(standby.standing_by, 120, 0.3):
            raise SystemExit(f"daemon b not standing by: {standby.log_path.read_text()[-3000:]}")
        out(f"a leads (pid {leader.proc.pid}), b stands by (pid {standby.proc.pid})")
        for k in range(1, kills + 1):
            # the leader commits at least one job of its own, then a random instant within a running one
            before = leader.table("m_raw").get("freshness") or 0
            wait_until(lambda n=leader, f=before: (n.table("m_raw").get("freshness") or 0) > f, 120, 0.2)
            wait_until(lambda n=leader: any(n.table(t).get("state") == "running" for t in ("m_raw", "m_5m")), 30, 0.05)
            time.sleep(rng.uniform(0.0, 1.0))
            if not leader.alive():
                failures.append(f"kill {k}: the leader {leader.name} exited by itself "
                                f"(rc {leader.proc.returncode})")
            t_kill = time.monotonic()
            leader.crash()
            took = wait_until(lambda n=standby: holder(server).get("pid") == n.proc.pid, 120, 0.05)
            t_took = time.monotonic()
            if not took:
                failures.append(f"kill {k}: the standby did not take the lease over within 120 s")
                break
            takeovers.append(t_took - t_kill)
            if not wait_until(standby.ready, 300, 0.2):
                failures.append(f"kill {k}: the new leader was not ready within 300 s")
                break
            readies.append(time.monotonic() - t_kill)
            leader.reap()
            killed = leader.name
            name = f"{killed.rstrip('0123456789')}{k}"
            leader, standby = standby, Node(name, work, standby=True)
            nodes[name] = standby
            if not wait_until(standby.standing_by, 120, 0.3):
                failures.append(f"kill {k}: the restarted daemon {name} is not standing by")
                break
            out(f"kill {k}/{kills}: {killed} killed; {leader.name} took the lease over in {takeovers[-1]:.2f} s "
                f"(epoch {holder(server).get('epoch')}), ready in {readies[-1]:.1f} s; {name} stands by")
        producer.stop_flag.set()
        producer.join(10)
        end = T0 + producer.produced * MINUTE
        rolled = math.floor((end - T0) / ROLLUP) * ROLLUP + T0
        caught_up = wait_until(lambda: leader.table("m_raw").get("freshness") == end
                               and (leader.table("m_5m").get("freshness") or 0) >= rolled, 600, 0.5)
        if not caught_up:
            failures.append(f"the leader did not catch up with {producer.produced} partitions within 600 s")
    finally:
        producer.stop_flag.set()
        for node in sorted(nodes.values(), key=lambda n: n is leader):  # the standby first: no takeover
            if node.alive():
                rc = node.stop()
                if rc != 0:
                    failures.append(f"daemon {node.name} exited {rc} on SIGTERM")
            else:
                node.reap(5)
    return {"kills": len(takeovers), "produced": producer.produced, "takeover_s": _summary(takeovers),
            "ready_s": _summary(readies), "failures": failures}


def _summary(xs: list[float]) -> dict[str, float | None]:
    return {"p50": round(statistics.median(xs), 3) if xs else None, "max": round(max(xs), 3) if xs else None,
            "n": len(xs)}


# ---------------------------------------------------------------- the audit (delta-rs)
def audit(server: S3Server, produced: int) -> dict[str, Any]:
    from deltalake import DeltaTable

    opts = server.storage_options()

    def table(name: str) -> DeltaTable:
        return DeltaTable(f"s3://{server.bucket}/wh/{name}", storage_options=opts)

    expected = {r["id"]: r for i in range(produced) for r in rows_of(i)}
    base = table("m_raw").to_pyarrow_table().to_pylist()
    counts = Counter(r["id"] for r in base)
    report: dict[str, Any] = {
        "rows": len(base), "expected_rows": len(expected),
        "lost": len(set(expected) - set(counts)), "doubled": sum(1 for n in counts.values() if n > 1),
        "foreign": len(set(counts) - set(expected))}
    logs: dict[str, Any] = {}
    for name in ("m_raw", "m_5m"):
        history = sorted(table(name).history(), key=lambda h: h["version"])
        freshet = [(h["version"], json.loads(h["userMetadata"])) for h in history if h.get("userMetadata")]
        freshet = [(v, m) for v, m in freshet if m.get("freshet")]
        leaders = [(v, m.get("leader")) for v, m in freshet]
        epochs = [x["epoch"] for _, x in leaders if x]
        owners: dict[int, set[str]] = defaultdict(set)
        for _, x in leaders:
            if x:
                owners[x["epoch"]].add(x["id"])
        logs[name] = {"commits": len(freshet), "unsigned": sum(1 for _, x in leaders if not x),
                      "interleaved": sum(1 for a, b in zip(epochs, epochs[1:], strict=False) if b < a),
                      "epochs": sorted(set(epochs)),
                      "owners_shared_epoch": sum(1 for ids in owners.values() if len(ids) > 1),
                      "freshness": max((m["freshness"] for _, m in freshet), default=None)}
    report["logs"] = logs
    # m_5m: each bucket once, equal to the roll-up of the produced rows up to its freshness
    f5 = logs["m_5m"]["freshness"]
    want: dict[tuple[float, str], tuple[int, float]] = {}
    if f5 is not None:
        sums: dict[tuple[float, str], list[float]] = defaultdict(list)
        for r in expected.values():
            if r["ts"] <= f5:
                sums[(math.ceil(r["ts"] / ROLLUP) * ROLLUP, r["k"])].append(r["v"])
        want = {key: (len(vs), round(sum(vs), 6)) for key, vs in sums.items()}
    got_rows = table("m_5m").to_pyarrow_table().to_pylist() if f5 is not None else []
    got = Counter((r["ts"].timestamp(), r["k"]) for r in got_rows)
    values = {(r["ts"].timestamp(), r["k"]): (r["n"], round(r["v_sum"], 6)) for r in got_rows}
    report["rollup"] = {"buckets": len(got_rows), "expected": len(want),
                        "doubled": sum(1 for n in got.values() if n > 1),
                        "wrong": sum(1 for key, v in want.items() if values.get(key) != v)
                        + sum(1 for key in values if key not in want)}
    return report


def passed(storm_result: dict[str, Any], report: dict[str, Any]) -> bool:
    logs = report["logs"].values()
    return (not storm_result["failures"] and report["lost"] == report["doubled"] == report["foreign"] == 0
            and len(report["logs"]["m_raw"]["epochs"]) == storm_result["kills"] + 1
            and all(x["interleaved"] == x["unsigned"] == x["owners_shared_epoch"] == 0 for x in logs)
            and report["rollup"]["doubled"] == report["rollup"]["wrong"] == 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20, help="leader SIGKILLs (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=float, default=2.0, help="seconds between two partitions landed (default 2)")
    ap.add_argument("--lease-timeout", type=float, default=10.0, help="warehouse.lease_timeout, seconds (default 10)")
    ap.add_argument("--workdir", help="keep the daemons' logs and the landing zone here (default: a temp dir)")
    ap.add_argument("--json", help="write the result here")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    load = os.getloadavg()
    with contextlib.ExitStack() as stack:
        work = Path(a.workdir) if a.workdir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        work.mkdir(parents=True, exist_ok=True)
        server = start_s3(work / "moto.log")
        stack.callback(stop_s3, server)
        result = storm(work, server, a.kills, a.seed, a.every, a.lease_timeout)
        report = audit(server, result["produced"])
    ok = passed(result, report)
    result |= {"audit": report, "passed": ok, "seconds": round(time.monotonic() - t0, 1),
               "load_before": [round(x, 2) for x in load], "load_after": [round(x, 2) for x in os.getloadavg()]}
    t, r = result["takeover_s"], result["ready_s"]
    print(f"{result['kills']} leader kills, {result['produced']} partitions produced")
    print(f"takeover (SIGKILL → the standby holds the lease): p50 {t['p50']} s, max {t['max']} s; "
          f"ready (→ /readyz 200): p50 {r['p50']} s, max {r['max']} s")
    print(f"m_raw: {report['rows']} rows of {report['expected_rows']}: {report['lost']} lost, "
          f"{report['doubled']} doubled, {report['foreign']} foreign; m_5m: {report['rollup']['buckets']} buckets "
          f"of {report['rollup']['expected']}, {report['rollup']['doubled']} doubled, {report['rollup']['wrong']} wrong")
    for name, x in report["logs"].items():
        print(f"{name} log: {x['commits']} Freshet commits, epochs {x['epochs']}, {x['interleaved']} interleaved, "
              f"{x['unsigned']} without a leader, {x['owners_shared_epoch']} epochs with two owners")
    for f in result["failures"]:
        print(f"FAILURE: {f}")
    print(f"{'PASSED' if ok else 'FAILED'} in {result['seconds']} s (load average {result['load_before']} → "
          f"{result['load_after']})")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
