"""The machine's cores as Spark's `local[*]` counts them: the JVM's availableProcessors — the CPUs
this process may run on, bounded by a cgroup CPU quota (a container's limit). The daemon counts
them once when it starts, for `scheduler.bulk_limit: auto` (warehouse.config.with_cores,
policies.bulk): the pure core is handed the number, it never asks the machine.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["machine_cores"]

_CGROUP = Path("/sys/fs/cgroup")


def machine_cores(cgroup: Path = _CGROUP) -> int:
    """CPUs this process may use: its affinity, at most its cgroup's quota (rounded up, as the JVM)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not Linux)
        n = os.cpu_count() or 1
    quota = _quota(cgroup)
    return max(1, min(n, quota)) if quota is not None else max(1, n)


def _quota(cgroup: Path) -> int | None:
    """⌈quota / period⌉ of cgroup v2's cpu.max or v1's cpu.cfs_quota_us; None: no quota (or none readable)."""
    try:
        fields = (cgroup / "cpu.max").read_text().split()
        if len(fields) == 2 and fields[0] != "max":
            return math.ceil(int(fields[0]) / int(fields[1]))
        return None
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:
        quota = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
        return math.ceil(quota / period) if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None
