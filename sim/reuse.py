"""The tuner's memory between evaluations (sim.autotune, step 5): what it may skip.

An evaluation replays the window under the setting in force and every candidate (over a hundred
simulations); a daemon whose setting keeps winning pays that every ten minutes for the same
verdict. What the tuner carries from one evaluation to the next (`Memo`, plain data: the daemon's
evaluation process gets it and hands it back with its decision, sim.selftune keeps it in memory)
decides how much of the next one to simulate (`plan`):

- **unchanged** — the window is the one judged last (the same records, state and costs: a daemon
  whose trace did not grow) and that verdict was a keep: it stands, nothing is simulated;
- **workload change** — a stream's arrivals per hour or the cost factor of all jobs (their
  measured time over what the config's E(n) = α + β·n says: slow periods, denser data) moved by
  more than `drift` since the last window simulated, or that of one busy table by more than
  `drift_table`: the streak is over and the whole grid is screened;
- **back-off** — after `calm` clear keeps in a row (no candidate within `clear` × the margin of
  the setting in force on the first seed), only every 2nd, then 4th, 8th, … evaluation simulates, at most
  `backoff_max` periods apart; the others keep (each still cuts its window and compares the
  workload: a change ends the streak at once, and a keep counts towards the next one only on a
  window wholly after the change);
- **narrowed** — an evaluation in a streak screens the `narrow` best candidates of the last full
  screen only; one of them within `clear` × the margin widens it to the whole grid at once, and every
  `rescreen`-th narrowed evaluation screens the whole grid anyway.

Outside a streak (a fresh tuner, a setting just switched to, a near miss, a workload change)
every evaluation is the full one of sim.autotune, so the tuner's rules (margin, every seed,
cool-down, minimum of jobs) decide as before; the rule only skips work where the setting in force
has kept winning clearly on the same workload. What it may miss: a candidate outside the narrowed
set that comes within reach while the workload's rates and costs stay put (a backlog
growing under a losing setting shows first in its best rivals, which are in that set). Pure and
deterministic: no clock, no randomness.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sim.trace import Trace
    from warehouse.config import FreshetConfig
    from warehouse.scheduler import Recovered


class Rules(Protocol):
    """What this module reads of the tuner's rules (`sim.autotune.Rules`, which imports it)."""

    drift: float
    drift_table: float
    calm: int
    backoff_max: int
    rescreen: int
    narrow: int


class Window(Protocol):
    """What this module reads of a replayed window (`sim.autotune.Window`)."""

    start: float
    end: float
    origin: float
    jobs: int
    trace: Trace
    recovered: dict[str, Recovered]
    costs: dict[str, tuple[float, float]]

__all__ = ["Memo", "drifted", "fingerprint", "signature"]

SHARE = 0.05  # a table's cost factor counts once its jobs took this share of the window's measured seconds …
COUNT = 10  # … and it had this many jobs; a stream's rate, once this many partitions arrived (fewer: noise)


def fingerprint(config: FreshetConfig, window: Window, rules: Rules, grid: list[dict[str, Any]]) -> str:
    """What an evaluation's verdict depends on: the scheduler section, the rules, the candidates and
    the window (its bounds, arrivals, measured durations, start state and fitted costs)."""
    w = window
    data = {
        "scheduler": config.scheduler.model_dump(mode="json"), "rules": repr(rules), "grid": grid,
        "window": [w.start, w.end, w.origin, w.jobs],
        "arrivals": {s: [[a.time, a.start, a.end, a.rows, a.safe_through] for a in seq]
                     for s, seq in sorted(w.trace.arrivals.items())},
        "durations": sorted([t, s, e, d] for (t, s, e), d in w.trace.durations.items()),
        "recovered": sorted([n, r.freshness] for n, r in w.recovered.items()),
        "costs": sorted([n, a, b] for n, (a, b) in w.costs.items()),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()


def signature(config: FreshetConfig, window: Window) -> dict[str, float]:
    """The workload the window shows: `rate:<stream>` partitions per hour that arrived in it (a
    stream with at least COUNT of them), `cost:<table>` the measured seconds of the table's jobs
    over their configured E(n) (a table with at least COUNT jobs that took at least SHARE of the
    window's measured seconds), and `cost:*` that of all its jobs."""
    span = max(window.end - window.start, 1e-9)
    out = {}
    for s, seq in sorted(window.trace.arrivals.items()):
        n = sum(1 for a in seq if a.time > window.start)
        if n >= COUNT:
            out[f"rate:{s}"] = 3600.0 * n / span
    tables = {t.name: t for t in config.tables}
    took: dict[str, float] = {}
    said: dict[str, float] = {}
    jobs: dict[str, int] = {}
    for j in window.trace.jobs:
        if j.time > window.start and j.table in tables:
            prior = config.cost_prior(tables[j.table])
            took[j.table] = took.get(j.table, 0.0) + j.duration
            said[j.table] = said.get(j.table, 0.0) + prior.alpha + prior.beta * (j.work or 0.0)
            jobs[j.table] = jobs.get(j.table, 0) + 1
    total = sum(took.values())
    if sum(said.values()) > 0:
        out["cost:*"] = total / sum(said.values())
    for name in sorted(took):
        if jobs[name] >= COUNT and took[name] >= SHARE * total and said[name] > 0:
            out[f"cost:{name}"] = took[name] / said[name]
    return out


def drifted(now: dict[str, float], before: dict[str, float], drift: float, table: float) -> bool:
    """Has any figure both signatures hold moved by more than `drift` (a share of the larger), or a
    single table's cost factor by more than `table` (fewer jobs: noisier)?"""
    for key in now.keys() & before.keys():
        a, b = now[key], before[key]
        if abs(a - b) > (drift if key == "cost:*" or key.startswith("rate:") else table) * max(a, b):
            return True
    return False


@dataclass
class Memo:
    """What the tuner carries from one evaluation to the next (module docstring)."""

    key: str | None = None  # fingerprint of the last window judged (by simulation)
    kept: bool = False  # … and its verdict was a keep
    signature: dict[str, float] = field(default_factory=dict)  # of the last window simulated
    streak: int = 0  # clear keeps in a row
    waited: int = 0  # evaluations backed off since the last that simulated
    narrowed: int = 0  # narrowed screens since the last full one
    ranking: list[dict[str, Any]] = field(default_factory=list)  # the last full screen's best, best first
    changed: float | None = None  # the end of the window that showed the last workload change

    def plan(self, rules: Rules, key: str, sig: dict[str, float]) -> str:
        """unchanged | backoff | narrow | full, for a window with fingerprint `key`, signature `sig`."""
        if self.kept and key == self.key:
            return "unchanged"
        if self.signature and drifted(sig, self.signature, rules.drift, rules.drift_table):
            return "full"
        if self.streak < rules.calm or not self.ranking:
            return "full"
        gap = min(2 ** (self.streak - rules.calm + 1), rules.backoff_max)
        if self.waited + 1 < gap:
            return "backoff"
        return "full" if self.narrowed >= rules.rescreen else "narrow"

    def skipped(self) -> Memo:
        """After an evaluation that simulated nothing (unchanged, backoff)."""
        return Memo(self.key, self.kept, self.signature, self.streak, self.waited + 1, self.narrowed, self.ranking,
                    self.changed)

    def after(self, rules: Rules, screen: str, key: str, sig: dict[str, float], ranking: list[dict[str, Any]],
              result: str, clear: bool, window: tuple[float, float] = (0.0, 0.0)) -> Memo:
        """After an evaluation that simulated the window `(start, end]`: `screen` full or narrow,
        `ranking` its candidates best first; `clear` — no candidate came within `clear` × the
        margin. A clear keep counts towards the streak only on a window wholly after the last
        workload change (one that straddles it holds both workloads). A switch starts afresh."""
        if result == "switch":
            return Memo()
        drift = bool(self.signature) and drifted(sig, self.signature, rules.drift, rules.drift_table)
        changed = window[1] if drift else self.changed
        settled = changed is None or window[0] >= changed
        streak = self.streak + 1 if clear and not drift and settled else 0
        narrowed = 0 if screen == "full" else self.narrowed + 1
        return Memo(key, result == "keep", sig, streak, 0, narrowed, ranking[:rules.narrow], changed)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "kept": self.kept, "signature": self.signature, "streak": self.streak,
                "waited": self.waited, "narrowed": self.narrowed, "ranking": self.ranking, "changed": self.changed}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Memo:
        if not data:
            return cls()
        return cls(data.get("key"), bool(data.get("kept")), dict(data.get("signature") or {}),
                   int(data.get("streak", 0)), int(data.get("waited", 0)), int(data.get("narrowed", 0)),
                   list(data.get("ranking") or []), data.get("changed"))
