"""Maintenance bookkeeping: compaction and garbage collection as scheduled jobs (Nova, SIGMOD 2011 §2.4).

Nova compacts a channel's delta blocks into one base block and garbage-collects the blocks no
consumer's cursor needs any more; a Delta table's equivalents are OPTIMIZE (rewrite many small
files as few large ones) and VACUUM (delete the files that no version within the retention
references). Freshet triggers them as Nova's §2.4 leaves open, by rule, per table
(`maintenance:` in the config, docs/warehouse.md):

- **optimize** after every `optimize_every` committed update jobs of the table;
- **vacuum** every `vacuum_every` seconds (from its last VACUUM, or from the table's first commit).

This module only keeps the counts and due times and ranks what is due; whether a table's
maintenance is due is its state (`warehouse.table.MaintenanceState`, moved by the Scheduler's transition
table, which asks `due` and `ripe` here); the Scheduler runs a due
job as a job of its table (so never beside the table's own update job: one writer per table) on a
track no update job takes in that round. A maintenance job removes no staleness, so in the
paper's terms its marginal benefit (§3.1) is zero: it never displaces an update job. Among
themselves maintenance jobs are ranked by `urgency`. Pure: no clock, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from warehouse.config import MaintenancePolicy
from warehouse.events import JobFailed, JobFinished, StartJob, _quick_init

__all__ = ["MAINTENANCE_KINDS", "OPTIMIZE", "VACUUM", "TableUpkeep", "Upkeep", "UpkeepStats"]

OPTIMIZE = "optimize"
VACUUM = "vacuum"
MAINTENANCE_KINDS = (OPTIMIZE, VACUUM)


@dataclass(slots=True)
class TableUpkeep:
    """One table's maintenance state (recovered from the Delta log on start, `lake.recovery`)."""

    policy: MaintenancePolicy
    commits: int = 0  # committed update jobs since the last OPTIMIZE
    optimized_through: float | None = None  # the freshness at the last OPTIMIZE: later data is uncompacted
    anchor: float | None = None  # when the vacuum clock started: the last VACUUM, else the first commit
    last_optimize: float | None = None
    last_vacuum: float | None = None
    files: int | None = None  # data files in the table's current version, as the last maintenance job saw
    bytes_reclaimed: int = 0
    done: dict[str, int] | None = None  # kind → jobs ok
    failed: dict[str, int] | None = None  # kind → jobs failed
    retry_at: float = 0.0  # after a failed maintenance job: not before

    def vacuum_due(self) -> float | None:
        if self.policy.vacuum_every is None or self.anchor is None:
            return None
        return max(self.anchor + self.policy.vacuum_every, self.retry_at)


@_quick_init  # (one per table and snapshot)
@dataclass(frozen=True, slots=True, kw_only=True)
class UpkeepStats:
    """A table's maintenance in the Scheduler's snapshot (metrics, `/v1/tables`)."""

    commits_since_optimize: int
    optimize_every: int | None
    vacuum_every: float | None
    last_optimize: float | None
    last_vacuum: float | None
    next_vacuum: float | None
    files: int | None
    bytes_reclaimed: int
    jobs_ok: tuple[tuple[str, int], ...]
    jobs_failed: tuple[tuple[str, int], ...]


class Upkeep:
    """The maintenance state of every table; the Scheduler calls it (see the module docstring)."""

    def __init__(self) -> None:
        self.tables: dict[str, TableUpkeep] = {}
        self.timers: list[tuple[float, str]] = []  # (vacuum due or retry, table): lazy deletion
        self._armed: set[tuple[float, str]] = set()  # the entries of `timers`: each is armed once
        self.active: set[str] = set()  # the tables with a maintenance policy (nothing is due of the others)
        self._shown: dict[str, UpkeepStats] = {}  # each table's row, until its state changes (`stats`)

    def configure(self, policies: Mapping[str, MaintenancePolicy], recovered: Mapping[str, object],
                  only: Iterable[str] | None = None) -> None:
        """Policies by table (`FreshetConfig.maintenance_of`); a table seen for the first time
        starts from what the Delta log says (`Recovered.last_optimize` …), or from nothing. `only`:
        the tables whose policy may have changed (the others keep theirs; None: all)."""
        for name in policies if only is None else only:
            policy = policies[name]
            u = self.tables.get(name)
            if u is None:
                u = TableUpkeep(policy=policy, done={}, failed={})
                rec = recovered.get(name)
                if rec is not None:
                    u.commits = getattr(rec, "commits_since_optimize", 0)
                    u.last_optimize = getattr(rec, "last_optimize", None)
                    u.last_vacuum = getattr(rec, "last_vacuum", None)
                    u.anchor = u.last_vacuum if u.last_vacuum is not None else getattr(rec, "first_commit", None)
                    u.optimized_through = getattr(rec, "optimized_through", None)
                self.tables[name] = u
            u.policy = policy
            self._shown.pop(name, None)
            if policy.active:
                self.active.add(name)
            else:
                self.active.discard(name)
        if len(self.tables) != len(policies):
            for name in [n for n in self.tables if n not in policies]:
                del self.tables[name]
                self.active.discard(name)
                self._shown.pop(name, None)
        for name in self.active:  # (a reload re-arms none that stands)
            self._arm(name, self.tables[name].vacuum_due())
        if len(self.timers) > 2 * len(self.tables) + 16:  # stale entries (policies changed, tables removed)
            self.timers = [e for e in self.timers if self._current(*e)]
            heapq.heapify(self.timers)
            self._armed = set(self.timers)

    def _arm(self, name: str, due: float | None) -> None:
        """A timer at `due` for `name`, unless one is armed there already (a reload re-arms none)."""
        if due is not None and (due, name) not in self._armed:
            self._armed.add((due, name))
            heapq.heappush(self.timers, (due, name))

    def _pop(self) -> tuple[float, str]:
        entry = heapq.heappop(self.timers)
        self._armed.discard(entry)
        return entry

    def _current(self, due: float, name: str) -> bool:
        """The timer still stands for `name`'s vacuum due time or its retry."""
        u = self.tables.get(name)
        return u is not None and due in (u.vacuum_due(), u.retry_at)

    # ---- what the Scheduler tells it --------------------------------------------------------------
    def committed(self, table: str, now: float) -> str | None:
        """An update job of `table` committed (a no-op replay does not count); the maintenance
        kind it needs now, if any (`due`)."""
        u = self.tables.get(table)
        if u is None:
            return None
        u.commits += 1
        self._shown.pop(table, None)
        if u.anchor is None:
            u.anchor = now
            self._arm(table, u.vacuum_due())
        return self.due(table, now) if table in self.active else None  # (nothing falls due without a policy)

    def finished(self, table: str, kind: str, now: float, *, through: float | None, files: int | None,
                 reclaimed: int) -> None:
        u = self.tables.get(table)
        if u is None:
            return
        assert u.done is not None
        self._shown.pop(table, None)
        u.done[kind] = u.done.get(kind, 0) + 1
        u.retry_at = 0.0
        if files is not None:
            u.files = files
        if kind == OPTIMIZE:
            u.commits, u.last_optimize, u.optimized_through = 0, now, through
        else:
            u.last_vacuum = u.anchor = now
            u.bytes_reclaimed += reclaimed
            self._arm(table, u.vacuum_due())

    def ended(self, job: StartJob, ev: JobFinished | JobFailed, now: float, backoff: float) -> None:
        """A maintenance `job` ended: finished (`ev` a JobFinished) or failed (retried after `backoff`)."""
        if isinstance(ev, JobFinished):
            self.finished(job.table, job.kind, now, through=job.end, files=ev.files, reclaimed=ev.bytes_reclaimed)
        else:
            self.failed(job.table, job.kind, now, backoff)

    def failed(self, table: str, kind: str, now: float, backoff: float) -> None:
        """A failed maintenance job is retried after `backoff`; the table's updates never wait for it."""
        u = self.tables.get(table)
        if u is None:
            return
        assert u.failed is not None
        self._shown.pop(table, None)
        u.failed[kind] = u.failed.get(kind, 0) + 1
        u.retry_at = now + backoff
        self._arm(table, u.retry_at)

    # ---- what is due --------------------------------------------------------------------------------
    def due(self, table: str, now: float) -> str | None:
        """The maintenance kind `table` needs now (optimize first: it makes the vacuum worthwhile)."""
        u = self.tables.get(table)
        if u is None or now < u.retry_at:
            return None
        every = u.policy.optimize_every
        if every is not None and u.commits >= every:
            return OPTIMIZE
        due = u.vacuum_due()
        if due is not None and due <= now:
            return VACUUM
        return None

    def urgency(self, table: str, kind: str, now: float) -> float:
        """How overdue the job is, in its own intervals (≥ 1 when due): commits / optimize_every, or
        (now − anchor) / vacuum_every. The Scheduler weighs it by priority over cost."""
        u = self.tables[table]
        if kind == OPTIMIZE:
            return u.commits / (u.policy.optimize_every or 1)
        every = u.policy.vacuum_every or 1.0
        return (now - (u.anchor if u.anchor is not None else now)) / every

    def ripe(self, now: float) -> list[str]:
        """The tables whose vacuum clock (or retry) has run out by `now` and whose maintenance is due."""
        out = []
        while self.timers and self.timers[0][0] <= now:
            _, name = self._pop()
            if self.due(name, now) is not None:
                out.append(name)
        return out

    def ranked(self, waiting: Iterable[str], now: float,
               eligible: Callable[[str, str], tuple[float, float, int] | None]) -> tuple[list[tuple], list[str]]:
        """The due jobs of the `waiting` tables that may run now, best first: `eligible(table,
        kind)` gives (Ip, estimated seconds, index) or None (not now); ranked by Ip · overdue
        (`urgency`) / estimate — a maintenance job removes no staleness, so this only orders them
        among themselves. ([(key, index, kind), …], the tables of `waiting` no longer due)"""
        out, gone = [], []
        for name in waiting:
            kind = self.due(name, now)
            if kind is None:
                gone.append(name)
                continue
            e = eligible(name, kind)
            if e is not None:
                inherited_priority, est, idx = e
                out.append((-inherited_priority * self.urgency(name, kind, now) / max(est, 1e-9), idx, kind))
        out.sort()
        return out, gone

    def span(self, table: str, kind: str, freshness: float, origin: float | None) -> float:
        """Where the data a job of `kind` rewrites begins: an OPTIMIZE from the freshness at the
        last one (else the origin), a VACUUM nothing (its freshness)."""
        if kind != OPTIMIZE:
            return freshness
        u = self.tables[table]
        start = u.optimized_through if u.optimized_through is not None else origin
        return freshness if start is None else min(start, freshness)

    def estimate(self, table: str, kind: str, freshness: float, origin: float | None,
                 cost: Callable[[float], float], alpha: float) -> float:
        """E of a maintenance job from the table's own E(n) (§2.4): an OPTIMIZE rewrites the data
        loaded since the last one, once (E(n) over that span); a VACUUM lists files (α)."""
        if kind == OPTIMIZE:
            return cost(freshness - self.span(table, kind, freshness, origin))
        return alpha

    def prune(self) -> None:
        """Stale timers at the top leave (a change of state: the Scheduler calls it in `handle`),
        so that `next_due` finds the earliest current one on top."""
        while self.timers and not self._current(*self.timers[0]):
            self._pop()

    def next_due(self) -> float | None:
        """The earliest vacuum due time (or retry) still to come: the top timer, current since the
        last `prune`. A query."""
        return self.timers[0][0] if self.timers else None

    def stats(self, table: str) -> UpkeepStats | None:
        """`table`'s row in the snapshot: kept until its maintenance state changes (every change
        is made here), so a snapshot of 10,000 tables builds only the rows that changed."""
        if (shown := self._shown.get(table)) is not None:
            return shown
        u = self.tables.get(table)
        if u is None:
            return None
        shown = self._shown[table] = UpkeepStats(
            commits_since_optimize=u.commits, optimize_every=u.policy.optimize_every,
            vacuum_every=u.policy.vacuum_every, last_optimize=u.last_optimize, last_vacuum=u.last_vacuum,
            next_vacuum=u.vacuum_due(), files=u.files, bytes_reclaimed=u.bytes_reclaimed,
            jobs_ok=tuple(sorted((u.done or {}).items())), jobs_failed=tuple(sorted((u.failed or {}).items())))
        return shown
