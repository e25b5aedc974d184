"""Defects the model-based test (tests/test_model.py) found in the engine and daemon,
each replayed as the shortest run found. The machine found them with more examples than CI runs
(1,000), or once the defect found before was fixed, so each is pinned here by its replay; what
fails is the machine's own drain rule (WrongWindow, RefreshKept); each passes since its fix.
"""

from __future__ import annotations

from tests.test_model import CHECKS, TRIGGERS, Warehouse, kept


def _machine() -> Warehouse:
    return type("Checked", (Warehouse,), {"checks": frozenset(CHECKS)})()


def test_a_refresh_done_is_not_kept() -> None:
    """The machine's drain rule found it only rarely; the shortest run it found, replayed. Fixed:
    the daemon settles kept refreshes after every event it hands the engine (ops.loop._dispatch),
    not only after a round that started a job."""
    m = _machine()
    try:
        m.arrive(stream="s", length=10, gap=0, rows=0)  # a's job
        m.end_job(i=0, outcome="ok")  # d1's and d3's jobs start
        m.operator(kind="refresh", table="d1")  # while d1's job runs: kept until it is done
        assert kept(m.ops)[1] == ["d1"]
    finally:
        m.teardown()  # d1's job finishes, nothing else starts: the drain


def test_a_late_partition_under_a_first_running_job_is_recomputed() -> None:
    """The machine found it with a SQL change of d1 while d2's first job ran; the same with late data."""
    m = _machine()

    def end(table: str) -> None:
        job_id = next(i for i, (j, _) in m.running.items() if j.table == table)
        m.end_job(i=sorted(m.running).index(job_id), outcome="ok")

    try:
        m.remove(table="d3")
        m.remove(table="d1")  # (and d2)
        m.arrive(stream="s", length=10, gap=0, rows=0)
        end("a")
        m.arrive(stream="s", length=10, gap=10, rows=0)  # (20, 30]: a hole (10, 20]
        end("a")
        m.readd()  # d1's first job (0, 30] starts: it reads a without (10, 20]
        end("d3")
        m.arrive_late(i=0, rows=1)  # (10, 20] loaded while d1's first job runs
        end("a")
    finally:
        m.teardown()  # d1's job commits windows 20 without the late rows; nothing recomputes them


def test_a_no_op_retry_does_not_claim_the_new_sql() -> None:
    m = _machine()
    try:
        m.arrive(stream="s", length=10, gap=0, rows=0)
        m.end_job(i=0, outcome="ok")  # d1's job (0, 10] starts with SQL 0
        m.change_sql(table="d1", version=1)
        m.end_job(i=0, outcome="unknown")  # it committed (SQL 0) but was reported failed
    finally:
        m.teardown()  # the retry is a no-op that the engine records as SQL 1: window 10 stays on SQL 0


def test_a_change_during_a_recompute_is_recomputed_after_it() -> None:
    m = _machine()
    try:
        m.arrive(stream="s", length=10, gap=0, rows=0)
        m.arrive(stream="u", length=10, gap=20, rows=0)  # b: (20, 30], a hole (0, 20]
        m.end_job(i=0, outcome="ok")
        m.arrive_late(i=0, rows=1)  # b's (0, 20], waiting for a track
        m.arrive(stream="s", length=10, gap=0, rows=0)
        m.change_sql(table="d1", version=1)
    finally:
        m.teardown()  # d2's recompute (0, 20] (d1 rewritten) runs while b loads (0, 20]: its touch is lost



class _Draws:
    """A restart's draws (which running jobs committed before the crash), fixed."""

    def __init__(self, *committed: bool) -> None:
        self.committed = list(committed)

    def draw(self, strategy: object, label: str | None = None) -> bool:
        return self.committed.pop(0)


def test_a_restart_after_a_time_slice_does_not_recompute_the_windows_it_did_not_touch() -> None:
    """Found with every input on (a seed CI does not run): a partition loaded in time slices, a
    restart after its first slice and one after its rest committed. Recovery counted the rest's
    commit as writing the whole partition (its `windows`), so d1's windows over the first slice —
    computed from rows that never changed — were found dirty and recomputed (RecomputeUntouched).
    Fixed: lake.recovery takes what a commit wrote of a partition from where its slices stopped."""
    m = type("Checked", (Warehouse,), {"checks": frozenset(CHECKS), "triggers": frozenset(TRIGGERS)})()
    try:
        m.arrive(stream="s", length=60, gap=0, rows=0)  # a loads (0, 30] first: a time slice
        m.restart(data=_Draws(True))  # the slice committed; d1 and d3 compute (0, 30]
        m.end_job(i=0, outcome="ok")  # d1's (0, 30] commits; a loads the rest (30, 60]
        m.restart(data=_Draws(False, True))  # d3's job lost, a's rest committed
        m.end_job(i=0, outcome="ok")
    finally:
        m.teardown()


def test_the_rest_of_a_sliced_partition_after_a_restart_touches_only_the_rest() -> None:
    """The same partition, one restart: the new engine did not know how far the slices had loaded
    it, so loading its rest touched the whole partition and d1's windows over the first slice
    were recomputed (RecomputeUntouched, once the reference counts what a commit wrote). Fixed:
    `Recovered.slices`; the re-delivered partition is pending from where its slices stopped."""
    m = type("Checked", (Warehouse,), {"checks": frozenset(CHECKS), "triggers": frozenset(TRIGGERS)})()
    try:
        m.arrive(stream="s", length=60, gap=0, rows=0)
        m.restart(data=_Draws(True))  # (0, 30] committed; d1 and d3 compute (0, 30]
        m.end_job(i=0, outcome="ok")  # d1's commits; a's job loads the rest: (30, 60], not (0, 60]
        assert [(j.start, j.end) for j, _ in m.running.values() if j.table == "a"] == [(30.0, 60.0)]
        m.end_job(i=1, outcome="ok")  # before: d1 recomputed (0, 30] after it
    finally:
        m.teardown()


def test_kept_backfills_restored_together_rewrite_their_range_once() -> None:
    """The long profile (HYPOTHESIS_PROFILE=long, 5,000 examples) found it: two backfills of d1's
    (0, 10] kept over a restart are restored one after the other; the first starts its recompute
    job, and the second marked the range again, so a second job rewrote windows no change had
    touched since (RecomputeUntouched). A backfill asked at the instant a recompute job of its
    range started is that job's (warehouse.derived.Derived.backfill)."""
    m = _machine()

    class _Uncommitted:
        def draw(self, strategy: object, label: str | None = None) -> bool:
            return False

    try:
        m.arrive(gap=0, length=10, rows=0, stream="s")
        m.end_job(i=0, outcome="ok")
        m.end_job(i=0, outcome="ok")
        m.backfill(length=10, start=-50, table="d1")  # (0, 10]: its recompute job starts
        m.remove(table="d1")  # (refused while d1 has a kept backfill)
        m.backfill(length=10, start=-50, table="d1")  # the same range, kept beside the first
        m.restart(data=_Uncommitted())  # the recompute job had not committed: both restored
    finally:
        m.teardown()  # the drain


def test_kept_backfills_within_a_restored_recompute_are_not_rewritten_again() -> None:
    """The long profile's find with every input (test_the_warehouse_stays_right_with_every_input):
    after SQL changes and restarts, two kept backfills, (0, 10] and (10, 20], are restored; the
    first one's recompute job takes (0, 30] (the old-SQL windows with it) and the second marked
    (10, 20] again, rewritten once more after it for no change (RecomputeUntouched)."""
    m = type("Checked", (Warehouse,), {"checks": frozenset(CHECKS), "triggers": frozenset(TRIGGERS)})()
    draws = iter([True, False, False, True, False, False, True, False])

    class _Draws:
        def draw(self, strategy: object, label: str | None = None) -> bool:
            return next(draws)

    try:
        m.arrive(gap=0, length=10, rows=0, stream="u")
        m.restart(data=_Draws())
        m.tick(dt=1)
        m.change_sql(table="d1", version=1)
        m.arrive(gap=0, length=100, rows=0, stream="s")
        m.restart(data=_Draws())
        m.end_job(i=0, outcome="ok")
        m.restart(data=_Draws())
        m.restart(data=_Draws())
        m.change_sql(table="d1", version=0)
        m.backfill(length=10, start=0, table="d1")
        m.backfill(length=10, start=10, table="d1")
        m.restart(data=_Draws())  # both restored: d1's recompute job (0, 30] starts with the first
        m.end_job(i=0, outcome="ok")
    finally:
        m.teardown()


def test_a_kept_backfill_wider_than_the_restored_recompute_marks_only_the_rest() -> None:
    """The long profile's third find (after the two above were fixed): kept backfills (0, 10] and
    (0, 20] of d1 are restored; the first one's recompute job takes (0, 10], and the second marked
    all of (0, 20], so (0, 10] was rewritten twice. Only (10, 20] is left to do."""
    m = _machine()

    class _Uncommitted:
        def draw(self, strategy: object, label: str | None = None) -> bool:
            return False

    try:
        m.arrive(gap=0, length=20, rows=0, stream="s")
        m.remove(table="d1")
        m.readd()
        m.end_job(i=0, outcome="ok")
        m.end_job(i=0, outcome="ok")
        m.remove(table="d1")
        m.readd()
        m.restart(data=_Uncommitted())
        m.backfill(length=10, start=-50, table="d1")  # (0, 10]
        m.remove(table="d1")  # (refused while d1 has a kept backfill)
        m.backfill(length=30, start=-50, table="d1")  # (0, 20], what d1 holds
        m.restart(data=_Uncommitted())
        m.end_job(i=0, outcome="ok")
    finally:
        m.teardown()


def test_a_recompute_of_unknown_outcome_then_the_old_sql_back_is_rewritten() -> None:
    """The long profile's fourth find (also at 98e438b): d1's SQL changes while its first job runs,
    its old-SQL recompute commits but is reported failed (an unknown outcome), and the SQL changes
    back: the engine believed the windows still on that SQL and never rewrote them (WrongWindow).
    A failed recompute's windows now count as on an unknown SQL version."""
    m = _machine()
    try:
        m.arrive(gap=0, length=10, rows=0, stream="s")
        m.end_job(i=0, outcome="ok")  # d1's and d3's first jobs start
        m.change_sql(table="d1", version=1)
        m.end_job(i=0, outcome="ok")  # d1's job: its recompute on the new SQL starts
        m.end_job(i=0, outcome="ok")
        m.end_job(i=0, outcome="unknown")  # the recompute committed, reported failed
        m.change_sql(table="d1", version=0)
    finally:
        m.teardown()


def _end(m: Warehouse, table: str, outcome: str = "ok") -> None:
    """`table`'s running job ends with `outcome`."""
    job_id = next(i for i, (j, _) in m.running.items() if j.table == table)
    m.end_job(i=sorted(m.running).index(job_id), outcome=outcome)


def test_an_update_of_unknown_outcome_across_a_sql_change_is_rewritten() -> None:
    """The long profile's find at 4fce582 (also at 98e438b): d1's first job, started on SQL 0,
    commits while the SQL changes to 1 but is reported failed (an unknown outcome). Its retry,
    started once a had loaded more, covered (0, 20]: the executor wrote only (10, 20], above the
    committed freshness, and the engine recorded SQL 1 over all of it; window 10 stayed on SQL 0
    (WrongWindow). A failed update job's retry covers no more than it did (Derived.unsure): it is
    a no-op that names the log's SQL version, or a commit of every window it covers."""
    m = _machine()
    try:
        m.arrive(stream="s", length=10, gap=0, rows=0)
        _end(m, "a")  # d1's first job (0, 10] starts on SQL 0
        m.change_sql(table="d1", version=1)
        m.arrive(stream="s", length=10, gap=0, rows=0)
        _end(m, "d1", "unknown")  # it committed (SQL 0), reported failed
        _end(m, "a")  # a at 20: the retry starts (it was (0, 20])
    finally:
        m.teardown()


def test_a_source_rewritten_under_an_update_of_unknown_outcome_is_recomputed() -> None:
    """The long profile's find with every input at b9147aa (also at 98e438b): d2's job commits
    window 20 from d1's SQL-0 output but is reported failed; while it backs off, d1's windows are
    rewritten on SQL 1. The engine dropped the change (nothing of d2 above F was committed, it
    thought), and the retry was a no-op: window 20 kept d1's old output (WrongWindow). Changes
    under a failed job's window are held until its retry says whether it had committed."""
    m = _machine()
    try:
        m.remove(table="d3")
        m.arrive(stream="s", length=20, gap=0, rows=0)
        m.arrive(stream="u", length=30, gap=0, rows=0)
        _end(m, "a")
        _end(m, "b")
        _end(m, "d1")  # d2's first job (0, 20] starts
        m.change_sql(table="d1", version=1)  # d1's recompute (0, 20] on SQL 1 starts
        _end(m, "d2", "unknown")  # committed, reported failed: d2 backs off
        _end(m, "d1")  # d1 rewritten while d2 backs off
    finally:
        m.teardown()  # d2's retry is a no-op: window 20 must still be recomputed


def test_late_rows_under_an_update_of_unknown_outcome_are_recomputed() -> None:
    """The long profile's find with every input at 4fce582: d2's window 20 lacked b's late rows
    after an unknown outcome of d2's job — the same cause with late data: b's hole (0, 10] is
    loaded while d2's job, which committed without it, backs off; its retry is a no-op."""
    m = _machine()
    try:
        m.remove(table="d3")
        m.arrive(stream="s", length=30, gap=0, rows=0)
        m.arrive(stream="u", length=10, gap=10, rows=0)  # b (10, 20]: a hole (0, 10]
        _end(m, "a")
        _end(m, "b")
        m.arrive(stream="u", length=20, gap=0, rows=0)  # b (20, 40]
        _end(m, "b")
        _end(m, "d1")  # d2's first job (0, 20] starts
        m.arrive_late(i=0, rows=1)  # b (0, 10] arrives; its load starts
        _end(m, "d2", "unknown")  # committed without it, reported failed
        _end(m, "b")  # the late rows loaded while d2 backs off
    finally:
        m.teardown()  # d2's retry is a no-op: window 20 must be recomputed with them


def test_a_kept_backfill_restored_with_a_full_refresh_job_is_that_job() -> None:
    """The long profile's find with every input, once the three above were fixed (also before
    them): a backfill of d3 (which refreshes in full) kept over a restart is restored at the
    instant d3's full update job starts; that job rewrites every window, yet the backfill marked
    (0, 10] again and a full recompute rewrote the table once more for no change
    (RecomputeUntouched). A full update job that started at that instant serves it, as a recompute
    job does (Derived.backfill)."""
    m = type("Checked", (Warehouse,), {"checks": frozenset(CHECKS), "triggers": frozenset(TRIGGERS)})()
    try:
        m.remove(table="d1")
        m.arrive(gap=0, length=10, rows=0, stream="s")
        m.arrive(gap=0, length=10, rows=0, stream="s")
        m.restart(data=_Draws(True))
        m.readd()
        m.end_job(i=0, outcome="ok")
        m.end_job(i=0, outcome="ok")  # d3's full job (0, 20] starts
        m.operator(kind="suspend", table="a")
        m.remove(table="d1")
        m.backfill(length=10, start=0, table="d3")  # (0, 10], kept
        m.arrive(gap=0, length=10, rows=0, stream="s")
        m.restart(data=_Draws(False, False))  # restored as d3's full job (0, 20] starts again
        m.end_job(i=0, outcome="ok")
    finally:
        m.teardown()


def test_a_kept_backfill_re_applied_to_a_table_taking_over_its_recompute_job_is_that_job() -> None:
    """The long profile's find with every input after the one above: d3's backfill starts its
    recompute job; d3 is removed and re-added while it runs, the new table takes the job over, and
    the reload re-applies the kept backfill: it marked the range again, rewritten once more after
    the job for no change (RecomputeUntouched). The job taken over serves it, as when it started."""
    m = type("Checked", (Warehouse,), {"checks": frozenset(CHECKS), "triggers": frozenset(TRIGGERS)})()
    try:
        m.tick(dt=1)
        m.arrive(gap=10, length=10, rows=0, stream="s")  # a (10, 20]
        m.restart(data=_Draws(True))  # d1 and d3 compute (10, 20]
        m.restart(data=_Draws(False, True))  # d3's committed
        m.restart(data=_Draws(False))
        m.backfill(length=10, start=10, table="d3")  # its recompute job starts
        m.remove(table="d3")
        m.readd()  # the new d3 takes the job over; the backfill is re-applied
        m.remove(table="d1")
    finally:
        m.teardown()


def test_a_refresh_asked_before_a_recompute_job_is_served_when_it_ends() -> None:
    """The long profile's find with every input after the two above (also at 1d19e59): a refresh
    of d1 asked while its first job runs, after a SQL change. That job's next is a recompute (the
    old-SQL window), not an update job, so the refresh was never served and stayed kept after the
    drain (RefreshKept). A recompute job's end serves it as an update job's does, when the table
    has nothing left to do."""
    m = type("Checked", (Warehouse,), {"checks": frozenset(CHECKS), "triggers": frozenset(TRIGGERS)})()
    try:
        m.arrive(gap=0, length=10, rows=0, stream="s")
        m.restart(data=_Draws(True))  # d1's first job (0, 10] starts on SQL 0
        m.change_sql(table="d1", version=1)
        m.operator(kind="refresh", table="d1")  # kept until served
    finally:
        m.teardown()  # d1's job, then its recompute of window 10 on SQL 1: nothing left


def test_an_update_of_unknown_outcome_is_retried_before_a_full_recompute() -> None:
    """Not a find of the machine: the case the held changes (`Derived.unsure`) open, built by
    hand. d1's update job (40, 60] commits but is reported failed after a late partition (40, 50]
    was loaded under it; a full recompute (late data and a SQL change) then ranked first and
    rewrote what the log held, (0, 60], and the no-op retry after it recomputed (40, 50] again for
    no change (RecomputeUntouched). A table's retry of unknown outcome goes before its recomputes."""
    m = _machine()
    try:
        m.remove(table="d3")
        m.remove(table="d2")
        m.arrive(stream="s", length=10, gap=0, rows=0)  # (0, 10]
        _end(m, "a")
        _end(m, "d1")
        m.arrive(stream="s", length=10, gap=10, rows=0)  # (20, 30]: a hole (10, 20]
        _end(m, "a")
        _end(m, "d1")
        m.arrive(stream="s", length=10, gap=0, rows=0)  # (30, 40]
        _end(m, "a")
        _end(m, "d1")
        m.arrive(stream="s", length=10, gap=10, rows=0)  # (50, 60]: a hole (40, 50]
        _end(m, "a")  # d1's update job (40, 60] starts
        m.change_sql(table="d1", version=1)
        m.arrive_late(i=0, rows=1)  # (10, 20]
        _end(m, "a")
        m.arrive_late(i=0, rows=1)  # (40, 50], under d1's running job
        _end(m, "a")
        _end(m, "d1", "unknown")  # committed, reported failed
        m.tick(dt=5)
    finally:
        m.teardown()


def test_a_kept_backfill_restored_after_a_piece_of_it_is_rewritten_only_in_the_rest() -> None:
    """The long profile's find with every input after the refresh above (also at 1d19e59): d1's
    backfill of (0, 50] runs in pieces, newest first; (20, 50] commits, and a restart while (0, 20]
    runs restored the whole backfill, so (20, 50] was rewritten again for no change
    (RecomputeUntouched). A restart re-applies only what its jobs have not covered."""
    m = type("Checked", (Warehouse,), {"checks": frozenset(CHECKS), "triggers": frozenset(TRIGGERS)})()
    try:
        m.arrive(gap=0, length=60, rows=0, stream="s")  # loaded in two slices
        m.end_job(i=0, outcome="ok")
        m.restart(data=_Draws(True, True))
        m.restart(data=_Draws(False, True))
        m.restart(data=_Draws(True))  # d1 holds (0, 60]
        m.backfill(length=100, start=-50, table="d1")  # (0, 50]: its piece (20, 50] starts
        m.restart(data=_Draws(False))
        m.end_job(i=0, outcome="ok")  # (20, 50] rewritten; (0, 20] starts
        m.restart(data=_Draws(False))  # kept: (0, 20] is left
    finally:
        m.teardown()
