"""The simulator shell (§4.1): SimPy streams and tracks around the one Scheduler (docs/architecture.md).

- Each stream pushes a partition every P_s (random phase per stream, optional jitter) from a SimPy
  timeout per arrival; a partition carries data up to its arrival time, or `sim.delay` behind it.
- Each `StartJob` becomes a SimPy timeout of the drawn execution time: uniform in
  [b·E_i(n), (1+b)·E_i(n)] with E_i(n) = α_i + β_i·n and n = end − start, the freshness delta it
  loads; times S if the job starts inside a slow period. The normal/slow cycle starts with a normal
  period at time 0. `sim.bursts` (per-class phases): a named table's data is `factor` times as
  dense in its bursts, so the event time n a job loads counts `factor` times where it lies in one.
- Maintenance jobs (`maintenance:` in the config; `warehouse.upkeep`) are jobs like the others:
  the Scheduler starts them on tracks left idle, and their drawn time comes from the table's own
  E(n) over their window — an OPTIMIZE rewrites the data loaded since the last one, a VACUUM's
  window is empty (α: a listing). So they compete for tracks with their costs.
- A stateful table's job (lake.stateful) costs E(n) over its increment: n is its window, plus the
  event time of the late partitions its base sources loaded since its last job — late rows are
  folded with the next increment, or, when none is due, by a late fold of E(their event time),
  never recomputed (`late_folded` per table). A rebuild's chunks are recompute jobs of E(chunk).
- The Scheduler is called on every arrival and every completion (and at back-off expiry); it
  integrates the weighted staleness exactly.
- **Relative lateness** = the run's weighted staleness over [0, T] divided by that of the ideal
  run: the same workload and seed with no contention (one track per table, Global partitioner, no
  chopping — every job starts when released), over the same horizon T.

Random numbers come from independent streams keyed by the seed and a name (a stream's arrivals,
a table's draws), so the ideal run sees exactly the same arrivals and a table's n-th job draws the
same uniform in both runs.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import random
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL

from sim.cores import Cores
from sim.loop import run_to, run_until
from sim.trace import ActionRecord, Arrival, JobRecord, Trace, TraceWriter
from sim.workload import burst_time as _burst_time
from sim.workload import periods, true_costs, utilization
from warehouse.config import FreshetConfig, SimConfig, StreamConfig
from warehouse.errors import ConfigError, FreshetError
from warehouse.events import Event, JobFinished, PartitionArrived, StartJob, Tick
from warehouse.freshness import longest_gap
from warehouse.scheduler import Recovered, Scheduler
from warehouse.upkeep import MAINTENANCE_KINDS

__all__ = ["RunStats", "SimResult", "Simulation", "generated_arrivals", "ideal_config", "simulate", "workload"]


def generated_arrivals(stream: StreamConfig, sim: SimConfig, seed: int, origin: float = 0.0) -> Iterator[Arrival]:
    """Periodic partitions of one stream (§4.1): phase ~ U[0, P), then every P (+ U[0, jitter·P)).
    A share `sim.late` of them arrives `sim.late_after` after its time (late data: the derived
    windows computed without it are recomputed), in arrival order with the rest."""
    for t, ev in _generated(stream, sim, seed, origin):
        yield Arrival(t, ev.stream, ev.partition_id, ev.start, ev.end, ev.rows, ev.safe_through)


def _generated(stream: StreamConfig, sim: SimConfig, seed: int, origin: float) -> Iterator[tuple[float, PartitionArrived]]:
    """`generated_arrivals` as (arrival time, the Scheduler's event): one object per partition."""
    on_time = _periodic(stream, sim, seed, origin)
    if not sim.late or not sim.late_after:
        return on_time  # (the periodic generator itself: no generator around it)
    return _with_late(on_time, stream, sim, seed)


def _with_late(on_time: Iterator[tuple[float, PartitionArrived]], stream: StreamConfig, sim: SimConfig,
               seed: int) -> Iterator[tuple[float, PartitionArrived]]:
    rng = random.Random(f"{seed}/late/{stream.name}")
    held: list[tuple[float, int, PartitionArrived]] = []
    for k, (t, ev) in enumerate(on_time):
        while held and held[0][0] <= t:
            late_t, _, late_ev = heapq.heappop(held)
            yield late_t, late_ev
        if rng.random() < sim.late:
            heapq.heappush(held, (t + sim.late_after, k, ev))
        else:
            yield t, ev


def _periodic(stream: StreamConfig, sim: SimConfig, seed: int, origin: float) -> Iterator[tuple[float, PartitionArrived]]:
    rng = random.Random(f"{seed}/arrivals/{stream.name}")
    period = stream.period
    phase = rng.uniform(0.0, period)
    jitter = sim.jitter * period
    delay = sim.delay
    name = stream.name
    prev_end = float(origin)
    trusted = PartitionArrived._trusted  # a float window with end > start, no rows: valid by construction
    last_t = origin
    k = 0
    while True:
        t = origin + phase + k * period
        if jitter:
            t = max(t + rng.uniform(0.0, jitter), last_t)
        last_t = t
        end = t - delay
        if end > prev_end:  # no rows: E(n) in event time, as §4.1
            yield t, trusted(name, f"{name}-{k}", prev_end, end)
            prev_end = end
        k += 1


def ideal_config(cfg: FreshetConfig) -> FreshetConfig:
    """No contention (§4.1): one track per table, Global, no chopping, no bulk limit — every job
    starts when released."""
    sc = cfg.scheduler.model_copy(
        update={"tracks": len(cfg.tables), "partitioner": "global", "policy": "max-benefit", "chop": None,
                "bulk_limit": None}
    )
    return cfg.model_copy(update={"scheduler": sc, "sim": cfg.sim.model_copy(update={"cores": None})})


@dataclass
class RunStats:
    """One simulated run, observed at its horizon."""

    horizon: float
    events: int
    weighted_staleness: float
    busy_time: float
    jobs: int
    chopped: int
    per_table: dict[str, dict[str, float]]
    maintenance: int = 0  # maintenance jobs among `jobs` (warehouse.upkeep)
    maintenance_busy: float = 0.0  # track time they took


@dataclass
class SimResult:
    """A run and its ideal (§4.1): everything `freshet sim run --json` prints."""

    config: FreshetConfig
    seed: int
    run: RunStats
    ideal: RunStats
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def relative_lateness(self) -> float:
        return self.run.weighted_staleness / self.ideal.weighted_staleness if self.ideal.weighted_staleness > 0 else 1.0

    def to_json(self) -> dict[str, Any]:
        sc = self.config.scheduler
        span = max(self.run.horizon - self.extra.get("origin", 0.0), 1e-12)
        return {
            "seed": self.seed,
            "policy": sc.policy,
            "partitioner": sc.partitioner,
            "tracks": sc.tracks,
            "inheritance": sc.inheritance,
            "chop": sc.chop,
            "allocation": sc.allocation,
            "aggressive": sc.aggressive,
            "k": sc.k,
            "tables": len(self.config.tables),
            "utilization": _r(utilization(self.config)),
            "busy_fraction": _r(self.run.busy_time / (span * sc.tracks)),
            "events": self.run.events,
            "ideal_events": self.ideal.events,
            "horizon": _r(span),
            "jobs": self.run.jobs,
            "chopped_jobs": self.run.chopped,
            "maintenance_jobs": self.run.maintenance,
            "maintenance_busy_fraction": _r(self.run.maintenance_busy / (span * sc.tracks)),
            "weighted_staleness": _r(self.run.weighted_staleness),
            "ideal_weighted_staleness": _r(self.ideal.weighted_staleness),
            "average_weighted_staleness": _r(self.run.weighted_staleness / span),
            "relative_lateness": _r(self.relative_lateness),
            "per_table": self.run.per_table,
            **{k: v for k, v in self.extra.items() if k != "origin"},
        }


def _r(x: float) -> float:
    return float(f"{x:.10g}")


class Simulation:
    """One SimPy environment, its streams, its tracks and one Scheduler (§4.1)."""

    def __init__(
        self,
        config: FreshetConfig,
        *,
        seed: int = 0,
        trace: Trace | None = None,
        use_measured: bool = True,
        writer: TraceWriter | None = None,
        recovered: dict[str, Recovered] | None = None,
    ) -> None:
        self.cfg = config
        self.seed = seed
        self.origin = trace.origin if trace is not None else 0.0
        self.env = simpy.Environment(initial_time=self.origin)
        # every table fresh at the start, or in the state `recovered` (a replay's, sim.autotune)
        self.recovered = recovered
        self.sched = (Scheduler(config, now=self.origin, initial_freshness=self.origin) if recovered is None
                      else Scheduler(config, now=self.origin, recovered=recovered))
        self.writer = writer
        self.measured = trace.durations if (trace is not None and use_measured) else None
        self.costs = true_costs(config)
        self.cold: set[tuple[str, float, float]] = set()  # windows whose recorded job was cold (JobFinished.cold)
        if trace is not None and use_measured:
            # a table whose config states no `cost`: jobs the replay runs that the trace did not
            # record take what the table's recorded jobs say E(n) is on that machine, or with none
            # what its settled peers' say (cost.Peers, as in the daemon), not the `sim` defaults
            unstated: dict[tuple[bool, bool], list[str]] = {}
            for t in config.tables:
                if t.peer_kind is not None:
                    unstated.setdefault(t.peer_kind, []).append(t.name)
            if unstated:  # (a replay's config states every cost: sim.autotune.replay_config)
                self.costs.update(trace.fitted_costs(self.costs, unstated.values()))
            self.cold = {(j.table, j.start, j.end) for j in trace.jobs if j.cold}
        self.rngs = {t.name: random.Random(f"{seed}/duration/{t.name}") for t in config.tables}
        # a stateful table folds its base sources' late rows with its next increment (lake.stateful):
        # the late event time loaded into each base table is added to the next such job's n
        self.folds = {b.name: [t.name for t in config.tables if t.is_stateful and b.name in t.sources]
                      for b in config.tables if b.is_base}
        self.folds = {b: ts for b, ts in self.folds.items() if ts}
        self.late_fold = {t.name: 0.0 for t in config.tables if t.is_stateful}  # to fold with the next job
        self.late_folded = dict(self.late_fold)  # folded so far
        self.b = config.sim.b
        sd = config.sim.slowdown
        self.slow = sd.factor if (sd.slow > 0 and sd.factor != 1.0) else 1.0
        self.cycle = sd.normal + sd.slow
        self.normal = sd.normal
        # per-class phases (sim.bursts): table → (factor, normal, cycle, offset) of each naming it
        # (every name is a table of the config: warehouse.config.verify_sim_bursts)
        self.bursts: dict[str, list[tuple[float, float, float, float]]] = {}
        for bu in config.sim.bursts:
            for name in bu.tables:
                self.bursts.setdefault(name, []).append((bu.factor, bu.normal, bu.normal + bu.slow, bu.offset))
        self.events = 0
        self.limit: float = math.inf  # events to handle (`run(events=…)`)
        self.busy = 0.0
        self.jobs = 0
        self.chopped = 0
        self.maintenance = 0
        self.maintenance_busy = 0.0
        self.rows: dict[str, int] = {}
        self.advanced: dict[str, list[float]] = {}  # table → when a job made it fresher (longest_gap)
        self.started: dict[int, tuple[float, float]] = {}
        self.tracks: dict[int, _Track] = {}  # each track's job timer (one job at a time per track)
        # cores shared by the running jobs (sim.cores); not over measured durations, which hold it
        self.cores = (Cores(self.env, config.sim.cores, min(t.priority for t in config.tables), self._ended)
                      if config.sim.cores is not None and not self.measured else None)
        self._tick_at: float | None = None
        self._stop: simpy.Event | None = None
        self._feeding = 0  # trace streams and action lists not yet handed over in full
        self._drain = False  # run(): stop once the trace is handed over and its work drained
        known = {s.name for s in config.streams}
        if trace is not None:
            unknown = sorted(set(trace.arrivals) - known)
            if unknown:
                raise ConfigError(f"{trace.source}: arrivals for stream(s) not in the config: {', '.join(unknown)}")
            sources: dict[str, Iterable[tuple[float, Arrival | PartitionArrived]]] = {
                name: ((a.time, a) for a in arrivals) for name, arrivals in trace.arrivals.items()}
        else:
            sources = {s.name: _generated(s, config.sim, seed, self.origin) for s in config.streams}
        fed = {t.stream for t in config.tables if t.stream}
        for s in config.streams:
            if s.name in fed and s.name in sources:
                self._feeding += 1
                _Stream(self, iter(sources[s.name]), generated=trace is None)
        if trace is not None and trace.actions:  # operator actions replay at their times (sim.trace)
            self._feeding += 1
            self.env.process(self._actions(trace.actions))

    # ---- the event callbacks -------------------------------------------------------------------
    def _arrive(self, time: float, a: Arrival | PartitionArrived) -> None:
        """A partition arrives at `time` (§2.1): hand it to the Scheduler. `a` is a trace's
        arrival, or the event itself for a generated one. Its rows are kept for the `JobFinished`
        that loads it only where there are some (a generated partition has none: where no trace
        is written either, `_Stream` hands it to `_handle` itself)."""
        if type(a) is not PartitionArrived:  # a trace's arrival
            if self.writer is not None:
                self.writer.arrival(a)
            a = PartitionArrived(stream=a.stream, partition_id=a.partition, start=a.start, end=a.end, rows=a.rows,
                                 safe_through=a.safe_through)
        elif self.writer is not None:
            self.writer.arrival(Arrival(time, a.stream, a.partition_id, a.start, a.end, a.rows, a.safe_through))
        if a.rows:
            self.rows[a.partition_id] = a.rows
        elif self.rows:  # (an id seen before, with no rows now)
            self.rows.pop(a.partition_id, None)
        self._handle(a, self.env.now)

    def _actions(self, actions: list[ActionRecord]) -> Generator[simpy.Event, None, None]:
        """The operator actions of a trace, handed to the Scheduler at their times; one the replayed
        state refuses (a backfill of windows not computed in this run) is skipped."""
        for a in actions:
            if a.time > self.env.now:
                yield self.env.timeout(a.time - self.env.now)
            with contextlib.suppress(FreshetError):
                self._handle(a.event(), self.env.now, count=False)
        self._fed()

    def _fed(self) -> None:
        """A trace stream (or its actions) has been handed over in full."""
        self._feeding -= 1
        self._drained()

    def _drained(self) -> None:
        """Draining a trace (`run()`): stop once all of it is handed over and no update job runs,
        waits or backs off (`Scheduler.drained`) — maintenance alone would fall due for ever."""
        if self._drain and self._feeding <= 0 and self._stop is not None and not self._stop.triggered \
                and self.sched.drained():
            self._stop.succeed()

    def _start(self, job: StartJob, now: float) -> None:
        """A track runs the job for its drawn execution time (§4.1) from `now`: the track's timer
        (`_Track`) hands its end to the Scheduler when it fires."""
        table = job.table
        alpha, beta = self.costs[table]
        u = self.rngs[table].random()  # always drawn, so replays stay aligned with the run
        n = job.n
        if table in self.late_fold and job.kind in ("stateful", "recompute") and "rebuild" not in job.reasons:
            # late rows ride with the increment, or are folded alone by a late fold (lake.stateful)
            n = self.late_fold[table] + (n if job.kind == "stateful" else 0.0)
            self.late_folded[table] += self.late_fold[table]
            self.late_fold[table] = 0.0
        if self.bursts and table in self.bursts:  # its data is denser in a burst (sim.bursts)
            for factor, normal, cycle, offset in self.bursts[table]:
                n += (factor - 1.0) * (_burst_time(job.end - offset, normal, cycle)
                                       - _burst_time(job.start - offset, normal, cycle))
        duration = (alpha + beta * n) * (self.b + u)
        if self.slow != 1.0 and (now - self.origin) % self.cycle >= self.normal:  # a slow period
            duration *= self.slow
        if self.measured is not None and job.kind not in MAINTENANCE_KINDS:
            duration = self.measured.get((table, job.start, job.end), duration)
        self.started[job.job_id] = (now, duration)
        if self.cores is not None:
            self.cores.start(job, duration)  # it ends when its share of the cores has done it
            return
        track = self.tracks.get(job.track)
        if track is None:
            track = self.tracks[job.track] = _Track(self)
        track.run(job, duration)

    def _ended(self, job: StartJob, duration: float) -> None:
        """`job` ended after `duration` (its timeout, or its share of the cores: sim.cores)."""
        if self.events >= self.limit:
            return
        del self.started[job.job_id]
        rows = 0
        if self.rows:
            pop = self.rows.pop
            for a in job.arrivals:
                rows += pop(a.partition_id, 0)
        if job.late and job.table in self.folds:  # late rows for the stateful tables over it
            late = sum(a.end - a.start for a in job.arrivals if a.partition_id in job.late)
            for t in self.folds[job.table]:
                self.late_fold[t] += late
        self.busy += duration
        self.jobs += 1
        self.chopped += job.chopped
        if job.kind in MAINTENANCE_KINDS:
            self.maintenance += 1
            self.maintenance_busy += duration
        else:
            if job.delta_f > 0:  # it made its table fresher (a recompute rewrites windows below F)
                self.advanced.setdefault(job.table, []).append(self.env._now)
            if self.writer is not None:  # the trace holds update jobs
                self.writer.job(JobRecord(time=self.env.now, table=job.table, start=job.start, end=job.end,
                                          duration=duration, rows=rows, track=job.track, work=job.n))
        cold = bool(self.cold) and (job.table, job.start, job.end) in self.cold
        self._handle(JobFinished.build(job_id=job.job_id, duration=duration, rows=rows, cold=cold),
                     self.env._now)  # (no property)
        if self._drain:
            self._drained()

    def _tick(self, _ev: simpy.Event) -> None:
        self._tick_at = None
        if self.events >= self.limit:
            return
        self._handle(Tick(), self.env.now, count=False)

    def _handle(self, event: Event, now: float, count: bool = True) -> None:
        """Hand `event` to the Scheduler at `now` (the SimPy clock's); start the jobs it decides."""
        if count:
            self.events += 1
        sched = self.sched
        jobs = sched.handle(event, now)
        if jobs:
            for job in jobs:
                self._start(job, now)
        wake = sched.next_wakeup()  # back-offs: only failed jobs have them
        if wake is not None and (self._tick_at is None or wake < self._tick_at):
            self._tick_at = wake
            self.env.timeout(max(wake - now, 0.0)).callbacks.append(self._tick)
        if self.events >= self.limit and self._stop is not None and not self._stop.triggered:
            self._stop.succeed()

    # ---- running -------------------------------------------------------------------------------
    def run(self, *, events: int | None = None, until: float | None = None) -> RunStats:
        """Run until `events` scheduler events have been handled, or until time `until`, or — a
        finite trace — until the trace is drained: every arrival and action handed over and no
        update job running, waiting or backing off (maintenance due later is not run)."""
        if events is not None:
            self.limit = events
            self._stop = self.env.event()
            with contextlib.suppress(RuntimeError):  # a trace ran out before `events`
                run_until(self.env, self._stop)
        elif until is not None:
            if until > self.env.now:
                run_to(self.env, until)
        else:
            self._drain, self._stop = True, self.env.event()
            self._drained()
            with contextlib.suppress(RuntimeError):  # nothing left to happen before it drained
                run_until(self.env, self._stop)
        return self.observe(self.env.now if until is None else until)

    def observe(self, horizon: float) -> RunStats:
        stats = self.sched.stats(horizon)
        span = max(horizon - self.origin, 1e-12)
        busy = self.busy + sum(max(0.0, min(d, horizon - s)) for s, d in self.started.values())
        per_table = {}
        for t in stats.tables:
            per_table[t.name] = {
                "priority": t.priority,
                "staleness": _r(t.weighted_staleness / t.priority / span),
                "weighted_staleness": _r(t.weighted_staleness),
                "jobs": t.jobs_completed,
                "mean_delta_f": _r(t.delta_f_total / t.jobs_completed) if t.jobs_completed else 0.0,
                "longest_gap": _r(longest_gap(self.advanced.get(t.name, []), self.origin, horizon)),
            }
            if t.recompute_jobs:  # late data (sim.late): recompute jobs competed for the tracks
                per_table[t.name]["recompute_jobs"] = t.recompute_jobs
                per_table[t.name]["windows_recomputed"] = t.windows_recomputed
            if t.name in self.late_folded:  # a stateful table: late rows folded, never recomputed
                per_table[t.name]["late_folded"] = _r(self.late_folded[t.name])
        return RunStats(horizon=horizon, events=self.events, weighted_staleness=stats.weighted_staleness,
                        busy_time=busy, jobs=self.jobs, chopped=self.chopped, per_table=per_table,
                        maintenance=self.maintenance, maintenance_busy=self.maintenance_busy)


class _Stream:
    """A stream (§2.1): each partition is handed to the Scheduler at its arrival time. One callback
    per arrival rather than a SimPy process (cheaper per event), in the same order as the process
    `for a in arrivals: yield env.timeout(a.time - env.now); hand a over` — it starts from an event
    scheduled at construction and schedules its next arrival after handing over the current one.
    `arrivals` yields (time, a trace's Arrival or the PartitionArrived itself)."""

    __slots__ = ("sim", "arrivals", "due", "eid", "event", "fire", "generated", "queue")

    def __init__(self, sim: Simulation, arrivals: Iterator[tuple[float, Arrival | PartitionArrived]],
                 generated: bool) -> None:
        self.sim, self.arrivals = sim, arrivals
        self.generated = generated  # PartitionArrived events with no rows: nothing for `_arrive` to keep
        self.due: tuple[float, Arrival | PartitionArrived] | None = None  # the arrival whose timeout is scheduled
        self.queue, self.eid = sim.env._queue, sim.env._eid  # `env.schedule`, inlined (SimPy 4: sim.loop)
        # its callback: a bound method, kept (SimPy calls it faster than an object's __call__)
        self.fire = self.fired
        # one event, re-armed for each arrival (a processed event is a timeout again once it has
        # callbacks and a place in the queue): as `env.timeout(dt)` does, without a new object
        self.event = start = sim.env.event()
        start.callbacks.append(self.fire)
        start.succeed()

    def fired(self, _ev: simpy.Event) -> None:
        """The scheduled arrival is due (or, the first time, the stream starts)."""
        sim = self.sim
        item, self.due = self.due, None
        now = sim.env._now  # (`env.now` without the property call: sim.loop)
        direct = self.generated and sim.writer is None  # no trace to write: straight to the Scheduler
        if item is not None:  # its timeout fired: it is due now
            if sim.events >= sim.limit:
                return
            if direct:
                sim._handle(item[1], now)
            else:
                sim._arrive(*item)
        for item in self.arrivals:  # at the start, or after the due one: hand over all due now
            if item[0] > now:
                self.due = item
                ev = self.event
                ev.callbacks = [self.fire]
                heappush(self.queue, (now + (item[0] - now), NORMAL, next(self.eid), ev))  # env.schedule
                return
            if sim.events >= sim.limit:
                return
            if direct:
                sim._handle(item[1], now)
            else:
                sim._arrive(*item)
        sim._fed()  # (the generated streams never end)


class _Track:
    """A track's running job (§4.1) ends by one SimPy event per track, re-armed for each job as
    `_Stream`'s is for each arrival: the same place in the queue as `env.timeout(duration)`, without
    a new object per job. The Scheduler runs at most one job per track, so the event has always
    fired (or not yet been made) when the track's next job starts."""

    __slots__ = ("sim", "env", "job", "duration", "event", "fire")

    def __init__(self, sim: Simulation) -> None:
        self.sim, self.env = sim, sim.env
        self.fire = self.ended  # its callback, kept (as `_Stream.fire`)
        self.job: StartJob | None = None
        self.duration = 0.0
        self.event: simpy.Event | None = None

    def run(self, job: StartJob, duration: float) -> None:
        """`job` runs for `duration` from now."""
        self.job, self.duration = job, duration
        ev = self.event
        if ev is None:
            self.event = ev = self.sim.env.timeout(duration)
            ev.callbacks.append(self.fire)
        else:
            assert ev.callbacks is None, "a track runs one job at a time"  # (its last one has ended)
            ev.callbacks = [self.fire]
            env = self.env
            heappush(env._queue, (env._now + duration, NORMAL, next(env._eid), ev))  # env.schedule, inlined

    def ended(self, _ev: simpy.Event) -> None:
        """The running job's time is up."""
        assert self.job is not None
        self.sim._ended(self.job, self.duration)


def prepare(config: FreshetConfig, seed: int, learn: bool = False) -> FreshetConfig:
    """The Scheduler as §4.1 runs it: estimates are the true E(n) (no learning) unless `learn` (the
    replay of a daemon's trace: the config's `learn_costs`); its Random policy seeded from the run's
    seed."""
    sc = config.scheduler.model_copy(update={"learn_costs": learn and config.scheduler.learn_costs, "seed": seed})
    return config.model_copy(update={"scheduler": sc})


def workload(config: FreshetConfig, *, seed: int = 0, trace: Trace | None = None,
             writer: TraceWriter | None = None) -> Simulation:
    """The run `simulate` makes, without its ideal: over a daemon's trace the twin learns α, β from
    the durations the daemon learned them from (§2.4), otherwise the estimates are the true E(n)."""
    return Simulation(prepare(config, seed, learn=trace is not None and trace.live), seed=seed, trace=trace,
                      writer=writer)


def simulate(
    config: FreshetConfig,
    *,
    seed: int = 0,
    events: int | None = None,
    until: float | None = None,
    trace: Trace | None = None,
    writer: TraceWriter | None = None,
    tuner: Callable[[Simulation, Trace | None], Any] | None = None,
) -> SimResult:
    """Run the workload, then its ideal over the same horizon; return both (§4.1). `tuner` (e.g.
    sim.selftune.attach) is attached to the run, not the ideal; its `summary()` goes in `extra`."""
    cfg = prepare(config, seed)  # (the ideal's: the true costs)
    if events is None and until is None and trace is None:
        events = cfg.sim.events
    sim = workload(config, seed=seed, trace=trace, writer=writer)
    hook = tuner(sim, trace) if tuner is not None else None
    run = sim.run(events=events, until=until)
    ideal_sim = Simulation(ideal_config(cfg), seed=seed, trace=trace, use_measured=False)
    ideal = ideal_sim.run(until=run.horizon)
    extra: dict[str, Any] = {"origin": sim.origin}
    if (ro := sim.sched.stats(run.horizon).rollout) is not None:  # policy rollout's rounds (warehouse.rollout)
        extra["rollout"] = {"decisions": ro.decisions, "overrides": ro.overrides, "fallbacks": ro.fallbacks}
    if hook is not None:
        extra["autotune"] = hook.summary()
    return SimResult(config=sim.cfg, seed=seed, run=run, ideal=ideal, extra=extra)


def horizon_for(cfg: FreshetConfig, events: int) -> float:
    """The time in which the ideal run handles about `events` events: an arrival and a completion
    per base period, a completion per derived period."""
    per = periods(cfg)
    rate = sum((2.0 if t.stream else 1.0) / per[t.name] for t in cfg.tables)
    return events / rate
