"""The tuner inside a simulation: `freshet sim run` and the experiments simulate the
daemon's tuner (ops.autotune) on the simulated run itself, so every simulated figure of the default
includes it.

As the daemon runs it:
- **cadence** — every `scheduler.autotune_every` of simulated time from the start (the daemon's
  first evaluation is one period after it starts), while `scheduler.autotune` is `apply`;
- **window** — the run's own trace so far (the records the daemon would have written to its trace
  file: arrivals and update jobs, kept in memory for twice the longest window, as far back as
  `sim.autotune.read_window` reads), cut by `sim.autotune.window_of` at the evaluation's time (the
  last `autotune_window`, an hour, or all of a shorter trace; longer to hold `autotune_min_jobs`
  jobs: `Rules.stretch`);
- **evaluation** — `sim.autotune.evaluate`, the one the daemon's child process runs, with the
  config's margin, cool-down and minimum of jobs and the daemon's three seeds, each handed what the
  last one left (`memo`: how much of it to simulate, sim.reuse), as the daemon hands it on;
- **switch** — `Reconfigure(config=…)` handed to the Scheduler through the simulation's one door
  (the daemon's reconfigure path; the running jobs finish), built by `sim.autotune.with_settings`.

**The evaluation's cost.** It takes no track and no simulated time: the switch applies at the
simulated instant of the evaluation, and its CPU time is recorded (`cpu_seconds`, per evaluation
and in total), not charged. In the daemon the child runs at nice 19 beside the loop, on a core of
its own or idle time, and its decision lands a few seconds after it starts (the CPU seconds per
evaluation, docs/experiments.md), against a cadence of ten minutes; charging it as a delay of
measured CPU time would make simulated figures depend on the machine and its load, and no longer
reproducible from the seed.

A shortcut that changes no outcome: an evaluation due inside the cool-down after a switch is
recorded as `cooldown` without running its simulations (whatever they found, the decision could
not be a switch). On a replayed trace (`--trace`) the tuner runs too — so the replay of a tuned
run's trace is that run — up to the trace's last arrival.

`summary()` holds what is reproducible from the seed (what `freshet sim run --json` prints, byte
for byte the same on every machine); `cpu_seconds` is the measured cost, reported apart.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from sim.autotune import Memo, Rules, current_setting, evaluate, window_of, with_settings
from sim.simulator import Simulation, prepare
from sim.trace import Arrival, JobRecord, Trace
from sim.tune import label
from warehouse.config import FreshetConfig
from warehouse.events import Reconfigure

__all__ = ["SEEDS", "SimTuner", "attach"]

SEEDS = Rules.seeds  # the daemon's too (ops.autotune.AutoTuner): sim.autotune.Rules owns the default


class _Recorder:
    """The records a daemon's trace file would hold (update jobs, arrivals), the last `keep`
    seconds of them in memory; passes every record on to the run's own writer, if any."""

    def __init__(self, keep: float, inner: Any) -> None:
        self.keep, self.inner = keep, inner
        self.arrivals: dict[str, deque[Arrival]] = {}
        self.jobs: deque[JobRecord] = deque()

    def arrival(self, a: Arrival) -> None:
        self.arrivals.setdefault(a.stream, deque()).append(a)
        if self.inner is not None:
            self.inner.arrival(a)

    def job(self, rec: JobRecord) -> None:
        self.jobs.append(rec)
        if self.inner is not None:
            self.inner.job(rec)

    def action(self, rec: Any) -> None:
        if self.inner is not None:
            self.inner.action(rec)

    def trace(self, now: float) -> Trace:
        since = now - self.keep
        for seq in (*self.arrivals.values(), self.jobs):
            while seq and seq[0].time < since:
                seq.popleft()
        return Trace({s: list(q) for s, q in self.arrivals.items()}, {}, list(self.jobs))


@dataclass
class SimTuner:
    """The tuner of one simulated run."""

    sim: Simulation
    config: FreshetConfig  # the setting in force (prepared as the simulation's, sim.simulator.prepare)
    rules: Rules
    last_switch: float | None = None
    results: Counter[str] = field(default_factory=Counter)
    switches: list[dict[str, Any]] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # CPU seconds of each evaluation that ran simulations
    runs: int = 0
    memo: Memo = field(default_factory=Memo)  # what the last evaluation handed on (sim.reuse)
    screens: Counter[str] = field(default_factory=Counter)  # evaluations judged, by how much they simulated

    end: float = math.inf  # a replayed trace's last arrival: no evaluation after it (it would prolong the run)

    def __post_init__(self) -> None:
        self.recorder = _Recorder(2 * self.rules.stretch * self.config.scheduler.autotune_window, self.sim.writer)
        self.sim.writer = self.recorder  # type: ignore[assignment]  # a TraceWriter's interface
        self._next()

    def _next(self) -> None:
        env, every = self.sim.env, self.config.scheduler.autotune_every
        if env.now + every <= self.end:
            env.timeout(every).callbacks.append(self._due)

    def _due(self, _ev: Any) -> None:
        sim = self.sim
        if sim.events >= sim.limit:  # the run is over (`run(events=…)`)
            return
        self.evaluate(sim.env.now)
        self._next()

    def evaluate(self, now: float) -> None:
        """One evaluation at simulated time `now`; a switch reconfigures the Scheduler now."""
        if self.last_switch is not None and now - self.last_switch < self.rules.cooldown:
            self.results["cooldown"] += 1  # could not switch (module docstring)
            return
        sc = self.config.scheduler
        window = window_of(self.recorder.trace(now), self.config, sc.autotune_window, end=now,
                           min_jobs=self.rules.min_jobs, stretch=self.rules.stretch)
        d = evaluate(self.config, window, self.rules, now=now, last_switch=self.last_switch, memo=self.memo)
        self.memo = d.memo
        self.results[d.result] += 1
        if d.screen:
            self.screens[d.screen] += 1
        self.runs += d.runs
        if d.runs:
            self.cpu.append(d.cpu_seconds)
        if d.result == "switch" and d.choice is not None:
            before = label(current_setting(self.config))
            self.config = prepare(with_settings(self.config, d.choice), self.sim.seed)
            self.sim._handle(Reconfigure(config=self.config), self.sim.env.now, count=False)
            self.last_switch = now
            self.switches.append({"time": now, "from": before, "to": label(d.choice), "reason": d.reason})

    @property
    def cpu_seconds(self) -> float:
        """CPU time the evaluations took (measured: differs between machines and runs)."""
        return sum(self.cpu)

    def summary(self) -> dict[str, Any]:
        """Evaluations by result, those that ran simulations, the switches, the setting at the end."""
        return {"evaluations": sum(self.results.values()), "simulated": len(self.cpu),
                "results": dict(sorted(self.results.items())), "switches": self.switches,
                "setting": label(current_setting(self.config)), "simulations": self.runs,
                "screens": dict(sorted(self.screens.items()))}


def attach(sim: Simulation, trace: Trace | None = None) -> SimTuner | None:
    """The tuner on `sim` (replaying `trace`, if any) when its config applies one
    (`scheduler.autotune: apply`, the default when policy, partitioner and chop are left to auto);
    None otherwise."""
    cfg = sim.cfg
    sc = cfg.scheduler
    if sc.autotune != "apply":
        return None
    rules = Rules.of(cfg, SEEDS)
    return SimTuner(sim, cfg, rules, end=trace.last_time if trace is not None else math.inf)
