#!/usr/bin/env python3
"""The live benchmark: one arrival trace into Freshet and into what a Spark user would
run instead, staleness measured from the Delta logs.

    .venv/bin/python scripts/bench_live.py [--quick] [--json OUT] [--out DIR] [--only a,b] [--seed S] [--seeds N]

One seeded trace (`scripts/live/trace.py`, saved as `<out>/trace.json`) over the benchmark
warehouse (`scripts/live/spec.py`: 12 streams, periods 10 s – 5 min, priorities 1 – 100, a
windowed roll-up, a two-source join and a second roll-up) is replayed in real time, once per
contestant, one contestant after the other, each with its own landing zone and warehouse under
`<out>/<contestant>/`. Same Spark settings for all (local[2], shuffle partitions 2, Freshet's
session defaults), 4 concurrent Spark jobs where the contestant lets one choose:

- `freshet`               — `freshet run` with its default policy, 4 tracks;
- `freshet-fifo`          — the same with `policy: fifo`, `partitioner: global` (an ablation);
- `freshet-edfp`          — the same with `policy: edf-p` (static priorities; an ablation);
- `structured-streaming`  — one streaming query per table in one Spark application (live/streaming.py);
- `structured-streaming-tuned` — the same with pools by priority, per-query triggers, a bulk pool
                            (live/streaming_tuned.py);
- `structured-streaming-grouped` — the tuned peer restructured for many tables: two base-table
                            queries (valuable, bulk) writing each stream's table in `foreachBatch`,
                            one query per derived table (live/streaming_grouped.py);
- `cron`                  — every shortest period, refresh every table with new source data, in
                            config order, 4 workers, Freshet's own append code (live/cron.py);
- `priority-cron`         — a 1 s tick, tables by inherited priority, valuable and bulk pools
                            (live/priority_cron.py);
- `declarative-pipelines` — the warehouse as a Spark Declarative Pipeline run by `spark-pipelines`
                            against a Spark Connect server with Delta, valuable datasets refreshed
                            in a loop of their own (live/pipelines.py), at most 4 flows at once;
- `declarative-pipelines-default` — the same with Spark's default `maxConcurrentFlows` (16).

`--tables N` runs a larger warehouse drawn from the same mix (live/spec.py `build`).

Measured (`scripts/live/measure.py`): from the Delta logs with delta-rs, every table's staleness
over the window [warm-up, duration] of the trace (seconds from each contestant's own start), its integral
weighted by priority, the maximum, the time within target, starvation (the longest time without a
commit), the staleness with derived tables credited for complete windows only; CPU-seconds (and
per committed row) and peak RSS of each contestant's process tree. At the end of each contestant
its derived tables are checked against their SQL over its own base tables (live/check.py); its
settings and the load average before it are recorded, and a loaded machine refuses the run
unless `--allow-load` (live/footing.py). Writes one JSON object (`--json`, layout fixed by issue
11; windows are seconds from each contestant's `start`), and two PNGs beside it. Prints a table.

    .venv/bin/python scripts/bench_live.py --seeds 3 [--trace-kind hot] --json out/seeds/summary.json

runs one trace per seed, the contestants in a seeded shuffled order per seed, writes each
seed's JSON beside the summary (`<stem>-seed<S>.json`) and the summary over seeds: each ratio
Freshet / contestant as the mean and 95 % t-interval, per-table staleness, starvation, CPU per
row, the git commit (live/summary.py). docs/benchmarks.md describes both.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import random
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

from scripts.live import check, contestants, footing, measure, spec, summary  # noqa: E402
from scripts.live.plots import plot  # noqa: E402
from scripts.live.reference import bound, predict, twin  # noqa: E402
from scripts.live.trace import Trace, generate, replay, stage  # noqa: E402
from sim.progress import ProgressReporter  # noqa: E402

CONTESTANTS = ("freshet", "freshet-fifo", "freshet-edfp", "structured-streaming", "structured-streaming-tuned",
               "structured-streaming-grouped",
               "cron", "priority-cron", "declarative-pipelines", "declarative-pipelines-default")
# `--quick` without `--only`: Freshet and the strongest peer of each kind, within 30 minutes
QUICK_CONTESTANTS = ("freshet", "structured-streaming-tuned", "priority-cron", "declarative-pipelines")
PEERS = ("structured-streaming", "structured-streaming-tuned", "structured-streaming-grouped", "cron", "priority-cron", "declarative-pipelines",
         "declarative-pipelines-default")


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
def start_time(now: float, rows: int, align: float = 1.0) -> float:
    """t0 of a contestant's replay: far enough ahead of `now` for every partition to be written
    ahead (`stage`, `rows` at STAGE_RATE), in whole seconds (event times are exact in µs), and a
    multiple of `align` — by default (`--align`) the derived tables' bucket lengths (`spec.alignment`):
    the buckets' phase against the partitions is then the same for every contestant and for the
    bound. (Unaligned, each
    contestant's t0 fell at another second of the minute, and `d_rollup`'s 1-minute buckets waited
    0-30 s longer for `b04`'s partition by luck alone: up to 1,200 of weighted staleness.)"""
    return float(math.ceil((now + 5 + rows / STAGE_RATE) / align) * align)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(name: str, d: Path, warehouse: spec.Spec) -> tuple[Path, str | None]:
    """Write `<d>/freshet.yaml` for `name`; returns it and the daemon's listen address (Freshet only)."""
    listen = f"127.0.0.1:{_free_port()}" if name.startswith("freshet") else "127.0.0.1:9"
    variant = contestants.FRESHET.get(name, contestants.FRESHET["freshet"])
    cfg = warehouse.freshet_config(str(d / "warehouse"), str(d / "landing"), **variant,
                                   listen=listen, trace=str(d / "freshet.trace") if name.startswith("freshet") else None)
    # Spark's event log, for the jobs each contestant runs (measure.spark_jobs): the same for all
    (d / "events").mkdir(exist_ok=True)
    cfg["spark"]["conf"].update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": (d / "events").as_uri(),
                                 "spark.eventLog.compress": "false"})
    path = d / "freshet.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path, listen if name.startswith("freshet") else None


def _command(name: str, cfg: Path, d: Path) -> list[str]:
    py = sys.executable
    if name.startswith("freshet"):
        return [py, "-m", "ops.cli", "run", "--config", str(cfg), "--log-format", "json", "--grace", "20"]
    module = contestants.PEER_MODULES[name]
    return [py, "-m", f"scripts.live.{module}", "--config", str(cfg), "--ready", str(d / "ready"),
            "--work", str(d / "work"), *contestants.PEER_VARIANTS.get(name, ([], {}))[0]]


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


def run_contestant(name: str, trace: Trace, out: Path, *, ready_timeout: float = 300.0,
                   align: float = 1.0) -> dict[str, Any]:
    """Start `name`, wait until it is ready, replay the trace into its landing zone in real time,
    stop it, and return what was run (the figures come from `evaluate`)."""
    d = (out / name).resolve()
    if d.exists():
        shutil.rmtree(d)
    (d / "landing").mkdir(parents=True)
    (d / "warehouse").mkdir()
    cfg, listen = _config(name, d, trace.spec)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    log = open(d / "contestant.log", "wb")  # noqa: SIM115 — closed below
    command = _command(name, cfg, d)
    info: dict[str, Any] = {"name": name, "root": str(d / "warehouse"), "status": "ok", "error": None}
    try:  # what it runs with (every contestant's JSON records its settings)
        info["settings"] = footing.settings(name, command, cfg)
    except Exception as err:  # noqa: BLE001 — recorded; the run goes on
        info["settings"] = {"error": f"{type(err).__name__}: {err}"}
    monitor: measure.ProcessMonitor | None = None
    began = time.time()
    proc = subprocess.Popen(command, cwd=d, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:  # from here on a SIGTERM (SystemExit) or Ctrl-C still stops the contestant: `finally`
        monitor = measure.ProcessMonitor(proc.pid)
        while not _ready(name, d, listen):
            if proc.poll() is not None:
                raise RuntimeError(f"exited with status {proc.returncode} before it was ready")
            if time.time() - began > ready_timeout:
                raise RuntimeError(f"not ready after {ready_timeout:.0f} s")
            time.sleep(0.5)
        info["startup_seconds"] = round(time.time() - began, 1)
        t0 = start_time(time.time(), sum(p.rows for p in trace.parts), align)
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
        if monitor is not None:
            monitor.stop()
        log.close()
    assert monitor is not None  # (set before anything that could return here)
    info["cpu_seconds"] = round(monitor.cpu_seconds, 1)
    info["peak_rss_bytes"] = monitor.peak_rss
    info["peak_rss_bytes_by_kind"] = dict(monitor.peak_rss_by_kind)
    info["spark_jobs"] = measure.spark_jobs(d / "events")
    if info["status"] != "ok":
        tail = (d / "contestant.log").read_text(errors="replace").splitlines()[-15:]
        info["log_tail"] = tail
    return info


# ---------------------------------------------------------------- evaluation
def evaluate(info: dict[str, Any], trace: Trace, *, step: float = 1.0) -> tuple[dict[str, Any], dict[str, list]]:
    """Staleness of every table of one contestant from its Delta logs (measure.py); the JSON
    entry and the series for the plots. Also each table's starvation (its longest time without a
    commit in the window, in seconds and in its periods), the rows committed and CPU-seconds per
    base-table row, and the weighted staleness with the derived tables credited for complete
    windows only (`measure.complete_windows`; equal to the first for a contestant that commits no
    incomplete window)."""
    prios, targets, periods = trace.spec.priorities(), trace.spec.targets(), trace.spec.periods()
    t0 = info["start"]
    w, t1 = t0 + trace.warmup, t0 + trace.duration
    b0, b1 = trace.burst
    phases = {"before": (trace.warmup, b0), "burst": (b0, b1), "after": (b1, trace.duration)}
    logs = {}
    for table in prios:
        path = Path(info["root"]) / table
        logs[table] = measure.commits(path) if (path / "_delta_log").is_dir() else []
    complete = {**logs, **{d.name: measure.complete_windows(logs[d.name], [logs[s] for s in d.sources], d.granularity)
                           for d in trace.spec.derived}}
    figures: dict[str, measure.TableFigures] = {}
    by_phase: dict[str, dict[str, measure.TableFigures]] = {k: {} for k in phases}
    series, tables = {}, {}
    for table, log in logs.items():
        # F before the first commit is t0: the warehouse is fresh when the replay starts
        f = measure.staleness(log, w, t1, targets[table], f0=t0, step=step)
        figures[table] = f
        for k, (lo, hi) in phases.items():
            by_phase[k][table] = measure.staleness(log, t0 + lo, t0 + hi, targets[table], f0=t0, step=step)
        series[table] = [(x + trace.warmup, y) for x, y in f.series]
        starved = measure.starvation(log, w, t1)
        tables[table] = {"priority": prios[table], "mean_staleness": round(f.area / (t1 - w), 3),
                         "max_staleness": round(f.max_staleness, 2),
                         "time_within_target": round(f.within, 4), "target": targets[table],
                         "commits": len([c for c in log if c.max_event is not None]),
                         "rows_committed": sum(c.rows for c in log),
                         "starvation_seconds": round(starved, 2), "period": periods[table],
                         "starvation_periods": round(starved / periods[table], 2)}
    phase_ws = {k: round(measure.weighted(by_phase[k], prios, t0 + lo, t0 + hi), 2) for k, (lo, hi) in phases.items()}

    def complete_ws(lo: float, hi: float) -> float:
        figs = {t: measure.staleness(log, lo, hi, targets[t], f0=t0) for t, log in complete.items()}
        return round(measure.weighted(figs, prios, lo, hi), 2)

    for d in trace.spec.derived:
        tables[d.name]["incomplete_commits"] = sum(
            1 for a, c in zip(logs[d.name], complete[d.name], strict=True)
            if a.max_event is not None and (c.max_event is None or c.max_event < a.max_event))
        tables[d.name]["mean_staleness_complete"] = round(
            measure.staleness(complete[d.name], w, t1, targets[d.name], f0=t0).area / (t1 - w), 3)
    base_rows = sum(tables[s.table]["rows_committed"] for s in trace.spec.streams)
    updates = sum(v["commits"] for v in tables.values())  # table updates committed, the whole run as the jobs
    cpu = info.get("cpu_seconds")
    entry = {**info, "weighted_staleness": round(measure.weighted(figures, prios, w, t1), 2),
             "burst_weighted_staleness": phase_ws["burst"], "phases": phase_ws,
             "weighted_staleness_complete": complete_ws(w, t1),
             "burst_weighted_staleness_complete": complete_ws(t0 + b0, t0 + b1),
             "rows_committed": base_rows,
             "cpu_seconds_per_row": float(f"{cpu / base_rows:.4g}") if cpu and base_rows else None,
             "spark_jobs_per_update": round(info["spark_jobs"] / updates, 2) if info.get("spark_jobs") and updates else None,
             "starvation": max(({"table": t, "seconds": v["starvation_seconds"], "periods": v["starvation_periods"]}
                                for t, v in tables.items()), key=lambda x: x["periods"]),
             "tables": tables}
    return entry, series


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _seeds(text: str | None, first: int) -> list[int] | None:
    """`--seeds N` (N seeds from `--seed` on) or `--seeds 11,12,13`."""
    if text is None:
        return None
    try:
        if "," in text:
            return [int(x) for x in text.split(",") if x.strip()]
        n = int(text)
    except ValueError:
        raise ValueError(f"--seeds {text!r}: a count (3) or a list of seeds (11,12,13)") from None
    if n < 1:
        raise ValueError(f"--seeds {text}: at least one seed")
    return list(range(first, first + n))


def order(names: list[str], seed: int | None) -> list[str]:
    """The contestants' running order: as given, or shuffled by a generator seeded from the
    trace's seed (recorded in the JSON), so no contestant always runs first or last."""
    if seed is None:
        return list(names)
    return random.Random(f"bench_live order {seed}").sample(names, len(names))


def run_seed(trace: Trace, out: Path, json_out: Path, names: list[str], running: list[str],
             reused: dict[str, dict[str, Any]], guard: footing.LoadGuard, extra: dict[str, Any]) -> dict[str, Any]:
    """Every contestant of `running` (in that order) on one trace, measured and checked; the
    result as in the module's docstring, written to `json_out` after each contestant."""
    out.mkdir(parents=True, exist_ok=True)
    trace.save(out / "trace.json")
    # the warehouse's size, for every contestant: this process's and those it starts (spec.from_env)
    os.environ["BENCH_TABLES"] = str(trace.tables)
    result: dict[str, Any] = {
        "window": [trace.warmup, trace.duration], "time_column": "ts", "tables": trace.tables,
        "priorities": trace.spec.priorities(),
        "burst": list(trace.burst), "burst_factor": trace.burst_factor, "seed": trace.seed, "trace_kind": trace.kind,
        "trace": str(out / "trace.json"), "targets": trace.spec.targets(), "periods": trace.spec.periods(),
        "rows_offered": {"warmup": trace.rows_offered(0, trace.warmup),
                         "before": trace.rows_offered(trace.warmup, trace.burst[0]),
                         "burst": trace.rows_offered(*trace.burst),
                         "after": trace.rows_offered(trace.burst[1], trace.duration)},
        "spark": {"master": "local[2]", **spec.SPARK_CONF}, "concurrent_jobs": 4,
        "order": running, **extra, "bound": bound(trace), "contestants": [],
    }
    if extra.get("costs"):  # the twin's prediction, made before any contestant runs
        try:
            result["prediction"] = predict(trace, Path(extra["costs"]), variant=contestants.FRESHET["freshet"])
        except Exception as err:  # noqa: BLE001 — recorded; the benchmark goes on
            result["prediction"] = {"error": f"{type(err).__name__}: {err}"}
    series: dict[str, dict[str, list]] = {}
    for name in [n for n in CONTESTANTS if n in reused] + running:
        if name in reused:  # run earlier on this trace: its Delta tables are measured again
            entry, series[name] = evaluate(reused[name], trace)
            result["contestants"].append(entry)
            print(f"bench_live: {name}: from {reused[name]['reused_from']}", flush=True)
            continue
        try:
            free = footing.disk_room(out, extra.get("min_free_gb", footing.MIN_FREE_GB) * 2**30, name)
            load = {**guard.before(name), "disk_free_bytes": free}
        except RuntimeError as err:
            result["refused"] = str(err)
            json_out.write_text(json.dumps(result, indent=1))
            raise
        print(f"bench_live: {name}: running ({trace.duration:.0f} s trace, seed {trace.seed}; load {load['before']}"
              f"{', FLAGGED' if load['flagged'] else ''})", flush=True)
        info = run_contestant(name, trace, out, align=extra.get("align_seconds", 1.0))
        info["load_average"] = {**load, "after": _load()}
        if summary.late(info):
            print(f"bench_live: {name}: FLAGGED: a partition landed {info['producer']['max_lag']:.1f} s after its "
                  "time in the trace (the machine paused or was too loaded to replay it); its figures are not of "
                  "this trace", flush=True)
        entry, s = evaluate(info, trace)
        try:  # the output check: each derived table against its SQL over the contestant's own base tables
            entry["check"] = check.check(entry["root"], entry["start"], trace.spec)
        except Exception as err:  # noqa: BLE001 — recorded; the benchmark goes on
            entry["check"] = {"error": f"{type(err).__name__}: {err}"}
        if not extra.get("keep_landing"):  # gigabytes of burst files, measured already: the Delta tables stay
            for sub in ("landing", "staging"):
                shutil.rmtree(out / name / sub, ignore_errors=True)
        if name == "freshet" and entry["status"] == "ok":
            entry["twin"] = twin(entry, trace, out)
            before, measured = (result.get("prediction") or {}).get("predicted_weighted_staleness"), \
                entry["twin"].get("measured_weighted_staleness")
            if before is not None and measured:
                entry["twin"].update(predicted_before_run=before, relative_error_before_run=round(before / measured - 1, 4))
        series[name] = s
        result["contestants"].append(entry)
        print(f"bench_live: {name}: {entry['status']} weighted staleness {entry['weighted_staleness']:.1f} "
              f"(complete windows {entry['weighted_staleness_complete']:.1f}), burst "
              f"{entry['burst_weighted_staleness']:.1f}, cpu {entry['cpu_seconds']} s, "
              f"rss {entry['peak_rss_bytes'] / 2**20:.0f} MiB" + (f" — {entry['error']}" if entry["error"] else ""),
              flush=True)
        json_out.write_text(json.dumps(result, indent=1))
    fr = next((c for c in result["contestants"] if c["name"] == "freshet"), None)
    if fr is not None:
        def ratio(c: dict[str, Any], key: str) -> float | None:
            return round(fr[key] / c[key], 3) if c.get(key) else None

        def excess(c: dict[str, Any]) -> float | None:
            if fr.get("weighted_staleness") is None or c.get("weighted_staleness") is None:
                return None
            x = summary.excess_over_bound(fr["weighted_staleness"], c["weighted_staleness"],
                                          result["bound"]["weighted_staleness"])
            return None if x is None else round(x, 3)

        result["ratios"] = {c["name"]: {"whole": ratio(c, "weighted_staleness"),
                                        "burst": ratio(c, "burst_weighted_staleness"),
                                        "whole_complete": ratio(c, "weighted_staleness_complete"),
                                        "excess_over_bound": excess(c)}
                            for c in result["contestants"] if c["name"] != "freshet"}
    result["plots"] = plot(result, series, json_out)
    json_out.write_text(json.dumps(result, indent=1))
    _print(result, json_out)
    return result


def _print(result: dict[str, Any], json_out: Path) -> None:
    print(f"{'contestant':24} {'status':7} {'Σp·S (window)':>14} {'complete':>9} {'Σp·S (burst)':>13} {'max S top':>10} "
          f"{'longest gap':>11} {'cpu s':>7} {'rss MiB':>8}")
    top = max(result["priorities"], key=lambda t: result["priorities"][t])
    for c in result["contestants"]:
        print(f"{c['name']:24} {c['status']:7} {c['weighted_staleness']:14.1f} {c['weighted_staleness_complete']:9.1f} "
              f"{c['burst_weighted_staleness']:13.1f} {c['tables'][top]['max_staleness']:10.1f} "
              f"{c['starvation']['table'] + ' ' + format(c['starvation']['periods'], 'g') + 'P':>11} "
              f"{c['cpu_seconds']:7.1f} {c['peak_rss_bytes'] / 2**20:8.0f}")
    print(f"{'zero-latency bound':24} {'':7} {result['bound']['weighted_staleness']:14.1f}")
    print(f"(max S top: the staleness of {top}, a top-priority table, at its worst, s; longest gap: the table that "
          "went the most of its periods (P) without a commit; starved means beyond 3 periods plus the burst)")
    for n, r in result.get("ratios", {}).items():
        print(f"freshet / {n}: window {r['whole']}, burst {r['burst']}, complete windows {r['whole_complete']}, "
              f"excess over the bound {r.get('excess_over_bound')}")
    print(f"wrote {json_out} and {', '.join(result['plots'])}")


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"a {QUICK.duration:.0f} s trace per contestant "
                                                         f"(without --only: {', '.join(QUICK_CONTESTANTS)}, within 30 minutes; "
                                                         f"all ten take about 55)")
    ap.add_argument("--json", help="write the result here (default <out>/bench_live.json; with --seeds the "
                                   "summary, each seed's result beside it as <stem>-seed<S>.json)")
    ap.add_argument("--out", default="out/bench_live", help="contestants' landing zones and warehouses")
    ap.add_argument("--only", help="comma-separated contestants (default: all ten; with --quick the four of "
                                   "QUICK_CONTESTANTS; \"\" with --reuse: measure the earlier run again)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--seeds", help="N (N seeds from --seed on) or a list 11,12,13: one trace per seed, the "
                                    "contestants in a seeded shuffled order per seed, and a summary over seeds")
    ap.add_argument("--trace-kind", choices=spec.TRACE_KINDS, default="bulk",
                    help="bulk: the bulk streams burst; hot: the priority-100 stream bursts with them")
    ap.add_argument("--trace", help="replay this saved trace instead of generating one")
    ap.add_argument("--shape", help="warmup,before,burst,after,factor (seconds ×4, row factor)")
    ap.add_argument("--reuse", metavar="JSON",
                    help="a previous run over the same trace: its contestants left out of --only are "
                         "measured again from their kept Delta tables (rerun Freshet alone after a change)")
    ap.add_argument("--keep-landing", action="store_true",
                    help="keep each contestant's landing zone (the burst's files: gigabytes) after the run")
    ap.add_argument("--load-threshold", type=float, default=footing.LoadGuard.default_threshold(),
                    help="refuse a contestant if the 1-minute load average is above this after --settle seconds "
                         f"(default {footing.LOAD_PER_CORE:g} per core: {footing.LoadGuard.default_threshold():g})")
    ap.add_argument("--settle", type=float, default=None,
                    help="seconds to wait at most before a contestant for the load to fall (default: 120 beyond "
                         "the 60·ln(load / threshold) the previous contestant's own load needs to decay)")
    ap.add_argument("--tables", type=int, default=15,
                    help="the warehouse's size: N tables from today's mix, a fifth of them derived (live/spec.py "
                         "build; default 15, today's warehouse). The burst's rows are shared among the bursting "
                         "streams, so a larger warehouse offers as many rows in all")
    ap.add_argument("--costs", metavar="TRACE",
                    help="an earlier run's freshet.trace (its freshet.yaml beside it): the twin predicts Freshet's "
                         "figure from the job costs measured there before the run (reference.predict)")
    ap.add_argument("--align", type=float, default=spec.DEFAULT.alignment(),
                    help="each contestant's t0 a multiple of this many seconds, so the derived tables' buckets "
                         f"fall at the same instants of every replay (default {spec.DEFAULT.alignment():g}: their "
                         "bucket lengths' LCM; 1 for a short test)")
    ap.add_argument("--min-free-gb", type=float, default=footing.MIN_FREE_GB,
                    help="refuse a contestant when its output's file system has less free space than this "
                         f"(default {footing.MIN_FREE_GB:g}: the `--quick` shape's Delta tables and burst files)")
    ap.add_argument("--allow-load", action="store_true",
                    help="run a contestant on a loaded machine anyway, flagged in the JSON")
    args = ap.parse_args(argv)
    # SIGTERM unwinds as Ctrl-C does, so the running contestant is stopped, not left orphaned
    previous = signal.signal(signal.SIGTERM, _terminate) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        return _main(ap, args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        warehouse = spec.build(args.tables)
    except ValueError as err:
        ap.error(str(err))
    shape = QUICK if args.quick else FULL
    if args.shape:
        try:
            shape = Shape(*(float(x) for x in args.shape.split(",")))
        except (TypeError, ValueError):
            ap.error(f"--shape {args.shape!r}: five numbers, warmup,before,burst,after,factor (e.g. 60,20,60,50,8000)")
    names = ([n for n in args.only.split(",") if n] if args.only is not None
             else list(QUICK_CONTESTANTS if args.quick else CONTESTANTS))
    unknown = [n for n in names if n not in CONTESTANTS]
    if unknown:
        ap.error(f"unknown contestant(s) {', '.join(unknown)}; known: {', '.join(CONTESTANTS)}")
    try:
        seeds = _seeds(args.seeds, args.seed)
    except ValueError as err:
        ap.error(str(err))
    if seeds is not None and (args.trace or args.reuse):
        ap.error("--seeds generates one trace per seed: it does not combine with --trace or --reuse")
    out = Path(args.out).resolve()
    json_out = Path(args.json).resolve() if args.json else out / "bench_live.json"
    guard = footing.LoadGuard(args.load_threshold, settle=args.settle, allow=args.allow_load)
    extra = {"commit": footing.provenance(ROOT), "keep_landing": args.keep_landing, "align_seconds": args.align,
             "costs": str(Path(args.costs).resolve()) if args.costs else None,
             "min_free_gb": args.min_free_gb,
             "load_guard": {"threshold": guard.threshold, "settle": guard.settle, "allowed": guard.allow}}
    names = [n for n in CONTESTANTS if n in names]
    if seeds is None:
        if args.trace:
            trace = Trace.load(args.trace)
        else:
            trace = generate(args.seed, shape.duration, shape.burst_window, shape.factor * warehouse.burst_scale(),
                             shape.warmup, args.trace_kind, args.tables)
        reused: dict[str, dict[str, Any]] = {}
        if args.reuse:
            prev = json.loads(Path(args.reuse).read_text())
            if Trace.load(prev["trace"]).parts != trace.parts:
                ap.error(f"--reuse: {args.reuse} replayed another trace ({prev['trace']}); pass it as --trace")
            reused = {c["name"]: {**c, "reused_from": str(Path(args.reuse).resolve())}
                      for c in prev["contestants"] if c["name"] not in names}
        if not names and not reused:
            ap.error("nothing to run: --only names no contestant and there is no --reuse")
        try:
            run_seed(trace, out, json_out, names, names, reused, guard, extra)
        except RuntimeError as err:
            print(f"bench_live: refused: {err}", file=sys.stderr)
            return 3
        return 0
    if not names:
        ap.error("nothing to run: --only names no contestant")
    runs: list[dict[str, Any]] = []
    result: dict[str, Any] = {"kind": "summary over seeds", "seeds": seeds, "trace_kind": args.trace_kind,
                              "shape": list(dataclasses.astuple(shape)), **extra, "runs": []}
    status = 0
    for seed in seeds:
        trace = generate(seed, shape.duration, shape.burst_window, shape.factor * warehouse.burst_scale(), shape.warmup,
                         args.trace_kind, args.tables)
        per = json_out.with_name(f"{json_out.stem}-seed{seed}{json_out.suffix}")
        try:
            runs.append(run_seed(trace, out / f"seed-{seed}", per, names, order(names, seed), {}, guard, extra))
        except RuntimeError as err:
            print(f"bench_live: refused: {err}", file=sys.stderr)
            result["refused"] = str(err)
            status = 3
            break
        result["runs"].append(str(per))
        result.update(summary.summarise(runs))
        json_out.write_text(json.dumps(result, indent=1))
    json_out.write_text(json.dumps(result, indent=1))
    for n, r in result.get("ratios", {}).items():
        w = r["weighted_staleness"]
        print(f"freshet / {n} over {w['n']} seeds: mean {w['mean']}, 95 % interval [{w['low']}, {w['high']}]")
    print(f"wrote {json_out}")
    return status


if __name__ == "__main__":
    code = main()
    # delta-rs (the audit) can abort the interpreter at exit, its threads outliving it
    # ("terminate called without an active exception": delta-io/delta-rs#2184): flush and leave
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
