"""Another commit's files beside this tree, for benchmarks that compare the two side by side in one
run (`scripts/bench_sim.py --against`, `scripts/bench_scheduler.py --against`)."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def export(rev: str, into: Path) -> str:
    """REV's files (git archive) under `into / "tree"`; returns the full commit id. SystemExit, naming
    REV, when it is no commit of this repository."""
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=ROOT,
                           text=True, capture_output=True)
    if found.returncode != 0:
        raise SystemExit(f"{rev!r} is not a commit of this repository ({ROOT})")
    commit = found.stdout.strip()
    tar = into / "rev.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(tar), commit], cwd=ROOT, check=True)
    with tarfile.open(tar) as tf:
        tf.extractall(into / "tree", filter="data")
    tar.unlink()
    return commit


def head_state(root: Path = ROOT) -> tuple[str, bool]:
    """The commit id of HEAD at `root`, and whether tracked files differ from it; OSError or
    CalledProcessError where there is no git tree. `status` takes no lock (`--no-optional-locks`):
    a benchmark killed while it runs (its SIGTERM kills this child) leaves no `.git/index.lock`."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()

    return git("rev-parse", "HEAD"), bool(git("--no-optional-locks", "status", "--porcelain", "--untracked-files=no"))


def describe_head() -> str:
    """This tree's HEAD, and whether it has uncommitted changes."""
    try:
        commit, dirty = head_state()
    except (OSError, subprocess.CalledProcessError):
        return "HEAD ?"
    return f"HEAD {commit[:7]}{' + uncommitted changes' if dirty else ''}"
