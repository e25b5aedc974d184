#!/usr/bin/env python3
"""Rollout's horizon and terminal credit (warehouse.rollout) against its base rule, Max-Benefit,
on the `unseen` workloads `classes`, `dag`, `hetero` (sim/workloads/unseen/) and the Fig. 8
hierarchy (`beyond`'s `fig8`: 9 chains of depth 3, Max inheritance), at one utilization.

Each line is a scheduler override (`t*`: the credit at the default priority; `own1800`,
`inh1800`: the credit at the table's own p or its inherited Ip, §3.3); a point's relative
lateness is its Σ p ∫ S dτ over the ideal run's of the same workload, seed and horizon
(sim.experiments, §4.1). Prints one row per workload and line: the mean over the seeds, each seed's figure, and the CPU-seconds the runs took.

    python scripts/rollout_horizon.py [--u 1.1] [--seeds 2] [--events 2000] [--workers 2]
        [--lines mb,old,t600,t1800,own1800,inh1800]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.args import names_of  # noqa: E402
from sim.experiments import BEYOND, Line, run_experiment  # noqa: E402
from sim.unseen import UNSEEN  # noqa: E402

LINES = {
    "mb": Line("Max-Benefit", {"policy": "max-benefit"}),
    "old": Line("rollout 600 s, no credit", {"policy": "rollout", "rollout": {"horizon": 600, "terminal": False}}),
    "old1800": Line("rollout 1800 s, no credit", {"policy": "rollout", "rollout": {"horizon": 1800, "terminal": False}}),
    "t300": Line("rollout 300 s + credit", {"policy": "rollout", "rollout": {"horizon": 300, "terminal": True}}),
    "t600": Line("rollout 600 s + credit", {"policy": "rollout", "rollout": {"horizon": 600, "terminal": True}}),
    "t1800": Line("rollout 1800 s + credit", {"policy": "rollout", "rollout": {"horizon": 1800, "terminal": True}}),
    "own1800": Line("rollout 1800 s + credit at p", {"policy": "rollout", "rollout": {"horizon": 1800, "credit": "own"}}),
    "inh1800": Line("rollout 1800 s + credit at Ip", {"policy": "rollout", "rollout": {"horizon": 1800, "credit": "inherited"}}),
}


WORKLOADS = (*(w.name for w in UNSEEN.workloads), "hierarchy")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--u", type=float, default=1.1)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--events", type=int, default=2000, help="events per point (the ideal run's; `unseen`'s 2,000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--lines", type=names_of(tuple(LINES)), default="mb,old,t600,t1800",
                    help=f"comma-separated, of {', '.join(LINES)}")
    ap.add_argument("--workloads", type=names_of(WORKLOADS), default="classes,dag,hetero,hierarchy",
                    help=f"comma-separated, of {', '.join(WORKLOADS)}")
    a = ap.parse_args(argv)
    lines = tuple(LINES[x] for x in a.lines)
    by_name = {w.name: w for w in UNSEEN.workloads}
    by_name["hierarchy"] = dataclasses.replace(next(w for w in BEYOND.workloads if w.name == "fig8"), name="hierarchy")
    wls = tuple(by_name[x] for x in a.workloads)
    exp = dataclasses.replace(UNSEEN, name="rollout-horizon", lines=lines, workloads=wls, verdict=None)
    t0, c0 = time.perf_counter(), time.process_time()
    res = run_experiment(exp, events=a.events, seeds=a.seeds, workers=a.workers, xs=(a.u,),
                         progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"U = {a.u:g}, seeds 1..{a.seeds}, {a.events} events per point; {time.perf_counter() - t0:.0f} s wall")
    print(f"{'workload':<10} {'line':<28} {'mean':>7}  per seed")
    for wl in exp.workload_names():
        for ln in lines:
            rows = [r for r in res.rows if r["workload"] == wl and r["line"] == ln.label]
            vals = [r["relative_lateness"] for r in rows]
            print(f"{wl:<10} {ln.label:<28} {sum(vals) / len(vals):>7.3f}  " + " ".join(f"{v:.3f}" for v in vals)
                  + f"  (events {', '.join(str(r['events']) for r in rows)}; horizon {rows[0]['horizon']:,.0f} s)")
    print(f"(this process: {time.process_time() - c0:.0f} CPU-s; the workers' are not counted)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
