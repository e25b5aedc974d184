"""Where Freshet's update jobs waited for a core, read from Spark's event log.

    .venv/bin/python -m scripts.live.waits out/bench_live/freshet/events [--from HH:MM:SS] [--to HH:MM:SS]

Every Spark job Freshet runs carries its update job's description (`freshet <kind> job <id>:
<table>`, lake.session.job_description; Delta prefixes its own jobs with `Delta: ` and names what
they do). Per table it prints the update jobs, the Spark jobs they ran, how many of those were
Delta's state reconstruction (`Compute snapshot`: the snapshot was not warm, lake.warm) and in how
many update jobs, and the seconds from each Spark job's submission to its first task's launch —
the wait for a free task slot; the warm-ups (`freshet: warm the snapshot of …`) as one row. Times
are the driver's clock (UTC), as in the daemon's log.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["TableWaits", "read_waits"]

_JOB = re.compile(r"freshet \w+ job (\d+): ([^\s:]+)")
WARM = "(warm-ups)"


@dataclass
class TableWaits:
    jobs: set[int] = field(default_factory=set)  # update jobs (the warm-ups' row: none)
    cold: set[int] = field(default_factory=set)  # update jobs that reconstructed the snapshot
    spark_jobs: int = 0
    snapshot_jobs: int = 0
    wait: float = 0.0  # seconds from submission to the first task, summed over its Spark jobs
    snapshot_wait: float = 0.0  # … over the state reconstructions


def _clock(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M:%S")


def read_waits(lines: Iterable[str], since: str = "", until: str = "99") -> dict[str, TableWaits]:
    """Per table (and WARM), the Spark jobs submitted in [since, until] (HH:MM:SS, UTC)."""
    started: dict[int, tuple[int, str]] = {}  # Spark job → (submitted ms, description)
    stage_job: dict[int, int] = {}
    first: dict[int, int] = {}  # Spark job → its first task's launch (ms)
    for line in lines:
        e = json.loads(line)
        kind = e["Event"]
        if kind == "SparkListenerJobStart":
            desc = (e.get("Properties") or {}).get("spark.job.description") or ""
            started[e["Job ID"]] = (e["Submission Time"], desc)
            for s in e["Stage IDs"]:
                stage_job[s] = e["Job ID"]
        elif kind == "SparkListenerTaskStart" and (j := stage_job.get(e["Stage ID"])) is not None:
            launch = e["Task Info"]["Launch Time"]
            first[j] = min(first.get(j, launch), launch)
    out: dict[str, TableWaits] = defaultdict(TableWaits)
    for j, (submitted, desc) in started.items():
        if not since <= _clock(submitted) <= until:
            continue
        if (m := _JOB.search(desc)) is not None:
            w, job = out[m.group(2)], int(m.group(1))
            w.jobs.add(job)
        elif "freshet: warm the snapshot" in desc:
            w, job = out[WARM], None
        else:
            continue
        wait = max(first.get(j, submitted) - submitted, 0) / 1000
        w.spark_jobs += 1
        w.wait += wait
        if "Compute snapshot" in desc:
            w.snapshot_jobs += 1
            w.snapshot_wait += wait
            if job is not None:
                w.cold.add(job)
    return dict(out)


def _lines(events: Path) -> Iterable[str]:
    """The events of a log directory (rolled logs: `eventlog_v2_<app>/events_<n>_<app>`) or file."""
    files = sorted(p for p in events.rglob("events_*") if p.is_file()) if events.is_dir() else [events]
    for f in files:
        with f.open() as fh:
            yield from (line for line in fh if line.strip())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("events", type=Path, help="spark.eventLog.dir of a run (or one event log file)")
    ap.add_argument("--from", dest="since", default="", help="HH:MM:SS (UTC), first submission counted")
    ap.add_argument("--to", dest="until", default="99", help="HH:MM:SS (UTC), last submission counted")
    args = ap.parse_args(argv)
    waits = read_waits(_lines(args.events), args.since, args.until)
    print("| table | update jobs | with a snapshot reconstruction | Spark jobs | of them reconstructions "
          "| wait for a slot, s | of it reconstructions, s |")
    print("|---|---|---|---|---|---|---|")
    for name in sorted(waits, key=lambda n: (n == WARM, n)):
        w = waits[name]
        jobs = "—" if name == WARM else str(len(w.jobs))
        cold = "—" if name == WARM else str(len(w.cold))
        print(f"| {name} | {jobs} | {cold} | {w.spark_jobs} | {w.snapshot_jobs} | {w.wait:.1f} | {w.snapshot_wait:.1f} |")


if __name__ == "__main__":
    main()
