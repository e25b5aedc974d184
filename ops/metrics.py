"""Prometheus metrics (docs/operations.md §3), read from the Scheduler's frozen snapshot.

Two kinds of numbers are exported:

* **From the snapshot** — a custom `Collector` turns the latest `SchedulerStats` into metric
  families at scrape time. The scrape thread never touches or locks the Scheduler: the daemon
  publishes a new snapshot after every event (`SnapshotHolder.publish`) and the collector reads
  whatever reference is current. Staleness `S_i(τ) = τ − F_i(τ)` (§2.1) is computed from the
  snapshot's freshness and the *wall clock at scrape time*, so between loads it rises the way the
  paper's Fig. 2 does even when no event has arrived; the accumulating quantities (∫ S dτ, time
  within target) are extrapolated exactly from the snapshot's instant to the scrape instant
  (staleness grows with slope 1 when nothing loads).
* **From the shell** — things the engine never sees (measured job durations, rows written,
  quarantined partitions, time spent deciding) are ordinary prometheus_client instruments the
  daemon updates as they happen.

Everything is built by `register_metrics(registry, …)`; nothing touches the global registry unless
it is passed in, so tests use a fresh `CollectorRegistry()` and round-trip through the parser.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ops.actions import ACTIONS
from ops.reload import RESULTS
from warehouse.config import FreshetConfig
from warehouse.freshness import staleness_area, time_within_target
from warehouse.stats import SchedulerStats, TableStats

__all__ = [
    "DECISION_BUCKETS",
    "JOB_DURATION_BUCKETS",
    "LOOPS",
    "LOOP_STEPS",
    "FreshetMetrics",
    "SnapshotCollector",
    "SnapshotHolder",
    "extrapolate",
    "register_metrics",
]

# the `loop` label of freshet_loop_errors_total: the landing-zone scan (its own thread), then the
# steps of the scheduler loop that touch the disk and are retried after an OSError (ops.loop)
LOOP_STEPS = ("archive", "actions_write", "trace_write")  # retried by the loop (ops.loop._step)
LOOPS = ("intake_scan", "quarantine", *LOOP_STEPS)  # quarantine: a move the intake retries at its next scan
JOB_DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, float("inf"))
DECISION_BUCKETS = (1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.5, 1, float("inf"))

Clock = Callable[[], float]


class SnapshotHolder:
    """The latest `SchedulerStats`, published by the scheduler thread and read by scrapers.

    Publishing swaps one reference (atomic in CPython), so readers never block the engine.
    """

    def __init__(self, initial: SchedulerStats | None = None) -> None:
        self._latest = initial
        self._ready = False
        self._ready_reason = "starting"
        self._standby = False
        self._lock = threading.Lock()

    def publish(self, stats: SchedulerStats) -> None:
        self._latest = stats

    def get(self) -> SchedulerStats | None:
        return self._latest

    def set_ready(self, ready: bool, reason: str = "", standby: bool = False) -> None:
        with self._lock:
            self._ready, self._ready_reason, self._standby = ready, reason, standby

    def ready(self) -> tuple[bool, str]:
        with self._lock:
            return self._ready, self._ready_reason

    def standby(self) -> bool:
        """Whether the daemon waits for the warehouse lease another daemon holds (`--standby`)."""
        with self._lock:
            return self._standby


@dataclass(frozen=True, slots=True)
class Extrapolated:
    """One table's time-dependent numbers, carried from the snapshot's `now` to a later instant."""

    staleness: float | None
    weighted_staleness_area: float  # p_i ∫ S_i dτ up to the instant
    time_within_target: float
    observed_time: float


def extrapolate(t: TableStats, snap_now: float, at: float) -> Extrapolated:
    """Carry `t` from `snap_now` to `at` assuming nothing loads in between (S grows with slope 1).

    The same formulas as the Scheduler's own meter (`warehouse.freshness`): ∫ S dτ over
    [snap_now, at] is a trapezoid, and the time within target grows by the part that stays ≤ the
    target (§2.3; Snowflake's time within target lag).
    """
    dt = max(0.0, at - snap_now)
    if t.freshness is None:
        return Extrapolated(None, t.weighted_staleness, t.time_within_target, t.observed_time)
    end = snap_now + dt
    staleness = end - t.freshness
    area = t.weighted_staleness + t.priority * staleness_area(snap_now, end, t.freshness)
    within = t.time_within_target + time_within_target(snap_now, end, t.freshness, t.target_staleness)
    return Extrapolated(staleness, area, within, t.observed_time + dt)


def _gauge(name: str, doc: str, labels: Iterable[str] = (), unit: str = "") -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels), unit=unit)


def _counter(name: str, doc: str, labels: Iterable[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=list(labels))


class SnapshotCollector(Collector):
    """Turns the latest snapshot into metric families at scrape time."""

    def __init__(self, snapshot: Callable[[], SchedulerStats | None], clock: Clock = time.time) -> None:
        self._snapshot = snapshot
        self._clock = clock

    def describe(self) -> list[Metric]:
        # Describing would call collect(); an empty description is allowed for custom collectors.
        return []

    def collect(self) -> Iterator[Metric]:  # noqa: C901 - one flat list of families reads best
        snap = self._snapshot()
        if snap is None:
            return
        now = self._clock()
        tables = sorted(snap.tables, key=lambda t: t.name)
        ext = {t.name: extrapolate(t, snap.now, now) for t in tables}

        staleness = _gauge("freshet_table_staleness_seconds",
                           "S_i = now - F_i: how far the table lags real time, at scrape time (§2.1)", ["table"])
        fresh = _gauge("freshet_table_freshness_timestamp_seconds",
                       "F_i: the largest event time loaded into the table (epoch seconds)", ["table"])
        safe = _gauge("freshet_table_safe_freshness_timestamp_seconds",
                      "F'_i: no more records can arrive at or before this time (§2.2)", ["table"])
        arrived = _gauge("freshet_table_arrived_timestamp_seconds",
                         "largest event time arrived but maybe not loaded (base) / sources' safe trailing "
                         "edge (derived): tells a late source from a late warehouse", ["table"])
        target = _gauge("freshet_table_staleness_target_seconds",
                        "the table's staleness target (target_staleness in the config)", ["table"])
        within = _counter("freshet_table_time_within_target_seconds",
                          "seconds the table spent with staleness at or below its target", ["table"])
        observed = _counter("freshet_table_observed_seconds",
                            "seconds since the table's first load (denominator of time within target)", ["table"])
        within_ratio = _gauge("freshet_table_time_within_target_ratio",
                              "share of observed time spent within the staleness target (SLI)", ["table"])
        prio = _gauge("freshet_table_priority", "p_i, the user priority (§2.3)", ["table"])
        iprio = _gauge("freshet_table_inherited_priority", "Ip_i, priority after inheritance over the DAG (§3.3)",
                       ["table"])
        backlog = _gauge("freshet_table_backlog_seconds",
                         "arrived minus loaded event time, including what a running job is loading now "
                         "(not chopped, §3.4)", ["table"])
        pend_delta = _gauge("freshet_table_pending_delta_seconds",
                            "the part of the backlog no job has taken yet: beyond a running job's new freshness",
                            ["table"])
        pend_parts = _gauge("freshet_table_pending_partitions",
                            "arrived partitions not committed yet, including those a running job is loading",
                            ["table"])
        run_parts = _gauge("freshet_table_running_partitions", "partitions the table's running job is loading",
                           ["table"])
        state = _gauge("freshet_table_state", "1 for the table's current job state", ["table", "state"])
        fails = _gauge("freshet_table_consecutive_failures", "failed jobs in a row (0 after a success)",
                       ["table"])
        released = _counter("freshet_jobs_released", "update jobs released (§2.1 release)", ["table"])
        overdue = _counter("freshet_jobs_overdue", "released jobs started as overdue, before the basic algorithm's "
                           "order (scheduler.overdue_periods)", ["table"])
        completed = _counter("freshet_jobs_completed", "update jobs that ended, by status", ["table", "status"])
        loaded_delta = _counter("freshet_table_loaded_delta_seconds",
                                "sum of freshness deltas loaded by completed jobs", ["table"])
        alpha = _gauge("freshet_cost_alpha_seconds", "learned α of E(n) = α + β·n (§2.4)", ["table"])
        beta = _gauge("freshet_cost_beta", "learned β of E(n) = α + β·n: seconds of work per second of data (§2.4)",
                      ["table"])
        tws = _gauge("freshet_table_weighted_staleness_seconds",
                     "p_i · S_i at scrape time: the table's share of the objective's integrand", ["table"])
        suspended = _gauge("freshet_table_suspended", "1 while an operator has the table suspended (no jobs)",
                           ["table"])
        files = _gauge("freshet_table_files", "data files in the table's current Delta version, as its last "
                                              "maintenance job (OPTIMIZE/VACUUM) counted them", ["table"])
        reclaimed = _counter("freshet_table_bytes_reclaimed", "bytes VACUUM deleted from the table (Nova, SIGMOD 2011 §2.4 "
                                                              "garbage collection)", ["table"])
        since_opt = _gauge("freshet_table_commits_since_optimize",
                           "update commits since the table's last OPTIMIZE (it runs at optimize_every)", ["table"])
        last_maint = _gauge("freshet_table_last_maintenance_timestamp_seconds",
                            "when the table's last OPTIMIZE / VACUUM ended (epoch seconds; from the Delta log "
                            "after a restart)", ["table", "kind"])
        maint_jobs = _counter("freshet_maintenance_jobs", "maintenance jobs that ended, by kind and status",
                              ["table", "kind", "status"])
        recomputed = _counter("freshet_windows_recomputed",
                              "derived windows rewritten by recompute jobs (late data, a changed SQL, a backfill)",
                              ["table"])
        old_sql = _gauge("freshet_table_windows_old_sql",
                         "committed derived windows computed by an older SQL, not rewritten yet (Olston, Graceful Logic Evolution in Web Data Processing Workflows)", ["table"])
        rc_pending = _gauge("freshet_table_recompute_pending_seconds",
                            "event time of committed derived windows waiting to be recomputed", ["table"])
        late_unfolded = _gauge("freshet_table_late_rows_unfolded",
                               "stateful tables: rows of late loads committed below F that the state has not "
                               "folded yet (a late fold is released for them)", ["table"])

        ws_now = 0.0
        ws_area = 0.0
        for t in tables:
            e = ext[t.name]
            n = [t.name]
            if e.staleness is not None:
                staleness.add_metric(n, e.staleness)
                tws.add_metric(n, t.priority * e.staleness)
                ws_now += t.priority * e.staleness
            if t.freshness is not None:
                fresh.add_metric(n, t.freshness)
            if t.safe_freshness is not None:
                safe.add_metric(n, t.safe_freshness)
            if t.arrived is not None:
                arrived.add_metric(n, t.arrived)
            if t.target_staleness is not None:
                target.add_metric(n, t.target_staleness)
                within.add_metric(n, e.time_within_target)
                if e.observed_time > 0:
                    within_ratio.add_metric(n, min(1.0, e.time_within_target / e.observed_time))
            observed.add_metric(n, e.observed_time)
            ws_area += e.weighted_staleness_area
            prio.add_metric(n, t.priority)
            iprio.add_metric(n, t.inherited_priority)
            backlog.add_metric(n, t.backlog)
            pend_delta.add_metric(n, t.pending_delta)
            pend_parts.add_metric(n, t.pending_partitions)
            run_parts.add_metric(n, t.running_partitions)
            for s in ("idle", "pending", "running", "backoff"):
                state.add_metric([t.name, s], 1.0 if t.state == s else 0.0)
            fails.add_metric(n, t.consecutive_failures)
            released.add_metric(n, t.jobs_released)
            overdue.add_metric(n, t.jobs_overdue)
            completed.add_metric([t.name, "ok"], t.jobs_completed)
            completed.add_metric([t.name, "failed"], t.jobs_failed)
            loaded_delta.add_metric(n, t.delta_f_total)
            alpha.add_metric(n, t.alpha)
            beta.add_metric(n, t.beta)
            suspended.add_metric(n, 1.0 if t.suspended else 0.0)
            u = t.upkeep
            if u is not None:
                if u.files is not None:
                    files.add_metric(n, u.files)
                reclaimed.add_metric(n, u.bytes_reclaimed)
                since_opt.add_metric(n, u.commits_since_optimize)
                ok, bad = dict(u.jobs_ok), dict(u.jobs_failed)
                for kind, at in (("optimize", u.last_optimize), ("vacuum", u.last_vacuum)):
                    if at is not None:
                        last_maint.add_metric([t.name, kind], at)
                    maint_jobs.add_metric([t.name, kind, "ok"], ok.get(kind, 0))
                    maint_jobs.add_metric([t.name, kind, "failed"], bad.get(kind, 0))
            if t.kind != "base":
                recomputed.add_metric(n, t.windows_recomputed)
                old_sql.add_metric(n, t.windows_old_sql)
                rc_pending.add_metric(n, t.recompute_pending)
            if t.kind == "stateful":
                late_unfolded.add_metric(n, t.late_rows_unfolded)

        yield from (staleness, fresh, safe, arrived, target, within, observed, within_ratio, prio, iprio,
                    backlog, pend_delta, pend_parts, run_parts, state, fails, released, overdue, completed, loaded_delta,
                    alpha, beta, tws, suspended, files, reclaimed, since_opt, last_maint, maint_jobs,
                    recomputed, old_sql, rc_pending, late_unfolded)

        ws = _gauge("freshet_weighted_staleness_seconds",
                    "Σ p_i · S_i at scrape time: the integrand of the objective Σ p_i ∫ S_i dτ (§2.3)")
        ws.add_metric([], ws_now)
        yield ws
        area = _counter("freshet_weighted_staleness_area_seconds",
                        "Σ p_i ∫ S_i dτ since the daemon started (the paper's objective, §2.3)")
        area.add_metric([], ws_area)
        yield area

        pending = _gauge("freshet_pending_jobs", "tables with released work waiting for a track")
        pending.add_metric([], snap.pending_jobs)
        yield pending
        running = _gauge("freshet_running_jobs", "update jobs running now")
        running.add_metric([], snap.running_jobs)
        yield running
        if (ro := snap.rollout) is not None:  # policy rollout (warehouse.rollout): its rounds, by outcome
            rounds = _counter("freshet_rollout_rounds", "rounds policy rollout weighed (all), those whose first job "
                              "it changed (override), those its event budget left to the base rule (fallback)",
                              ["outcome"])
            for outcome, n in (("all", ro.decisions), ("override", ro.overrides), ("fallback", ro.fallbacks)):
                rounds.add_metric([outcome], n)
            yield rounds

        # Pending work per cluster of the track plan (§3.2.3): which group of tracks is backed up.
        by_table = {t.name: t for t in tables}
        cpend = _gauge("freshet_cluster_pending_jobs", "tables of a cluster with work waiting for a track",
                       ["cluster", "tracks"])
        for i, members in enumerate(snap.plan.clusters):
            homes = snap.plan.home_tracks[i] if i < len(snap.plan.home_tracks) else ()
            waiting = sum(1 for m in members if m in by_table and by_table[m].state in ("pending", "backoff"))
            cpend.add_metric([str(i), ",".join(str(h) for h in homes)], waiting)
        yield cpend

        busy = _gauge("freshet_track_busy", "1 while the track runs a job (§3.2: one job per track)", ["track"])
        busy_s = _counter("freshet_track_busy_seconds", "seconds the track spent running jobs", ["track"])
        free = _gauge("freshet_track_free", "1 for a free track that any cluster may use (§3.2.1)", ["track"])
        for tr in sorted(snap.tracks, key=lambda x: x.track):
            lab = [str(tr.track)]
            busy.add_metric(lab, 0.0 if tr.running_job is None else 1.0)
            extra = max(0.0, now - snap.now) if tr.running_job is not None else 0.0
            busy_s.add_metric(lab, tr.busy_time + extra)
            free.add_metric(lab, 1.0 if tr.free else 0.0)
        yield from (busy, busy_s, free)

        util = _gauge("freshet_track_plan_utilization", "U_tot = Σ E_i(P_i)/P_i of the current track plan (§3.2)")
        util.add_metric([], snap.plan.utilization)
        feas = _gauge("freshet_track_plan_feasible", "1 if the track plan is feasible (U fits the tracks)")
        feas.add_metric([], 1.0 if snap.plan.feasible else 0.0)
        tracks = _gauge("freshet_tracks", "N, the number of tracks")
        tracks.add_metric([], snap.plan.tracks)
        events = _counter("freshet_scheduler_events", "events handled by the Scheduler")
        events.add_metric([], snap.events)
        age = _gauge("freshet_snapshot_age_seconds", "seconds since the Scheduler published this snapshot")
        age.add_metric([], max(0.0, now - snap.now))
        yield from (util, feas, tracks, events, age)


class FreshetMetrics:
    """The shell-side instruments plus the snapshot collector, all in one registry."""

    def __init__(self, registry: CollectorRegistry, snapshot: Callable[[], SchedulerStats | None],
                 clock: Clock = time.time) -> None:
        self.registry = registry
        self.collector = SnapshotCollector(snapshot, clock)
        registry.register(self.collector)
        self.job_duration = Histogram(
            "freshet_job_duration_seconds", "measured wall time of update jobs (§2.4)",
            ["table", "kind"], buckets=JOB_DURATION_BUCKETS, registry=registry)
        self.rows_loaded = Counter("freshet_rows_loaded", "rows appended to Delta tables", ["table"],
                                   registry=registry)
        self.late_rows = Counter("freshet_late_rows", "rows of late partitions loaded (their derived windows "
                                 "are recomputed)", ["table"], registry=registry)
        self.partitions_arrived = Counter("freshet_partitions_arrived", "partitions accepted from a stream",
                                          ["stream"], registry=registry)
        self.partitions_quarantined = Counter(
            "freshet_partitions_quarantined", "partitions moved to landing/_quarantine (docs/warehouse.md §3)",
            ["stream"], registry=registry)
        self.partitions_duplicate = Counter(
            "freshet_partitions_duplicate", "re-delivered partitions already loaded with the same content (no-ops)",
            ["stream"], registry=registry)
        self.unknown_partitions = Gauge(
            "freshet_landing_unknown_partitions", "complete partitions waiting under a landing-zone directory "
            "that names no configured stream: not loaded, left in place", ["directory"], registry=registry)
        self._unknown_dirs: set[str] = set()
        self.decision_seconds = Histogram(
            "freshet_scheduler_decision_seconds", "time the Scheduler took to handle one event",
            buckets=DECISION_BUCKETS, registry=registry)
        self.reloads = Counter("freshet_config_reloads", "SIGHUP reloads, by result: ok, rejected (an invalid "
                               "config), failed (reading the Delta log failed); the old config keeps running "
                               "unless ok", ["result"], registry=registry)
        self.ready = Gauge("freshet_ready", "1 once recovery is done and the Spark session is up",
                           registry=registry)
        self.standby = Gauge("freshet_standby", "1 while this daemon waits as a standby for the warehouse lease "
                             "another daemon holds (freshet run --standby)", registry=registry)
        self.start_time = Gauge("freshet_start_time_seconds", "when the daemon started (epoch seconds)",
                                registry=registry)
        self.loop_errors = Counter(
            "freshet_loop_errors", "failures of a retried background loop (the landing-zone scan) or of a retried "
            "step of the scheduler loop (quarantine, archive, actions_write, trace_write), by loop",
            ["loop"], registry=registry)
        self.spark_connected = Gauge(
            "freshet_spark_connected", "1 while the daemon reaches its Spark (a Spark Connect server with "
            "spark.remote; the driver in this process otherwise)", registry=registry)
        self.spark_connection_lost = Counter(
            "freshet_spark_connection_lost", "times the Spark Connect server became unreachable (jobs failed "
            "and were retried after their back-off)", registry=registry)
        self.operator_actions = Counter(
            "freshet_operator_actions", "operator actions accepted (suspend, resume, refresh, backfill; ops.actions)",
            ["table", "action"], registry=registry)
        self.start_time.set(clock())
        for r in RESULTS:
            self.reloads.labels(result=r)
        for loop in LOOPS:
            self.loop_errors.labels(loop=loop)

    def declare(self, config: FreshetConfig) -> None:
        """Create every labelled shell series of `config`'s streams and tables at 0 (docs/operations.md §3).

        A counter with no series until its first event hides that event from `increase()` and
        from the alerts; called at start and after every reload (series of removed streams or
        tables stay, as counters should).
        """
        for s in config.streams:
            for c in (self.partitions_arrived, self.partitions_quarantined, self.partitions_duplicate):
                c.labels(stream=s.name)
        for t in config.tables:
            self.rows_loaded.labels(table=t.name)
            self.job_duration.labels(table=t.name, kind="base" if t.is_base else "stateful" if t.is_stateful
                                     else "derived")
            for action in ACTIONS:
                self.operator_actions.labels(table=t.name, action=action)
            if t.is_base:
                self.late_rows.labels(table=t.name)
            else:
                self.job_duration.labels(table=t.name, kind="recompute")

    def intake_counted(self, counter: str, stream: str) -> None:
        """The intake's push (`Intake(on_count=…)`): one more partition quarantined or duplicate on
        `stream`, or one more quarantine move that failed and will be retried."""
        if counter == "quarantined":
            self.partitions_quarantined.labels(stream=stream).inc()
        elif counter == "duplicates":
            self.partitions_duplicate.labels(stream=stream).inc()
        elif counter == "quarantine_failures":
            self.loop_errors.labels(loop="quarantine").inc()

    def unknown_directories(self, counts: Mapping[str, int]) -> None:
        """The intake's `unknown` after a scan: directories gone from it are dropped."""
        for directory in self._unknown_dirs - counts.keys():
            self.unknown_partitions.remove(directory)
        for directory, n in counts.items():
            self.unknown_partitions.labels(directory=directory).set(n)
        self._unknown_dirs = set(counts)

    def job_done(self, table: str, kind: str, duration: float, rows: int, late_rows: int = 0) -> None:
        self.job_duration.labels(table=table, kind=kind).observe(duration)
        if rows:
            self.rows_loaded.labels(table=table).inc(rows)
        if late_rows:
            self.late_rows.labels(table=table).inc(late_rows)


def register_metrics(registry: CollectorRegistry, snapshot: Callable[[], SchedulerStats | None],
                     clock: Clock = time.time) -> FreshetMetrics:
    """Build every Freshet metric in `registry` (pass a fresh one in tests)."""
    return FreshetMetrics(registry, snapshot, clock)
