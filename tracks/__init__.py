"""Tracks: partitioning released jobs over N tracks (the DataDepot paper §3.2).

A track runs at most one job at a time; tracks bound concurrency and keep short jobs from being
blocked by long ones. Each partitioner is one small strategy — `global_plan` (one queue),
`edf_partitioned` (§3.2.1-§3.2.2), `proportional` (§3.2.3) — that builds a plan from each table's
period and E_i(P_i); every plan meets the `TrackPlan` protocol (`base.py`) and answers, for one
job and the set of available tracks, which track it may start on. `plan.make_plan` picks one by
name. Pure: no Spark, SimPy, HTTP or I/O.
"""

from tracks.plan import JobProfile, TrackPlan, make_plan

__all__ = ["JobProfile", "TrackPlan", "make_plan"]
