"""The look-ahead's copies of the Scheduler (warehouse.rollout): one decision's state pickled once,
each candidate's copy a fresh load of it.

A copy shares what no simulated event changes: the immutable config, plan and blueprint, the frozen
events, profiles and job shapes, enum members, functions and, in a local look-ahead, the tables it
leaves out (read only, warehouse.rollout.involved). It holds its own of the rest. Each base table's
backlog (warehouse.backlog) is forked, not pickled: its lists, set and dict are the copy's own,
its partitions the Scheduler's — no simulated event changes a partition but a time slice's
`loaded` mark, and a forked backlog copies the partition it takes a slice of first (`_Forked`).

The pickle (its C implementation, the shared objects passed by reference: those `Copies` names,
functions, whose handlers and keys' lambdas cannot be pickled, and the frozen values) walks the
state in Python once per decision; each of the k candidates then costs one load, in C. A state
pickle refuses is copied by copy.deepcopy instead, with the same sharing.
"""

from __future__ import annotations

import copy
import enum
import heapq
import io
import math
import pickle
import random
import types
from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel

from tracks.base import JobProfile
from warehouse.backlog import Backlog, Partition
from warehouse.events import PartitionArrived, StartJob
from warehouse.queues import ReadyQueues
from warehouse.table import JobShape
from warehouse.upkeep import UpkeepStats

__all__ = ["Copies"]

# passed by reference: functions, enum members, the frozen events, profiles, shapes and rows, config models
_BY_REFERENCE = (types.FunctionType, enum.Enum, PartitionArrived, StartJob, BaseModel, JobProfile, JobShape,
                 UpkeepStats)
_BY_TABLE = frozenset({"_tables", "_by_idx", "_by_stream", "_rates", "_queues", "_upkeep", "_overdue"})  # a local copy rebuilds these
_SHARED_LISTS = frozenset({"_names"})  # (a list is pickled by value whatever `shared` says: set after the load)
_SHARED: list[Any] = []  # the objects passed by reference, while one copy is loaded


class Copies:
    """Copies of Scheduler `s` for one decision; with `local` (warehouse.rollout.Local) only those
    tables are copied, the others shared, and the copy's queues hold only their entries. `s` is
    pickled here, once; `copy(first)` loads a fresh copy whose first pick is `first`. `s` is not
    changed. RecursionError: tables linked too deep to copy."""

    __slots__ = ("_data", "_deep", "_heaps", "_local", "_made", "_objs", "_s", "_upkept")

    def __init__(self, s: Any, local: Any | None) -> None:
        self._s, self._local = s, local
        shared: dict[int, Any] = {id(s.config): s.config, id(s.plan): s.plan, id(s._first): None}
        if s.blueprint is not None:
            shared[id(s.blueprint)] = s.blueprint  # (immutable: shared, as the config and the plan)
        # objects each copy makes its own of, without the pickle: the Scheduler's shell (its bound
        # methods, the handlers and the queues' check, are the copy's), its random generator
        fresh: dict[int, Callable[[], Any]] = {id(s): partial(object.__new__, type(s))}
        if type(s._rng) is random.Random:
            fresh[id(s._rng)] = partial(_twin, s._rng.getstate())
        skip = _SHARED_LISTS if local is None else _SHARED_LISTS | _BY_TABLE
        state = {name: value for name, value in vars(s).items() if name not in skip}
        if local is None:
            tables = s._by_idx
            payload: tuple = (s, state)
        else:
            by_idx, keep = s._by_idx, set(local.tables)
            tables = [by_idx[i] for i in local.tables]
            shared[id(s._nextjob.ranking)] = s._nextjob.ranking  # (replaced on a repartition, never changed)
            for t in tables:  # the sources outside, read by their dependents: shared
                for x in t.sources:
                    if x.idx not in keep:
                        shared[id(x)] = x
            for _, _, x in s._releases.heap:  # (track reservation's expected releases: read only)
                if x.idx not in keep:
                    shared[id(x)] = x
            up = s._upkeep  # (maintenance, per table: only the kept tables' entries are copied, the others shared)
            self._upkept = [t.name for t in tables if t.name in up.tables]
            payload = (s, state, tables, [s._rates[x] for x in local.streams], [up.tables[x] for x in self._upkept])
            self._heaps = []
            for h in s._queues.heaps:  # (a heap's list copied stays a heap)
                mine = [e for e in h if e[-1] in keep]
                heapq.heapify(mine)
                self._heaps.append(mine)
        for t in tables:
            if t.log is not None:
                fresh[id(t.log)] = partial(_fork, t.log)
        self._deep: Any = None
        buf = io.BytesIO()
        pickler = _Copier(buf, shared, fresh)
        try:
            pickler.dump(payload)
        except (pickle.PicklingError, TypeError, AttributeError):
            self._deep = (payload, shared, fresh)
            return
        self._data, self._objs, self._made = buf.getvalue(), pickler.objs, pickler.made

    def copy(self, first: object) -> Any:
        """A fresh copy of the Scheduler whose first pick is `first` (warehouse.rollout.Forced)."""
        global _SHARED
        if self._deep is not None:
            payload, shared, fresh = self._deep
            memo = dict(shared)
            for key, make in fresh.items():
                memo[key] = make()
            loaded = copy.deepcopy(payload, memo)
        else:
            objs = list(self._objs)
            for i, make in self._made:
                objs[i] = make()
            _SHARED = objs
            try:
                loaded = pickle.loads(self._data)
            finally:
                _SHARED = []
        c = loaded[0]
        c.__dict__.update(loaded[1])
        c._names = self._s._names  # (the tables' names by index: replaced on a reconfigure, never changed)
        if self._local is not None:
            self._assemble(c, *loaded[2:])
        c._first = first
        return c

    def _assemble(self, c: Any, copies: list[Any], rates: list[Any], kept: list[Any]) -> None:
        """A local copy: its own tables, rates and maintenance entries (`kept`), the others shared
        in its indexes; queues of its tables' entries only; no repartition."""
        s, local = self._s, self._local
        up = s._upkeep
        c._upkeep = object.__new__(type(up))
        c._upkeep.__dict__.update({k: v.copy() if isinstance(v, dict | set | list) else v for k, v in vars(up).items()})
        c._upkeep.tables.update(zip(self._upkept, kept, strict=True))
        c._by_idx = by_idx = list(s._by_idx)
        c._tables = dict(s._tables)
        for t in copies:
            by_idx[t.idx] = c._tables[t.name] = t
        c._by_stream = dict(s._by_stream)
        c._rates = dict(s._rates)
        for x, rate in zip(local.streams, rates, strict=True):  # (every table of a stream is kept, and shares its rate)
            c._by_stream[x] = [by_idx[t.idx] for t in s._by_stream[x]]
            c._rates[x] = rate
        q = s._queues
        c._queues = queues = ReadyQueues(c._valid)
        queues.queued, queues.urgent = list(q.queued), dict(q.urgent)
        queues.heaps = [list(h) for h in self._heaps]
        c._overdue = s._overdue.only({t.name for t in copies})
        c._last_plan_event = math.inf  # no repartition in the copy


class _Forked(Backlog):
    """A copy's backlog: its own lists, set and dict; the Scheduler's partitions, read only — the
    one a time slice marks `loaded` (Backlog.finished) is copied when the slice is taken."""

    __slots__ = ()

    def take_slice(self) -> Partition:
        _own(self, self.pending[0])
        return Backlog.take_slice(self)


def _fork(log: Backlog) -> Backlog:
    """A copy of `log` (`_Forked`): its containers copied, its partitions shared but a running slice's."""
    f = object.__new__(_Forked)
    f.pending, f.rows, f.ids, f.arrived = log.pending.copy(), log.rows, log.ids.copy(), log.arrived
    f.running, f.slice, f.partial, f.sliced = log.running.copy(), log.slice, log.partial, log.sliced.copy()
    if f.slice is not None:  # (its `loaded` moves when the slice ends)
        _own(f, f.slice)
    return f


def _twin(state: tuple) -> random.Random:
    """A random generator in `state` (random.Random.getstate): a copy's own, drawing what the Scheduler's would."""
    r = random.Random(0)
    r.setstate(state)
    return r


def _own(b: Backlog, p: Partition) -> None:
    """Backlog `b` holds a copy of partition `p` in its place from now on."""
    q = Partition(p.end, p.start, p.seq, p.late, p.arrival, p.loaded)
    b.pending = [q if x is p else x for x in b.pending]
    b.running = [q if x is p else x for x in b.running]
    b.slice = q if b.slice is p else b.slice
    b.partial = q if b.partial is p else b.partial


def _shared(i: int) -> Any:
    return _SHARED[i]


class _Copier(pickle.Pickler):
    """A pickler that writes each object in `shared` (by id: the object a copy holds instead) or
    `fresh` (by id: how each copy makes its own), and each object of `_BY_REFERENCE`, as a
    reference into the list a load is given (`objs`, with `made`'s entries made anew per load)."""

    __slots__ = ("fresh", "made", "objs", "shared")

    def __init__(self, buf: io.BytesIO, shared: dict[int, Any], fresh: dict[int, Callable[[], Any]]) -> None:
        super().__init__(buf, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared, self.fresh = shared, fresh
        self.objs: list[Any] = []
        self.made: list[tuple[int, Callable[[], Any]]] = []

    def reducer_override(self, obj: Any) -> Any:
        got = self.shared.get(id(obj), _shared)
        if got is _shared:
            make = self.fresh.get(id(obj))
            if make is not None:
                self.made.append((len(self.objs), make))
                got = None
            else:
                by_ref = _BY_TYPE.get(type(obj))
                if by_ref is None:  # (isinstance of a pydantic model runs Python: asked once per type)
                    by_ref = _BY_TYPE[type(obj)] = isinstance(obj, _BY_REFERENCE)
                if not by_ref or obj is _shared:  # (`_shared` itself: by its name)
                    return NotImplemented
                got = obj
        self.objs.append(got)
        return _shared, (len(self.objs) - 1,)


_BY_TYPE: dict[type, bool] = {}  # is an object of this type passed by reference (_BY_REFERENCE)?
