"""The tables of a config, laid out (§2, §3.3): built and wired to their sources and dependents,
by name, in topological order and by the stream they read; a reload's returning tables and the
running jobs they take over (§4.4). Knows nothing of the Scheduler: it applies the layout, and
moves a table that takes a job over by its transition table. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from warehouse.backlog import Backlog, Partition
from warehouse.blueprint import Blueprint, Changes, changed
from warehouse.cost import CostModel, Peers, RowRate
from warehouse.derived import Derived
from warehouse.events import StartJob
from warehouse.freshness import StalenessMeter, safe_freshness
from warehouse.table import Mode, Recovered, Table, read_stale, update_edge

Change = tuple[float, float, str, tuple[str, ...]]  # a source's rows changed in (lo, hi]: reason, late ids

__all__ = ["Change", "Layout", "adopt", "build_tables", "lay_out"]


class Layout(NamedTuple):
    """The tables by name, by index (topological order) and their names by index (the ready
    queues' entries name tables by index), the base tables reading each stream, the new
    tables that take over a job still running (with that job), and the tables the new config
    touched — built, re-parametrised or rewired — in topological order."""

    tables: dict[str, Table]
    by_idx: list[Table]
    names: list[str]
    by_stream: dict[str, list[Table]]
    adopting: list[tuple[Table, StartJob]]
    touched: list[Table]


def lay_out(bp: Blueprint, was: Blueprint | None, old: dict[str, Table], old_streams: dict[str, list[Table]],
            recovered: dict[str, Recovered], initial: float | None, now: float, rates: dict[str, RowRate],
            running: dict[str, StartJob]) -> Layout:
    """The tables of the blueprint `bp` (build_tables) with derived edges set in topological order
    (§2.2); a new table whose previous incarnation's job still runs (`running`, by table) takes
    that job over: one writer per table at a time, whatever the reloads (§4.4). `was`: the
    blueprint `old` (and `old_streams`, its readers by stream) was laid out from (None: every
    table is touched)."""
    tables, new, touched = build_tables(bp, changed(bp, was), old, recovered, initial, now)
    order = bp.dag.order
    by_idx = [tables[n] for n in order]
    touched_list = by_idx if touched is None else [t for t in by_idx if t in touched]
    for t in touched_list:  # derived edges in topological order (a table not touched keeps its own)
        if not t.base:
            update_edge(t)
    adopting = [(t, job) for t in new if (job := running.get(t.name)) is not None]
    if was is None:
        by_stream = {s: [tables[n] for n in names] for s, names in bp.readers.items()}
    else:  # a stream's readers, new only where they changed
        fresh = {t.stream for t in new if t.stream is not None}
        before = was.readers
        by_stream = {s: old_streams[s] if s not in fresh and before.get(s) == names else [tables[n] for n in names]
                     for s, names in bp.readers.items()}
    for t in touched_list:  # each shares its stream's row rate (`rates`, kept across reconfigures)
        if t.stream is not None:
            t.rate = t.cost.rate = rates.setdefault(t.stream, RowRate())
    kinds: dict[tuple[bool, bool], list[CostModel]] = {}  # base, derived, stateful: each kind its peers
    for t in by_idx:
        spec = bp.specs[t.name]
        t.cost.peers = None
        if spec.peer_kind is not None and t.cost.learn:
            kinds.setdefault(spec.peer_kind, []).append(t.cost)
    Peers(list(kinds.values()))
    return Layout(tables, by_idx, list(order), by_stream, adopting, touched_list)


def build_tables(bp: Blueprint, changes: Changes | None, old: dict[str, Table], recovered: dict[str, Recovered],
                 initial: float | None, now: float) -> tuple[dict[str, Table], list[Table], set[Table] | None]:
    """The tables of the blueprint in topological order, wired to their sources and dependents,
    with inherited priorities (§3.3): a table that stays keeps its run state (during a run the
    Scheduler owns it) and takes the new parameters; a new one starts from what storage holds
    (`recovered`) or `initial`. Tables of `old` no longer configured are marked removed. Only the
    tables `changes` touches (None: all) take their parameters again; those it re-weighs, their
    priority and target; the others' are unchanged. (tables by name, the new ones, the tables
    touched — None: all)."""
    tables: dict[str, Table] = {}
    new: list[Table] = []
    touched: set[Table] = set()
    specs, inherited = bp.specs, bp.inherited_priority
    rebuilding = bp.rebuilding
    touch, reweigh = (None, frozenset()) if changes is None else changes
    for i, name in enumerate(bp.dag.order):
        t = was = old.get(name)
        if touch is not None and t is not None and name not in touch and name not in rebuilding and not t.removed:
            t.idx, t.inherited_priority = i, inherited[name]  # parameters unchanged (and so its kind, its edges)
            if name in reweigh:
                spec = specs[name]
                t.priority, t.target = spec.priority, spec.target
                t.meter.target = spec.target
            tables[name] = t
            continue
        spec = specs[name]
        if t is None or t.base != spec.base or t.removed:
            rec = recovered.get(name)
            t = Table(
                name=name,
                idx=i,
                base=spec.base,
                priority=spec.priority,
                period=spec.period,
                lateness=spec.lateness,
                granularity=spec.granularity,
                target=spec.target,
                stream=spec.stream,
                cost=CostModel(spec.alpha, spec.beta, learn=spec.learn, row=spec.row),
                meter=StalenessMeter(target=spec.target),
                log=Backlog(dict(rec.slices) if rec else {}) if spec.base else None,
                mode=was.mode if was is not None else Mode.ACTIVE,  # an operator's word outlives a reload
            )
            new.append(t)
            f = rec.freshness if rec else initial
            if f is not None:
                t.freshness = f
                t.origin = rec.origin if rec and rec.origin is not None else f
                t.safe = safe_freshness(f, t.lateness, (rec.safe_freshness if rec else None,))
                t.meter.start(f, now)
        else:
            t.idx, t.priority, t.period = i, spec.priority, spec.period
            t.lateness = spec.lateness
            t.granularity, t.target, t.stream = spec.granularity, spec.target, spec.stream
            t.meter.target = spec.target
            t.cost.learn, t.cost.row = spec.learn, spec.row
        touched.add(t)
        if spec.derived is not None:  # refresh mode, skew bound and SQL version (warehouse.derived)
            sql, tcols, refresh_mode, lookback, max_skew, rebuild, stateful = spec.derived
            if t.derived is None:
                rec = recovered.get(name)
                t.derived = Derived(sql, rec.sql_versions if rec else (), rec.dirty if rec else (), rec.rebuild if rec else None)
            t.derived.configure(sql, tcols, refresh_mode, lookback, max_skew, rebuild, stateful=stateful)
        tables[name] = t
        t.inherited_priority = inherited[name]
    for t in new:  # a new table's neighbours point to it: they are rewired too
        for n in (*specs[t.name].sources, *specs[t.name].dependents):
            touched.add(tables[n])
    for t in touched:
        spec = specs[t.name]
        t.sources = [tables[s] for s in spec.sources]
        t.dependents = [tables[d] for d in spec.dependents]
    for name, t in old.items():
        if name not in tables:
            t.removed = True
    return tables, new, None if touch is None else touched


def adopt(t: Table, job: StartJob, seq: int, changed: Iterable[Change] = (), now: float | None = None) -> int:
    """A new incarnation of a table (a reconfigure) takes over its previous one's running `job`:
    a base table the partitions it loads, numbered after `seq` (the last number used is returned)
    — a time slice's partition stays pending for the slices after it;
    a derived table the windows it rewrites (as when it started, warehouse.jobs: a backfill the
    reload re-applies `now` is its recompute job's, Derived.backfill), and the windows it computes
    from rows of its sources that `changed` while it ran, to recompute after it."""
    if t.log is not None:
        parts = []
        for a in job.arrivals:
            seq += 1
            parts.append(Partition(a.end, a.start, seq, a.partition_id in job.late, a))
        if job.time_slice:  # the rest of the partition is loaded by later slices (§3.4)
            t.log.adopt_slice(parts[0], job.start)
        else:
            t.log.adopt(parts)
    if t.derived is not None:
        if job.kind == "recompute":
            t.derived.take(job.start, job.end, job.full, upto=t.freshness, reasons=set(job.reasons))
            if now is not None:
                t.derived.rewriting = (now, job.start, job.end)
        elif job.full:
            t.derived.take(job.start, job.end, overwrite=True)
        for lo, hi, reason, late in changed:
            read_stale(t, job, lo, hi, reason, late)
    return seq
