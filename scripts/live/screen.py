"""Screen scheduler settings on the live benchmark's own runs, in the twin (no Spark): each
per-seed JSON's `freshet` run — its config and its trace of arrivals and measured job durations
(`<out>/seed-S/freshet/`) — replayed by the simulator as `reference.twin` replays it, once as run
and once per variant of its scheduler settings. Per variant and trace: the twin's average
weighted staleness, and the tables that starved beyond the benchmark's target (no commit that
made them fresher for longer than 3 of their periods plus the burst, in the measured window:
`summary.starve_target`).

    python -m scripts.live.screen out/seeds/summary-seed1[123].json \\
        --set '{"overdue_periods": 6}' --set '{"overdue_periods": null}'

A screen, not a result: the twin is within a few per cent of the daemon (docs/benchmarks.md), so
what a screen finds is measured live before it is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scripts.live.summary import starve_target
from sim.simulator import workload
from sim.trace import read_trace
from warehouse.config import SchedulerConfig, load_config
from warehouse.freshness import longest_gap

__all__ = ["main", "screen"]


def _freshet_dir(run: dict[str, Any]) -> tuple[Path, float]:
    """The `freshet` contestant's directory (config and trace) of a per-seed run, and its start."""
    entry = next((c for c in run["contestants"] if c["name"] == "freshet"), None)
    if entry is None:
        raise ValueError(f"seed {run.get('seed')}: no freshet contestant in this run")
    d = Path(entry["root"]).parent
    for f in ("freshet.yaml", "freshet.trace"):
        if not (d / f).is_file():
            raise ValueError(f"seed {run.get('seed')}: {d / f} is missing (was the run's --out directory removed?)")
    return d, float(entry["start"])


def _run(path: Path) -> dict[str, Any]:
    """A per-seed JSON, its `freshet` run's directory still there."""
    try:
        run = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: {e}") from None
    if not isinstance(run, dict) or not isinstance(run.get("contestants"), list):
        raise ValueError(f"{path}: not a per-seed JSON of bench_live.py (a summary over seeds names its per-seed "
                         "files in `runs`)")
    _freshet_dir(run)
    return run


def screen(run: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any]:
    """One per-seed run replayed with `variant` over its scheduler settings: the twin's average
    weighted staleness over the replay (reference.twin's `predicted_weighted_staleness` when the
    variant is empty) and the tables starved beyond the target, with their longest gap."""
    d, t0 = _freshet_dir(run)
    config = load_config(d / "freshet.yaml")
    sc = SchedulerConfig.model_validate({**config.scheduler.model_dump(), **variant})
    config = config.model_copy(update={"scheduler": sc})
    w0, w1 = run["window"]
    sim = workload(config, trace=read_trace(d / "freshet.trace"))
    stats = sim.run(until=t0 + w1)
    starved = {}
    for table, period in run["periods"].items():
        gap = longest_gap(sim.advanced.get(table, []), t0 + w0, t0 + w1)
        if gap > starve_target(run, period):
            starved[table] = round(gap, 1)
    return {"seed": run.get("seed"), "weighted_staleness": round(stats.weighted_staleness / (t0 + w1 - sim.origin), 2),
            "starved_beyond_target": dict(sorted(starved.items()))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.live.screen", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="per-seed JSON files of bench_live.py (<stem>-seed<S>.json)")
    ap.add_argument("--set", action="append", default=[], metavar="JSON",
                    help="a variant: scheduler settings over the run's, as a JSON object (repeatable)")
    args = ap.parse_args(argv)
    variants: list[dict[str, Any]] = [{}]
    for text in args.set:
        try:
            v = json.loads(text)
        except json.JSONDecodeError as e:
            ap.error(f"--set {text}: not JSON ({e})")
        if not isinstance(v, dict):
            ap.error(f"--set {text}: not a JSON object of scheduler settings")
        variants.append(v)
    try:
        runs = [_run(p) for p in args.runs]
    except ValueError as e:
        ap.error(str(e))
    print("| variant | Σp·S per trace | sum | starved per trace |")
    print("|---|---|---|---|")
    for v in variants:
        try:
            res = [screen(r, v) for r in runs]
        except ValidationError as e:  # a setting the scheduler does not have, or a bad value
            print(f"{json.dumps(v)}: {e}", file=sys.stderr)
            return 2
        figs = [x["weighted_staleness"] for x in res]
        print(f"| {json.dumps(v) if v else 'as run'} | {' / '.join(f'{f:,.0f}' for f in figs)} | {sum(figs):,.0f} "
              f"| {' / '.join(str(len(x['starved_beyond_target'])) for x in res)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
