#!/usr/bin/env python3
"""The `auto` partitioner's rule for a few long tables (tracks/plan.py: plan_auto) on random
workloads where it fires, against the rule before it: docs/experiments.md, "On random workloads
where the branch fires".

    python scripts/auto_rule_random.py draw --count 30 --seed 7 --out rand.json    # this tree: keeps draws that fire
    PYTHONPATH=<tree> python scripts/auto_rule_random.py run rand.json --out a.jsonl  # auto, no tuner, on that tree
    python scripts/auto_rule_random.py compare old.jsonl new.jsonl [old2.jsonl new2.jsonl ...]

`run` imports the engine from PYTHONPATH (a `git worktree` of the commit before the rule, then this
tree), so the two rules run side by side on the same workloads, seeds and horizons; it runs them as
an experiment (sim.experiments.run_experiment: relative lateness against the ideal run, as every
`freshet sim experiment` point), each workload written as a YAML file beside OUT.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

XS, SEEDS, EVENTS = (0.8, 1.0, 1.2), 2, 2_000


def draw(rng: random.Random) -> dict[str, Any]:
    """3-5 tracks; short, middling and 1 to tracks − 1 long feeds; priorities log-uniform in 1-100;
    a third with S = 2 for 20 min an hour, a third with the long feeds 3× as dense an hour in 2.5."""
    n = rng.choice([3, 4, 5])
    counts = {"s": rng.randint(3, 9), "m": rng.randint(0, 4), "l": rng.randint(1, n - 1)}
    p0 = rng.choice([60.0, 120.0, 180.0])
    streams, tables = [], []
    for kind, k in counts.items():
        for i in range(k):
            if kind == "s":
                period, alpha, beta = p0, rng.uniform(0.3, 2.0), 0.05
            elif kind == "m":
                period, alpha, beta = p0 * rng.choice([2, 3, 5]), rng.uniform(2, 10), 0.05
            else:
                period, alpha, beta = p0 * rng.choice([12, 15, 20, 30]), rng.uniform(15, 60), 0.1
            priority = round(math.exp(rng.uniform(0, math.log(100))), 2)
            streams.append({"name": f"{kind}{i}", "period": period})
            tables.append({"name": f"t{kind}{i}", "stream": f"{kind}{i}", "priority": priority,
                           "cost": {"alpha": round(alpha, 2), "beta": beta}})
    r, sim = rng.random(), {}
    if r < 1 / 3:
        sim = {"b": 0.5, "slowdown": {"factor": 2.0, "normal": 2400.0, "slow": 1200.0}}
    elif r < 2 / 3:
        sim = {"bursts": [{"tables": [t["name"] for t in tables if t["name"].startswith("tl")], "factor": 3.0,
                           "normal": 5400.0, "slow": 3600.0}]}
    return {"streams": streams, "tables": tables, "scheduler": {"tracks": n}, "sim": sim}


def run(workloads: list[dict[str, Any]], out: Path, workers: int) -> None:
    """`auto` without the tuner on each workload at XS, SEEDS seeds: [workload, U, seed, relative
    lateness] per line of `out`."""
    from sim.experiments import Line, Workload, run_experiment
    from sim.unseen import UNSEEN

    files = out.with_suffix(".workloads")
    files.mkdir(exist_ok=True)
    wls = []
    for i, data in enumerate(workloads):
        path = files / f"w{i:03d}.yaml"
        path.write_text(yaml.safe_dump(data))
        wls.append(Workload(f"w{i:03d}", path=str(path)))
    exp = dataclasses.replace(UNSEEN, name="auto-rule-random", lines=(Line("auto", {"autotune": "off"}),),
                              workloads=tuple(wls), xs=XS, events=EVENTS, seeds=SEEDS, verdict=None)
    res = run_experiment(exp, workers=workers)
    with out.open("w") as f:
        for r in sorted(res.rows, key=lambda r: (r["workload"], r["utilization"], r["seed"])):
            f.write(json.dumps([int(r["workload"][1:]), r["utilization"], r["seed"], r["relative_lateness"]]) + "\n")


def _means(paths: list[str]) -> dict[tuple[int, int, float], float]:
    """Mean over seeds per (file, workload, U)."""
    d: dict[tuple[int, int, float], list[float]] = defaultdict(list)
    for n, path in enumerate(paths):
        with open(path) as f:
            for line in f:
                i, x, _, r = json.loads(line)
                d[(n, i, x)].append(r)
    return {k: statistics.mean(v) for k, v in d.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("draw")
    a.add_argument("--count", type=int, default=30)
    a.add_argument("--seed", type=int, default=7)
    a.add_argument("--out", required=True)
    b = sub.add_parser("run")
    b.add_argument("workloads")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--workers", type=int, default=2)
    c = sub.add_parser("compare")
    c.add_argument("pairs", nargs="+", help="the old rule's and the new rule's runs, a pair per draw")
    args = ap.parse_args()
    if args.cmd == "draw":
        from tracks.plan import FEW_LONG_TABLES
        from warehouse.blueprint import blueprint
        from warehouse.config import parse_config

        rng, kept, tries = random.Random(args.seed), [], 0
        while len(kept) < args.count:
            tries += 1
            if tries > 100 * args.count:
                ap.error(f"the rule fired on {len(kept)} of {tries - 1} draws: is it in this tree?")
            data = draw(rng)
            if blueprint(parse_config(data), costs={}).ahead.plan.note == FEW_LONG_TABLES:  # type: ignore[union-attr]
                kept.append(data)
        print(f"{len(kept)} of {tries} draws fire the rule", file=sys.stderr)
        with open(args.out, "w") as f:
            json.dump(kept, f)
    elif args.cmd == "run":
        with open(args.workloads) as f:
            run(json.load(f), args.out, args.workers)
    else:
        if len(args.pairs) % 2:
            ap.error("compare takes pairs: OLD NEW [OLD NEW ...]")
        old, new = _means(args.pairs[::2]), _means(args.pairs[1::2])
        for x in XS:
            rs = [new[k] / old[k] for k in old if k[2] == x]
            geo = math.exp(sum(map(math.log, rs)) / len(rs))
            print(f"U = {x:g}: new / old geometric mean {geo:.3f}; better by > 3% at {sum(r < 0.97 for r in rs)}, "
                  f"worse by > 3% at {sum(r > 1.03 for r in rs)} of {len(rs)} (min {min(rs):.3f}, max {max(rs):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
