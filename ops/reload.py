"""The warehouse parts the scheduler loop drives, built from the Delta log at start and rebuilt
on SIGHUP (§4.4: at start and on reload the Delta log is the truth, handed to the Scheduler).

**Start** (`start_parts`): recover every table from its Delta log, start Spark, build the intake,
the executor and the Scheduler. A local root with a local Spark: the log's files are read first
(no Spark needed). A URI root or Spark Connect: Spark first, then the log through it. `progress`
is called after each table's log is read (the daemon feeds systemd's watchdog with it).

**Reload** (`Reloader`), in two halves. `prepare` runs in a thread of its own, off the scheduler
loop, and does everything that reads a file or Spark or can fail — read and validate the file,
refuse the sections that need a restart (`warehouse`, `spark`, `listen`) and a SQL naming a column
its sources do not have (`warehouse.sqlcheck`, no Spark), check that a changed
derived SQL keeps its schema or only adds columns (Olston, Graceful Logic Evolution in Web Data Processing Workflows), recover the new config's tables
from their Delta logs, and lay the new config out for the Scheduler (`warehouse.blueprint`: what
changed against the running layout, the track plan made ahead) and the intake (its streams'
readers). `switch` runs on the loop and reads nothing: the Scheduler takes one `Reconfigure`
through its door (tables added and removed, priorities, repartition §3.2), touching only the
tables whose parameters changed, then the intake, the executor and the daemon's own config follow. Events that arrive while a reload is
prepared are handled by the running config; the Scheduler keeps the run state of the tables that
stay, so the switch sees them. If preparing fails — an invalid file (`rejected`), or an error
reading the log: a half-written commit JSON, Spark Connect or object storage unreachable
(`failed`) — nothing has switched: the old config keeps running, and the reason is logged,
counted (`freshet_config_reloads_total{result}`) and shown in `/v1/status` (`Reloader.last`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from warehouse.blueprint import Blueprint, blueprint
from warehouse.config import FreshetConfig, load_config, with_cores
from warehouse.errors import ConfigError
from warehouse.events import Reconfigure
from warehouse.sqlcheck import column_problems
from warehouse.times import iso

if TYPE_CHECKING:
    from ops.liveness import SparkWatch
    from warehouse.events import StartJob
    from warehouse.lake.commit import Leader
    from warehouse.lake.recovery import RecoveryState

__all__ = ["RESTART_SECTIONS", "Parts", "Prepared", "ReloadResult", "Reloader", "start_parts"]

log = logging.getLogger("freshet")

RESTART_SECTIONS = ("warehouse", "spark", "listen")  # changing one of these needs a restart
RESULTS = ("ok", "rejected", "failed")  # the `result` label of freshet_config_reloads_total


@dataclass
class Parts:
    """What the loop drives, all from one config and one recovered state."""

    state: RecoveryState
    intake: Any  # warehouse.landing.intake.Intake
    executor: Any  # warehouse.lake.executor.Executor
    sched: Any  # warehouse.scheduler.Scheduler


def start_parts(config: FreshetConfig, spark: SparkWatch, now: Callable[[], float] = time.time,
                on_count: Callable[[str, str], None] | None = None,
                progress: Callable[[], None] | None = None, leader: Leader | None = None) -> Parts | None:
    """Recover, start Spark, build the parts (see the module docstring); None if the daemon was
    stopped while waiting for Spark. `leader`: the warehouse lease held, which fences and signs
    every write of the executor (`lake.commit`)."""
    from warehouse.lake.executor import Executor
    from warehouse.lake.recovery import delta_log, needs_spark, recover
    from warehouse.landing.intake import Intake
    from warehouse.scheduler import Scheduler

    t0 = now()
    if needs_spark(config):
        if not spark.start():
            return None
        state = recover(config, delta_log(config, spark.link.session), progress=progress)
    else:
        state = recover(config, progress=progress)
    for name, st in sorted(state.tables.items()):
        log.info("recovered table", extra={"table": name, "freshness": iso(st.freshness, "seconds"),
                                           "safe_freshness": iso(st.safe_freshness, "seconds"),
                                           "partitions": len(st.partitions)})
    intake = Intake(config, state, on_count=on_count)
    if spark.spark is None and not spark.start():
        return None
    if spark.remote:
        executor = Executor(config, None, state, link=spark.link, leader=leader)
    else:
        executor = Executor(config, spark.spark, state, leader=leader)
    sched = Scheduler(config, now=now(), recovered=state.recovered, first_job=state.next_job_id)
    log.info("recovery done", extra={"tables": len(config.tables), "seconds": round(now() - t0, 3)})
    return Parts(state, intake, executor, sched)


@dataclass(frozen=True)
class ReloadResult:
    """The last SIGHUP: when, how it ended and why (`/v1/status`)."""

    time: float
    result: str  # ok | rejected | failed
    reason: str = ""
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def view(self) -> dict[str, Any]:
        return {"time": self.time, "time_iso": iso(self.time), "result": self.result, "reason": self.reason,
                "added": self.added, "removed": self.removed}


class _RecoveryFailed(Exception):
    """Reading the new config's Delta logs failed (the message says which tables were new)."""


@dataclass
class Prepared:
    """A reload made ready off the loop (`Reloader.prepare`): the new config, what its tables'
    Delta logs hold, and the Scheduler's view of it; `result` and `reason` when it failed."""

    requested: float  # when the SIGHUP was taken
    config: FreshetConfig | None = None
    state: RecoveryState | None = None
    recovered: dict[str, Any] = field(default_factory=dict)  # state.recovered, built off the loop
    blueprint: Any = None  # warehouse.blueprint.Blueprint of `config`: the Scheduler's layout, built off the loop
    fed: frozenset[str] = frozenset()  # tables reading a stream they did not read (the intake starts them from the log)
    readers: Any = None  # warehouse.landing.intake.intake_readers(config), built off the loop
    moves: tuple[list[str], list[str]] | None = None  # (tables added, removed), compared off the loop
    result: str = "ok"  # ok | rejected | failed
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # what the daemon prepared beside (ops.loop)

    def added(self, current: FreshetConfig) -> list[str]:
        return sorted({t.name for t in self.config.tables} - {t.name for t in current.tables}) if self.config else []

    def reads(self, current: FreshetConfig) -> set[str]:
        """The tables whose commits this preparation read for the tables it adds: those tables and
        their sources. A job of one of them that finished meanwhile makes it stale."""
        if self.config is None:
            return set()
        added = set(self.added(current))
        return added | {s for t in self.config.tables if t.name in added for s in t.sources}


class Reloader:
    """SIGHUP for one config file: `prepare(current, parts, requested)` off the loop, then
    `switch(prepared, current, parts, now)` on it → the new config and the jobs the Scheduler
    starts, or None (kept the old one). `counted(result)`: freshet_config_reloads_total."""

    def __init__(self, path: str, counted: Callable[[str], None]) -> None:
        self.path = path
        self._counted = counted
        self.last: ReloadResult | None = None

    def prepare(self, current: FreshetConfig, parts: Parts, requested: float,
                costs: dict[str, tuple[float, float]] | None = None, against: Blueprint | None = None,
                pause: Callable[[], None] | None = None) -> Prepared:
        """Everything that reads a file or Spark or can fail; never raises. Runs off the loop:
        it reads `parts` (the executor's Spark and Delta log) but changes nothing. It lays the
        new config out for the Scheduler (warehouse.blueprint): its track plan made ahead from
        `costs` (`Scheduler.costs()`, copied on the loop when the reload began), what it changes
        compared with `against` (`Scheduler.blueprint`, immutable). `pause` is called after each
        table's log is read: the loop's turn, if one is under way, goes first (ops.loop)."""
        from warehouse.landing.intake import intake_readers

        try:
            config, state = self._prepare(current, parts, pause)
            return Prepared(requested, config, state, state.recovered, blueprint(config, costs, against), _fed(current, config),
                            intake_readers(config), _moves(current, config))
        except ConfigError as e:
            return Prepared(requested, result="rejected", reason=str(e))
        except _RecoveryFailed as e:
            return Prepared(requested, result="failed", reason=str(e))
        except Exception as e:  # noqa: BLE001 — e.g. Spark failed: the old config keeps running
            return Prepared(requested, result="failed", reason=f"{type(e).__name__}: {e}")

    def switch(self, prepared: Prepared, current: FreshetConfig, parts: Parts,
               now: float) -> tuple[FreshetConfig, list[StartJob]] | None:
        """On the loop: all parts take the prepared config at once, or (it failed) none does."""
        if prepared.result != "ok":
            return self._kept(now, prepared.result, prepared.reason)
        new, state = prepared.config, prepared.state
        assert new is not None and state is not None
        # (the tables a reload changes change by nothing else meanwhile: the tuner's switch changes `scheduler` alone)
        added, removed = prepared.moves if prepared.moves is not None else _moves(current, new)
        # the switch: nothing below reads a file or Spark, so it cannot half happen for I/O reasons.
        # Only a table new to a part starts from the log (one that stays keeps its run state): the
        # intake is handed the state of the tables that read a stream they did not read before
        decisions = parts.sched.handle(Reconfigure(config=new, recovered=prepared.recovered,
                                                   blueprint=prepared.blueprint), now)
        fed = prepared.fed if prepared.blueprint is not None else _fed(current, new)
        parts.intake.reconfigure(new, _only(state, fed), readers=prepared.readers)
        parts.executor.reconfigure(new, state)
        parts.state = state
        self.last = ReloadResult(now, "ok", added=added, removed=removed)
        self._counted("ok")
        log.info("config reloaded", extra={"config": self.path, "added": self.last.added,
                                           "removed": self.last.removed, "tracks": new.scheduler.tracks,
                                           "seconds": round(now - prepared.requested, 3)})
        return new, decisions

    def _prepare(self, current: FreshetConfig, parts: Parts,
                 pause: Callable[[], None] | None = None) -> tuple[FreshetConfig, RecoveryState]:
        from warehouse.lake.recovery import recover

        new = with_cores(load_config(self.path), current.spark.cores)  # the cores counted at start stand
        problems = [f"{s}: changing it needs a restart" for s in RESTART_SECTIONS
                    if getattr(new, s) != getattr(current, s)]
        problems += column_problems(new)  # a column the SQL names that its sources lack (warehouse.sqlcheck)
        if not problems:  # a changed derived SQL must keep its table's schema or only add columns (Olston, Graceful Logic Evolution in Web Data Processing Workflows)
            problems = _evolution_problems(parts.executor, new)
        if problems:
            raise ConfigError(problems, source=self.path)
        try:
            state = recover(new, parts.executor.log, progress=pause)
        except Exception as e:
            added = sorted({t.name for t in new.tables} - {t.name for t in current.tables})
            raise _RecoveryFailed(f"recovering the tables from their Delta logs (new: {', '.join(added) or 'none'}): "
                                  f"{type(e).__name__}: {e}") from e
        return new, state

    def _kept(self, now: float, result: str, reason: str) -> None:
        self.last = ReloadResult(now, result, reason)
        self._counted(result)
        log.error(f"config reload {result}; keeping the running config",
                  extra={"config": self.path, "reason": reason})
        return None


def _moves(current: FreshetConfig, new: FreshetConfig) -> tuple[list[str], list[str]]:
    """The tables `new` adds to `current` and those it removes, sorted."""
    old_tables, new_tables = {t.name for t in current.tables}, {t.name for t in new.tables}
    return sorted(new_tables - old_tables), sorted(old_tables - new_tables)


def _fed(current: FreshetConfig, new: FreshetConfig) -> frozenset[str]:
    """The tables of `new` that read a stream they did not read in `current` (new ones included):
    the intake takes their state from the log (the tables and streams a reload can change are
    never changed by anything else meanwhile: the tuner's switch changes `scheduler` alone)."""
    fed = {(t.name, t.stream) for t in current.tables}
    return frozenset(t.name for t in new.tables if (t.name, t.stream) not in fed)


def _only(state: RecoveryState, tables: set[str] | frozenset[str]) -> RecoveryState:
    """`state` restricted to `tables` (what the intake needs of a reload: it knows the rest)."""
    from warehouse.lake.recovery import RecoveryState

    return RecoveryState(tables={n: st for n, st in state.tables.items() if n in tables}, loaded={})


def _evolution_problems(executor: Any, new: FreshetConfig) -> list[str]:
    """Derived tables whose new SQL changes their schema in a way that is not additive without
    `rebuild: true` (Executor.evolution_problems). If Spark cannot analyse, the reload goes on:
    such a table's jobs then fail with the same reason and back off; the rest run."""
    try:
        return executor.evolution_problems(new)
    except Exception as e:  # noqa: BLE001 — the check, not the reload, failed
        log.warning("could not check the reloaded SQL's schemas; its jobs will refuse a non-additive change",
                    extra={"error": f"{type(e).__name__}: {str(e)[:300]}"})
        return []
