"""A stateful table in the engine: released and chopped like a derived table, its
cost in the increment, never a window rewrite — a late partition or a changed increment start no
recompute job; a backfill, or a changed increment with `rebuild: true`, rebuilds the state from
the origin in chunks of at most c·P, resumed after a restart. The engine alone (no Spark)."""

from __future__ import annotations

from tests.helpers_engine import config
from warehouse.events import (
    Backfill,
    JobFinished,
    PartitionArrived,
    Reconfigure,
    Resume,
    StartJob,
    Suspend,
    Tick,
)
from warehouse.scheduler import Recovered, Scheduler

INC = ("SELECT k, count(*) AS n, max(ts) AS ts FROM raw WHERE ts > :window_start AND ts <= :window_end "
       "GROUP BY k")


def _cfg(inc: str = INC, rebuild: bool = False) -> object:
    return config([{"name": "s", "period": 60}], _tables(inc, rebuild), chop=3)


def _tables(inc: str, rebuild: bool) -> list[dict]:
    return [{"name": "raw", "stream": "s", "cost": {"alpha": 1, "beta": 0.01}},
            {"name": "state", "kind": "stateful", "sources": ["raw"], "key": ["k"], "increment": inc,
             "fold": {"n": "sum", "ts": "max"}, "priority": 5, "cost": {"alpha": 1, "beta": 0.01},
             "rebuild": rebuild},
            {"name": "roll", "sources": ["raw"], "granularity": 300, "cost": {"alpha": 1, "beta": 0.01},
             "sql": "SELECT window(ts, '5 minutes').end AS ts, count(*) AS n FROM raw GROUP BY 1"}]


def _run(s: Scheduler, jobs: list[StartJob], now: float, log: list[StartJob]) -> float:
    while jobs:
        job = jobs.pop(0)
        log.append(job)
        now += 1
        jobs += s.handle(JobFinished(job_id=job.job_id, duration=1), now)
    return now


def _arrive(s: Scheduler, i: int, now: float) -> list[StartJob]:
    return s.handle(PartitionArrived(stream="s", partition_id=f"p{i}", start=i * 60.0, end=(i + 1) * 60.0), now)


def test_stateful_jobs_fold_consecutive_windows_and_a_late_load_releases_a_late_fold():
    s = Scheduler(_cfg(), now=0)
    log: list[StartJob] = []
    now = 0.0
    for i in [*range(0, 7), *range(8, 20)]:  # minute 7 held back, then late
        now = _run(s, _arrive(s, i, now), now, log)
    mine = [j for j in log if j.table == "state"]
    assert mine and all(j.kind == "stateful" for j in mine)  # its own kind in logs, /v1 and the page
    assert [(j.start, j.end) for j in mine] == list(zip([0.0] + [j.end for j in mine[:-1]], [j.end for j in mine],
                                                        strict=True))  # consecutive windows, each folded once
    assert mine[-1].end == 1200
    log.clear()
    late = s.handle(PartitionArrived(stream="s", partition_id="p7", start=420.0, end=480.0, rows=10), now)
    now += 1
    (base,) = late
    late = s.handle(JobFinished(job_id=base.job_id, duration=1), now)  # the late minute is loaded
    state = next(t for t in s.stats(now).tables if t.name == "state")
    assert state.late_rows_unfolded == 10  # freshet_table_late_rows_unfolded: not folded yet
    now = _run(s, late, now, log)  # the derived roll-up is recomputed; the state folds the late rows alone
    folds = [j for j in log if j.table == "state"]
    assert [(j.kind, j.reasons, j.start, j.end, j.late) for j in folds] == [("recompute", ("late",), 420.0, 480.0,
                                                                             ("p7",))]
    assert sorted(j.table for j in log if j.kind == "recompute") == ["roll", "state"]
    assert next(t for t in s.stats(now).tables if t.name == "state").late_rows_unfolded == 0
    log.clear()
    jobs = s.handle(Reconfigure(config=_cfg(INC.replace("count(*)", "count(k)"))), now)  # a changed increment
    assert not [j for j in jobs if j.table == "state"]
    stats = next(t for t in s.stats(now).tables if t.name == "state")
    assert stats.recompute_pending == 0 and stats.refresh_mode == "incremental" and stats.freshness == 1200
    assert stats.kind == "stateful"  # not "derived": /v1/status, the page and `freshet validate` say so


def test_validate_names_the_kind():
    from ops.validate import _text, describe

    d = describe(_cfg())
    assert {t["name"]: t["kind"] for t in d["tables"]} == {"raw": "base", "state": "stateful", "roll": "derived"}
    assert "  state  stateful  P=" in _text(d)


def _chunks(log: list[StartJob], upto: float) -> list[StartJob]:
    """The rebuild's chunks in `log`: the first overwrites from the origin, the others follow it
    without gap or overlap up to `upto`, each at most c·P = 180 s."""
    chunks = [j for j in log if j.table == "state" and j.kind == "recompute"]
    assert chunks and chunks[0].full and not any(j.full for j in chunks[1:])
    assert chunks[0].start == 0 and chunks[-1].end == upto
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:], strict=False))
    assert all(0 < j.end - j.start <= 180 for j in chunks) and all(j.reasons == ("rebuild",) for j in chunks)
    return chunks


def _settled(now: float) -> tuple[Scheduler, float, list[StartJob]]:
    s = Scheduler(_cfg(), now=0)
    log: list[StartJob] = []
    for i in range(20):
        now = _run(s, _arrive(s, i, now), now, log)
    return s, now, log


def test_a_backfill_rebuilds_the_whole_state_in_chunks_while_updates_go_on():
    s, now, log = _settled(0.0)
    log.clear()
    jobs = s.handle(Backfill(table="state", start=300, end=600, reason="ops"), now)
    assert [(j.kind, j.start, j.full) for j in jobs if j.table == "state"] == [("recompute", 0.0, True)]
    now = _run(s, jobs, now, log)
    now = _run(s, _arrive(s, 20, now), now, log)  # a new minute meanwhile: folded by an update job
    now = _run(s, s.handle(Tick(), now), now, log)
    chunks = _chunks(log, 1200.0)  # the rebuild ends where F stood when its first chunk started
    assert len(chunks) == 7
    ups = [j for j in log if j.table == "state" and j.kind != "recompute"]
    assert [(j.start, j.end) for j in ups] == [(1200.0, 1260.0)]
    stats = next(t for t in s.stats(now).tables if t.name == "state")
    assert stats.recompute_pending == 0 and stats.freshness == 1260


def test_a_changed_increment_with_rebuild_true_rebuilds_and_a_restart_resumes_the_rebuild():
    s, now, log = _settled(0.0)
    log.clear()
    changed = INC.replace("count(*)", "count(k)")
    now = _run(s, s.handle(Reconfigure(config=_cfg(changed, rebuild=True)), now), now, log)
    _chunks(log, 1200.0)
    log.clear()  # once rebuilt, the same config asks for nothing more
    _run(s, s.handle(Reconfigure(config=_cfg(changed, rebuild=True)), now), now, log)
    assert not [j for j in log if j.table == "state"]
    # a restart in the middle of a rebuild (lake.recovery reads its progress from the log): resumed
    rec = {"raw": Recovered(1200.0, 1200.0, origin=0.0),
           "state": Recovered(1200.0, 1200.0, origin=0.0, sql_versions=((0.0, 1200.0, "old"),), rebuild=(360.0, 1200.0)),
           "roll": Recovered(1200.0, 1200.0, origin=0.0)}
    r = Scheduler(_cfg(changed, rebuild=True), now=now, recovered=rec)
    log.clear()
    _run(r, r.handle(Tick(), now), now, log)
    chunks = [j for j in log if j.table == "state"]
    assert chunks and not any(j.full for j in chunks) and chunks[0].start == 360.0 and chunks[-1].end == 1200.0
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:], strict=False))


def test_a_rebuild_that_would_lose_rows_is_refused_by_name():
    """The first chunk checks that every source still reaches back to the state's origin (its log
    or data cleaned up would leave folds out): refused with a clear error before Spark is asked."""
    import pytest

    from warehouse.lake.outcome import JobError
    from warehouse.lake.rebuild import run_rebuild
    from warehouse.lake.recovery import TableState

    cfg = _cfg()

    class Lake:  # what run_rebuild asks of the executor (lake.commit.Lake), no Spark
        config = cfg

        def __init__(self, raw_origin: float | None) -> None:
            self.states = {"state": TableState(freshness=1200.0, origin=0.0, txn_version=1_200_000),
                           "raw": TableState(freshness=1200.0, origin=raw_origin)}
            self.log = self

        def version(self, path: str) -> int:
            return 3

        def table_state(self, table: str) -> TableState:
            return self.states[table]

    job = StartJob(job_id=1, table="state", track=0, kind="recompute", start=0.0, end=180.0, new_freshness=1200.0,
                   new_safe_freshness=1200.0, full=True, reasons=("rebuild",))
    with pytest.raises(JobError, match=r"origin of its source 'raw' cannot be read.*refused rather than lose"):
        run_rebuild(Lake(None), job, cfg.table("state"), 0.0)  # type: ignore[arg-type]
    with pytest.raises(JobError, match=r"source 'raw' holds rows from .* only.*would lose the ones between"):
        run_rebuild(Lake(60.0), job, cfg.table("state"), 0.0)  # type: ignore[arg-type]


def test_the_simulator_folds_late_rows_into_the_next_increment_and_recomputes_nothing():
    """`freshet sim run` over a stateful table (sim.simulator): its jobs cost E(n) over the
    increment plus the late event time its base source loaded since its last job; no recompute job.
    The derived roll-up over the same base table recomputes its windows instead."""
    from sim.simulator import Simulation, prepare
    from warehouse.config import parse_config

    data = {"streams": [{"name": "s", "period": 60}], "tables": _tables(INC, False), "scheduler": {"tracks": 2, "chop": 3},
            "sim": {"late": 0.2, "late_after": 150, "alpha": 1, "beta": 0.01}}
    cfg = prepare(parse_config(data), 3)
    sim = Simulation(cfg, seed=3)
    run = sim.run(events=600)
    state, roll = run.per_table["state"], run.per_table["roll"]
    assert state.get("windows_recomputed", 0) == 0 and roll["recompute_jobs"] > 0  # late folds rewrite no window
    assert state["late_folded"] > 0 and state["late_folded"] % 60 == 0, state  # whole late minutes, folded
    assert state["late_folded"] + sim.late_fold["state"] == 60 * sim.sched.late_partitions, (state, run.per_table)


def test_a_backfill_of_a_stateful_table_is_refused_when_a_source_lost_rows_and_can_be_cancelled():
    import pytest

    from warehouse.errors import RecomputeRefused
    from warehouse.events import CancelBackfill

    rec = {"raw": Recovered(1200.0, 1200.0, origin=300.0), "state": Recovered(1200.0, 1200.0, origin=0.0)}
    s = Scheduler(_cfg(), now=2000, recovered=rec)
    with pytest.raises(RecomputeRefused, match="'raw' holds rows from 300.0 only.*would lose rows"):
        s.handle(Backfill(table="state", start=0, end=600), 2000)
    s, now, log = _settled(0.0)
    s.handle(Suspend(table="state"), now)  # asked while suspended, cancelled before it starts
    s.handle(Backfill(table="state", start=0, end=600, reason="ops"), now)
    s.handle(CancelBackfill(table="state", start=0, end=600, reason="ops"), now)
    log.clear()
    _run(s, s.handle(Resume(table="state"), now), now, log)
    assert not [j for j in log if j.table == "state"]


def test_a_rebuild_marks_the_dependents_once_when_it_is_swapped_in():
    """A dependent over the state reads the live state, which a rebuild leaves whole until its last
    chunk swaps the rebuilt one in (lake.rebuild): no chunk before marks the dependent's windows;
    the swap marks all of them, from the state's origin to its F, once."""
    dep = {"name": "dep", "sources": ["state"], "granularity": 60, "cost": {"alpha": 1, "beta": 0.01},
           "sql": "SELECT ts, k, n FROM state WHERE ts > :window_start AND ts <= :window_end"}
    s = Scheduler(config([{"name": "s", "period": 60}], [*_tables(INC, False), dep], chop=3, tracks=2), now=0)
    log: list[StartJob] = []
    now = 0.0
    for i in range(20):
        now = _run(s, _arrive(s, i, now), now, log)
    log.clear()
    jobs = s.handle(Backfill(table="state", start=300, end=600, reason="ops"), now)
    seen: list[tuple[str, float, float]] = []
    while jobs:
        job = jobs.pop(0)
        now += 1
        seen.append((job.table, job.start, job.end))
        jobs += s.handle(JobFinished(job_id=job.job_id, duration=1), now)
    chunks = [x for x in seen if x[0] == "state"]
    assert len(chunks) == 7 and chunks[-1][2] == 1200
    deps = [x for x in seen if x[0] == "dep"]
    assert deps and seen.index(deps[0]) > seen.index(chunks[-1])  # nothing of dep before the swap
    assert min(lo for _, lo, _ in deps) == 0 and max(hi for _, _, hi in deps) == 1200  # then all of it
