#!/usr/bin/env python3
"""The bulk limit in the simulator, before and after, side by side in one run: the live
benchmark's trace shape (scripts/live/trace.py: 12 streams, 3 derived tables, a burst of 8,000×
on nine streams) replayed by `sim.simulator.simulate` with the benchmark's Freshet config
(`local[2]`, 4 tracks, Freshet's defaults) under `bulk_limit: null` (before) and `auto` (= 1 on
two cores), per seed of the trace.

Costs are the live run's (docs/benchmarks.md): a base job α 0.6 s plus its rows at 1.75 M rows/s,
a derived job α 1.5 s, β 0.005. Each twice: as the paper's simulator runs jobs (each for its E(n)
whatever else runs: the limit can only delay bulk loads), and with `sim.cores: 2` (sim.cores: the
running jobs share two cores by their Spark pools, as on the benchmark's machine).

    python scripts/sim_bulk.py [--seeds 11,12,13] [--shape 60,60,90,210] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.live import spec  # noqa: E402
from scripts.live import trace as live_trace  # noqa: E402
from sim.cores import Cores  # noqa: E402
from sim.simulator import simulate  # noqa: E402
from sim.trace import parse_trace  # noqa: E402
from warehouse.config import parse_config  # noqa: E402

ROWS_PER_SECOND = 1.75e6  # one Freshet append on the benchmark's machine (docs/benchmarks.md)


def config(limit: object, cores: int | None) -> object:
    data = spec.DEFAULT.freshet_config("/tmp/unused", "/tmp/unused")
    data["sim"] = {"cores": cores}
    rate = {s.table: s.rate for s in spec.DEFAULT.streams}
    for t in data["tables"]:
        t["cost"] = ({"alpha": 0.6, "beta": rate[t["name"]] / ROWS_PER_SECOND} if "stream" in t
                     else {"alpha": 1.5, "beta": 0.005})
    data["scheduler"]["bulk_limit"] = limit
    return parse_config(data)


def arrivals(seed: int, shape: list[float]) -> object:
    """The live trace's partitions (warm-up, before, burst, after seconds) as simulator arrivals:
    each at its `end` (when it lands)."""
    w, pre, burst, post = shape
    tr = live_trace.generate(seed, w + pre + burst + post, (w + pre, w + pre + burst), 8000.0, warmup=w)
    lines = [json.dumps({"time": p.end, "stream": p.stream, "partition": f"{p.stream}-{p.index}",
                         "start": p.start, "end": p.end, "rows": p.rows}) for p in tr.parts]
    return tr, parse_trace(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="11,12,13")
    ap.add_argument("--shape", default="60,60,90,210", help="warm-up,before,burst,after seconds (the full run's)")
    ap.add_argument("--json")
    args = ap.parse_args()
    shape = [float(x) for x in args.shape.split(",")]
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        tr, replay = arrivals(seed, shape)
        row: dict[str, object] = {"seed": seed}
        for name, limit, cores, by_priority in (
                ("before", None, None, True), ("after", "auto", None, True),
                ("before_cores", None, 2, False),  # Freshet before no limit, a weight-1 pool per track
                ("pools_cores", None, 2, True),  # the priority pools alone
                ("after_cores", "auto", 2, True)):  # the pools and the limit
            Cores.by_priority = by_priority
            res = simulate(config(limit, cores), trace=replay, until=tr.duration)
            out = res.to_json()
            row[name] = {"weighted_staleness": round(out["average_weighted_staleness"], 2),
                         "mean_staleness": {t: round(v["staleness"], 1) for t, v in out["per_table"].items()
                                            if v.get("staleness") is not None}}
        rows.append(row)
        for model, b, a in (("4 tracks, no core model, limit", row["before"], row["after"]),
                             ("2 cores shared (sim.cores), pools", row["before_cores"], row["pools_cores"]),
                             ("2 cores shared (sim.cores), pools + limit", row["before_cores"], row["after_cores"])):
            print(f"seed {seed}, {model}: weighted staleness {b['weighted_staleness']:,.0f} → "  # type: ignore[index]
                  f"{a['weighted_staleness']:,.0f}; mean staleness b00 {b['mean_staleness'].get('b00')} → "  # type: ignore[index]
                  f"{a['mean_staleness'].get('b00')} s, d_join {b['mean_staleness'].get('d_join')} → "  # type: ignore[index]
                  f"{a['mean_staleness'].get('d_join')} s, b11 {b['mean_staleness'].get('b11')} → "  # type: ignore[index]
                  f"{a['mean_staleness'].get('b11')} s")  # type: ignore[index]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
