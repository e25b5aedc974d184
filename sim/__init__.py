"""The simulator (the DataDepot paper §4): the daemon's Scheduler inside a SimPy model of streams and tracks.

Streams push periodic partitions; tracks run each `StartJob` for a drawn execution time
(uniform in [b·E(n), (1+b)·E(n)], times S while slow); the one Scheduler (docs/architecture.md) decides.
Relative lateness compares a run with the no-contention ideal of the same workload and seed.

- `sim.workload`    — the paper's job sets as ordinary `FreshetConfig`s; utilization
- `sim.simulator`   — the SimPy shell: `Simulation`, `simulate`
- `sim.trace`       — recorded arrivals and durations (JSON lines; docs/simulator.md)
- `sim.figures`     — the experiments (Figs. 4-11, beyond) as data: job sets, lines, verdicts
- `sim.experiments` — Figs. 4-11 as parallel utilization sweeps (docs/experiments.md)
- `sim.cli`         — `freshet sim run|experiment`
"""
