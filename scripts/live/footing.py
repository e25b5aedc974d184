"""Same footing for every contestant: the load guard, the disk, the settings each one
ran with, and the commit the figures come from.

**The disk.** A contestant starts only with `--min-free-gb` free under the output (`disk_room`).

**The load guard.** Before a contestant starts, wait until the 1-minute load average is at or
below the threshold — by default half a load per core, 1.0 on the benchmark's 2-core machine. The
previous contestant's load decays by itself (e^(−t/60)): from a load L the wait is at most 120 s
plus the 60·ln(L / threshold) that decay needs (a 60-table contestant leaves a load of 10, which
120 s alone bring only to 1.35), or exactly `settle` seconds when the caller gives one, so a load
still above the threshold after the wait is other processes'. Then refuse the run, or, when the
caller allows it (`--allow-load`), go on and flag the contestant. Also recorded: the cores other
processes kept busy over a few seconds (psutil: the machine's busy share minus this process's).

**Settings.** Every contestant records the shared session settings (Freshet's session defaults,
FAIR mode included, + the config's Spark settings) with its own over them: from the peers'
registry `scripts.live.contestants.settings(name, config)` when it knows the contestant, else
from the module its command runs (`settings(config) -> dict` or a `SETTINGS` dict; its Spark
settings under `spark_conf` or `spark`), else none beyond the shared ones.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LOAD_PER_CORE", "MIN_FREE_GB", "LoadGuard", "disk_room", "provenance", "settings"]

LOAD_PER_CORE = 0.5  # the default threshold: 1-minute load average per core
DECAY = 60.0  # seconds: the 1-minute load average falls as e^(−t/DECAY) when nothing runs
SETTLE = 120.0  # seconds the guard waits beyond that decay, by default
# Free disk a contestant needs: its Delta tables keep ~1.3 GB and the burst's landing files a few
# more until it is measured (the `--quick` shape); on a full disk its writes fail and it is
# measured as stale, not refused (trace 13 of the first repeated run: docs/benchmarks.md).
MIN_FREE_GB = 6.0


def provenance(root: str | Path) -> dict[str, Any]:
    """The git commit of the working tree at `root`, and whether tracked files differ from it."""
    from scripts.revtree import head_state

    try:
        commit, dirty = head_state(Path(root))
    except (OSError, subprocess.CalledProcessError) as err:
        return {"commit": None, "dirty": None, "error": str(err)}
    return {"commit": commit, "dirty": dirty}


@dataclass(slots=True)
class LoadGuard:
    """Waits for a quiet machine before each contestant; refuses or flags a loaded one."""

    threshold: float
    settle: float | None = None  # seconds to wait at most; None: SETTLE + what the decay from the load found needs
    allow: bool = False  # go on (flagged) instead of refusing
    load: Callable[[], tuple[float, float, float]] = os.getloadavg
    sleep: Callable[[float], None] = time.sleep
    poll: float = 5.0
    others: Callable[[], float | None] | None = None  # default: others_cores

    @classmethod
    def default_threshold(cls) -> float:
        return LOAD_PER_CORE * (os.cpu_count() or 1)

    def before(self, name: str) -> dict[str, Any]:
        """Wait, then {"before": [1, 5, 15-min load], "waited", "threshold", "flagged"}; raises
        `RuntimeError` naming the load when it is above the threshold and not allowed."""
        waited = 0.0
        avg = self.load()
        limit = self.settle if self.settle is not None else SETTLE + (
            DECAY * math.log(avg[0] / self.threshold) if avg[0] > self.threshold > 0 else 0.0)
        while avg[0] > self.threshold and waited < limit:
            step = min(self.poll, limit - waited)
            self.sleep(step)
            waited += step
            avg = self.load()
        flagged = avg[0] > self.threshold
        if flagged and not self.allow:
            raise RuntimeError(f"{name}: the 1-minute load average is {avg[0]:.2f} after waiting {waited:.0f} s, above "
                               f"the threshold {self.threshold:g}: other processes load the machine (--allow-load runs "
                               f"anyway and flags the contestant)")
        return {"before": [round(x, 2) for x in avg], "waited": round(waited, 1), "threshold": self.threshold,
                "flagged": flagged, "others_cores": (self.others or others_cores)()}


def disk_room(path: Path, need_bytes: float, name: str) -> int:
    """The free bytes of the file system holding `path`; `RuntimeError` naming the contestant and
    the space when fewer than `need_bytes` are free."""
    free = shutil.disk_usage(path).free
    if free < need_bytes:
        raise RuntimeError(f"{name}: {free / 2**30:.1f} GiB free under {path}, below the {need_bytes / 2**30:.1f} GiB "
                           f"a contestant needs (--min-free-gb): delete earlier runs' warehouses first")
    return free


def others_cores(interval: float = 1.0) -> float | None:
    """Cores kept busy by processes other than this one over `interval` seconds."""
    try:
        import psutil

        me = psutil.Process()
        c0 = sum(me.cpu_times()[:2])
        busy = psutil.cpu_percent(interval=interval) / 100.0 * (psutil.cpu_count() or 1)
        mine = (sum(me.cpu_times()[:2]) - c0) / interval
        return round(max(0.0, busy - mine), 2)
    except Exception:  # noqa: BLE001 — a figure recorded beside the load average, never decisive
        return None


def settings(name: str, command: list[str], config_path: str | Path) -> dict[str, Any]:
    """The settings contestant `name` runs with (`command`, on its generated config): the shared
    Spark settings (`spark`), with the contestant's own Spark settings over them, and the rest of
    what it declares (pools, triggers, ticks, its scheduler); `source` says where they came from."""
    from warehouse.config import load_config
    from warehouse.lake.session import DEFAULT_CONF

    config = load_config(config_path)
    shared = {"master": config.spark.master, **DEFAULT_CONF, **config.spark.conf}
    found = _own(name, command, config)
    if found is None:
        return {"source": "shared session settings", "spark": shared}
    source, own = found
    spark = {**shared, **own.get("spark", {}), **own.get("spark_conf", {})}
    return {"source": source, "spark": spark, **{k: v for k, v in own.items() if k not in ("spark", "spark_conf")}}


def _own(name: str, command: list[str], config: Any) -> tuple[str, dict[str, Any]] | None:
    """The contestant's own settings: from `scripts.live.contestants` when it knows `name`, else
    from the module its command runs (`settings(config)` or `SETTINGS`); None when it declares none."""
    contestants = importlib.import_module("scripts.live.contestants")
    if name in contestants.FRESHET or name in contestants.PEER_MODULES:
        return "scripts.live.contestants.settings", contestants.settings(name, config)
    module = command[command.index("-m") + 1] if "-m" in command else None
    if module and module.startswith("scripts.live."):
        mod = importlib.import_module(module)
        fn = getattr(mod, "settings", None)
        own = fn(config) if callable(fn) else getattr(mod, "SETTINGS", None)
        if own is not None:
            return f"{module}.settings", dict(own)
    return None
