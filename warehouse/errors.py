"""One root error; each subclass says who is at fault (STYLE.md §7)."""

from __future__ import annotations


class FreshetError(Exception):
    """Root of every error Freshet raises on purpose."""


class ConfigError(FreshetError):
    """The user's configuration is wrong. `problems` lists every problem at once."""

    def __init__(self, problems: list[str] | str, *, source: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__("\n".join(prefix + p for p in self.problems))


class SchedulerMisuse(FreshetError):
    """A shell drove the Scheduler wrongly (a bug in the caller, not in the data)."""


class WarehouseError(FreshetError):
    """Spark, storage or a bad partition."""


class PartitionRefused(WarehouseError):
    """The Scheduler refuses an event because of what a source sent (e.g. a partition for a
    stream that no table reads). It changed nothing; the shell quarantines the partition."""

    def __init__(self, stream: str, partition_id: str, reason: str) -> None:
        self.stream, self.partition_id, self.reason = stream, partition_id, reason
        super().__init__(f"partition {partition_id!r} of stream {stream!r}: {reason}")
