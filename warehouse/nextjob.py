"""What a table's next job is: its window, n of E(n), and how the basic algorithm sees it.

A base job loads its backlog (warehouse.backlog), a derived job the window up to its sources'
trailing edge (§2.2), each chopped to about c·P_i (§3.4; with `chop: auto`, c where chopping pays,
policies.chopping.chop_pays) — or, for a derived table, a recompute job rewriting committed
windows (warehouse.derived) when that ranks first. The Candidate is what the basic algorithm
(§3.1, policies.basic) orders. Queries only: nothing here changes a table. Knows nothing of the
Scheduler: it is handed the knobs and the pace.
"""

from __future__ import annotations

from collections.abc import Callable

from policies.basic import Candidate, marginal_benefit, policy_key, policy_key_of
from policies.chopping import AUTO_C, Pace, chop_pays, chop_window
from policies.reservation import ValueRanking
from warehouse.recompute import RecomputePlan
from warehouse.table import JobShape, Table

__all__ = ["JobShape", "NextJob", "fixed_cost"]


def _capped(c: float | None, cap: float | None) -> float | None:
    """c, at most `cap` (None: no chopping, no cap)."""
    return c if cap is None or (c is not None and c <= cap) else cap


def fixed_cost(t: Table, delta_f: float, cost: float) -> float:
    """What a job of ΔF seconds of data estimated at `cost` costs beyond β per second of data, at least
    α (§2.4): α, or more for a full refresh (its history) or a burst (rows beyond the typical rate).
    The fixed cost `policies.basic.whittle_index` and `amortized_benefit` divide by."""
    a, f = t.cost.alpha, cost - t.cost.beta * delta_f
    return f if f > a else a


_shape = tuple.__new__  # JobShape(…) without its Python-level __new__: it is built on every decision's path


class NextJob:
    """The next job of any table under one configuration (chopping, policy key)."""

    __slots__ = ("auto", "chop", "key", "key_of", "pace", "ranking", "tracks")

    def __init__(self, chop: float | str | None, policy: str, pace: Pace) -> None:
        self.chop = chop
        self.auto = chop == "auto"
        self.key: Callable[[Candidate], tuple] = policy_key(policy)  # the basic algorithm's sort key (§3.1)
        self.key_of = policy_key_of(policy)  # the same from the job's numbers
        self.pace = pace  # observed / estimated durations (chop auto, §3.4)
        self.ranking = ValueRanking(())  # the tables by regular marginal benefit (§3.1), on each (re)partition
        self.tracks = 1  # N, on each (re)partition

    def shape(self, t: Table, cap: float | None = None) -> JobShape:
        """The shape of the update job t would run now, chopped (§3.4); with `chop: auto` a
        partition longer than the chop bound is loaded in time slices (`policies.chopping.time_slice`); a full refresh starts at the
        origin. A fixed c's shape holds while the table's version and its stream's rate do: the
        one the Scheduler kept when it queued the job (`QueuePlace.shape`) is read, never written here.
        `cap`: c at most this (an overdue job, warehouse.overdue.OVERDUE_CHOP)."""
        if t.log is not None:  # warehouse.backlog: O(log n) however long the backlog
            assert t.rate is not None
            if self.auto:
                c = self.chop_c(t)
            else:
                c = self.chop
                q = t.queue
                if cap is None and q.shape is not None and q.shape_version == q.version and q.keyed_rate == t.rate.rate:
                    return q.shape
            if cap is not None:
                c = _capped(c, cap)
            start, end, new_f, count, sliced = t.log.shape(t.freshness, t.period, c, self.auto)  # type: ignore[arg-type]
            n = end - start if t.rate.rate is None else t.log.work(t.rate, count, start, end)  # (no rows: ΔF)
            return _shape(JobShape, (start, end, new_f, count, sliced, n))
        start = t.freshness if t.freshness is not None else t.origin
        assert start is not None and t.derived is not None and t.derived.edge is not None
        if t.derived.full_refresh:  # a full refresh computes the table from its origin (docs/warehouse.md), up to
            # the edge: a chopped one would cost as much and land less (§3.4's pieces are cheaper
            # because they load less), so the table would fall behind for good
            start = t.origin if t.origin is not None else start
            end = t.derived.edge if t.derived.unsure is None else min(t.derived.edge, t.derived.unsure[1])
            return _shape(JobShape, (start, end, end, 0, False, end - start))
        if t.derived.unsure is not None:  # the retry of a failed job covers what it did: a no-op iff it committed
            end = min(t.derived.edge, t.derived.unsure[1])
        else:
            end = chop_window(start, t.derived.edge, t.period, _capped(self.chop_c(t), cap), t.granularity)
        return _shape(JobShape, (start, end, end, 0, False, end - start))

    def chop_c(self, t: Table) -> float | None:
        """c for t's next job: the configured one, or, with `chop: auto`, the rule of §3.4 extended
        (policies.chopping.chop_pays)."""
        if not self.auto:
            return self.chop  # type: ignore[return-value]
        rank = self.ranking
        load = rank.total / self.tracks * self.pace.long  # U_tot·m/N
        if t.log is not None:
            assert t.rate is not None
            ref, end = t.log.whole(t.freshness)
            delta, n = end - ref, t.log.work(t.rate, len(t.log.pending), ref, end)
        else:
            assert t.derived is not None and t.derived.edge is not None
            delta = n = t.derived.edge - (t.freshness if t.freshness is not None else t.origin)
        benefit = marginal_benefit(t.inherited_priority, delta, t.cost.estimate(n))
        return chop_pays(self.pace, load, benefit, rank.best, t.cost.alpha, t.cost.beta * t.period, rank.load_above,
                         self.tracks)

    def candidate(self, t: Table, cap: float | None = None) -> tuple[Candidate, bool]:
        """(t's next job, is it the recompute job?): its update job (chopped at `cap`, as `shape`),
        or — when it ranks first — its recompute job (warehouse.recompute: §3.1's benefit with ΔF =
        the range made right)."""
        derived = t.derived
        upd = self.update(t, cap) if derived is None or derived.has_update(
            t.freshness if t.freshness is not None else t.origin) else None
        if upd is not None and (derived is None or derived.full_refresh or derived.unsure is not None):
            return upd, False  # a full update rewrites every window anyway; a retry says what is committed first
        plan = self.recompute(t)
        if plan is None:
            assert upd is not None
            return upd, False
        piece, overwrite, share = plan.piece, plan.overwrite, plan.share
        cost = t.cost.estimate(piece.hi - piece.lo)
        q = t.queue
        rec = Candidate(table=t.name, priority=t.inherited_priority * share, delta_f=piece.hi - piece.lo,
                        cost=cost, release=q.release, period=t.period, seq=q.seq, rand=q.rand,
                        fixed=fixed_cost(t, piece.hi - piece.lo, cost))
        if (upd is None or overwrite and derived is not None and derived.recompute.rewrite_all
                or self.key(rec) < self.key(upd)
                or t.jobs.consecutive_failures and derived is not None and derived.stateful and "rebuild" in piece.reasons):
            # (a rebuild goes first: the new SQL's schema may not fit the old windows; a stateful
            # table's update job that failed during its rebuild waits for the swap: a changed
            # increment's columns may not fit the live state until then, lake.rebuild)
            return rec, True
        return upd, False

    def update(self, t: Table, cap: float | None = None) -> Candidate:
        """t's update job as the basic algorithm sees it: ΔF over E(n) (§3.1)."""
        delta_f, cost = self._update(t, self.shape(t, cap) if cap is not None else None)
        q = t.queue
        return Candidate(table=t.name, priority=t.inherited_priority, delta_f=delta_f, cost=cost,
                         release=q.release, period=t.period, seq=q.seq, rand=q.rand, fixed=fixed_cost(t, delta_f, cost))

    def _update(self, t: Table, shape: JobShape | None = None) -> tuple[float, float]:
        """(ΔF, E(n)) of t's update job (of `shape`, if given: its `shape(t)`)."""
        s = self.shape(t) if shape is None else shape
        return s.new_freshness - (t.freshness if t.freshness is not None else s.start), t.cost.estimate(s.work)

    def queue_key(self, t: Table, shape: JobShape | None = None) -> tuple:
        """`key(candidate(t)[0])`, the key t's job waits by in the ready queues — without building
        the Candidate where t has update jobs only (a base table; `shape`: its `shape(t)`, if known)."""
        if t.derived is not None:
            return self.key(self.candidate(t)[0])
        delta_f, cost = self._update(t, shape)
        q = t.queue
        return self.key_of(t.inherited_priority, delta_f, cost, q.release, t.period, q.seq, q.rand,
                           fixed_cost(t, delta_f, cost))

    def recompute(self, t: Table) -> RecomputePlan | None:
        """t's next recompute job (its range, whether it overwrites the table, its priority share), or None
        (warehouse.derived.Derived.plan), in pieces of at most c·P_i (§3.4)."""
        if t.derived is None:
            return None
        span = max((self.chop if isinstance(self.chop, float | int) else AUTO_C) * t.period, t.granularity or 0.0)
        return t.derived.plan(t.freshness, t.origin, span, t.cost.alpha, t.cost.beta, t.granularity, AUTO_C)
