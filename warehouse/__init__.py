"""Freshet's domain (the DataDepot paper §2): the pure engine in the top-level modules, I/O in two rooms.

Top level — pure, no clock and no I/O (docs/architecture.md): `config` (the one schema), `dag`,
`freshness` (staleness, the trailing edge §2.2), `cost` (E(n) = α + β·n, §2.4), `events`, `stats`
and the `scheduler` (§3); `recompute` (committed derived windows to rewrite: late data, a changed
SQL, backfills — beyond the paper, Olston, Modeling and Scheduling Asynchronous Incremental Workflows; Olston, Graceful Logic Evolution in Web Data Processing Workflows) and `sqltext` (window binding, SQL versions,
window-locality). The simulator and the daemon drive the same `Scheduler`.

The engine, by noun (each knows nothing of the Scheduler; only `warehouse.scheduler` imports them):

    warehouse.table     a table: its facts (priority, period, F, F', origin) and nouns (JobState, Mode,
                        MaintenanceState; QueuePlace, JobCounts, its JobProfile), Recovered; has it
                        work, a commit, edges and F' down the DAG (§2.2), a backfill's range
    warehouse.lifecycle the transition table: a table's job state, operator mode and maintenance state
    warehouse.blueprint what the tables take from a config alone, what one changes of another, a track
                        plan made ahead: a reload builds it off the scheduler loop
    warehouse.layout    the tables of a config, built and wired (by name, index, stream); what a table
                        back by a reload takes over (§4.4)
    warehouse.backlog   a base table's pending partitions, rows, slices, arrived (§2.4)
    warehouse.derived   a derived table's edge and settle point (§2.2), refresh mode, recompute ranges
    warehouse.nextjob   the next job of a table: window, n of E(n), its Candidate (§3.1, §3.4)
    warehouse.queues    the ready queues per track-plan group, the urgent queue and its picks, a round (§3.2)
    warehouse.board     the track board: which job runs where since when, busy time
    warehouse.bulk      the bulk limit: threshold, cap, which running jobs are bulk (policies.bulk)
    warehouse.backoff   tables in back-off after a failure, by retry time
    warehouse.upkeep    maintenance counts, clocks, what is due and its ranking (Nova, SIGMOD 2011 §2.4)
    warehouse.stats     the frozen snapshot rows and the snapshot
    warehouse.views     the Scheduler's queries: its snapshot, Σ p_i ∫ S_i dτ, costs, another setting's plan
    warehouse.jobs      building a job: the StartJob of a table's next job, taken from its backlog;
                        may maintenance run
    warehouse.orders    the operator's orders (suspend, resume, refresh, backfill, cancel) and a dropped
                        partition, as moves the Scheduler applies through its transition table
    warehouse.lookahead Lookahead's first pick (§3.1) and track reservation's hold, as queries
    warehouse.rollout   rollout's first pick (beyond the paper): the best k simulated ahead in copies
    warehouse.rollout_copy  those copies: the state pickled once a decision, a load per candidate
    policies.reservation  expected releases and the hold decision
    policies.bulk       which job is bulk, how many may run at once (warehouse.bulk counts them)

`warehouse.landing` — how partitions arrive: manifests, their one validator, the landing-zone
scanner and quarantine (docs/warehouse.md §3).

`warehouse.lake` — where they go: the Spark session, Delta reads and idempotent writes, recovery
from the Delta log and the executor that turns a `StartJob` into a Delta commit (docs/warehouse.md §5).
"""
