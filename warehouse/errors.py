"""One root error; each subclass says who is at fault."""

from __future__ import annotations


class FreshetError(Exception):
    """Root of every error Freshet raises on purpose."""


class ConfigError(FreshetError):
    """The user's configuration is wrong. `problems` lists every problem at once; `what` names the
    kind of input in the one-line heading a CLI prints above them."""

    what = "configuration"

    def __init__(self, problems: list[str] | str, *, source: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__("\n".join(prefix + p for p in self.problems))


class TraceError(ConfigError):
    """A trace given to the simulator (`--trace`, sim.trace) cannot be read or is wrong."""

    what = "trace"


class SchedulerMisuse(FreshetError):
    """A shell drove the Scheduler wrongly (a bug in the caller, not in the data)."""


class WarehouseError(FreshetError):
    """Spark, storage or a bad partition. `reason` is the one-line explanation a log, a reason
    file or an HTTP error shows."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class PartitionRefused(WarehouseError):
    """The Scheduler refuses an event because of what a source sent (e.g. a partition for a
    stream that no table reads). It changed nothing; the shell quarantines the partition."""

    def __init__(self, stream: str, partition_id: str, reason: str) -> None:
        super().__init__(reason)
        self.stream, self.partition_id = stream, partition_id

    def __str__(self) -> str:
        return f"partition {self.partition_id!r} of stream {self.stream!r}: {self.reason}"


class RecomputeRefused(WarehouseError):
    """A recompute (backfill) asked for a table that cannot be recomputed: unknown, a base table
    (its data is what arrived), or an empty range. Nothing was queued."""

    def __init__(self, table: str, reason: str) -> None:
        super().__init__(f"table {table!r}: {reason}")
        self.table = table
