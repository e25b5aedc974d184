#!/usr/bin/env python3
"""The tuner's cost inside `freshet sim run`: CPU seconds and relative lateness of one point of
the `unseen` experiments (sim.unseen; the default line, so its tuner runs) three ways, one after
the other on the same workload and seed:

- **off** — this tree, `--autotune off` (the run alone, the ideal run, the interpreter's start);
- **before** — the tree of commit REV (exported with `git archive`), the tuner on (the default);
- **after** — this tree, the tuner on.

Each is a `freshet sim run --json` child process; its CPU time is the children's user + system
time (`resource.getrusage`) across it, so it holds the interpreter's start and imports too.

    python scripts/tuner_cost.py --against 0c36297 [--point dag:1.1] [--events 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.revtree import describe_head, export  # noqa: E402
from sim.cli import positive_float  # noqa: E402
from sim.figures import DEFAULT_LABEL, Line  # noqa: E402
from sim.unseen import EXPERIMENTS  # noqa: E402


def parse_point(text: str) -> tuple[str, float]:
    """`--point WORKLOAD:U` (argparse type): a workload of the unseen experiments and a utilization > 0."""
    names = sorted(w.name for e in EXPERIMENTS.values() for w in e.workloads)
    name, _, u = text.partition(":")
    if name not in names:
        raise argparse.ArgumentTypeError(f"unknown workload {name!r} (one of {', '.join(names)})")
    try:
        return name, positive_float(u)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"WORKLOAD:U, U {e}") from None


def point(name: str, u: float) -> dict[str, Any]:
    """The default line's config of workload `name` at utilization `u`, as the experiments build it."""
    exp = next(e for e in EXPERIMENTS.values() if any(w.name == name for w in e.workloads))
    wl = next(w for w in exp.workloads if w.name == name)
    return exp.config(Line(DEFAULT_LABEL, {}), u, wl)


def run(tree: Path, config: Path, events: int, seed: int, *extra: str) -> tuple[float, dict[str, Any]]:
    """CPU seconds of one `freshet sim run --json` of `tree`, and its report."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-c", "import sys; from ops.cli import main; sys.exit(main())", "sim", "run",
           "--config", str(config), "--events", str(events), "--seed", str(seed), "--json", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", required=True, help="the commit whose tuner is `before`")
    ap.add_argument("--point", type=parse_point, default="dag:1.1",
                    help="WORKLOAD:U of the unseen experiments (default dag:1.1)")
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    name, u = a.point
    with tempfile.TemporaryDirectory(prefix="tuner_cost_") as tmp:
        tmpd = Path(tmp)
        export(a.against, tmpd)  # the commit's files under tmpd / "tree"
        config = tmpd / f"{name}-{u:g}.yaml"
        config.write_text(yaml.safe_dump(point(name, u)))
        rows = []
        for label, tree, extra in (("off", ROOT, ("--autotune", "off")), ("before", tmpd / "tree", ()),
                                   ("after", ROOT, ())):
            load = os.getloadavg()[0]
            cpu, out = run(tree, config, a.events, a.seed, *extra)
            at = out.get("autotune", {})
            rows.append((label, cpu, out, at, load))
            print(json.dumps({"run": label, "cpu_seconds": round(cpu, 2), "relative_lateness": out["relative_lateness"],
                              "load_1min": load, "autotune": at}), flush=True)
    off = rows[0][1]
    print(f"\n{name} U={u:g}, {a.events} events, seed {a.seed}; this tree: {describe_head()}, before = {a.against}")
    print(f"{'run':<8} {'CPU s':>8} {'× off':>7} {'rel. lateness':>14} {'evaluations':>12} {'simulations':>12} "
          f"{'switches':>9} {'load':>6}")
    for label, cpu, out, at, load in rows:
        print(f"{label:<8} {cpu:>8.2f} {cpu / off:>7.1f} {out['relative_lateness']:>14.10g} "
              f"{at.get('evaluations', '-')!s:>12} {at.get('simulations', '-')!s:>12} "
              f"{len(at.get('switches', [])) if at else '-'!s:>9} {load:>6.2f}")
    if rows[1][3] and rows[2][3]:
        same = rows[1][2]["relative_lateness"] == rows[2][2]["relative_lateness"] and \
            [s["to"] for s in rows[1][3]["switches"]] == [s["to"] for s in rows[2][3]["switches"]]
        print(f"before and after: {'the same run (lateness and switches)' if same else 'DIFFERENT runs'}; "
              f"screens after: {rows[2][3].get('screens')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
