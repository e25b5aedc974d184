"""The tables of a config, laid out (§2, §3.3): built and wired to their sources and dependents,
by name, in topological order and by the stream they read; a reload's returning tables and the
running jobs they take over (§4.4). Knows nothing of the Scheduler: it applies the layout, and
moves a table that takes a job over by its transition table. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from policies.inheritance import inherit
from warehouse.backlog import Backlog, Partition
from warehouse.config import FreshetConfig
from warehouse.cost import CostModel, RowRate
from warehouse.dag import Dag
from warehouse.derived import Derived
from warehouse.events import StartJob
from warehouse.freshness import StalenessMeter, safe_freshness
from warehouse.table import Mode, Recovered, Table, read_stale, update_edge

Change = tuple[float, float, str, tuple[str, ...]]  # a source's rows changed in (lo, hi]: reason, late ids

__all__ = ["Change", "Layout", "adopt", "build_tables", "lay_out", "stream_readers"]


class Layout(NamedTuple):
    """The tables by name, by index (topological order) and their names by index (the ready
    queues' entries name tables by index), the base tables reading each stream, and the new
    tables that take over a job still running (with that job)."""

    tables: dict[str, Table]
    by_idx: list[Table]
    names: list[str]
    by_stream: dict[str, list[Table]]
    adopting: list[tuple[Table, StartJob]]


def lay_out(config: FreshetConfig, old: dict[str, Table], recovered: dict[str, Recovered], initial: float | None,
            now: float, rates: dict[str, RowRate], running: dict[str, StartJob]) -> Layout:
    """The tables of `config` (build_tables) with derived edges set in topological order (§2.2);
    a new table whose previous incarnation's job still runs (`running`, by table) takes that job
    over: one writer per table at a time, whatever the reloads (§4.4)."""
    dag = Dag.from_config(config)
    tables, new = build_tables(config, dag, old, recovered, initial, now)
    by_idx = [tables[n] for n in dag.order]
    for t in by_idx:  # derived edges in topological order
        if not t.base:
            update_edge(t)
    adopting = [(t, job) for t in new if (job := running.get(t.name)) is not None]
    return Layout(tables, by_idx, list(dag.order), stream_readers(by_idx, rates), adopting)


def build_tables(config: FreshetConfig, dag: Dag, old: dict[str, Table], recovered: dict[str, Recovered],
                 initial: float | None, now: float) -> tuple[dict[str, Table], list[Table]]:
    """The tables of `config` in topological order, wired to their sources and dependents, with
    inherited priorities (§3.3): a table that stays keeps its run state (during a run the
    Scheduler owns it) and takes the new parameters; a new one starts from what storage holds
    (`recovered`) or `initial`. Tables of `old` no longer configured are marked removed.
    (tables by name, the new ones)."""
    sc = config.scheduler
    periods = dag.periods()
    streams = {s.name: s for s in config.streams}
    configs = {t.name: t for t in config.tables}  # config.table() is a scan: O(n²) at 100,000 tables
    tables: dict[str, Table] = {}
    new: list[Table] = []
    for i, name in enumerate(dag.order):
        tc = configs[name]
        prior = config.cost_prior(tc)
        t = was = old.get(name)
        rec = recovered.get(name)
        if t is None or t.base != tc.is_base or t.removed:
            t = Table(
                name=name,
                idx=i,
                base=tc.is_base,
                priority=tc.priority,
                period=periods[name],
                lateness=streams[tc.stream].lateness if tc.stream else 0.0,
                granularity=tc.granularity,
                target=tc.target_staleness,
                stream=tc.stream,
                cost=CostModel(prior.alpha, prior.beta, learn=sc.learn_costs),
                meter=StalenessMeter(target=tc.target_staleness),
                log=Backlog(dict(rec.slices) if rec else {}) if tc.is_base else None,
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
            t.idx, t.priority, t.period = i, tc.priority, periods[name]
            t.lateness = streams[tc.stream].lateness if tc.stream else 0.0
            t.granularity, t.target, t.stream = tc.granularity, tc.target_staleness, tc.stream
            t.meter.target = tc.target_staleness
            t.cost.learn = sc.learn_costs
        t.sources, t.dependents = [], []
        if not t.base:  # refresh mode, skew bound and SQL version (warehouse.derived)
            sql = tc.increment if tc.is_stateful else tc.sql  # a stateful table: its increment (lake.stateful)
            if t.dv is None:
                t.dv = Derived(sql, rec.sql_versions if rec else (), rec.dirty if rec else (), rec.rebuild if rec else None)
            tcols = tuple(streams[c.stream].time_column if c.stream else "ts" for c in (configs[n] for n in tc.sources))
            t.dv.configure(sql, tcols, tc.refresh_mode, tc.lookback, tc.max_skew, tc.rebuild, stateful=tc.is_stateful)
        tables[name] = t
    for name, t in tables.items():
        t.sources = [tables[s] for s in dag.sources[name]]
        t.dependents = [tables[d] for d in dag.dependents[name]]
    for name, t in old.items():
        if name not in tables:
            t.removed = True
    ip = inherit({n: t.priority for n, t in tables.items()}, dag.dependents, dag.order, sc.inheritance, sc.inheritance_k)
    for n, t in tables.items():
        t.ip = ip[n]
    return tables, new


def stream_readers(tables: list[Table], rates: dict[str, RowRate]) -> dict[str, list[Table]]:
    """The base tables reading each stream, in order; each shares its stream's row rate (`rates`,
    kept across reconfigures)."""
    out: dict[str, list[Table]] = {}
    for t in tables:
        if t.stream is not None:
            out.setdefault(t.stream, []).append(t)
            t.rate = rates.setdefault(t.stream, RowRate())
    return out




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
    if t.dv is not None:
        if job.kind == "recompute":
            t.dv.take(job.start, job.end, job.full, upto=t.freshness, reasons=set(job.reasons))
            if now is not None:
                t.dv.rewriting = (now, job.start, job.end)
        elif job.full:
            t.dv.take(job.start, job.end, full=True)
        for lo, hi, reason, late in changed:
            read_stale(t, job, lo, hi, reason, late)
    return seq
