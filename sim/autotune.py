"""The tuner: replay the daemon's own recent trace in the simulator under the setting in
force and under the `freshet sim tune` candidates (sim.tune.candidates), and decide whether to switch.

1. **Window.** The last `span` seconds of the trace (`scheduler.autotune_window`, an hour), or all
   of a shorter trace, replayed from its own start: the arrivals in it, the jobs that finished in
   it (their measured durations, and E(n) = α + β·n fitted to them, §2.4), and the state at its
   start — each table's freshness then (the end of its last job before the window) and the
   partitions that had arrived and were not loaded yet (the backlog). A window holding fewer than
   `min_jobs` jobs reaches back to the `min_jobs`-th last one, up to `stretch` spans: an
   overloaded daemon finishes few, large jobs (13-46 an hour on two unseen workloads at U = 1.2),
   and with the hour alone its tuner went blind for as long as the overload lasted. Measured over
   18 unseen points (docs/experiments.md § Unseen) it is within 3% of the best paper line at 15
   against 13 with `stretch` = 1, but worse on six-hour capacity phases (0.957× → 1.125× at
   U = 1.2: switches judged on overloaded hours). A window of the whole trace (`autotune_window:
   1d`, hourly) saw gains the hour hides in single decisions (a `dag` trace, docs/operations.md
   §8: chopping's cost there was mostly the chopped full refresh, fixed since), but over the experiments it was worse than the hour at 7 of 18 points, better at 3 (§ Unseen, "A judge on the
   whole trace"), so the hour stays the default.
2. **Replay.** One simulation per setting and seed from that state over the window, the same
   arrivals for all (common random numbers: a table's n-th drawn duration is the same uniform in
   every run, sim.simulator); the score is the predicted weighted staleness Σ p_i ∫ S_i dτ (§2.3)
   over the window and a run-out of half a window (at most `runout_max`, 1.5 h: what an hour's
   window stretched three times had) after it with no more arrivals. Without the
   run-out a setting that defers work past the window's end (chopping a backlog, paying α more
   often) is not charged for the backlog it leaves: on an inverted hierarchy at U = 1.05 the
   replay then switched in 4 of 12 windows to chop 3, which full runs show is no better; with it,
   in none (docs/operations.md §8).
3. **Screen, then confirm.** Every candidate runs with the first seed; those that beat the current
   setting by the margin there (at most `finalists` of them, best first, one of each score: under
   `auto` several settings behave alike) run with the other seeds. Settings that differ only in
   the partitioner's and make plans that act alike (`alike`: with costs not learned a replay keeps
   its first plan) replay alike to the last bit, so one of them is replayed for all: on the
   tests' two-class workload about 60 replays of 143 settings.
4. **Decide.** Switch to the best finalist (lowest mean) only if it beats the current setting by
   the margin with *every* seed, the window held at least `min_jobs` jobs, and the last switch is
   at least `cooldown` ago. Otherwise keep, and say why.
5. **Skip what cannot have changed** (sim.reuse). The screen stops a candidate's replay once its
   weighted staleness so far plus a floor under the rest (`staleness_floor`, the same for every
   setting) is past `clear` × the margin short of the current setting's: that candidate can be
   no finalist, and its figure is kept as a lower bound. What one evaluation hands the next
   (`Decision.memo`) lets it keep a verdict on a window judged already, back off after `calm`
   clear keeps in a row on the same workload, and then screen the last full screen's `narrow`
   best only — the whole grid again on a near miss, a workload change or every `rescreen`-th time.

Pure but for the simulator: no clock (time comes in), no I/O except `read_window` (the trace file).

Limits: the seeds vary the drawn durations, not the arrivals — a window's winner is the setting
that would have done best on *that* trace; the margin and the cool-down bound what a wrong guess
costs. Jobs running at the window's start are not replayed (their tracks start free), and a
backlog older than what `read_window` reads (two spans) starts at the oldest partition read.
"""

from __future__ import annotations

import bisect
import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.reuse import Memo, fingerprint, signature
from sim.simulator import Simulation, prepare
from sim.trace import Trace, parse_trace
from sim.tune import SETTINGS, candidates, label
from warehouse.config import CostPrior, FreshetConfig, SchedulerConfig, SimConfig, parse_config
from warehouse.dag import Dag
from warehouse.freshness import staleness_area
from warehouse.scheduler import Recovered, Scheduler

__all__ = ["Decision", "Memo", "Rules", "Score", "Window", "current_setting", "decide", "evaluate", "read_window",
           "replay", "score", "window_of", "with_settings"]

BLOCK = 1 << 20  # bytes read at a time from the end of the trace file


def _default(field: str) -> Any:
    """The config's default for `scheduler.<field>`: the one place the tuner's defaults live."""
    return SchedulerConfig.model_fields[field].default


@dataclass(frozen=True)
class Rules:
    """When a candidate may replace the setting in force (config `scheduler.autotune_*`)."""

    margin: float = _default("autotune_margin")  # better by this share of the current weighted staleness
    cooldown: float = _default("autotune_cooldown")  # seconds between switches
    min_jobs: int = _default("autotune_min_jobs")  # jobs the window must hold to judge
    seeds: int = 3  # every seed must agree
    finalists: int = 4  # candidates confirmed with every seed after the first-seed screen
    runout: float = 0.5  # the replay runs on this share of the window after its end (step 2) …
    runout_max: float = 5400.0  # … at most this long (the longest a stretched hour's run-out was)
    stretch: float = 3.0  # a window with fewer than min_jobs jobs grows up to this many spans (step 1)
    # step 5, sim.reuse: what an evaluation may skip after the setting in force kept winning
    calm: int = 2  # clear keeps in a row before backing off
    clear: float = 0.75  # a keep is clear when no candidate beats the setting by this share of the margin
    backoff_max: int = 24  # at most this many periods between evaluations that simulate (the drift check runs at each)
    narrow: int = 6  # candidates an evaluation in a streak screens: the last full screen's best
    rescreen: int = 12  # narrowed evaluations before the whole grid is screened again
    drift: float = 0.3  # a stream's rate or all jobs' cost factor moving this much is a new workload …
    drift_table: float = 0.5  # … and one table's cost factor moving this much

    @classmethod
    def of(cls, config: FreshetConfig, seeds: int, **other: Any) -> Rules:
        """The rules `config.scheduler.autotune_*` set, with `seeds` seeds (and `other` fields)."""
        sc = config.scheduler
        return cls(margin=sc.autotune_margin, cooldown=sc.autotune_cooldown, min_jobs=sc.autotune_min_jobs,
                   seeds=seeds, **other)


@dataclass
class _Trace(Trace):
    """A trace window whose replay starts at `start`, not at its earliest partition's start."""

    start: float = 0.0

    @property
    def origin(self) -> float:
        return self.start


@dataclass(frozen=True)
class Window:
    """The part of a trace the tuner replays: `(start, end]` and the state at `start`."""

    start: float
    end: float
    trace: Trace
    recovered: dict[str, Recovered]  # the state at `origin`
    costs: dict[str, tuple[float, float]]  # (α, β) per table fitted to its measured jobs (§2.4)
    jobs: int  # update jobs that finished ok inside the window
    origin: float  # the replay starts here, a warm-up before `start`; it is scored from `start`


def current_setting(config: FreshetConfig) -> dict[str, Any]:
    """The scheduler settings `freshet sim tune` varies, as they are in `config`."""
    return {k: getattr(config.scheduler, k) for k in SETTINGS}


def with_settings(config: FreshetConfig, settings: dict[str, Any]) -> FreshetConfig:
    """`config` with its scheduler section's `settings` replaced, validated like a file (`autotune`
    and everything else kept): what a switch hands to the reconfigure path (ops.autotune.switch,
    sim.selftune)."""
    data = config.model_dump(mode="json", by_alias=True)
    data["scheduler"] = {**data["scheduler"], **settings}
    return parse_config(data, source="<autotune>")


def window_of(trace: Trace, config: FreshetConfig, span: float, end: float | None = None,
              warmup: float = 0.0, min_jobs: int = 0, stretch: float = 1.0) -> Window:
    """Cut `(end − span, end]` out of `trace` (end: its last record), with a warm-up of
    `warmup × span` before it and the state at the warm-up's start. (Off by default: on the
    inverted-hierarchy workload of docs/operations.md §8 a quarter-window warm-up doubled the
    switches to settings that are no better in full runs.) With fewer than `min_jobs` update jobs
    in it, the window starts earlier, at the `min_jobs`-th last job's end, up to `stretch × span`
    long (module docstring, step 1)."""
    last = max([trace.last_time, *(j.time for j in trace.jobs)])
    end = last if end is None else end
    start = max(end - span, min(trace.origin, end))  # a trace shorter than the span: all of it
    if min_jobs > 0 and stretch > 1.0:
        done = sorted(j.time for j in trace.jobs if j.status == "ok" and j.time <= end)
        if done and sum(1 for t in done if t > start) < min_jobs:
            first = done[-min_jobs] if len(done) >= min_jobs else done[0]
            start = max(end - stretch * span, min(start, first - 1e-9))
            span = end - start
    origin = start - warmup * span
    before = [j for j in trace.jobs if j.status == "ok" and j.time <= origin]
    replayed = [j for j in trace.jobs if j.status == "ok" and origin < j.time <= end]
    dag = Dag.from_config(config)
    fresh: dict[str, float] = {}
    for j in before:
        fresh[j.table] = max(fresh.get(j.table, -math.inf), j.end)
    tables = {t.name: t for t in config.tables}
    by_stream: dict[str, float] = {}
    for name in dag.order:  # sources first
        t = tables[name]
        if name not in fresh:
            if t.stream is not None:  # nothing loaded in what we read: everything read is pending
                seq = trace.arrivals.get(t.stream, [])
                fresh[name] = min((a.start for a in seq), default=origin)
            else:
                fresh[name] = min(fresh[s] for s in t.sources)
        if t.stream is not None:  # a stream's partitions are pending for the least fresh of its tables
            by_stream[t.stream] = min(by_stream.get(t.stream, math.inf), fresh[name])
    arrivals = {s: [a for a in seq if a.time <= end and (a.time > origin or a.end > by_stream.get(s, -math.inf))]
                for s, seq in trace.arrivals.items() if s in by_stream}
    durations = {(j.table, j.start, j.end): j.duration for j in replayed}
    priors = {t.name: (config.cost_prior(t).alpha, config.cost_prior(t).beta) for t in config.tables}
    costs = {**priors, **Trace({}, {}, [j for j in trace.jobs if j.time <= end]).fitted_costs(priors)}
    win = _Trace(arrivals=arrivals, durations=durations, jobs=replayed, start=origin)
    recovered = {n: Recovered(freshness=min(f, origin)) for n, f in fresh.items()}
    return Window(start, end, win, recovered, costs, sum(1 for j in replayed if j.time > start), origin)


def read_window(path: str | Path, config: FreshetConfig, span: float, end: float | None = None,
                warmup: float = 0.0, min_jobs: int = 0, stretch: float = 1.0) -> Window:
    """`window_of` the trace file at `path`, reading from its end only as far back as it needs
    (the window — stretched, if it must be — and its warm-up, and as much again for the backlog
    before them), so a trace of months costs what an hour does. Operator actions and a line still
    being written are skipped. A rotated trace (`<name>.1`, sim.trace.TraceWriter) is read on
    into the file before it when the current one does not reach back far enough."""
    p, back = Path(path), 2 * (max(stretch, 1.0) + warmup) * span
    lines, since, reached = _tail(p, back, end)
    older = p.with_name(p.name + ".1")
    if not reached and older.exists():
        lines = _tail(older, back, end if end is not None or since is None else since + back)[0] + lines
    return window_of(parse_trace(lines, source=str(path)), config, span, end, warmup, min_jobs, stretch)


def _time(line: bytes) -> float | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    t = obj.get("time") if isinstance(obj, dict) else None
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None


def _tail(path: Path, back: float, end: float | None) -> tuple[list[str], float | None, bool]:
    """The records of `path` from `back` seconds before `end` (default: its last record's time),
    that time, and whether the file reaches back that far."""
    reached = False
    with path.open("rb") as f:
        size = f.seek(0, 2)
        pos, buf, since = size, b"", None
        while pos > 0:
            step = min(BLOCK, pos)
            pos -= step
            f.seek(pos)
            buf = f.read(step) + buf
            whole = buf.split(b"\n")[1:-1] if pos > 0 else buf.split(b"\n")[:-1]
            if since is None:
                last = next((t for ln in reversed(whole) if (t := _time(ln)) is not None), None)
                if last is not None:
                    since = (last if end is None else end) - back
            first = next((t for ln in whole if (t := _time(ln)) is not None), None)
            if since is not None and first is not None and first < since:
                reached = True
                break
    complete = buf.split(b"\n")[:-1]  # the last piece has no newline yet: still being written
    if pos > 0:
        complete = complete[1:]  # cut mid-line
    out = []
    for ln in complete:
        text = ln.decode("utf-8", "replace").strip()
        if not text or text.startswith("#"):
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            continue
        if isinstance(obj, dict) and "action" not in obj and ("stream" in obj or "table" in obj):
            out.append(text)
    return out, since, reached


def replay_config(config: FreshetConfig, window: Window, settings: dict[str, Any]) -> FreshetConfig:
    """`config` under `settings`, each table's true cost its fitted one, durations drawn with
    mean E(n) (b = ½) and no slow periods (measured durations already hold them)."""
    tables = [t.model_copy(update={"cost": CostPrior(alpha=a, beta=b)})
              for t in config.tables for a, b in (window.costs[t.name],)]
    sc = config.scheduler.model_copy(update=settings)
    return config.model_copy(update={"tables": tables, "scheduler": sc, "sim": SimConfig(b=0.5)})


def replayed(config: FreshetConfig, window: Window, settings: dict[str, Any], seed: int) -> Simulation:
    """The simulation `replay` runs, built (its Scheduler in the state at the window's origin, its
    track plan made: with costs not learned, the one it keeps to the end, §3.2), not run."""
    cfg = prepare(replay_config(config, window, settings), seed)
    return Simulation(cfg, seed=seed, trace=window.trace, recovered=window.recovered)


def replay(config: FreshetConfig, window: Window, settings: dict[str, Any], seed: int, runout: float = 0.5,
           runout_max: float = math.inf, above: float = math.inf, floor: Sequence[float] | None = None,
           trail: list[float] | None = None) -> float:
    """Predicted weighted staleness Σ p_i ∫ S_i dτ under `settings` (§2.3) over the window and a
    run-out of `runout × span` (at most `runout_max`) after it with no more arrivals (module
    docstring, step 2); stopped once it is past `above` (`score`)."""
    return score(replayed(config, window, settings, seed), window, runout, runout_max, above, floor, trail)


PLANNED = ("partitioner", "k", "allocation", "aggressive")  # settings that act through the track plan alone


def alike(sim: Simulation, config: FreshetConfig, settings: dict[str, Any]) -> tuple[Any, ...]:
    """What a replay under `settings` depends on beyond the window and seed: the settings that are
    not the partitioner's, and the behaviour of the track plan its partitioner makes (tracks.base.
    Plan.behaviour) from the profiles of `sim`'s Scheduler, which are every setting's (costs are not
    learned in a replay: estimates, and so the plan, never move, warehouse.table.committed). Two
    settings alike replay alike, to the last bit."""
    sc = config.scheduler.model_copy(update=settings)  # (a setting left out is the config's, as in replay_config)
    return tuple(getattr(sc, k) for k in SETTINGS if k not in PLANNED), sim.sched.plan_for(sc).behaviour()


CHECKS = 24  # times a replay with a bound (`score`'s `above`) looks whether it is past it


def checkpoints(window: Window, runout: float = 0.5, runout_max: float = math.inf) -> tuple[list[float], float]:
    """The times a bounded replay looks (CHECKS − 1 of them, evenly from the window's start) and its end."""
    end = window.end + min(runout * (window.end - window.start), runout_max)
    step = (end - window.start) / CHECKS
    return [window.start + i * step for i in range(1, CHECKS)], end


def staleness_floor(config: FreshetConfig, window: Window, times: Sequence[float], end: float) -> list[float]:
    """For each t of `times`, a floor under Σ p_i ∫_t^end S_i dτ that holds for every setting: no
    table is fresher than the newest data that has arrived for it — its stream's partitions (a base
    table), its sources' edges (a derived one), or its freshness at the window's origin — so
    S_i(τ) ≥ τ − E_i(τ) with E_i that edge at τ. (The run-out has no arrivals: there the floor is
    most of what any setting scores.) Tables with no freshness at the origin count nothing."""
    tables = {t.name: t for t in config.tables}
    edges: dict[str, list[tuple[float, float]]] = {}  # table → (time, edge from then on), the edge rising
    for name in Dag.from_config(config).order:  # sources first
        t = tables[name]
        rec = window.recovered.get(name)
        e0 = rec.freshness if rec is not None and rec.freshness is not None else -math.inf
        if t.stream is not None:
            steps = sorted((a.time, a.end) for a in window.trace.arrivals.get(t.stream, []))
        else:
            steps = sorted(x for src in t.sources for x in edges.get(src, []))
        rising, top = [(window.origin, e0)], e0
        for at, e in steps:
            if e > top:
                top = e
                rising.append((max(at, window.origin), e))
        edges[name] = rising
    out = [0.0] * len(times)
    for name, rising in edges.items():
        rec = window.recovered.get(name)
        if rec is None or rec.freshness is None:
            continue
        p = tables[name].priority
        # ∫_t^end (τ − E(τ)) dτ: the piece holding t from t on, then every later piece whole (each a
        # trapezoid, staleness_area), summed from the last piece back
        starts = [a for a, _ in rising]
        ends = [min(b, end) for b in [*starts[1:], math.inf]]
        after = [0.0] * (len(rising) + 1)
        for k in range(len(rising) - 1, -1, -1):
            a, e = rising[k]
            after[k] = after[k + 1] + (staleness_area(a, ends[k], e) if a < ends[k] else 0.0)
        for n, t in enumerate(times):
            k = bisect.bisect_right(starts, t) - 1
            head = staleness_area(t, ends[k], rising[k][1]) if t < ends[k] else 0.0
            out[n] += p * (head + after[k + 1])
    return out


def score(sim: Simulation, window: Window, runout: float = 0.5, runout_max: float = math.inf,
          above: float = math.inf, floor: Sequence[float] | None = None, trail: list[float] | None = None) -> float:
    """`sim` (built on `window.trace`) run from the state at the window's warm-up start; its
    weighted staleness from the window's start to `runout × span` (at most `runout_max`) after its end.

    With `above` finite the run stops as soon as its weighted staleness so far, plus the floor
    under what is still to come (`staleness_floor`, the same for every setting; computed here
    unless given for `checkpoints`), is past `above` (looked at CHECKS − 1 times, evenly): the
    whole run's is past it too, and the figure returned (> `above`) is a lower bound of it.
    Stopping between events changes nothing of the run before it (SimPy processes the events
    before each stop in the same order), so a figure at or below `above` is the exact one.
    `trail`, if given, gets the weighted staleness so far at each checkpoint the run passed."""
    if sim.recovered is not window.recovered or sim.env.now != window.origin:  # the state at the warm-up's start
        sim.sched = Scheduler(sim.cfg, now=window.origin, recovered=window.recovered)
    before = sim.run(until=window.start).weighted_staleness if window.start > window.origin else 0.0
    times, end = checkpoints(window, runout, runout_max)
    if above < math.inf or trail is not None:
        if above < math.inf and floor is None:
            floor = staleness_floor(sim.cfg, window, times, end)
        bar = above * (1.0 + 1e-9)  # (rounding: never stop a run that could end at `above`)
        for t, rest in zip(times, floor or [0.0] * len(times), strict=True):
            if t > sim.env.now:
                sim.env.run(until=t)
            so_far = sim.sched.weighted_staleness(t) - before
            if trail is not None:
                trail.append(so_far)
            if so_far + rest > bar:
                return so_far + rest
    return sim.run(until=end).weighted_staleness - before


@dataclass
class Score:
    """One setting's predicted weighted staleness, one value per seed it ran with."""

    settings: dict[str, Any]
    staleness: list[float] = field(default_factory=list)
    bound: bool = False  # the first seed's figure is a lower bound: its replay stopped past the screen's bar
    rank: float = math.nan  # how it compares with the setting in force on the first seed (evaluate)

    @property
    def label(self) -> str:
        return label(self.settings)

    @property
    def mean(self) -> float:
        return sum(self.staleness) / len(self.staleness) if self.staleness else math.nan

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.label, "settings": self.settings, "weighted_staleness": self.staleness,
                "mean": self.mean, "bound": self.bound}


@dataclass
class Decision:
    """What one evaluation found and chose (logged, and shown on `/v1/status`)."""

    time: float
    result: str  # switch | keep | cooldown | too_few_jobs
    reason: str
    current: Score
    choice: dict[str, Any] | None = None  # the new setting when result == "switch"
    scores: list[Score] = field(default_factory=list)  # candidates, best first by their first seed
    window: tuple[float, float] = (0.0, 0.0)
    jobs: int = 0
    cpu_seconds: float = 0.0
    runs: int = 0  # simulations run
    screen: str = ""  # full | narrow | unchanged | backoff (step 5, sim.reuse); "" when not judged
    memo: Memo = field(default_factory=Memo)  # what the next evaluation is to be given

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "result": self.result, "reason": self.reason, "current": self.current.to_json(),
                "choice": None if self.choice is None else label(self.choice), "choice_settings": self.choice,
                "window": list(self.window), "jobs": self.jobs, "cpu_seconds": round(self.cpu_seconds, 3),
                "runs": self.runs, "screen": self.screen, "memo": self.memo.to_json(),
                "candidates": [s.to_json() for s in self.scores]}


def beats(cand: Score, cur: Score, margin: float) -> list[bool]:
    """Per seed both ran: is the candidate better than the current setting by the margin?"""
    return [c <= (1.0 - margin) * b for c, b in zip(cand.staleness, cur.staleness, strict=False)]


def decide(current: Score, scores: Sequence[Score], rules: Rules, *, now: float,
           last_switch: float | None, jobs: int) -> tuple[str, dict[str, Any] | None, str]:
    """(result, choice, reason) by the rules of the module docstring (steps 3-4)."""
    full = [s for s in scores if len(s.staleness) >= rules.seeds and len(current.staleness) >= rules.seeds]
    winners = sorted((s for s in full if all(beats(s, current, rules.margin))), key=lambda s: s.mean)
    if not winners:
        near = min(full or scores, key=lambda s: s.mean, default=None)
        if near is None:
            return "keep", None, "no candidate"
        ok = beats(near, current, rules.margin)
        if full and any(ok):
            return "keep", None, (f"best candidate {near.label} beats the current setting by "
                                  f"{rules.margin:.0%} with {sum(ok)} of {len(ok)} seeds only")
        gain = 1.0 - near.mean / current.mean if current.mean > 0 else 0.0
        bound = " at most" if near.bound else ""  # its replay stopped past the screen's bar (evaluate)
        return "keep", None, (f"no candidate beats the current setting by {rules.margin:.0%} "
                              f"(best {near.label}:{bound} {gain:+.1%})")
    best = winners[0]
    gain = 1.0 - best.mean / current.mean
    if last_switch is not None and now - last_switch < rules.cooldown:
        return "cooldown", None, (f"{best.label} is {gain:.1%} better, but the last switch was "
                                  f"{now - last_switch:.0f}s ago (cool-down {rules.cooldown:.0f}s)")
    return "switch", best.settings, (f"{best.label} beats the current setting by {gain:.1%} "
                                     f"(every one of {rules.seeds} seeds by at least {rules.margin:.0%}) "
                                     f"over {jobs} jobs")


def evaluate(config: FreshetConfig, window: Window, rules: Rules = Rules(), *, now: float,
             last_switch: float | None = None, grid: Iterable[dict[str, Any]] | None = None,
             memo: Memo | None = None) -> Decision:
    """Replay the window under the current setting and each candidate; decide (module docstring).
    `memo` is what the last evaluation handed on (`Decision.memo`; none: a tuner's first), and says
    how much of this one to simulate (step 5, sim.reuse)."""
    t0 = time.process_time()
    memo = Memo() if memo is None else memo
    mine = current_setting(config)
    current = Score(mine)
    out = Decision(now, "too_few_jobs", f"{window.jobs} jobs in the window (at least {rules.min_jobs} needed)",
                   current, window=(window.start, window.end), jobs=window.jobs, memo=memo)
    if window.jobs < rules.min_jobs:
        return out
    seeds = list(range(1, rules.seeds + 1))

    floor: list[float] = []  # under every setting's replay (staleness_floor), once the screen needs it

    def run(settings: dict[str, Any], seed: int, above: float = math.inf, trail: list[float] | None = None,
            sim: Simulation | None = None) -> float:
        if above < math.inf and not floor:
            floor.extend(staleness_floor(config, window, *checkpoints(window, rules.runout, rules.runout_max)))
        sim = replayed(config, window, settings, seed) if sim is None else sim
        return score(sim, window, rules.runout, rules.runout_max, above, floor or None, trail)

    cands = [s for s in (candidates(config) if grid is None else grid) if s != mine]
    key, sig = fingerprint(config, window, rules, cands), signature(config, window)
    out.screen = memo.plan(rules, key, sig)
    if out.screen in ("unchanged", "backoff"):
        out.result, out.memo = "keep", memo.skipped()
        out.reason = ("the window is the one judged last, and kept: nothing simulated" if out.screen == "unchanged"
                      else f"kept clearly {memo.streak} times in a row on the same workload: "
                           f"backed off ({memo.waited + 1} evaluations without simulating)")
        out.cpu_seconds = time.process_time() - t0
        return out
    mine_trail: list[float] = []  # the setting in force's staleness so far at each checkpoint
    probe = replayed(config, window, mine, seeds[0])
    done: dict[tuple[Any, ...], tuple[float, list[float]]] = {}  # first-seed replays by what they depend on (alike)
    current.staleness.append(run(mine, seeds[0], trail=mine_trail, sim=probe))
    bar = (1.0 - rules.clear * rules.margin) * current.staleness[0]  # through the screen: at or below it

    def screened(pool: list[dict[str, Any]]) -> dict[int, Score]:
        """First-seed scores of `pool` (one replay per behaviour, `alike`); a replay past the bar stops
        there (its figure a bound), ranked by its staleness so far over the setting in force's at the
        last checkpoint it passed."""
        got = {}
        for s in pool:
            key = alike(probe, config, s)
            if key not in done:
                trail: list[float] = []
                done[key] = (run(s, seeds[0], bar, trail), trail)
            v, trail = done[key]
            cur = current.staleness[0]
            if v > bar and len(trail) < len(mine_trail) + 1 and trail[-1] > 0 and mine_trail[len(trail) - 1] > 0:
                rank = trail[-1] / mine_trail[len(trail) - 1]
            else:
                rank = v / cur if cur > 0 else 1.0
            got[id(s)] = Score(s, [v], bound=v > bar, rank=rank)
        return got

    pool = cands
    if out.screen == "narrow":
        pool = [s for s in cands if s in memo.ranking]
    by = screened(pool)
    if out.screen == "narrow" and any(sc.staleness[0] <= bar for sc in by.values()):
        out.screen = "full"  # one of the best comes through the screen: the whole grid after all
        by.update(screened([s for s in cands if id(s) not in by]))
    scores = [by[id(s)] for s in cands if id(s) in by]  # in the grid's order, so ties break as always
    # exact figures first, by value (as without the bar: the finalists are among them), then the
    # stopped ones by how they compared when they stopped
    scores.sort(key=lambda s: (s.staleness[0] if not s.bound else math.inf, s.rank))
    runs = 1 + len(done)
    finalists: list[Score] = []
    for s in scores:  # settings that behave alike (aliases under `auto`) score alike: confirm one of each
        if len(finalists) < rules.finalists and all(beats(s, current, rules.margin)) and \
                all(abs(s.staleness[0] - f.staleness[0]) > 1e-9 * f.staleness[0] for f in finalists):
            finalists.append(s)
    if finalists:
        for seed in seeds[1:]:
            current.staleness.append(run(mine, seed))
            for s in finalists:
                s.staleness.append(run(s.settings, seed))
            runs += 1 + len(finalists)
    out.result, out.choice, out.reason = decide(current, scores, rules, now=now, last_switch=last_switch,
                                                jobs=window.jobs)
    clear = all(s.staleness[0] > bar for s in scores)
    ranking = [s.settings for s in sorted(scores, key=lambda s: s.rank)]
    out.memo = memo.after(rules, out.screen, key, sig, ranking, out.result, clear, (window.start, window.end))
    out.scores, out.runs, out.cpu_seconds = scores, runs, time.process_time() - t0
    return out
