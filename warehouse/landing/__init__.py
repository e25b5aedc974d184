"""The landing zone (docs/warehouse.md §3): partitions arrive here, are validated once, and are either
announced to the Scheduler as `PartitionArrived` or moved to quarantine with a reason.

Everything a source sends passes through this room first, by file drop or by HTTP alike; nothing
in it talks to Spark. `manifest` holds the manifest and its one validator (the declaration, then
the files against the stream: future-dated `end`, paths, format, schema, row times, row count,
fingerprint); `intake` the scanner, the ids pending and loaded, the stream windows that refuse
overlaps, and quarantine; `store` the one seam through which both reach the landing zone's
objects (a local directory, or a bucket: `store_s3`).
"""
