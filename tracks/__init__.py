"""Tracks: partitioning released jobs over N tracks (paper 004, §3.2).

A track runs at most one job at a time; tracks bound concurrency and keep short jobs from being
blocked by long ones. `plan.py` builds a TrackPlan (Global, EDF-Partitioned §3.2.1-§3.2.2,
Proportional §3.2.3) from each table's period and E_i(P_i); the plan then answers, for one job
and the set of available tracks, which track it may start on. Pure: no Spark, SimPy, HTTP or I/O.
"""

from tracks.plan import JobProfile, TrackPlan, make_plan

__all__ = ["JobProfile", "TrackPlan", "make_plan"]
