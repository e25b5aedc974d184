"""The landing zone (DESIGN.md §4.3): partitions arrive here, are validated once, and are either
announced to the Scheduler as `PartitionArrived` or moved to quarantine with a reason.

Everything a source sends passes through this room first, by file drop or by HTTP alike; nothing
in it talks to Spark.
"""
