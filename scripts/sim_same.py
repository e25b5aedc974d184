#!/usr/bin/env python3
"""Does this tree simulate exactly as commit REV does? `freshet sim run --json --write-trace` with a
fixed seed, for examples/*.yaml and the Table 2 workload at U=0.9 (scripts/bench_sim.py), under each
policy, partitioner and chop (none, 3, auto): the JSON report and the trace (every arrival and job)
must be byte-identical between REV's tree (exported with `git archive`) and this one, but for the
lower bound (`bound`, sim.bound: computed beside the run from the config, not in it; tests/test_bound.py
checks it), which is not compared, and in a table's row the keys of ADDED_PER_TABLE REV's report
lacks (its longest gap between fresher commits: observed, not decided on); every other key REV's
report has must hold the same value, and the report may add no other.

    python scripts/sim_same.py --against d4c39f0 [--events N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.workload import TableClass, build_workload, with_utilization  # noqa: E402

POLICIES = ("auto", "max-benefit", "lookahead", "edf-p", "edf", "random", "fifo")
PARTITIONERS = ("auto", "global", "edf-partitioned", "proportional")
CHOPS = ("none", "3", "auto")
SKIPPED = frozenset({"bound"})  # computed beside the run, not in it: not compared
ADDED_PER_TABLE = frozenset({"longest_gap"})  # the same, in each table's row of `per_table`


def same_report(base: bytes, new: bytes) -> bool:
    """Byte-identical, or equal but for SKIPPED and the keys of ADDED_PER_TABLE that `base` lacks."""
    if base == new:
        return True
    a, b = json.loads(base), json.loads(new)
    for t, row in b.get("per_table", {}).items():
        for k in ADDED_PER_TABLE - set(a.get("per_table", {}).get(t, {})):
            row.pop(k, None)
    return {k: v for k, v in a.items() if k not in SKIPPED} == {k: v for k, v in b.items() if k not in SKIPPED}


def runs(configs: list[Path]) -> list[tuple[str, list[str]]]:
    out = []
    for cfg in configs:
        for policy, chop in itertools.product(POLICIES, CHOPS):
            out.append((f"{cfg.stem}-{policy}-{chop}", ["--config", str(cfg), "--policy", policy, "--chop", chop]))
        for part, chop in itertools.product(PARTITIONERS, CHOPS):
            out.append((f"{cfg.stem}-{part}-{chop}", ["--config", str(cfg), "--partitioner", part, "--chop", chop]))
        out.append((f"{cfg.stem}-1track", ["--config", str(cfg), "--tracks", "1"]))
    return out


def run(tree: Path, args: list[str], events: int, trace: Path) -> bytes:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-c", "import sys; from ops.cli import main; sys.exit(main())", "sim", "run", *args, "--events", str(events), "--seed", "7",
           "--json", "--write-trace", str(trace)]
    return subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True)
    ap.add_argument("--events", type=int, default=4000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sim_same_") as tmp:
        tmpd = Path(tmp)
        tar = tmpd / "rev.tar"
        subprocess.run(["git", "archive", "--format=tar", "-o", str(tar), a.against], cwd=ROOT, check=True)
        with tarfile.open(tar) as tf:
            tf.extractall(tmpd / "base", filter="data")
        t2 = with_utilization(build_workload([TableClass(30)], scheduler={"tracks": 4}), 0.9)
        (tmpd / "table2_u09.yaml").write_text(yaml.safe_dump(t2))
        configs = sorted((ROOT / "examples").glob("*.yaml")) + [tmpd / "table2_u09.yaml"]
        bad = 0
        todo = runs(configs)
        for name, args in todo:
            got = []
            for side, tree in (("base", tmpd / "base"), ("new", ROOT)):
                trace = tmpd / f"{name}.{side}.jsonl"
                got.append((run(tree, args, a.events, trace), trace.read_bytes()))
            same = same_report(got[0][0], got[1][0]) and got[0][1] == got[1][1]
            bad += not same
            print(f"{'same' if same else 'DIFFERENT':<9} {name}", flush=True)
        print(f"{len(todo) - bad}/{len(todo)} runs identical (trace byte for byte, report but for {sorted(SKIPPED | ADDED_PER_TABLE)}) "
              f"against {a.against}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
