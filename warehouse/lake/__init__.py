"""The Delta Lake warehouse (docs/warehouse.md §5): the Spark session, Delta reads and idempotent
appends, recovery of every table's state from its Delta log, and the executor that runs a
`StartJob` and reports what it committed.

The Delta log is the truth: on start and on reload it is read back and handed to the Scheduler;
during a run the Scheduler owns what is pending, running and loaded.
"""
