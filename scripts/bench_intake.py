#!/usr/bin/env python3
"""HTTP intake throughput and `/healthz` latency under load ("Speed"; defect 7).

Starts the real API app (`ops.api.create_app` served by uvicorn, as the daemon does) over a real
`Intake` on a temporary landing zone — no Spark — on loopback. The data files of `--manifests`
small partitions (`--rows` rows of tiny parquet each, disjoint one-minute windows, 4 streams) are
written first; then `--clients` client processes (httpx, keep-alive) POST their manifests as fast
as the server answers, while one more process samples `GET /healthz` every `--probe-every`
seconds. Each POST is validated in full (pyarrow reads, fingerprint) and its `_partition.json`
written, exactly like a producer's.

Prints accepted manifests/s (202s over the wall time from the first POST to the last answer) and
the `/healthz` latency (median, p99, max) sampled during the run. Targets: ≥ 500 manifests/s,
`/healthz` p99 < 50 ms.

    .venv/bin/python scripts/bench_intake.py [--manifests 4000] [--clients 4] [--rows 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STREAMS = 4
PERIOD = 60.0
SCHEMA = {"ts": "timestamp", "router": "string", "value": "double"}


def config_dict(base: Path) -> dict[str, Any]:
    return {
        "warehouse": {"root": str(base / "data"), "landing": str(base / "landing")},
        "streams": [{"name": f"s{i}", "period": PERIOD, "schema": SCHEMA} for i in range(STREAMS)],
        "tables": [{"name": f"t{i}", "stream": f"s{i}"} for i in range(STREAMS)],
    }


def stage(config: Any, n: int, rows: int) -> list[tuple[str, dict[str, Any]]]:
    """Write the files of `n` partitions (no manifest: they are POSTed); (stream, manifest) each."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    from warehouse.times import iso

    t0 = (time.time() // 3600 - 24 * 7) * 3600  # a week ago: nothing is future-dated
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("router", pa.string()), ("value", pa.float64())])
    landing = Path(config.warehouse.landing)
    out = []
    for i in range(n):
        stream, k = f"s{i % STREAMS}", i // STREAMS
        start, end = t0 + k * PERIOD, t0 + (k + 1) * PERIOD
        ts = [dt.datetime.fromtimestamp(start + (j + 1) * PERIOD / (rows + 1), dt.UTC) for j in range(rows)]
        table = pa.table({"ts": ts, "router": [f"r{j % 7}" for j in range(rows)],
                          "value": [float(j) for j in range(rows)]}, schema=schema)
        pid = f"p{k:06d}"
        d = landing / stream / pid
        d.mkdir(parents=True)
        pq.write_table(table, d / "part-0.parquet", coerce_timestamps="us")
        out.append((stream, {"id": pid, "start": iso(start), "end": iso(end), "files": ["part-0.parquet"],
                             "rows": rows}))
    return out


class Backend:
    """The daemon's part the API needs: the real Intake; arrivals are queued as the daemon does."""

    def __init__(self, config: Any) -> None:
        from warehouse.landing.intake import Intake

        self.config = config
        self.intake = Intake(config)
        self.events: queue.Queue[Any] = queue.Queue()

    def snapshot(self) -> None:
        return None

    def ready(self) -> tuple[bool, str]:
        return True, ""

    def streams(self) -> list[str]:
        return [s.name for s in self.config.streams]

    def submit_partition(self, stream: str, manifest: Any) -> Any:
        sub = self.intake.submit(stream, manifest)
        if sub.arrived is not None:
            self.events.put(sub.arrived)
        return sub


def client(url: str, work: list[tuple[str, dict[str, Any]]], start: Any, out: Any) -> None:
    import httpx

    statuses: dict[int, int] = {}
    with httpx.Client(base_url=url, timeout=30) as c:
        c.get("/healthz")  # connect before the clock starts
        start.wait()
        t0, cpu0 = time.perf_counter(), time.process_time()
        for stream, manifest in work:
            r = c.post(f"/v1/streams/{stream}/partitions", json=manifest)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        out.put({"began": t0, "ended": time.perf_counter(), "statuses": statuses, "cpu": time.process_time() - cpu0})


def probe(url: str, every: float, start: Any, stop: Any, out: Any) -> None:
    import httpx

    lat: list[float] = []
    with httpx.Client(base_url=url, timeout=30) as c:
        c.get("/healthz")
        start.wait()
        while not stop.is_set():
            t = time.perf_counter()
            r = c.get("/healthz")
            lat.append(time.perf_counter() - t)
            assert r.status_code == 200
            time.sleep(every)
    out.put(lat)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def wait_for_clients(results: Any, clients: int, backend: Any, manifests: int, timeout: float) -> list[dict]:
    """Each client's report; meanwhile a bar of the manifests accepted so far, on a terminal only."""
    from sim.progress import ProgressReporter

    done: list[dict] = []
    deadline = time.monotonic() + timeout
    with ProgressReporter("bench_intake manifests", lines=False) as progress:
        while len(done) < clients:
            try:
                done.append(results.get(timeout=0.5))
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise
            progress.step(backend.events.qsize(), manifests, "accepted")
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifests", type=int, default=4000, help="partitions to POST (default 4000)")
    ap.add_argument("--clients", type=int, default=4, help="concurrent client processes (default 4)")
    ap.add_argument("--rows", type=int, default=10, help="rows per partition (default 10)")
    ap.add_argument("--probe-every", type=float, default=0.01, help="seconds between /healthz probes")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    from prometheus_client import CollectorRegistry

    from ops.api import ApiServer, create_app
    from warehouse.config import parse_config

    base = Path(tempfile.mkdtemp(prefix="freshet-bench-intake-"))
    try:
        config = parse_config(config_dict(base))
        work = stage(config, args.manifests, args.rows)
        backend = Backend(config)
        app = create_app(backend, CollectorRegistry(), token=None, open_without_token=True)
        server = ApiServer(app, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.start()}"
        ctx = mp.get_context("spawn")  # the server's threads stay in this process
        start, stop, results, probes = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
        procs = [ctx.Process(target=client, args=(url, work[i::args.clients], start, results))
                 for i in range(args.clients)]
        prober = ctx.Process(target=probe, args=(url, args.probe_every, start, stop, probes))
        for p in [*procs, prober]:
            p.start()
        time.sleep(1.0)  # let the clients import and connect
        print(f"staged {len(work)} partitions; posting", file=sys.stderr, flush=True)
        cpu0 = time.process_time()
        start.set()
        done = wait_for_clients(results, len(procs), backend, args.manifests, timeout=600)
        cpu = time.process_time() - cpu0  # this process: the server (the clients run in their own)
        stop.set()
        lat = probes.get(timeout=60)
        for p in [*procs, prober]:
            p.join(30)
        server.stop()
        wall = max(d["ended"] for d in done) - min(d["began"] for d in done)
        statuses: dict[str, int] = {}
        for d in done:
            for k, v in d["statuses"].items():
                statuses[str(k)] = statuses.get(str(k), 0) + v
        accepted = statuses.get("202", 0)
        assert backend.events.qsize() == accepted, (backend.events.qsize(), accepted)
        report = {
            "manifests": args.manifests, "clients": args.clients, "rows": args.rows, "statuses": statuses,
            "seconds": round(wall, 3), "accepted_per_second": round(accepted / wall, 1),
            "healthz_samples": len(lat), "healthz_median_ms": round(statistics.median(lat) * 1e3, 2),
            "healthz_p99_ms": round(pct(lat, 0.99) * 1e3, 2), "healthz_max_ms": round(max(lat) * 1e3, 2),
            "server_cpu_ms_per_manifest": round(cpu / max(1, args.manifests) * 1e3, 3),
            "clients_cpu_ms_per_manifest": round(sum(d["cpu"] for d in done) / max(1, args.manifests) * 1e3, 3),
            # the share of the machine's CPUs the server and clients got during the run (the rest
            # went to other processes), and what the same CPU time would give with the CPUs to itself
            "cpu_share": round((cpu + sum(d["cpu"] for d in done)) / (wall * (os.cpu_count() or 1)), 2),
            "per_second_if_cpus_were_free": round(accepted / (cpu + sum(d["cpu"] for d in done))
                                                   * (os.cpu_count() or 1), 1),
            "http_protocol": server._config.http_protocol_class.__name__,
            "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{accepted} of {args.manifests} manifests accepted in {report['seconds']} s from {args.clients} "
              f"clients: {report['accepted_per_second']} manifests/s (target ≥ 500); statuses {statuses}")
        print(f"/healthz during the run ({len(lat)} samples): median {report['healthz_median_ms']} ms, "
              f"p99 {report['healthz_p99_ms']} ms (target < 50), max {report['healthz_max_ms']} ms")
        print(f"server ({report['http_protocol']}) CPU {report['server_cpu_ms_per_manifest']} ms per manifest, "
              f"clients {report['clients_cpu_ms_per_manifest']} ms; {report['cpus']} CPUs, load average "
              f"{report['load_average'][0]}: the run got {report['cpu_share']:.0%} of the CPUs "
              f"(≈ {report['per_second_if_cpus_were_free']} manifests/s with them to itself)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
