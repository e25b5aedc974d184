"""Model-based test of the pure Scheduler ("Prove it"): hypothesis stateful testing.

The Scheduler (warehouse.scheduler) runs against a modelled Delta log (tests.model_ref.ModelLake:
what the lake executor would commit for each StartJob, planned from the log alone) and a small
reference model (tests.model_ref.Reference: what must be true of the warehouse, written without
the engine). Rules: arrivals on two streams (on time, with holes filled late, bursts of rows,
partitions long enough to be loaded in time slices, §3.4), job finishes, failures, unknown
outcomes (committed, reported failed: the executor re-reads the log), partitions quarantined
after acceptance, SIGHUP-like reconfigures (a derived SQL changed, tables removed and re-added),
operator actions (suspend, resume, refresh, backfill — also before a table's origin) and
restarts that rebuild a new Scheduler from the modelled log the way the daemon does
(lake.recovery.recover, then the kept operator actions, then the landing zone re-delivered).

At every step: each partition's rows are committed once; a recompute rewrites only windows some
change touched (a source commit after the window was read, its SQL, an operator's backfill, a
failed job over it), §2.2; the pending-row and pending-partition totals are what they stand
for. Once arrivals stop and every job is finished the warehouse drains: nothing pending, nothing
dirty, no operator action kept, every derived window its current SQL over the final sources.

Every call that drives the Scheduler is in the adapter below (`new_scheduler` … `kept`), so a
change of the engine's API is a change here only.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ops.actions import ActionRejected, ActionRequest, ActionStore, OperatorActions
from tests.conftest import examples as conftest_examples
from tests.model_ref import Arrived, ModelLake, Plan, Reference, unjustified, window_ends
from warehouse.config import FreshetConfig, parse_config
from warehouse.events import JobFailed, JobFinished, PartitionArrived, Reconfigure, StartJob, Tick
from warehouse.lake.outcome import noop_outcome
from warehouse.lake.recovery import recover
from warehouse.scheduler import Scheduler


# ---- the adapter: every call that drives the engine ---------------------------------------------
def new_scheduler(config: FreshetConfig, now: float, recovered: dict[str, Any]) -> Scheduler:
    return Scheduler(config, now=now, recovered=recovered)


def handle(sched: Scheduler, event: Any, now: float) -> list[StartJob]:
    return sched.handle(event, now)


def reconfigure(sched: Scheduler, config: FreshetConfig, now: float, recovered: dict[str, Any]) -> list[StartJob]:
    return sched.handle(Reconfigure(config=config, recovered=recovered), now)


def act(ops: OperatorActions, sched: Scheduler, kind: str, table: str, now: float, **kw: Any) -> list[StartJob] | None:
    """An operator action as the daemon takes it (validated, kept, applied); None if refused.
    kind: suspend | resume | refresh | backfill (start=, end=)."""
    queued: list[ActionRequest] = []
    ops._enqueue = queued.append
    ops._snapshot = lambda: sched.stats(now)
    body = {"from": kw["start"], "to": kw["end"]} if kind == "backfill" else {}
    try:
        ops.request(table, "refresh" if kind == "backfill" else kind, body)
    except ActionRejected:
        return None
    jobs: list[StartJob] = []
    for req in queued:
        jobs += ops.apply(sched, req, now)
    return jobs


def restore(ops: OperatorActions, sched: Scheduler, now: float) -> list[StartJob]:
    return ops.restore(sched, now) + sched.handle(Tick(), now)


def started(ops: OperatorActions, sched: Scheduler) -> None:
    """The daemon's settling after every event it hands to the engine (ops.loop._dispatch)."""
    ops.settle(sched)


def job_finished(ops: OperatorActions, job: StartJob) -> None:
    ops.job_finished(job)


def stopped(ops: OperatorActions) -> None:
    """The daemon stops: what the loop forgot is written (`ActionStore.flush`, as `_shutdown` does)."""
    assert ops.store.flush(5)


def pending_rows(sched: Scheduler, table: str) -> tuple[int, int]:
    """(the engine's running total of pending rows, the sum over its pending partitions)."""
    log = sched._tables[table].log
    assert log is not None, table
    return log.rows, sum(p.arrival.rows for p in log.pending)


def kept(ops: OperatorActions) -> tuple[list[dict[str, Any]], list[str]]:
    """(backfills, refreshes) the daemon keeps to re-apply at its next start."""
    return ops.store.backfills(), ops.store.refreshes()


def operator_actions(root: Path, config: FreshetConfig, now: float) -> OperatorActions:
    return OperatorActions(ActionStore(root / "_freshet" / "actions.json"), lambda: config, lambda: None,
                           lambda req: None, lambda table, action: None, lambda: now)


# ---- the warehouse -------------------------------------------------------------------------------
STREAMS = {"s": "a", "u": "b"}  # stream → its base table
LATENESS = {"s": 0, "u": 10}
SQL = {
    "d1": ["SELECT ts, v FROM a", "SELECT ts, v + 1 AS v FROM a", "SELECT ts, v * 2 AS v FROM a"],
    "d2": ["SELECT ts, v FROM d1 UNION ALL SELECT ts, v FROM b", "SELECT ts, v FROM d1 UNION ALL SELECT ts, -v AS v FROM b"],
    "d3": ["SELECT ts, v FROM a", "SELECT ts, v + 3 AS v FROM a"],
}
DERIVED = {"d1": (["a"], 10), "d2": (["d1", "b"], 20), "d3": (["a"], 10)}  # sources, granularity
TABLES = ["a", "b", "d1", "d2", "d3"]


def make_config(root: Path, sql: dict[str, int], present: set[str]) -> FreshetConfig:
    cost = {"alpha": 1, "beta": 0.1}
    tables: list[dict[str, Any]] = [{"name": b, "stream": s, "priority": 1, "cost": cost} for s, b in STREAMS.items()]
    for name, (sources, g) in DERIVED.items():
        if name in present:
            tables.append({"name": name, "sources": sources, "granularity": g, "sql": SQL[name][sql[name]],
                           "priority": {"d1": 5, "d2": 2, "d3": 1}[name], "cost": cost,
                           **({"refresh_mode": "full"} if name == "d3" else {})})
    return parse_config({
        "warehouse": {"root": str(root / "data"), "landing": str(root / "landing")},
        "streams": [{"name": s, "period": 10, "lateness": LATENESS[s]} for s in STREAMS],
        "tables": tables,
        "scheduler": {"tracks": 2, "chop": "auto", "retry_backoff": 1, "retry_backoff_max": 4},
    })


# ---- what is checked, and the defects today's engine has --------------------------------------------
class RecomputeUntouched(AssertionError):
    """A recompute rewrote committed windows no change touched."""


class BackfillKept(AssertionError):
    """The warehouse drained, but a backfill is still kept for the next start."""


class BackfillForgotten(AssertionError):
    """A backfill kept for a table that a reload removed and re-added never runs (the engine's new
    table does not have it; only a restart would re-apply it)."""


class RefreshKept(AssertionError):
    """The warehouse drained, but a refresh is still kept for the next start."""


class DroppedCounts(AssertionError):
    """A partition quarantined after acceptance still counts as arrived."""


class WrongWindow(AssertionError):
    """After the drain a derived window is not its current SQL over the final sources (always checked)."""


CHECKS = {RecomputeUntouched, BackfillKept, BackfillForgotten, RefreshKept, DroppedCounts}


TRIGGERS = frozenset({"slices", "backfill_outside", "quarantine", "reload_backfill"})  # every input


class Warehouse(RuleBasedStateMachine):
    """One warehouse: the engine, the modelled lake, the reference and the operator's store.

    `triggers` turns on the inputs that once set off a defect: "slices"
    (partitions longer than c·P, §3.4), "backfill_outside" (backfills from before a table's
    origin, and of the full-refresh table), "quarantine" (partitions found unloadable after acceptance),
    "reload_backfill" (a table removed while a backfill of it is kept)."""

    checks: frozenset[type] = frozenset(CHECKS)
    triggers: frozenset[str] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="freshet-model-"))
        self.now = 0.0
        self.sql = {name: 0 for name in DERIVED}
        self.present = set(TABLES)
        self.config = make_config(self.root, self.sql, self.present)
        self.lake = ModelLake(self.config)
        self.ref = Reference()
        self.cursor = {s: 0.0 for s in STREAMS}
        self.holes: list[tuple[str, float, float]] = []
        self.n = 0
        self.running: dict[int, tuple[StartJob, Plan]] = {}
        self.in_step = False
        self.reloaded: set[str] = set()  # backfills kept for a table a reload removed
        self.stores: list[ActionStore] = []  # every instance's: their writer threads end before the root goes
        self._instance([])

    def _instance(self, deliver: list[Arrived]) -> None:
        """A new Scheduler from the modelled log (ops.daemon._startup)."""
        self.delivered: set[str] = set()
        self.done: set[str] = set()  # partitions this instance was told are loaded
        self.sched = new_scheduler(self.config, self.now, recover(self.config, self.lake).recovered)
        self.ops = operator_actions(self.root, self.config, self.now)
        self.stores.append(self.ops.store)
        self._took(restore(self.ops, self.sched, self.now))
        for a in deliver:
            self._deliver(a)

    def teardown(self) -> None:
        try:
            if not self.in_step:  # the run ended without a failure: it must drain
                self.drain()
        finally:
            for store in self.stores:
                store.flush()
            shutil.rmtree(self.root, ignore_errors=True)

    def _fail(self, kind: type, message: str) -> None:
        if kind in self.checks:
            raise kind(message)

    # ---- feeding the engine -------------------------------------------------------------------------
    def _deliver(self, a: Arrived) -> None:
        self.delivered.add(a.pid)
        ev = PartitionArrived(stream=a.stream, partition_id=a.pid, start=a.start, end=a.end, rows=a.rows,
                              fingerprint=a.pid)
        self._took(handle(self.sched, ev, self.now))

    def _took(self, jobs: list[StartJob]) -> None:
        """Jobs the engine started: check them against the log, plan what each will commit."""
        for job in jobs:
            assert job.job_id not in self.running
            assert all(j.table != job.table for j, _ in self.running.values()), f"two writers of {job.table}"
            assert all(j.track != job.track for j, _ in self.running.values()), f"two jobs on track {job.track}"
            if job.kind == "recompute":
                self._check_recompute(job)
            elif job.kind == "derived":
                sources, g = DERIVED[job.table]
                safe = [self.lake.state(s).safe_freshness for s in sources]
                assert None not in safe, f"{job.table} computed before its sources were loaded"
                edge = math.floor(min(safe) / g) * g
                assert job.end <= edge, f"{job.table} computed past its sources' safe trailing edge {edge} (§2.2)"
            self.running[job.job_id] = (job, self.lake.plan(job))
        started(self.ops, self.sched)

    def _check_recompute(self, job: StartJob) -> None:
        why = self.ref.reasons(self.config, self.lake, job.table, job.start, job.end)
        if job.full:  # one overwrite instead of the pieces (cheaper, or a full-refresh table): something changed
            if why and not any(why.values()):
                self._fail(RecomputeUntouched, f"{job.table}: full recompute {job.start}..{job.end} with no "
                                               f"window touched")
            return
        bad = unjustified(why)
        if bad:
            self._fail(RecomputeUntouched, f"{job.table}: recompute ({job.start}, {job.end}] rewrites windows "
                                           f"{bad} that no change touched")

    def _end(self, job_id: int, outcome: str) -> None:
        job, plan = self.running.pop(job_id)
        if outcome in ("ok", "unknown"):
            committed = self.lake.commit(plan, self.now)
        if outcome == "ok":
            if job.kind == "base":
                self.done.update(p.partition_id for p in job.arrivals if p.end <= job.end)
            self.lake.reported(job, plan.written if committed else None)
            job_finished(self.ops, job)
            # a no-op names the SQL version the log holds over its window, as the executor's does
            ev: Any = (JobFinished(job_id=job.job_id, duration=1.0) if committed
                       else noop_outcome(job, 1.0, self.lake.state(job.table), "already committed").event())
        elif outcome == "bad":
            st = self.lake.state(job.table)
            pid = next(p.partition_id for p in job.arrivals if p.end <= job.end and p.partition_id not in
                       st.partitions and p.partition_id not in st.slices)
            self.ref.dropped.add(pid)
            ev = JobFailed(job_id=job.job_id, reason="file deleted", bad_partitions=(pid,))
        else:
            self.ref.failed.append((job.table, self.lake.tick(), job.start, job.end))
            ev = JobFailed(job_id=job.job_id, reason="boom" if outcome == "fail" else "outcome unknown")
        self._took(handle(self.sched, ev, self.now))

    def _droppable(self, job: StartJob) -> bool:
        st = self.lake.state(job.table)
        return job.kind == "base" and any(p.end <= job.end and p.partition_id not in st.partitions
                                          and p.partition_id not in st.slices for p in job.arrivals)

    def _reconfigure(self) -> None:
        """SIGHUP (ops.daemon._reload): recover from the log, switch the executor, then the engine."""
        self.config = make_config(self.root, self.sql, self.present)
        state = recover(self.config, self.lake)
        self.lake.config = self.config
        self.ops._config = lambda: self.config
        before = {t.name for t in self.sched.config.tables}
        jobs = reconfigure(self.sched, self.config, self.now, state.recovered)
        added = {t.name for t in self.config.tables} - before
        self._took(jobs + (self.ops.restore(self.sched, self.now, added) if added else []))

    # ---- rules --------------------------------------------------------------------------------------
    def _step(self) -> None:
        self.in_step = True

    @rule(stream=st.sampled_from(sorted(STREAMS)), length=st.sampled_from([10, 10, 20, 30, 60, 100]),
          gap=st.sampled_from([0, 0, 0, 10, 20]), rows=st.sampled_from([0, 5, 100, 10_000]))
    def arrive(self, stream: str, length: int, gap: int, rows: int) -> None:
        """A partition on time — or after a hole its stream fills later — a burst, or a long one
        (loaded in time slices of c·P = 30 s)."""
        self._step()
        if length > 30 and "slices" not in self.triggers:
            length = 30
        start = self.cursor[stream] + gap
        if gap:
            self.holes.append((stream, self.cursor[stream], start))
        self.cursor[stream] = start + length
        self._arrive(stream, start, start + length, rows)
        self.in_step = False

    def _arrive(self, stream: str, start: float, end: float, rows: int) -> None:
        self.n += 1
        a = Arrived(stream, f"{stream}{self.n}", start, end, rows)
        self.ref.arrived[a.pid] = a
        self.now = max(self.now + 1, end)
        self._deliver(a)

    @precondition(lambda self: self.holes)
    @rule(i=st.integers(0, 9), rows=st.sampled_from([1, 50]))
    def arrive_late(self, i: int, rows: int) -> None:
        """A partition for a hole: below what is loaded (late data, its dependents' windows are wrong)."""
        self._step()
        stream, start, end = self.holes.pop(i % len(self.holes))
        self._arrive(stream, start, end, rows)
        self.in_step = False

    @precondition(lambda self: self.running)
    @rule(i=st.integers(0, 9), outcome=st.sampled_from(["ok", "ok", "ok", "ok", "fail", "unknown", "bad"]))
    def end_job(self, i: int, outcome: str) -> None:
        """A running job ends: committed, failed, committed but reported failed, or a partition of it
        found unloadable (quarantined after acceptance)."""
        self._step()
        self.now += 1
        job_id = sorted(self.running)[i % len(self.running)]
        if outcome == "bad" and "quarantine" not in self.triggers:
            outcome = "ok"
        if outcome == "bad" and not self._droppable(self.running[job_id][0]):
            outcome = "fail"
        self._end(job_id, outcome)
        self.in_step = False

    @rule(dt=st.sampled_from([1, 5, 30]))
    def tick(self, dt: int) -> None:
        self._step()
        self.now += dt
        self._took(handle(self.sched, Tick(), self.now))
        self.in_step = False

    @rule(table=st.sampled_from(sorted(SQL)), version=st.integers(0, 2))
    def change_sql(self, table: str, version: int) -> None:
        """SIGHUP with a derived table's SQL changed (Olston, Graceful Logic Evolution in Web Data Processing Workflows: its old windows are rewritten)."""
        self._step()
        self.sql[table] = version % len(SQL[table])
        self.ref.sql_changes.append((table, self.lake.tick()))
        self._reconfigure()
        self.in_step = False

    @rule(table=st.sampled_from(["d1", "d2", "d3"]))
    def remove(self, table: str) -> None:
        """SIGHUP without a derived table (and what depends on it)."""
        self._step()
        gone = {table, "d2"} if table == "d1" else {table}
        held = {b["id"] for b in self.ops.store.backfills() if b["table"] in gone & self.present}
        if held and "reload_backfill" not in self.triggers:
            self.in_step = False
            return
        self.reloaded |= held
        self.present -= gone
        self._reconfigure()
        self.in_step = False

    @precondition(lambda self: len(self.present) < len(TABLES))
    @rule()
    def readd(self) -> None:
        """SIGHUP with every table back: they start from what their Delta logs hold."""
        self._step()
        self.present = set(TABLES)
        self._reconfigure()
        self.in_step = False

    @rule(kind=st.sampled_from(["suspend", "resume", "refresh"]), table=st.sampled_from(TABLES))
    def operator(self, kind: str, table: str) -> None:
        self._step()
        if kind == "refresh" and self.running and table not in self.present:  # most often while its job runs
            table = self.running[min(self.running)][0].table
        self._took(act(self.ops, self.sched, kind, table, self.now) or [])
        self.in_step = False

    @rule(table=st.sampled_from(["d1", "d2", "d3"]), start=st.sampled_from([-50, 0, 10, 30, 60]),
          length=st.sampled_from([10, 30, 100]))
    def backfill(self, table: str, start: int, length: int) -> None:
        """refresh --from --to: recompute a range of a derived table (also from before its origin)."""
        self._step()
        if "backfill_outside" not in self.triggers:  # within what the table covers; not the full-refresh one
            table = "d1" if table == "d3" else table
            origin = self.lake.state(table).origin
            start = max(start, origin) if origin is not None else start
        jobs = act(self.ops, self.sched, "backfill", table, self.now, start=start, end=start + length)
        if jobs is not None:
            kept_now = [b for b in self.ops.store.backfills() if b["table"] == table]
            b = kept_now[-1] if kept_now else {"start": start, "end": start + length}
            self.ref.backfills.append((table, b["start"], b["end"], self.lake.tick()))
            self._took(jobs)
        self.in_step = False

    @precondition(lambda self: self.n > 0)
    @rule(data=st.data())
    def restart(self, data: st.DataObject) -> None:
        """The daemon stops at any instant: each running job committed or not; a new Scheduler is
        built from the log, kept actions re-applied, unloaded partitions re-delivered from landing."""
        self._step()
        for job_id in sorted(self.running):
            job, plan = self.running.pop(job_id)
            if data.draw(st.booleans(), label=f"job {job_id} committed before the crash"):
                self.lake.commit(plan, self.now)
            self.ref.failed.append((job.table, self.lake.tick(), job.start, job.end))  # its outcome is unknown
        self.now += 1
        loaded = {pid for name in STREAMS.values() for pid in self.lake.state(name).partitions}
        stopped(self.ops)
        self._instance([a for a in self.ref.arrived.values() if a.pid not in loaded and a.pid not in self.ref.dropped])
        self.in_step = False

    # ---- at every step ------------------------------------------------------------------------------
    @invariant()
    def pending_totals(self) -> None:
        self._step()
        stats = {t.name: t for t in self.sched.stats(self.now).tables}
        for stream, name in STREAMS.items():
            total, summed = pending_rows(self.sched, name)
            assert total == summed, f"{name}: pending rows {total}, its partitions hold {summed}"
            want = {pid for pid in self.delivered - self.done - self.ref.dropped if pid.startswith(stream)}
            assert stats[name].pending_partitions == len(want), (
                f"{name}: {stats[name].pending_partitions} partitions pending, expected {sorted(want)}")
            arrived = stats[name].arrived
            live = [self.ref.arrived[p].end for p in self.delivered - self.ref.dropped if p.startswith(stream)]
            fresh = stats[name].freshness
            if arrived is not None and arrived not in live and (fresh is None or arrived > fresh):
                self._fail(DroppedCounts, f"{name}: arrived {arrived} counts a quarantined partition "
                                          f"(backlog {stats[name].backlog}, live ends {sorted(live)})")
        self.in_step = False

    # ---- the drain ------------------------------------------------------------------------------------
    def drain(self) -> None:
        """Arrivals stop, every table is back and resumed, every job finishes: the warehouse drains."""
        if self.present != set(TABLES):
            self.present = set(TABLES)
            self._reconfigure()
        for table in sorted(self.ops.store.suspended()):
            self._took(act(self.ops, self.sched, "resume", table, self.now) or [])
        for _ in range(5000):
            if self.running:
                self.now += 1
                self._end(min(self.running), "ok")
                continue
            wake = self.sched.next_wakeup()
            if wake is None:
                break
            self.now = max(self.now, wake)
            self._took(handle(self.sched, Tick(), self.now))
        else:
            raise AssertionError("the warehouse does not drain")
        stats = {t.name: t for t in self.sched.stats(self.now).tables}
        for name, t in stats.items():
            assert t.state == "idle" and t.pending_partitions == 0, f"{name}: {t.state}, {t.pending_partitions} pending"
            assert not t.recompute_pending and not t.windows_old_sql, (
                f"{name}: {t.recompute_pending} s to recompute, {t.windows_old_sql} windows on an old SQL")
        for stream, name in STREAMS.items():
            assert self.lake.rows.get(name, set()) == self.ref.base_rows(stream), f"{name}: rows lost"
            live = [a.end for a in self.ref.live(stream)]
            assert self.lake.state(name).freshness == (max(live) if live else None), f"{name}: freshness"
        for name, (sources, g) in DERIVED.items():
            st_ = self.lake.state(name)
            safe = [self.lake.state(s).safe_freshness for s in sources]
            edge = None if None in safe else math.floor(min(safe) / g) * g
            if st_.freshness is None:
                assert edge is None or st_.origin is None and not self.lake.wins.get(name), f"{name}: never computed"
                continue
            assert st_.freshness == edge, f"{name}: computed through {st_.freshness}, its sources' safe edge is {edge}"
            wins = self.lake.wins.get(name, {})
            assert sorted(wins) == window_ends(st_.origin, st_.freshness, g), f"{name}: windows missing or extra"
            for e, w in sorted(wins.items()):
                right = self.ref.truth(self.config, self.lake, name, e)
                if w.value != right:
                    raise WrongWindow(f"{name}: window {e} is {w.value}, its SQL over the final sources is {right}")
        backfills, refreshes = kept(self.ops)
        forgotten = [b for b in backfills if b["id"] in self.reloaded]
        if forgotten:
            self._fail(BackfillForgotten, f"backfills kept after the drain, their table removed and re-added: "
                                          f"{forgotten}")
        if backfills:
            self._fail(BackfillKept, f"backfills kept after the drain: {backfills}")
        if refreshes:
            self._fail(RefreshKept, f"refreshes kept after the drain: {refreshes}")


# ---- the tests ------------------------------------------------------------------------------------
def _run(checks: set[type], triggers: set[str], examples: int, shrink: bool = True) -> None:
    machine = type("Checked", (Warehouse,), {"checks": frozenset(checks), "triggers": frozenset(triggers)})
    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if shrink else [])
    run_state_machine_as_test(machine, settings=settings(
        max_examples=conftest_examples(examples), stateful_step_count=40, derandomize=True, database=None, deadline=None,
        phases=phases, report_multiple_bugs=False, print_blob=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


def test_the_scheduler_keeps_the_warehouse_right() -> None:
    """Every rule and every check, strict, on the common inputs (partitions that fit one job,
    backfills within what a table holds, no quarantine after acceptance, no reload of a table
    with a kept backfill)."""
    _run(CHECKS, set(), examples=150)


def test_the_warehouse_stays_right_with_every_input() -> None:
    """Every input, with long partitions (time slices), backfills outside the tables, quarantines
    after acceptance and reloads that drop and re-add a table with a kept backfill; every check."""
    _run(CHECKS, set(TRIGGERS), examples=120)
