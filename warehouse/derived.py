"""A derived table's state: its sources' trailing edge, how it refreshes, what to recompute.

§2.2: a derived table is updated up to the safe trailing edge of its sources, floored to its
granularity (`edge`); below that edge (`settle`) its windows are final — unless it may run ahead
of its slowest source by `max_skew` (Olston, Modeling and Scheduling Asynchronous Incremental Workflows §5), or late data, a backfill or a changed SQL
(Olston, Graceful Logic Evolution in Web Data Processing Workflows) made committed windows wrong: those ranges and the SQL version of each committed
window are kept in `recompute` (warehouse.recompute.TableRecompute) and rewritten by recompute jobs.
A stateful table (`kind: stateful`, lake.stateful) is scheduled the same way but folds each
increment into its state once: it refreshes incrementally, and nothing is ever recomputed.
Pure: no clock, no I/O; knows nothing of the Scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from warehouse.freshness import floor_to, trailing_edge
from warehouse.recompute import (
    EVOLVE_SHARE,
    Piece,
    Ranges,
    RecomputePlan,
    TableRecompute,
    VersionMap,
    full_pays,
    touched,
    window_count,
)
from warehouse.sqltext import refresh_plan, sql_version

__all__ = ["Derived", "Folded"]


@dataclass(slots=True)
class Folded(TableRecompute):
    """A stateful table's recompute state: it folds increments (Programming Bulk-Incremental Dataflows §3) and never rewrites
    committed windows. Its `dirty` ranges are late rows: rows a late load committed below F,
    which no job has read — folded by its next job (an update job reads them too) or, when no
    update job is due, by a late fold of their own (a recompute job with reason `late`).

    A **rebuild** folds the whole state again from its sources — asked by a backfill (folds are
    not invertible: one range cannot be refolded alone) or by a changed increment with `rebuild:
    true` — in chunks of at most c·P_i (§3.4), each one job: the first starts it from the origin
    (`rewrite_all`, asked), the others fold `(next, next + span]` until `to`, the freshness when the
    first chunk started; the last swaps the rebuilt state in (lake.rebuild)."""

    next: float | None = None  # a rebuild under way: the next chunk's start
    to: float | None = None  # … and where it ends
    late_rows: int = 0  # rows of the late loads in `dirty`, not folded yet
    taken_rows: int = 0  # … and of those its running job folds

    def under_way(self) -> bool:
        return self.next is not None and self.to is not None and self.next < self.to

    def has_work(self) -> bool:
        return self.rewrite_all or self.under_way() or bool(self.dirty)

    def chunk(self, freshness: float, origin: float, span: float) -> RecomputePlan | None:
        """The next job — a rebuild's first chunk (`overwrite`: it starts the rebuild from the
        origin), a late fold, or the rebuild's next chunk — at the table's whole priority; or None."""
        if self.rewrite_all:
            return RecomputePlan(Piece(origin, min(origin + span, freshness), {"rebuild"}), True, 1.0)
        if self.dirty:  # late rows: their range, the whole of it (one MERGE folds them all)
            late = set().union(*(p.late for p in self.dirty.items))
            return RecomputePlan(Piece(self.dirty.items[0].lo, self.dirty.items[-1].hi, {"late"}, late), False, 1.0)
        if self.under_way():
            assert self.next is not None and self.to is not None
            return RecomputePlan(Piece(self.next, min(self.next + span, self.to), {"rebuild"}), False, 1.0)
        return None

    def late(self, lo: float, hi: float, ids: tuple[str, ...], taken: float | None, rows: int) -> bool:
        """A base source committed `rows` rows in `(lo, hi]`: those at or below `taken` (F, or the
        running update job's new F) are late rows no job has read. True when some are."""
        if taken is None or lo >= taken or hi <= lo:
            return False
        top = min(hi, taken)
        self.dirty.add(lo, top, ("late",), ids)
        self.late_rows += round(rows * (top - lo) / (hi - lo))
        return True

    def take_late(self) -> list[Piece]:
        """A job starts that reads every late row committed so far (a late fold, an update job)."""
        self.taken_rows, self.late_rows = self.taken_rows + self.late_rows, 0
        return self.dirty.remove(-math.inf, math.inf)


@lru_cache(maxsize=4096)
def _plan(sql: str, time_columns: tuple[str, ...]) -> tuple[bool, str]:
    return refresh_plan(sql, time_columns)


class Derived:
    """Edge, settle point, refresh mode and recompute state of one derived table."""

    __slots__ = ("edge", "full_refresh", "held", "lookback", "max_skew", "reason", "recompute", "resume", "rewriting", "settle",
                 "stateful", "taken", "taken_rewrite_all", "unsure")

    def __init__(self, sql: str | None, versions: Sequence[tuple[float, float, str]] = (),
                 dirty: Iterable[tuple[float, float]] = (), rebuild: tuple[float, float] | None = None) -> None:
        self.recompute = TableRecompute(sql_version(sql), VersionMap(tuple(versions)))
        for lo, hi in dirty:  # late data loaded before a restart (lake.recovery)
            self.recompute.dirty.add(lo, hi, ("late",))
        self.edge: float | None = None  # the sources' safe trailing edge, floored (+ max_skew)
        self.settle: float | None = None  # the safe trailing edge of the sources, floored: below it, final
        self.lookback = 0.0
        self.max_skew = 0.0
        self.full_refresh = False  # refresh_mode full (or auto and the SQL is not window-local)
        self.reason = ""  # why that refresh mode
        self.taken: list[Piece] = []  # what the running job took out of recompute.dirty
        self.taken_rewrite_all = False  # … and whether it took the "rewrite all" request
        self.rewriting: tuple[float, float, float] | None = None  # the running recompute (or full) job: (started, lo, hi)
        self.stateful = False  # folds increments (lake.stateful): incremental, never recomputed
        self.resume = rebuild  # a stateful table's rebuild under way before a restart: (next chunk, to)
        # a failed update job's window (lo, hi] above F: its outcome may be unknown (committed,
        # reported failed), so its windows may be in the log; its retry covers no more, and its
        # outcome says which (a no-op: they are). `held`: the changes of sources under it meanwhile
        self.unsure: tuple[float, float] | None = None
        self.held = Ranges()

    def configure(self, sql: str | None, time_columns: tuple[str, ...], refresh_mode: str, lookback: float,
                  max_skew: float, rebuild: bool, *, stateful: bool = False) -> None:
        """Refresh mode (full or incremental), skew bound and SQL version from the config; a changed
        SQL makes the windows of the old one stale (Olston, Graceful Logic Evolution in Web Data Processing Workflows), or, with `rebuild`, asks for one
        full rewrite. A stateful table (`sql`: its increment) is incremental and has nothing to
        recompute (`Folded`)."""
        self.lookback, self.max_skew = lookback, max_skew
        if stateful != self.stateful:
            kind = Folded if stateful else TableRecompute
            self.recompute = kind(self.recompute.sql_version, self.recompute.versions)
            self.stateful = stateful
            if stateful and self.resume is not None:
                self.recompute.next, self.recompute.to = self.resume  # type: ignore[attr-defined]
        local, why = _plan(sql or "", time_columns) if sql and not stateful else (True, "no SQL")
        if stateful:
            self.full_refresh, self.reason = False, "stateful: each job folds its increment into the state by one MERGE"
        elif refresh_mode == "auto":
            self.full_refresh, self.reason = not local, why
        else:
            self.full_refresh, self.reason = refresh_mode == "full", f"refresh_mode: {refresh_mode} in the config"
        version = sql_version(sql)
        if self.recompute.sql_version != version:
            self.recompute.sql_version = version
            self.recompute.rewrite_all = self.recompute.rewrite_all or self.full_refresh
        if rebuild and self.recompute.old() and not (stateful and self.recompute.under_way()):  # type: ignore[attr-defined]
            self.recompute.rewrite_all = True  # rebuild: one full rewrite (a stateful table: a rebuild, resumed if under way)

    def describe(self) -> tuple[str, str]:
        """("full" | "incremental", why) — `freshet validate` shows it."""
        if self.stateful:
            return "incremental", self.reason
        if self.full_refresh:
            return "full", f"full recompute (idempotent overwrite) each job: {self.reason}"
        return "incremental", (f"{self.reason}; rewrites by replaceWhere (one full pass when the learned "
                               "E(n) says it is cheaper)")

    # ---- §2.2: the trailing edge and safe freshness ---------------------------------------------
    def update_edge(self, sources_safe: Sequence[float | None], granularity: float | None) -> bool:
        """TE = safe trailing edge of the sources, floored to the granularity (§2.2), run ahead by
        at most max_skew (Olston, Modeling and Scheduling Asynchronous Incremental Workflows bound_inconsistency). True when the edge moved."""
        te = trailing_edge(sources_safe)
        edge = None if te is None else floor_to(te, granularity)
        self.settle = edge
        if edge is not None and te is not None and self.max_skew > 0:
            lead = max(s for s in sources_safe if s is not None)
            edge = max(edge, floor_to(min(lead, te + self.max_skew), granularity))
        changed = edge != self.edge
        self.edge = edge
        return changed

    def safe(self, freshness: float) -> float | None:
        """Derived F' (§2.2): below it the windows are final — at most its freshness, the sources'
        safe trailing edge (max_skew lets F run ahead of it) and the oldest window to recompute."""
        if self.settle is None:
            return None
        cand = min(freshness, self.settle)
        low = None if self.stateful else self.recompute.dirty.lowest()
        return cand if low is None else min(cand, low)

    def has_update(self, start: float | None) -> bool:
        """The sources' edge is past `start` (its freshness, or origin): an update job (§2.2)."""
        return self.edge is not None and start is not None and self.edge > start

    # ---- recomputing committed windows (warehouse.recompute) --------------------------------------
    def mark(self, lo: float, hi: float, reason: str, late: tuple[str, ...], *, granularity: float | None,
             taken: float | None, origin: float | None, rows: int = 0, held: bool = False) -> bool:
        """A source's rows in `(lo, hi]` changed: the windows computed from them (up to `taken`) are
        wrong — a stateful table's: `rows` late rows to fold. `held`: no job of it runs, and those
        in `unsure` are held until its retry says whether they were committed. True when something
        was marked to recompute."""
        if isinstance(self.recompute, Folded):  # rows below what it folded: late rows for a late fold (lake.stateful)
            return self.recompute.late(lo, hi, late, taken, rows)
        r = touched(lo, hi, lookback=self.lookback, granularity=granularity, taken=taken, origin=origin)
        if r is None:
            return False
        lo, hi = r
        if held and self.unsure is not None and hi > self.unsure[0]:
            self.held.add(max(lo, self.unsure[0]), hi, (reason,), late)
            hi = self.unsure[0]
        if hi <= lo:
            return False
        self.recompute.dirty.add(lo, hi, (reason,), late)
        return True

    def plan(self, freshness: float | None, origin: float | None, span: float, alpha: float, beta: float,
             granularity: float | None, c_full: float) -> RecomputePlan | None:
        """The next recompute job (its range, whether it overwrites the whole table, its priority
        share), or None.

        Late data, backfills and rewritten sources (`dirty`) come first at the table's priority,
        then windows on an old SQL version at EVOLVE_SHARE of it (Olston, Graceful Logic Evolution in Web Data Processing Workflows: in the background),
        newest first, in pieces of at most `span` (c·P_i, §3.4). One full overwrite instead, from
        the origin, when the table refreshes in full, a rebuild is asked for, or the learned E(n)
        says it is cheaper than the pieces (`recompute.full_pays`, Olston, Modeling and Scheduling Asynchronous Incremental Workflows §6).
        """
        recompute = self.recompute
        if freshness is None or not recompute.has_work():
            return None
        if isinstance(recompute, Folded):  # a stateful table's rebuild, chunk by chunk
            return recompute.chunk(freshness, origin if origin is not None else freshness, span)
        origin = origin if origin is not None else freshness
        dirty, old = recompute.dirty.total(), recompute.old_length()
        share = 1.0 if recompute.rewrite_all or dirty > 0 else EVOLVE_SHARE
        if recompute.rewrite_all or self.full_refresh or full_pays(alpha, beta, dirty + old, span, freshness - origin, c_full):
            reasons = set().union(*(p.reasons for p in recompute.dirty.items)) | ({"sql"} if old > 0 or recompute.rewrite_all else set())
            late = set().union(*(p.late for p in recompute.dirty.items))
            return RecomputePlan(Piece(origin, freshness, reasons, late), True, share)
        piece = recompute.dirty.newest(span, granularity) if dirty > 0 else recompute.newest_old(span, granularity)
        assert piece is not None
        return RecomputePlan(piece, False, share)

    def take(self, lo: float, hi: float, overwrite: bool, upto: float | None = None,
             reasons: frozenset[str] | set[str] = frozenset()) -> tuple[set[str], set[str]]:
        """A job starts that rewrites `(lo, hi]` (all of it when `overwrite`): what it takes leaves
        `dirty` now, so a change while it runs is recomputed again after it. (reasons, late ids).
        A stateful table's (`reasons` say which job): a late fold takes every late row; a
        rebuild's first chunk fixes where the rebuild ends: `upto`, its F now."""
        if isinstance(self.recompute, Folded):
            if "rebuild" not in reasons:  # a late fold: every late row so far
                self.taken = self.recompute.take_late()
                return {"late"}, set().union(*(p.late for p in self.taken))
            if overwrite:
                self.recompute.next, self.recompute.to = lo, upto
            self.taken_rewrite_all = self.recompute.rewrite_all
            self.recompute.rewrite_all = False if overwrite else self.recompute.rewrite_all
            self.taken = []
            return {"rebuild"}, set()
        self.taken_rewrite_all = self.recompute.rewrite_all
        self.recompute.rewrite_all = False if overwrite else self.recompute.rewrite_all
        self.taken = self.recompute.dirty.remove(lo, hi)
        reasons = set().union(*(p.reasons for p in self.taken))
        late = set().union(*(p.late for p in self.taken))
        return reasons, late

    def committed(self, start: float, end: float, version: str, windows: int | None, replayed: bool = False) -> None:
        """A job rewrote `(start, end]` with SQL `version` (`windows`: a recompute job's count).
        `replayed`: an update job found its windows in the log (a no-op), committed by an earlier
        attempt reported failed: the changes held under it (`unsure`) made them wrong."""
        recompute = self.recompute
        if isinstance(recompute, Folded):
            recompute.taken_rows = 0
        if windows is None:
            recompute.versions.set(start, end, version)
            if self.unsure is not None:
                self._settle(end, replayed)
        elif isinstance(recompute, Folded) and self.taken:  # a late fold: no window rewritten
            recompute.recompute_jobs += 1
        else:
            recompute.done(start, end, version, windows)
            if isinstance(recompute, Folded) and recompute.next is not None:  # a rebuild chunk folded
                recompute.next = max(recompute.next, end)
        self.taken, self.taken_rewrite_all, self.rewriting = [], False, None

    def folded(self) -> float | None:
        """A stateful table's job starts: it reads every late row committed so far (an update
        job too). The earliest of them (its dependents' windows from there on may change), or None."""
        if not isinstance(self.recompute, Folded):
            return None
        self.taken = self.recompute.take_late()
        return self.taken[0].lo if self.taken else None

    def rebuilt(self, end: float) -> bool:
        """A stateful table's rebuild chunk ending at `end` finished: was it the last one, the swap?"""
        recompute = self.recompute
        return isinstance(recompute, Folded) and recompute.to is not None and end >= recompute.to and not recompute.under_way()

    def _settle(self, end: float, replayed: bool) -> None:
        """The retry of the job in `unsure` ended at `end`: a no-op (`replayed`) — the earlier
        attempt's windows are in the log, and what changed under them is recomputed; a commit —
        none of the attempts committed (none covered less than it, `NextJob.shape`): what was held
        is moot, the retry read it."""
        assert self.unsure is not None
        hi = self.unsure[1]
        if not replayed:
            self.unsure, self.held = None, Ranges()
            return
        for p in self.held.remove(-math.inf, end):
            self.recompute.dirty.add(p.lo, p.hi, p.reasons, p.late)
        self.unsure = (end, hi) if end < hi else None
        if self.unsure is None:
            self.held = Ranges()

    def failed(self, update: bool, freshness: float | None, rewrote: tuple[float, float] | None = None,
               window: tuple[float, float] | None = None) -> None:
        """The running job did not commit: the windows it took stay to recompute. After a failed
        update (of `window`) nothing above F is known to be committed, but a failure may be an
        unknown outcome that committed: its window is `unsure` until its retry says, and changes
        marked above F are held till then. `rewrote`: a failed recompute job's range — its windows
        not put back to recompute count as on an unknown SQL version (""): a later SQL change back
        to the version they had must still rewrite them."""
        if rewrote is not None and not isinstance(self.recompute, Folded):  # (what it took goes back to dirty below)
            at = rewrote[0]
            for p in sorted(self.taken, key=lambda q: q.lo):
                if p.lo > at:
                    self.recompute.versions.set(at, min(p.lo, rewrote[1]), "")
                at = max(at, p.hi)
            if at < rewrote[1]:
                self.recompute.versions.set(at, rewrote[1], "")
        for p in self.taken:
            self.recompute.dirty.add(p.lo, p.hi, p.reasons, p.late)
        if isinstance(self.recompute, Folded):
            self.recompute.late_rows, self.recompute.taken_rows = self.recompute.late_rows + self.recompute.taken_rows, 0
        self.recompute.rewrite_all = self.recompute.rewrite_all or self.taken_rewrite_all
        self.taken, self.taken_rewrite_all, self.rewriting = [], False, None
        if update and window is not None and not isinstance(self.recompute, Folded):
            lo = freshness if freshness is not None else window[0]
            self.unsure = (lo, max(window[1], self.unsure[1] if self.unsure is not None else window[1]))
            for p in self.recompute.dirty.remove(lo, math.inf):
                self.held.add(p.lo, p.hi, p.reasons, p.late)
        elif update and freshness is not None:
            self.recompute.dirty.remove(freshness, math.inf)

    def backfill(self, lo: float, hi: float, reason: str, now: float) -> bool:
        """Recompute `(lo, hi]` (warehouse.recompute); a stateful table's state is rebuilt whole:
        its folds are not invertible, so no range of it can be folded again alone. What a
        recompute job (or a full update job) that started at this instant rewrites is left to it —
        it reads what a new one would (kept backfills restored one after another on a start).
        Marked anything?"""
        if isinstance(self.recompute, Folded):
            self.recompute.rewrite_all = True
            return True
        r = self.rewriting
        parts = ((lo, min(hi, r[1])), (max(lo, r[2]), hi)) if r is not None and r[0] == now else ((lo, hi),)
        marked = False
        for a, b in parts:
            if b > a:
                self.recompute.dirty.add(a, b, (reason,))
                marked = True
        return marked

    def cancel(self, lo: float, hi: float, reason: str) -> None:
        """Forget `reason` (a backfill's) in `(lo, hi]`; ranges wrong for another reason stay. A
        stateful table's rebuild not started yet is dropped; one under way finishes (its state is
        partial until its last chunk)."""
        if isinstance(self.recompute, Folded):
            self.recompute.rewrite_all = False
            return
        for p in self.recompute.dirty.remove(lo, hi):
            left = p.reasons - {reason}
            if left:
                self.recompute.dirty.add(p.lo, p.hi, left, p.late)

    def stats(self, granularity: float | None, period: float) -> dict:
        recompute = self.recompute
        old = 0.0 if self.stateful else recompute.old_length()  # a stateful table keeps no windows to rewrite
        return {
            "refresh_mode": "full" if self.full_refresh else "incremental",
            "sql_version": recompute.sql_version,
            "windows_old_sql": window_count(old, granularity, period),
            "recompute_pending": _rebuilding(recompute) if isinstance(recompute, Folded) else recompute.dirty.total() + old + sum(
                p.hi - p.lo for p in self.taken),
            "late_rows_unfolded": recompute.late_rows + recompute.taken_rows if isinstance(recompute, Folded) else 0,
            "windows_recomputed": recompute.windows_recomputed,
            "recompute_jobs": recompute.recompute_jobs,
        }


def _rebuilding(recompute: Folded) -> float:
    """What a stateful table's rebuild under way has left to fold (event time)."""
    return recompute.to - recompute.next if recompute.under_way() and recompute.to is not None and recompute.next is not None else 0.0
