"""The daemon's scheduler loop (ops.loop.SchedulerLoop) under a simulated clock, for the soak test
(tests/test_soak_loop.py).

The loop object is the daemon's own, run by its own `_loop()`, with the real Scheduler, the real
intake on a real landing zone (real Parquet partitions and manifests), the real reload path
(`ops.reload.Reloader` reading a real config file on SIGHUP), the real operator actions and their
file, the real trace file and the real tuner's switch path. Stand-ins, each small:

- `Clock`: the time `ops.loop` reads (`time.time`); `Sim` is the loop's event queue and moves the
  clock from one scheduled happening to the next instead of waiting — a discrete-event driver, so
  a month of simulated time takes seconds;
- `SoakLake` (tests.model_ref.ModelLake with indexed reads): the Delta tables and the executor, a
  modelled Delta log that `lake.recovery.recover` reads at each reload, as in tests/test_model.py;
- `SimWorkers`: the track workers; a job runs for a simulated duration, then the loop's own
  `_execute` runs it against the lake (a failure recheck reads the real partition files);
- `SimTuner`: the real `ops.autotune.AutoTuner` whose evaluation (a separate process) is replaced
  by a decision to switch, handed to its own `_decided` → `switch` → the loop's `_autotuned`.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import queue
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ops.autotune import AutoTuner
from ops.loop import LOOP_TIMEOUT, SchedulerLoop
from ops.workers import JobResult
from sim.tune import label
from tests.model_ref import ModelLake, Plan, rows_of, window_ends
from warehouse.config import FreshetConfig
from warehouse.events import JobFailed, JobFinished, StartJob
from warehouse.lake.delta import ms, next_txn_version
from warehouse.lake.outcome import noop_outcome
from warehouse.lake.recovery import TableState
from warehouse.sqltext import sql_version
from warehouse.upkeep import MAINTENANCE_KINDS

HOUR, DAY = 3600.0, 86400.0


class Clock:
    """The simulated time: `time()` is what `ops.loop` reads as `time.time()`."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


class SoakLake(ModelLake):
    """The modelled Delta log (tests.model_ref.ModelLake), its reads indexed by event time (a month
    of rows), and the executor's face the loop and the reload use (`log`, `execute`, …)."""

    def __init__(self, config: FreshetConfig) -> None:
        super().__init__(config)
        self._ts: dict[str, list[float]] = {}  # table → event times of its rows (or window ends), sorted
        self._at: dict[str, list[Any]] = {}  # table → its rows (or window ends), in that order
        self.fail: Callable[[StartJob], str | None] = lambda job: None  # a reason: the job fails
        self.maintenance = 0
        self.folded: dict[str, Counter[tuple[str, int]]] = {}  # stateful table → its state: (version, key) → n
        self._folds: dict[int, tuple[bool, float, float, str]] = {}  # job → what its commit folds

    @property
    def log(self) -> SoakLake:  # what the reload recovers from (ops.reload: recover(new, executor.log))
        return self

    def _index(self, source: str) -> tuple[list[float], list[Any]]:
        if source not in self._ts:
            if source in self.rows:
                items = sorted(self.rows[source], key=lambda r: (r[1], r[0]))
                self._ts[source], self._at[source] = [r[1] for r in items], items
            else:
                ends = sorted(self.wins.get(source, {}))
                self._ts[source], self._at[source] = list(ends), ends
        return self._ts[source], self._at[source]

    def _read(self, source: str, lo: float, hi: float) -> tuple:
        ts, at = self._index(source)
        i, j = bisect.bisect_right(ts, lo), bisect.bisect_right(ts, hi)
        if source in self.rows:
            return (source, tuple(sorted(at[i:j])))
        wins = self.wins[source]
        return (source, tuple((e, wins[e].value) for e in at[i:j]))

    def commit(self, plan: Any, at: float) -> bool:
        done = super().commit(plan, at)
        fold = self._folds.pop(plan.job.job_id, None)
        if done and fold is not None:
            full, lo, hi, version = fold
            state = Counter() if full else self.folded.get(plan.job.table, Counter())
            state.update(fold_rows(self._read(self.config.table(plan.job.table).sources[0], lo, hi)[1], version))
            self.folded[plan.job.table] = state
        if done:
            name = plan.job.table
            if plan.rows and name in self._ts:
                ts, items = self._ts[name], self._at[name]
                for r in plan.rows:
                    k = bisect.bisect_right(ts, r[1])
                    ts.insert(k, r[1])
                    items.insert(k, r)
            else:
                self._ts.pop(name, None)
                self._at.pop(name, None)
        return done

    # ---- a stateful table (lake.stateful: run_fold, fold_late; lake.rebuild: run_rebuild), its state a count per key ---------
    def plan(self, job: StartJob) -> Plan:
        tc = self.config.table(job.table)
        if not tc.is_stateful:
            return super().plan(job)
        st, version = self.state(tc.name), sql_version(tc.increment)
        sources = {s: v for s in tc.sources if (v := self.version(s)) is not None}
        if job.kind != "recompute":  # fold the increment of (F, end]
            start = job.start if st.freshness is None else max(job.start, st.freshness)
            txn = next_txn_version(job.end, st.txn_version)
            if job.end <= start or txn != ms(job.end):
                return Plan(job, noop=f"the increment up to {job.end} is folded")
            meta = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": job.end,
                    "safe_freshness": min(job.new_safe_freshness, job.end), "window": [start, job.end],
                    "sql_version": version, "sources": sources}
            self._folds[job.job_id] = (False, start, job.end, version)
            return Plan(job, meta=meta, txn=txn, written=[(start, job.end)])
        if st.freshness is None:  # a chunk of a rebuild
            return Plan(job, noop="the state holds nothing to rebuild")
        if job.full:
            lo, to, pinned = job.start, st.freshness, sources
        else:
            prog = st.rebuild
            if prog is None or prog["done"] >= prog["to"] or prog["done"] >= job.end:
                return Plan(job, noop="this chunk of the rebuild is already folded")
            lo, to, pinned = prog["done"], prog["to"], dict(prog["versions"])
        hi = min(job.end, to)
        meta = {"kind": "stateful", "job_id": job.job_id, "partitions": {}, "freshness": st.freshness,
                "safe_freshness": st.safe_freshness if st.safe_freshness is not None else st.freshness,
                "window": [lo, hi], "sources": pinned, "sql_version": version, "reasons": list(job.reasons),
                "rebuild": {"from": job.start if job.full else st.rebuild["from"], "to": to, "done": hi,
                            "versions": pinned}}
        self._folds[job.job_id] = (job.full, lo, hi, version)
        return Plan(job, meta=meta, txn=next_txn_version(st.freshness, st.txn_version), written=[(lo, hi)])

    # ---- the executor's face (warehouse.lake.executor.Executor) ----------------------------------
    def execute(self, job: StartJob) -> JobFinished | JobFailed:
        if job.kind in MAINTENANCE_KINDS:
            self.maintenance += 1
            return JobFinished(job_id=job.job_id, duration=5.0, committed=False, files=1)
        if job.table not in {t.name for t in self.config.tables}:  # removed by a reload while it ran
            return JobFailed(job_id=job.job_id, reason=f"table {job.table!r} is not configured any more")
        why = self.fail(job)
        plan = self.plan(job)
        if why == "unknown":  # committed, then the worker died before it could say so
            self.commit(plan, 0.0)
            return JobFailed(job_id=job.job_id, reason="outcome unknown: the Spark driver went away")
        if why:
            return JobFailed(job_id=job.job_id, reason=why)
        if self.commit(plan, 0.0):
            self.reported(job, plan.written)
            return JobFinished(job_id=job.job_id, duration=self.duration(job), rows=len(plan.rows))
        self.reported(job)
        return noop_outcome(job, 1.0, self.state(job.table), plan.noop or "already committed").event()

    @staticmethod
    def duration(job: StartJob) -> float:
        return 60.0 + 20.0 * len(job.partitions) + (120.0 if job.kind == "recompute" else 0.0)

    def table_state(self, table: str, *_: Any) -> TableState:  # both faces: executor (table) and log (path, table)
        return super().table_state(_[0] if _ else table, _[0] if _ else table)

    def evolution_problems(self, new: FreshetConfig) -> list[str]:
        return []

    def reconfigure(self, config: FreshetConfig, state: Any = None) -> None:
        self.config = config


class SimTuner(AutoTuner):
    """The daemon's tuner, its evaluation replaced by a decision to switch to the next of
    `settings` every `autotune_every` (the real `_decided` → `switch` → the loop's reconfigure)."""

    def __init__(self, *a: Any, settings: list[dict[str, Any]], **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._next = itertools.cycle(settings)
        self.switches = 0

    def poll(self, now: float) -> None:
        if self.mode != "apply" or now < self.next_at:
            return
        self.next_at = now + self.config.scheduler.autotune_every
        choice = next(self._next)
        cur = {"setting": label({k: getattr(self.config.scheduler, k) for k in choice}), "mean": 1.0}
        self._decided(now, {"result": "switch", "current": cur, "candidates": [{"setting": str(choice), "mean": 0.5}],
                            "choice_settings": choice, "reason": "the soak's tuner switches"})
        self.switches += 1


def _threads_done(limit: float = 120.0) -> None:
    """A reload's preparation and the landing rescan after it run in threads of their own
    (ops.loop); on the simulated clock they take no time: the clock waits for them."""
    deadline = time.monotonic() + limit
    while any(t.name.startswith("freshet-reload") and t.is_alive() for t in threading.enumerate()):
        assert time.monotonic() < deadline, "a reload thread did not finish"
        time.sleep(0.001)


class Sim:
    """The loop's event queue and the simulated world around it: a heap of happenings (arrivals,
    job ends, SIGHUPs, failures, disk errors, operator actions) run in time order as the loop
    asks for its next event. When the loop would only poll, the clock jumps to the next thing due
    (a happening, the Scheduler's next wakeup, a retry of a failed step, the tuner's next turn).
    When nothing is left, SIGTERM: the loop must then stop with no job running."""

    def __init__(self, loop: SchedulerLoop, clock: Clock) -> None:
        self.loop, self.clock = loop, clock
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.ready: deque[Any] = deque()
        self.running: dict[int, StartJob] = {}
        self.turns = 0

    # ---- the world ---------------------------------------------------------------------------------
    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), fn))

    def submit(self, job: StartJob) -> None:  # the track workers (ops.workers.TrackWorkers)
        began = self.clock.now
        self.running[job.job_id] = job

        def end() -> None:
            del self.running[job.job_id]
            event = self.loop._execute(job)  # the loop's own worker body (recheck on a failed base job)
            self.put(JobResult(job, event, began, self.clock.now))

        self.at(began + SoakLake.duration(job), end)

    # ---- queue.Queue, as the loop uses it -------------------------------------------------------------
    def put(self, item: Any) -> None:
        self.ready.append(item)

    def get(self, timeout: float | None = None) -> Any:
        self.turns += 1
        _threads_done()
        if self.ready:
            return self.ready.popleft()
        now = self.clock.now
        target = now + (timeout or 0.0)
        if timeout is not None and timeout >= LOOP_TIMEOUT - 1e-9:  # the loop would only poll: jump
            target = self._horizon(now)
            if target is None:
                self.loop._term = signal.SIGTERM  # nothing left anywhere: stop
                raise queue.Empty
        while self.heap and self.heap[0][0] <= target:
            t, _, fn = heapq.heappop(self.heap)
            self.clock.now = max(self.clock.now, t)
            fn()
            if self.ready:
                return self.ready.popleft()
            if self.loop._hup or self.loop._term is not None:
                raise queue.Empty
        self.clock.now = max(self.clock.now, target)
        raise queue.Empty

    def _horizon(self, now: float) -> float | None:
        due = [self.heap[0][0]] if self.heap else []
        if self.loop.sched is not None and (wake := self.loop.sched.next_wakeup()) is not None:
            due.append(wake)
        if self.loop._retries:
            due.append(now + self.loop.opts.retry_every)
        if due:  # the tuner turns only while something else is still to come
            if self.loop.tuner.mode == "apply":
                due.append(self.loop.tuner.next_at)
            return max(now, min(due))
        return None


# ---- what must hold once the warehouse drained (tests/test_model.py's drain) --------------------------
class Truth:
    """The rows each stream delivered (every partition, once) and what each derived window must
    hold: its current SQL over its sources' right rows (§2.2) — written without the engine."""

    def __init__(self) -> None:
        self.partitions: dict[str, dict[str, tuple[float, float]]] = {}  # stream → pid → (start, end)
        self._ts: dict[str, tuple[list[float], list[Any]]] = {}
        self._memo: dict[tuple[str, int], tuple] = {}

    def arrived(self, stream: str, pid: str, start: float, end: float) -> None:
        self.partitions.setdefault(stream, {})[pid] = (start, end)
        self._ts.pop(stream, None)

    def rows(self, stream: str) -> set[tuple[str, int]]:
        return {r for pid, (s, e) in self.partitions.get(stream, {}).items() for r in rows_of(pid, s, e, s, e)}

    def _rows_in(self, stream: str, lo: float, hi: float) -> tuple:
        if stream not in self._ts:
            items = sorted(self.rows(stream), key=lambda r: (r[1], r[0]))
            self._ts[stream] = ([r[1] for r in items], items)
        ts, items = self._ts[stream]
        return tuple(sorted(items[bisect.bisect_right(ts, lo):bisect.bisect_right(ts, hi)]))

    def window(self, config: FreshetConfig, lake: ModelLake, table: str, e: int) -> tuple:
        key = (table, e)
        if key not in self._memo:
            tc = config.table(table)
            g = int(tc.granularity or 1)
            origin = lake.state(table).origin
            lo = max(e - g, origin if origin is not None else -math.inf)
            items = []
            for s in tc.sources:
                sc = config.table(s)
                if sc.is_base:
                    items.append((s, self._rows_in(sc.stream, lo, e)))
                else:
                    ss = lake.state(s)
                    ends = window_ends(ss.origin, ss.freshness, int(sc.granularity or 1)) if ss.freshness else []
                    items.append((s, tuple((x, self.window(config, lake, s, x)) for x in ends if lo < x <= e)))
            self._memo[key] = (sql_version(tc.sql), tuple(items))
        return self._memo[key]

    def state(self, config: FreshetConfig, lake: ModelLake, table: str) -> Counter[tuple[str, int]]:
        """A stateful table's right state: its current increment folded over its source's rows."""
        tc, st = config.table(table), lake.state(table)
        src = config.table(tc.sources[0])
        return fold_rows(self._rows_in(src.stream, st.origin, st.freshness), sql_version(tc.increment))


def fold_rows(rows: tuple, version: str) -> Counter[tuple[str, int]]:
    """The increment of a stateful table over `rows`: a count per key (the row's ten minutes mod 3)."""
    return Counter((version, int(ts) // 600 % 3) for _, ts in rows)


def write_rows(landing: str | Path, stream: str, pid: str, start: float, end: float) -> None:
    """A real partition in the landing zone (two rows; the modelled lake counts its own)."""
    import datetime as dt

    import pyarrow as pa

    from ops.demo import write_partition

    ts = [dt.datetime.fromtimestamp(start + (end - start) * f, dt.UTC) for f in (0.25, 0.75)]
    table = pa.table({"ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "k": ["x", "y"], "v": [1.0, 2.0]})
    write_partition(landing, stream, pid, start, end, table)
