"""Policies: the pure strategies of the scheduling framework (the DataDepot paper §3.1, §3.3, §3.4).

`basic` orders released jobs (Max-Benefit, Lookahead, EDF-P, EDF, FIFO, Random); `inheritance`
propagates priorities up the view hierarchy; `chopping` bounds the freshness delta of one job.
Nothing here knows about Spark, SimPy, HTTP, clocks or files.
"""
