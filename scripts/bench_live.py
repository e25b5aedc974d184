#!/usr/bin/env python3
"""The live benchmark (issue 11): one arrival trace into Freshet and into what a Spark user would
run instead, staleness measured from the Delta logs.

    .venv/bin/python scripts/bench_live.py [--quick] [--json OUT] [--out DIR] [--only a,b] [--seed S]

One seeded trace (`scripts/live/trace.py`, saved as `<out>/trace.json`) over the benchmark
warehouse (`scripts/live/spec.py`: 12 streams, periods 10 s – 5 min, priorities 1 – 100, a
windowed roll-up, a two-source join and a second roll-up) is replayed in real time, once per
contestant, one contestant after the other, each with its own landing zone and warehouse under
`<out>/<contestant>/`. Same Spark settings for all (local[2], shuffle partitions 2, Freshet's
session defaults), 4 concurrent Spark jobs where the contestant lets one choose:

- `freshet`               — `freshet run` with its default policy, 4 tracks;
- `freshet-fifo`          — the same with `policy: fifo`, `partitioner: global` (an ablation);
- `structured-streaming`  — one streaming query per table in one Spark application (live/streaming.py);
- `cron`                  — every shortest period, refresh every table with new source data, in
                            config order, 4 workers, Freshet's own append code (live/cron.py);
- `declarative-pipelines` — the warehouse as a Spark Declarative Pipeline run by `spark-pipelines`
                            against a Spark Connect server with Delta (live/pipelines.py).

Measured (`scripts/live/measure.py`): from the Delta logs with delta-rs, every table's staleness
over the window [warm-up, duration] of the trace (seconds from each contestant's own start), its integral
weighted by priority, the maximum, the time within target; CPU-seconds and peak RSS of each
contestant's process tree. Writes one JSON object (`--json`, layout fixed by issue 11; windows are
seconds from each contestant's `start`), and two PNGs beside it. Prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from scripts.live import contestants, measure, spec  # noqa: E402
from scripts.live.trace import Trace, generate, replay, stage  # noqa: E402
from sim.progress import ProgressReporter  # noqa: E402

CONTESTANTS = ("freshet", "freshet-fifo", "freshet-edfp", "structured-streaming", "structured-streaming-tuned",
               "cron", "priority-cron", "declarative-pipelines")
PEERS = ("structured-streaming", "structured-streaming-tuned", "cron", "priority-cron", "declarative-pipelines")


@dataclass(frozen=True, slots=True)
class Shape:
    """The trace's phases (seconds): a warm-up (replayed, not measured: every contestant's first
    Spark jobs pay the JVM's class loading and JIT), before the burst, the burst, the recovery."""

    warmup: float
    before: float
    burst: float
    after: float
    factor: float  # rows × factor on the bursting streams during the burst

    @property
    def duration(self) -> float:
        return self.warmup + self.before + self.burst + self.after

    @property
    def burst_window(self) -> tuple[float, float]:
        b0 = self.warmup + self.before
        return (b0, b0 + self.burst)


# The burst: the nine bursting streams (50 rows/s each) send 8,000× their rows, 3.6 M rows/s in all,
# about twice what Spark local[2] appends here on a quiet machine (~1.5-2 M rows/s at best, one
# job alone): a real overload, whoever schedules. (×400, the first setting, was absorbed by a quiet
# machine: every contestant kept up, and the figures measured only each one's latency.)
QUICK = Shape(warmup=60.0, before=20.0, burst=60.0, after=50.0, factor=8000.0)
FULL = Shape(warmup=60.0, before=60.0, burst=90.0, after=210.0, factor=8000.0)
STAGE_RATE = 4e6  # rows/s `stage` writes here (6.5 M measured; conservative): how far ahead t0 is set


# ---------------------------------------------------------------- contestants
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(name: str, d: Path) -> tuple[Path, str | None]:
    """Write `<d>/freshet.yaml` for `name`; returns it and the daemon's listen address (Freshet only)."""
    listen = f"127.0.0.1:{_free_port()}" if name.startswith("freshet") else "127.0.0.1:9"
    variant = contestants.FRESHET.get(name, contestants.FRESHET["freshet"])
    cfg = spec.freshet_config(str(d / "warehouse"), str(d / "landing"), **variant,
                              listen=listen, trace=str(d / "freshet.trace") if name.startswith("freshet") else None)
    path = d / "freshet.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path, listen if name.startswith("freshet") else None


def _command(name: str, cfg: Path, d: Path) -> list[str]:
    py = sys.executable
    if name.startswith("freshet"):
        return [py, "-m", "ops.cli", "run", "--config", str(cfg), "--log-format", "json", "--grace", "20"]
    module = contestants.PEER_MODULES[name]
    return [py, "-m", f"scripts.live.{module}", "--config", str(cfg), "--ready", str(d / "ready"),
            "--work", str(d / "work")]


def _ready(name: str, d: Path, listen: str | None) -> bool:
    if listen is not None:
        try:
            with urllib.request.urlopen(f"http://{listen}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    return (d / "ready").exists()


def _stop(proc: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM to the contestant's process group, SIGKILL after `grace`; then SIGKILL whatever of
    its process tree is left (a Spark JVM, or a Connect server in a session of its own)."""
    import psutil

    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for p in tree:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(tree, timeout=10)


def run_contestant(name: str, trace: Trace, out: Path, *, ready_timeout: float = 300.0) -> dict[str, Any]:
    """Start `name`, wait until it is ready, replay the trace into its landing zone in real time,
    stop it, and return what was run (the figures come from `evaluate`)."""
    d = (out / name).resolve()
    if d.exists():
        shutil.rmtree(d)
    (d / "landing").mkdir(parents=True)
    (d / "warehouse").mkdir()
    cfg, listen = _config(name, d)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    log = open(d / "contestant.log", "wb")  # noqa: SIM115 — closed below
    began = time.time()
    proc = subprocess.Popen(_command(name, cfg, d), cwd=d, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    monitor = measure.ProcessMonitor(proc.pid)
    info: dict[str, Any] = {"name": name, "root": str(d / "warehouse"), "status": "ok", "error": None}
    try:
        while not _ready(name, d, listen):
            if proc.poll() is not None:
                raise RuntimeError(f"exited with status {proc.returncode} before it was ready")
            if time.time() - began > ready_timeout:
                raise RuntimeError(f"not ready after {ready_timeout:.0f} s")
            time.sleep(0.5)
        info["startup_seconds"] = round(time.time() - began, 1)
        # whole seconds: event times are exact in µs; every partition is written ahead (`stage`)
        t0 = float(int(time.time() + 5 + sum(p.rows for p in trace.parts) / STAGE_RATE))
        info["start"] = t0
        info["staging_seconds"] = round(stage(trace, d / "staging", t0), 1)
        if time.time() > t0:
            raise RuntimeError(f"staging the trace's partitions took {info['staging_seconds']} s, past t0")
        stop = threading.Event()
        result: dict[str, float] = {}
        producer = threading.Thread(target=lambda: result.update(replay(trace, d / "staging", d / "landing", t0,
                                                                        stop)),
                                    name="bench-producer", daemon=True)
        producer.start()
        progress = ProgressReporter(f"bench_live {name}", lines=False).start()  # a bar with an ETA on a terminal
        while time.time() < t0 + trace.duration + 1.0:
            progress.step(min(max(0, int(time.time() - t0)), int(trace.duration)), int(trace.duration),
                          "s of the trace replayed")
            if proc.poll() is not None:
                info["status"] = "failed"
                info["error"] = f"exited with status {proc.returncode} during the run (see {d / 'contestant.log'})"
                break
            time.sleep(0.5)
        progress.stop()
        stop.set()
        producer.join(60)
        info["producer"] = {k: round(v, 3) for k, v in result.items()}
    except RuntimeError as err:
        info.update(status="failed", error=f"{name}: {err} (see {d / 'contestant.log'})", start=time.time())
    finally:
        _stop(proc)
        monitor.stop()
        log.close()
    info["cpu_seconds"] = round(monitor.cpu_seconds, 1)
    info["peak_rss_bytes"] = monitor.peak_rss
    if info["status"] != "ok":
        tail = (d / "contestant.log").read_text(errors="replace").splitlines()[-15:]
        info["log_tail"] = tail
    return info


# ---------------------------------------------------------------- evaluation
def evaluate(info: dict[str, Any], trace: Trace, *, step: float = 1.0) -> tuple[dict[str, Any], dict[str, list]]:
    """Staleness of every table of one contestant from its Delta logs (measure.py); the JSON
    entry and the series for the plots."""
    prios, targets = spec.priorities(), spec.targets()
    t0 = info["start"]
    w, t1 = t0 + trace.warmup, t0 + trace.duration
    b0, b1 = trace.burst
    phases = {"before": (trace.warmup, b0), "burst": (b0, b1), "after": (b1, trace.duration)}
    figures: dict[str, measure.TableFigures] = {}
    by_phase: dict[str, dict[str, measure.TableFigures]] = {k: {} for k in phases}
    series, tables = {}, {}
    for table in prios:
        path = Path(info["root"]) / table
        log = measure.commits(path) if (path / "_delta_log").is_dir() else []
        # F before the first commit is t0: the warehouse is fresh when the replay starts
        f = measure.staleness(log, w, t1, targets[table], f0=t0, step=step)
        figures[table] = f
        for k, (lo, hi) in phases.items():
            by_phase[k][table] = measure.staleness(log, t0 + lo, t0 + hi, targets[table], f0=t0, step=step)
        series[table] = [(x + trace.warmup, y) for x, y in f.series]
        tables[table] = {"priority": prios[table], "mean_staleness": round(f.area / (t1 - w), 3),
                         "max_staleness": round(f.max_staleness, 2),
                         "time_within_target": round(f.within, 4), "target": targets[table],
                         "commits": len([c for c in log if c.max_event is not None])}
    phase_ws = {k: round(measure.weighted(by_phase[k], prios, t0 + lo, t0 + hi), 2) for k, (lo, hi) in phases.items()}
    entry = {**info, "weighted_staleness": round(measure.weighted(figures, prios, w, t1), 2),
             "burst_weighted_staleness": phase_ws["burst"], "phases": phase_ws, "tables": tables}
    return entry, series


def bound(trace: Trace) -> dict[str, Any]:
    """The staleness no scheduler avoids: every partition committed the instant it arrives, every
    derived window the instant its sources cover it (floored to its granularity); measured over
    the window like a contestant. A contestant's weighted staleness minus this is what its
    scheduling and its Spark jobs add."""
    from warehouse.freshness import floor_to, trailing_edge

    prios, targets = spec.priorities(), spec.targets()
    table_of = {s.name: s.table for s in spec.STREAMS}
    ends: dict[str, list[float]] = {s.table: [] for s in spec.STREAMS}
    for part in trace.parts:
        ends[table_of[part.stream]].append(part.end)
    logs = {t: [measure.Commit(version=i, time=e, max_event=e) for i, e in enumerate(sorted(v))]
            for t, v in ends.items()}
    instants = sorted({c.time for log in logs.values() for c in log})
    for d in spec.DERIVED:
        log, last = [], -math.inf
        for i, tau in enumerate(instants):
            edge = trailing_edge(max((c.max_event for c in logs[s] if c.time <= tau), default=None)
                                 for s in d.sources)
            if edge is None:
                continue
            f = floor_to(edge, d.granularity) if d.granularity else edge
            if f > last:
                log.append(measure.Commit(version=i, time=tau, max_event=f))
                last = f
        logs[d.name] = log
    w, t1 = trace.warmup, trace.duration
    figures = {t: measure.staleness(logs[t], w, t1, targets[t], f0=0.0) for t in prios}
    return {"weighted_staleness": round(measure.weighted(figures, prios, w, t1), 2),
            "mean_staleness": {t: round(f.area / (t1 - w), 2) for t, f in figures.items()}}


def twin(entry: dict[str, Any], trace: Trace, out: Path) -> dict[str, Any]:
    """The digital twin (issue 11): the `freshet` run's own trace (arrivals and measured job
    durations, written by the daemon) replayed by the simulator (`freshet sim run --trace`, here
    in-process so that it stops at the same instant), its predicted weighted staleness beside the
    one measured from the Delta logs, both over the whole replay [t0, t0 + duration]; and the same
    replay with one track per table (`ideal_config`: no job ever waits for a track) at the same
    measured durations — what no order of these jobs could beat on this machine."""
    from sim.simulator import ideal_config, simulate
    from sim.trace import read_trace
    from warehouse.config import load_config

    d = out / entry["name"]
    t0 = entry["start"]
    try:
        config, replayed = load_config(d / "freshet.yaml"), read_trace(d / "freshet.trace")
        res = simulate(config, trace=replayed, until=t0 + trace.duration).to_json()
        alone = simulate(ideal_config(config), trace=replayed, until=t0 + trace.duration).to_json()
    except Exception as err:  # noqa: BLE001 — reported in the JSON, the benchmark goes on
        return {"error": f"{type(err).__name__}: {err}"}
    prios, targets = spec.priorities(), spec.targets()
    figs = {}
    for table in prios:
        path = Path(entry["root"]) / table
        log = measure.commits(path) if (path / "_delta_log").is_dir() else []
        figs[table] = measure.staleness(log, t0, t0 + trace.duration, targets[table])
    measured = measure.weighted(figs, prios, t0, t0 + trace.duration)
    predicted = float(res["average_weighted_staleness"])
    return {"predicted_weighted_staleness": round(predicted, 2), "measured_weighted_staleness": round(measured, 2),
            "predicted_one_track_per_table": round(float(alone["average_weighted_staleness"]), 2),
            "error": None, "relative_error": round(predicted / measured - 1.0, 4) if measured else None,
            "sim_horizon_seconds": res.get("horizon"), "measured_window_seconds": trace.duration,
            "per_table": {t: {"predicted_mean_staleness": round(v["staleness"], 2),
                              "measured_mean_staleness": round(figs[t].area / trace.duration, 2)}
                          for t, v in res.get("per_table", {}).items() if t in figs and v.get("staleness") is not None}}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def plot(result: dict[str, Any], series: dict[str, dict[str, list]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prios = result["priorities"]
    top = max(prios, key=lambda t: prios[t])
    b0, b1 = result["burst"]
    files = []
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for c in result["contestants"]:
        s = series.get(c["name"], {}).get(top)
        if s:
            ax.plot([x for x, _ in s], [y for _, y in s], label=c["name"], lw=1.2)
    ax.axvspan(b0, b1, color="grey", alpha=0.2, label="burst")
    ax.set_xlabel("seconds since the trace started")
    ax.set_ylabel(f"staleness of {top} (p={prios[top]:g}), s")
    ax.set_title("Staleness of the highest-priority table, from the Delta logs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = out.with_name(out.stem + "-top.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(str(p))
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [c["name"] for c in result["contestants"]]
    whole = [c.get("weighted_staleness") or 0 for c in result["contestants"]]
    burst = [c.get("burst_weighted_staleness") or 0 for c in result["contestants"]]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], whole, width=0.4, label=f"window [{result['window'][0]:g}, {result['window'][1]:g}] s")
    ax.bar([x + 0.2 for x in xs], burst, width=0.4, label=f"burst [{b0:g}, {b1:g}] s")
    ax.set_xticks(list(xs), names, rotation=15, fontsize=8)
    ax.set_ylabel("average Σ p·S  (priority-seconds)")
    ax.set_title("Priority-weighted staleness per contestant (lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = out.with_name(out.stem + "-weighted.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(str(p))
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"a {QUICK.duration:.0f} s trace per contestant "
                                                         f"(all five within 25 minutes)")
    ap.add_argument("--json", help="write the result here (default <out>/bench_live.json)")
    ap.add_argument("--out", default="out/bench_live", help="contestants' landing zones and warehouses")
    ap.add_argument("--only", help="comma-separated contestants (default: all five; \"\" with --reuse: "
                                   "measure the earlier run again)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--trace", help="replay this saved trace instead of generating one")
    ap.add_argument("--shape", help="warmup,before,burst,after,factor (seconds ×4, row factor)")
    ap.add_argument("--reuse", metavar="JSON",
                    help="a previous run over the same trace: its contestants left out of --only are "
                         "measured again from their kept Delta tables (rerun Freshet alone after a change)")
    ap.add_argument("--keep-landing", action="store_true",
                    help="keep each contestant's landing zone (the burst's files: gigabytes) after the run")
    args = ap.parse_args(argv)
    shape = QUICK if args.quick else FULL
    if args.shape:
        shape = Shape(*(float(x) for x in args.shape.split(",")))
    names = [n for n in args.only.split(",") if n] if args.only is not None else list(CONTESTANTS)
    unknown = [n for n in names if n not in CONTESTANTS]
    if unknown:
        ap.error(f"unknown contestant(s) {', '.join(unknown)}; known: {', '.join(CONTESTANTS)}")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.trace:
        trace = Trace.load(args.trace)
    else:
        trace = generate(args.seed, shape.duration, shape.burst_window, shape.factor, shape.warmup)
    reused: dict[str, dict[str, Any]] = {}
    if args.reuse:
        prev = json.loads(Path(args.reuse).read_text())
        if Trace.load(prev["trace"]).parts != trace.parts:
            ap.error(f"--reuse: {args.reuse} replayed another trace ({prev['trace']}); pass it as --trace")
        reused = {c["name"]: {**c, "reused_from": str(Path(args.reuse).resolve())}
                  for c in prev["contestants"] if c["name"] not in names}
    if not names and not reused:
        ap.error("nothing to run: --only names no contestant and there is no --reuse")
    trace.save(out / "trace.json")
    json_out = Path(args.json).resolve() if args.json else out / "bench_live.json"
    result: dict[str, Any] = {
        "window": [trace.warmup, trace.duration], "time_column": "ts", "priorities": spec.priorities(),
        "burst": list(trace.burst), "burst_factor": trace.burst_factor, "seed": trace.seed,
        "trace": str(out / "trace.json"), "targets": spec.targets(),
        "rows_offered": {"warmup": trace.rows_offered(0, trace.warmup),
                         "before": trace.rows_offered(trace.warmup, trace.burst[0]),
                         "burst": trace.rows_offered(*trace.burst),
                         "after": trace.rows_offered(trace.burst[1], trace.duration)},
        "spark": {"master": "local[2]", **spec.SPARK_CONF}, "concurrent_jobs": 4,
        "bound": bound(trace), "contestants": [],
    }
    series: dict[str, dict[str, list]] = {}
    for name in [n for n in CONTESTANTS if n in names or n in reused]:
        if name in reused:  # run earlier on this trace: its Delta tables are measured again
            entry, series[name] = evaluate(reused[name], trace)
            result["contestants"].append(entry)
            print(f"bench_live: {name}: from {reused[name]['reused_from']}", flush=True)
            continue
        print(f"bench_live: {name}: running ({trace.duration:.0f} s trace; load {_load()})", flush=True)
        load0 = _load()
        info = run_contestant(name, trace, out)
        info["load_average"] = {"before": load0, "after": _load()}
        entry, s = evaluate(info, trace)
        if not args.keep_landing:  # gigabytes of burst files, measured already: the Delta tables stay
            for sub in ("landing", "staging"):
                shutil.rmtree(out / name / sub, ignore_errors=True)
        if name == "freshet" and entry["status"] == "ok":
            entry["twin"] = twin(entry, trace, out)
        series[name] = s
        result["contestants"].append(entry)
        print(f"bench_live: {name}: {entry['status']} weighted staleness {entry['weighted_staleness']:.1f}, "
              f"burst {entry['burst_weighted_staleness']:.1f}, cpu {entry['cpu_seconds']} s, "
              f"rss {entry['peak_rss_bytes'] / 2**20:.0f} MiB" + (f" — {entry['error']}" if entry["error"] else ""),
              flush=True)
        json_out.write_text(json.dumps(result, indent=1))
    fr = next((c for c in result["contestants"] if c["name"] == "freshet"), None)
    if fr is not None:
        result["ratios"] = {
            c["name"]: {"whole": round(fr["weighted_staleness"] / c["weighted_staleness"], 3)
                        if c["weighted_staleness"] else None,
                        "burst": round(fr["burst_weighted_staleness"] / c["burst_weighted_staleness"], 3)
                        if c["burst_weighted_staleness"] else None}
            for c in result["contestants"] if c["name"] != "freshet"}
    result["plots"] = plot(result, series, json_out)
    json_out.write_text(json.dumps(result, indent=1))
    print(f"{'contestant':24} {'status':7} {'Σp·S (window)':>14} {'Σp·S (burst)':>13} {'max S top':>10} "
          f"{'cpu s':>7} {'rss MiB':>8}")
    top = max(result["priorities"], key=lambda t: result["priorities"][t])
    for c in result["contestants"]:
        print(f"{c['name']:24} {c['status']:7} {c['weighted_staleness']:14.1f} {c['burst_weighted_staleness']:13.1f} "
              f"{c['tables'][top]['max_staleness']:10.1f} {c['cpu_seconds']:7.1f} {c['peak_rss_bytes'] / 2**20:8.0f}")
    print(f"{'zero-latency bound':24} {'':7} {result['bound']['weighted_staleness']:14.1f}")
    for n, r in result.get("ratios", {}).items():
        print(f"freshet / {n}: window {r['whole']}, burst {r['burst']}")
    print(f"wrote {json_out} and {', '.join(result['plots'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
