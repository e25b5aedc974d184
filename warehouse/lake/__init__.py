"""The Delta Lake warehouse (docs/warehouse.md §5): the Spark session, Delta reads and idempotent
appends, recovery of every table's state from its Delta log, and the executor that runs a
`StartJob` — one pipeline per kind of job (plan, read at pinned versions, compute, commit;
docs/architecture.md, How a job travels through the lake) — and reports what it committed.

The Delta log is the truth: on start and on reload it is read back and handed to the Scheduler;
during a run the Scheduler owns what is pending, running and loaded.
"""
