"""Freshet's domain (paper 004, §2): the pure engine in the top-level modules, I/O in two rooms.

Top level — pure, no clock and no I/O (DESIGN.md §3): `config` (the one schema), `dag`,
`freshness` (staleness, the trailing edge §2.2), `cost` (E(n) = α + β·n, §2.4), `events`, `stats`
and the `scheduler` (§3); `recompute` (committed derived windows to rewrite: late data, a changed
SQL, backfills — beyond the paper, seeds 000/001) and `sqltext` (window binding, SQL versions,
window-locality). The simulator and the daemon drive the same `Scheduler`.

`warehouse.landing` — how partitions arrive: manifests, their one validator, the landing-zone
scanner and quarantine (DESIGN.md §4.3).

`warehouse.lake` — where they go: the Spark session, Delta reads and idempotent writes, recovery
from the Delta log and the executor that turns a `StartJob` into a Delta commit (DESIGN.md §4.4).
"""
