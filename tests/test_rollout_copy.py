"""Rollout's copies of the Scheduler (warehouse.rollout_copy): a decision leaves the Scheduler's
whole state as it was, byte for byte, and the same state gives the same pick; a copy's backlog
shares the Scheduler's partitions but the one a time slice marks."""

from __future__ import annotations

import io
import pickle
import random
import types
import weakref
from typing import Any

import pytest
from conftest import saturated_config
from pydantic import BaseModel

import warehouse.rollout as ro
from warehouse.backlog import Backlog, Partition
from warehouse.blueprint import Blueprint
from warehouse.events import JobFailed, JobFinished, PartitionArrived, StartJob
from warehouse.rollout_copy import _fork
from warehouse.scheduler import Scheduler


class _Snapshot(pickle.Pickler):
    """The Scheduler's whole state as bytes: every object it holds, in the order it holds them;
    functions by name, the immutable config models and blueprint by identity, its first pick (whose counts a
    decision moves) by a constant."""

    def __init__(self, buf: io.BytesIO, first: object) -> None:
        super().__init__(buf, protocol=pickle.HIGHEST_PROTOCOL)
        self.first = first

    def reducer_override(self, obj: Any) -> Any:
        if obj is self.first:
            return str, ("<first pick>",)
        if isinstance(obj, types.FunctionType):
            return str, (f"<function {obj.__module__}.{obj.__qualname__}>",)
        if isinstance(obj, BaseModel | Blueprint | weakref.ref):  # (immutable: the same object or not)
            return str, (f"<{type(obj).__name__} at {id(obj)}>",)
        return NotImplemented


def snapshot(s: Scheduler) -> bytes:
    buf = io.BytesIO()
    _Snapshot(buf, s._first).dump(s)
    return buf.getvalue()


class Checked:
    """The Scheduler's first pick, asked twice on each state: the same pick and the same simulated
    futures both times, and the Scheduler's state, pickled, the same bytes before and after."""

    def __init__(self, inner: ro.Rollout) -> None:
        self.inner = inner
        self.checked = 0

    @property
    def stats(self) -> ro.RolloutStats:
        return self.inner.stats

    def pick(self, s: Scheduler, now: float) -> str | None:
        before = snapshot(s)
        was = self.inner.stats
        first = self.inner.pick(s, now), self.inner.stats.last
        assert snapshot(s) == before
        self.inner.stats = was
        name = self.inner.pick(s, now)
        assert (name, self.inner.stats.last) == first
        assert snapshot(s) == before
        self.checked += 1
        return name


def _config(n: int, tracks: int, overdue: float | None = None, **rollout: Any):
    """`conftest.saturated_config` under rollout with these settings."""
    return saturated_config(n, tracks, 11, policy="rollout", rollout=rollout, overdue_periods=overdue)


def _drive(s: Scheduler, periods: list[float], events: int) -> list[StartJob]:
    """A saturated run: every fourth stream delivers partitions five periods long (time slices),
    every 23rd job fails (back-offs). The jobs started."""
    rng = random.Random(5)
    span = [5 * p if i % 4 == 0 else p for i, p in enumerate(periods)]
    nxt = [rng.uniform(0, x) for x in span]
    k = [0] * len(periods)
    running: list[tuple[float, int, StartJob]] = []
    out: list[StartJob] = []
    for n in range(events):
        i = min(range(len(periods)), key=lambda j: nxt[j])
        if running and running[0][0] <= nxt[i]:
            now, _, job = running.pop(0)
            ev: Any = (JobFailed(job_id=job.job_id, reason="test") if n % 23 == 0
                       else JobFinished(job_id=job.job_id, duration=job.estimate, rows=100))
        else:
            now = nxt[i]
            ev = PartitionArrived(stream=f"s{i}", partition_id=f"{i}-{k[i]}", start=k[i] * span[i],
                                  end=(k[i] + 1) * span[i], rows=100)
            k[i] += 1
            nxt[i] += span[i]
        jobs = s.handle(ev, now)
        running += [(now + j.estimate, j.job_id, j) for j in jobs]
        running.sort()
        out += jobs
    return out


@pytest.mark.parametrize(("n", "overdue"), [(20, None), (80, None), (80, 2.0)])
def test_a_decision_leaves_the_schedulers_whole_state_as_it_was_and_the_same_state_gives_the_same_pick(
        n: int, overdue: float | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """20 tables: the whole Scheduler copied; 80 (above LOCAL_ABOVE): local look-aheads. At every
    decision, the Scheduler pickled whole (tables, backlogs and their partitions, queues — the
    overdue queue too, where it is on — board, timers, maintenance, counters, the random
    generator) is the same bytes before and after, and the decision asked again gives the same
    pick and scores. Time slices and back-offs ran."""
    seen = {"local": 0, "all": 0}
    whole = ro.involved

    def counted(*a: Any) -> Any:
        out = whole(*a)
        seen["local" if out is not None else "all"] += 1
        return out

    monkeypatch.setattr(ro, "involved", counted)
    cfg, periods = _config(n, 3, overdue, horizon=120.0, budget_events=300)
    s = Scheduler(cfg, now=0.0, initial_freshness=0.0)
    s._first = checked = Checked(s._first)  # type: ignore[arg-type,assignment]
    jobs = _drive(s, periods, 600)
    stats = s.stats(0.0).rollout
    assert stats is not None and checked.checked >= stats.decisions > 20 and stats.fallbacks < stats.decisions
    assert any(j.time_slice for j in jobs) and s._failed > 0
    assert any(j.overdue for j in jobs) == (overdue is not None)
    if n > ro.LOCAL_ABOVE:
        assert seen["local"] > seen["all"]
    else:
        assert seen["local"] == 0


def _backlog() -> tuple[Backlog, Partition]:
    log = Backlog()
    arrival = PartitionArrived(stream="s", partition_id="p", start=0.0, end=100.0, rows=100)
    p = Partition(100.0, 0.0, 1, False, arrival)
    log.add(p)
    log.add(Partition(110.0, 100.0, 2, False, PartitionArrived(stream="s", partition_id="q", start=100.0, end=110.0)))
    return log, p


def test_a_forked_backlog_copies_the_partition_a_time_slice_marks_and_shares_the_others() -> None:
    log, p = _backlog()
    was = pickle.dumps(log)
    f = _fork(log)
    assert f.pending[1] is log.pending[1]  # shared, read only
    f.take_slice()
    f.finished(30.0)
    assert f.partial is f.pending[0] is not p and f.pending[0].loaded == 30.0
    assert p.loaded is None and pickle.dumps(log) == was
    g = _fork(log)  # a second copy sees the Scheduler's backlog, not the first copy's
    assert g.pending[0] is p and g.partial is None
    f.take_slice()  # the next slice of the copy's own partition
    f.finished(60.0)
    f.take(2)  # the rest loads
    f.finished(110.0)
    assert f.pending == [] and f.ids == set() and log.pending[0] is p and pickle.dumps(log) == was


def test_a_slice_running_when_the_backlog_is_forked_ends_in_the_copy_only() -> None:
    log, p = _backlog()
    log.take_slice()
    was = pickle.dumps(log)
    f = _fork(log)
    assert f.slice is not p and f.slice is f.pending[0]
    f.finished(30.0)
    assert f.pending[0].loaded == 30.0 and f.partial is f.pending[0]
    assert p.loaded is None and log.slice is p and pickle.dumps(log) == was


def test_a_forked_backlog_holds_every_slot_of_a_backlog() -> None:
    """(A slot added to Backlog and not to `_fork` would be unset in every copy.)"""
    log, _ = _backlog()
    log.sliced["x"] = 5.0
    f = _fork(log)
    for name in Backlog.__slots__:
        assert getattr(f, name) == getattr(log, name), name
    assert f.pending is not log.pending and f.ids is not log.ids and f.sliced is not log.sliced
