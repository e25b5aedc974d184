"""A month of the daemon's scheduler loop under a simulated clock (tests/helpers_soak.py).

The real loop object runs its own `_loop()` for 31 simulated days: two two-hourly streams (one
with holes filled late, §2.2) into three base tables, three derived tables (one refreshed in full)
and a stateful table, and SIGHUPs every hour — a derived table and a base table removed and
re-added (the base table once while it holds a backlog), a derived SQL changed, the stateful
increment changed (`rebuild: true`), an invalid file, a section that needs a restart — tables that fail for days (a failure
of every job, and commits whose outcome is lost), disk errors (the trace file, the operator
actions file, the landing zone's archive), operator actions (refreshes, a suspension across a
removal, a backfill) and a tuner that switches the scheduler's setting every six hours. Then
arrivals stop, every table is back and resumed, and the warehouse drains.

At the end: the loop never died and stopped cleanly on SIGTERM with no job running; nothing is
lost — every partition is loaded exactly once by every base table configured when it arrived
(tests.model_ref.ModelLake refuses a row loaded twice); and the drain invariants of the model
test (tests/test_model.py) hold: nothing pending, nothing dirty, no operator action kept, every
derived window its current SQL over the final sources (§2.2), the stateful state its increment over
its source. FRESHET_SOAK_DAYS=90 runs a quarter instead.
"""

from __future__ import annotations

import json
import math
import os
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ops.loop
from ops.actions import ActionRejected, ActionStore, OperatorActions, store_path
from ops.loop import Options, SchedulerLoop
from ops.reload import Parts
from sim.trace import TraceWriter
from tests.helpers_soak import DAY, HOUR, Clock, Sim, SimTuner, SoakLake, Truth, write_rows
from tests.model_ref import window_ends
from warehouse.config import load_config
from warehouse.events import Tick
from warehouse.lake import recovery
from warehouse.lake.recovery import recover
from warehouse.landing.intake import Intake
from warehouse.scheduler import Scheduler

T0 = 1_764_000_000.0  # 2025-11-24T16:00:00Z
DAYS = float(os.environ.get("FRESHET_SOAK_DAYS", "31"))
PERIOD = 2 * HOUR  # of both streams
STREAMS = {"s": 0.0, "u": PERIOD}  # stream → lateness
BASE = {"a": "s", "a2": "s", "b": "u"}
SQL = {"d1": ["SELECT ts, v FROM a", "SELECT ts, v + 1 AS v FROM a", "SELECT ts, v * 2 AS v FROM a"],
       "d2": ["SELECT ts, v FROM d1 UNION ALL SELECT ts, v FROM b"],
       "d3": ["SELECT ts, count(*) AS n FROM a GROUP BY ts"]}
DERIVED = {"d1": (["a"], PERIOD, 5), "d2": (["d1", "b"], 2 * PERIOD, 2), "d3": (["a"], DAY, 1)}  # sources, g, priority
INCREMENT = ["SELECT k, count(*) AS n FROM a WHERE ts > :window_start AND ts <= :window_end GROUP BY k",
             "SELECT k, count(*) AS n FROM a WHERE ts > :window_start AND ts <= :window_end AND v >= 0 GROUP BY k"]
TUNINGS = [{"policy": "edf", "partitioner": "global", "chop": None, "tracks": 3},
           {"policy": "max-benefit", "partitioner": "proportional", "chop": 3.0, "tracks": 2},
           {"policy": "auto", "partitioner": "auto", "chop": "auto", "tracks": 2}]


def config_dict(root: Path, present: set[str], sql: dict[str, int], broken: str = "") -> dict[str, Any]:
    schema = {"ts": "timestamp", "k": "string", "v": "double"}
    tables: list[dict[str, Any]] = [{"name": t, "stream": s, "cost": {"alpha": 30, "beta": 1}}
                                    for t, s in BASE.items() if t in present]
    for name, (sources, g, p) in DERIVED.items():
        if name in present:
            tables.append({"name": name, "sources": sources, "granularity": g, "priority": p,
                           "sql": SQL[name][sql.get(name, 0)], "cost": {"alpha": 60, "beta": 1},
                           **({"refresh_mode": "full"} if name == "d3" else {})})
    if "st" in present:  # a stateful table: a changed increment rebuilds its state in chunks
        tables.append({"name": "st", "kind": "stateful", "sources": ["a"], "key": ["k"], "fold": {"n": "sum"},
                       "increment": INCREMENT[sql.get("st", 0)], "rebuild": True, "cost": {"alpha": 60, "beta": 1}})
    out = {
        "warehouse": {"root": str(root / ("elsewhere" if broken == "restart" else "data")),
                      "landing": str(root / "landing")},
        "streams": [{"name": s, "period": PERIOD, "lateness": late, "schema": schema} for s, late in STREAMS.items()],
        "tables": tables,
        "scheduler": {"tracks": 2, "autotune": "apply",  # back-off: the defaults (5 s, at most 10 min)
                      "autotune_every": 6 * HOUR},
    }
    if broken == "invalid":
        out["tables"].append({"name": "d9", "sources": ["nowhere"], "sql": "SELECT 1"})
    return out


class Soak:
    """The loop, its world and the record of what happened (what the checks compare against)."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, days: float) -> None:
        self.root, self.days = root, days
        self.end = T0 + days * DAY
        self.clock = Clock(T0)
        monkeypatch.setattr(ops.loop, "time", types.SimpleNamespace(time=self.clock.time, monotonic_ns=time.monotonic_ns))
        parse, parsed = recovery._freshet_meta, {}  # the modelled log is replayed whole after each commit:
        monkeypatch.setattr(recovery, "_freshet_meta", lambda text: parsed[text] if text in parsed  # each
                            else parsed.setdefault(text, parse(text)))  # commit's metadata parsed once
        self.present = set(BASE) | set(DERIVED) | {"st"}
        self.sql = {n: 0 for n in [*DERIVED, "st"]}
        self.path = root / "freshet.yaml"
        self.write_config()
        cfg = load_config(self.path)
        loop = self.loop = SchedulerLoop(cfg, Options(config_path=str(self.path), retry_every=60.0))
        self.sim = Sim(loop, self.clock)
        loop.events = self.sim  # type: ignore[assignment]
        loop.workers = self.sim  # type: ignore[assignment]
        loop.tuner = SimTuner(cfg, None, loop.registry.__class__(), loop._autotuned, now=T0, settings=TUNINGS)
        self.lake = SoakLake(cfg)
        self.lake.fail = self.failing
        state = recover(cfg, self.lake)
        intake = Intake(cfg, state, clock=self.clock.time, on_count=loop.metrics.intake_counted)
        loop.parts = Parts(state, intake, self.lake, Scheduler(cfg, now=T0, recovered=state.recovered))
        self.store = ActionStore(store_path(cfg), retry_every=0.02)
        loop.actions = OperatorActions(self.store, lambda: loop.config, loop.holder.get, self.sim.put,
                                       lambda table, action: None, self.clock.time)
        self.disk_full: set[str] = set()  # "trace", "actions", "archive"
        self._flaky_disk(monkeypatch)
        self.truth = Truth()
        self.expected: dict[str, set[str]] = {t: set() for t in BASE}  # base table → partitions it must load
        self.failures: list[tuple[str, float, float, str]] = []  # (table, from, to, how)
        self.rejected: list[str] = []
        self.refused: list[tuple[str, str, str]] = []  # operator actions refused: (table, action, why)
        self.unknown_done: dict[str, int] = {}
        self.broken = 0  # SIGHUPs of a file the reload must reject

    # ---- the world's parts -----------------------------------------------------------------------
    def write_config(self, broken: str = "") -> None:
        self.path.write_text(json.dumps(config_dict(self.root, self.present, self.sql, broken)))  # (JSON is YAML)

    def _flaky_disk(self, monkeypatch: pytest.MonkeyPatch) -> None:
        loop = self.loop
        trace = TraceWriter.append_to(self.root / "trace.jsonl", {"source": "soak"})

        class Trace:  # the trace file on a disk that fills up at times
            def arrival(_, rec: Any) -> None:
                self._disk("trace")
                trace.arrival(rec)

            def job(_, rec: Any) -> None:
                self._disk("trace")
                trace.job(rec)

            def close(_) -> None:
                trace.close()

        loop._trace = Trace()  # type: ignore[assignment]
        write = self.store._write

        def store_write(body: str) -> None:
            self._disk("actions")
            write(body)

        self.store._write = store_write  # type: ignore[method-assign]
        import warehouse.landing.store as store_mod  # the local landing zone's moves

        move = store_mod._move

        def archive_move(src: Path, dest_parent: Path, name: str) -> Path:
            if dest_parent.parent.name == "_loaded":
                self._disk("archive")
            return move(src, dest_parent, name)

        monkeypatch.setattr(store_mod, "_move", archive_move)

    def _disk(self, what: str) -> None:
        if what in self.disk_full:
            raise OSError(28, "No space left on device")

    def failing(self, job: Any) -> str | None:
        now = self.clock.now
        for table, lo, hi, how in self.failures:
            if table == job.table and lo <= now < hi and job.kind not in ("optimize", "vacuum"):
                if how == "unknown":  # every other attempt commits, then its outcome is lost
                    n = self.unknown_done[table] = self.unknown_done.get(table, 0) + 1
                    return "unknown" if n % 2 else None
                return f"{table} fails: simulated outage"
        return None

    # ---- the scenario ----------------------------------------------------------------------------
    def arrive(self, stream: str, i: int) -> None:
        start = T0 + i * PERIOD
        pid = f"{stream}-{i:05d}"
        write_rows(self.loop.config.warehouse.landing, stream, pid, start, start + PERIOD)
        self.truth.arrived(stream, pid, start, start + PERIOD)
        for t, s in BASE.items():
            if s == stream and t in self.present:
                self.expected[t].add(pid)
        self.scan()

    def scan(self) -> None:  # the intake thread's poll (ops.daemon._intake_loop)
        for ev in self.loop.intake.scan():
            self.sim.put(ev)

    def hup(self, change: Callable[[], str] | None = None) -> None:
        broken = change() if change is not None else ""
        self.write_config(broken)
        self.loop._hup = True
        if broken:  # the operator fixes the file at the next hour
            self.sim.at(self.clock.now + HOUR - 60, self.write_config)

    def toggle(self, table: str, on: bool) -> Callable[[], str]:
        def change() -> str:
            (self.present.add if on else self.present.discard)(table)
            return ""
        return change

    def sql_change(self, table: str) -> Callable[[], str]:
        def change() -> str:
            self.sql[table] = (self.sql[table] + 1) % len((SQL | {"st": INCREMENT})[table])
            return ""
        return change

    def act(self, table: str, action: str, body: dict[str, Any] | None = None) -> None:
        try:
            self.loop.actions.request(table, action, body or {})
        except ActionRejected as e:
            self.refused.append((table, action, e.message))
            if e.status == 503:  # the actions file could not be written: the operator tries again
                self.sim.at(self.clock.now + HOUR, lambda: self.act(table, action, body))

    def backfill(self, table: str) -> None:
        snap = self.loop.holder.get()
        row = next(t for t in snap.tables if t.name == table)
        if row.freshness is not None:
            self.act(table, "refresh", {"from": row.freshness - DAY, "to": row.freshness - DAY / 2})

    def disk(self, what: str, full: bool) -> None:
        (self.disk_full.add if full else self.disk_full.discard)(what)

    def plan(self) -> None:
        at, days = self.sim.at, self.days
        hours = int(days * 24)
        for i in range(int(days * DAY / PERIOD)):
            at(T0 + (i + 1) * PERIOD + 120, lambda i=i: self.arrive("s", i))
            late = 100 * 60 if i % 10 == 3 else 60  # a hole filled late, within the stream's lateness
            at(T0 + (i + 1) * PERIOD + late, lambda i=i: self.arrive("u", i))
        for h in range(hours):
            at(T0 + h * HOUR + 1800, self.scan)
        for h in range(1, hours):  # SIGHUP every hour
            t, hod = T0 + h * HOUR + 15 * 60, h % 24
            change = {3: self.toggle("d2", False), 9: self.toggle("d2", True), 6: self.sql_change("d1")}.get(hod)
            if h % 72 == 30:  # the stateful table's increment changes: its state is rebuilt
                change = self.sql_change("st")
            elif h % 120 == 70:
                change = self.toggle("a2", False)
            elif h % 120 == 76:
                change = self.toggle("a2", True)
            elif h % 100 == 41:
                change, self.broken = (lambda: "invalid"), self.broken + 1  # noqa: E731
            elif h % 100 == 57:
                change, self.broken = (lambda: "restart"), self.broken + 1  # noqa: E731
            at(t, lambda change=change: self.hup(change))
        for d in range(int(days)):
            day = T0 + d * DAY
            at(day + 12 * HOUR, lambda: self.act("d1", "refresh"))
            if d % 7 == 4:  # suspended across d2's removal and re-adding (03:00 and 09:00)
                at(day + 1 * HOUR, lambda: self.act("d2", "suspend", {"reason": "soak"}))
                at(day + 18 * HOUR, lambda: self.act("d2", "resume"))
            if d % 9 == 6:
                at(day + 20 * HOUR, lambda: self.backfill("d1"))
        # tables that fail for days (d1 for eight: 1,150 failures in a row; a2 holds a backlog when a reload removes it at 22 d 22 h)
        for table, lo, hi, how in [("d1", 3, 11, "fail"), ("b", 10, 12.5, "fail"), ("a", 15, 16, "unknown"),
                                   ("d2", 20, 21, "fail"), ("a2", 22.5, 23.5, "fail")]:
            if lo < days:
                self.failures.append((table, T0 + lo * DAY, T0 + min(hi, days) * DAY, how))
        for what, lo, hi in [("trace", 7, 8), ("actions", 8, 9), ("archive", 12, 13)]:
            if lo < days:
                at(T0 + lo * DAY, lambda what=what: self.disk(what, True))
                at(T0 + min(hi, days) * DAY, lambda what=what: self.disk(what, False))
        at(self.end + HOUR, self.wind_down)

    def wind_down(self) -> None:
        """Arrivals have stopped: every table back, no failure, no disk error, all resumed."""
        self.failures.clear()
        self.disk_full.clear()
        if self.present != set(BASE) | set(DERIVED) | {"st"}:
            self.present = set(BASE) | set(DERIVED) | {"st"}
            self.hup()
        for table in sorted(self.store.suspended()):
            self.act(table, "resume")

    def run(self) -> int:
        self.plan()
        loop = self.loop
        loop._dispatch(loop.actions.restore(loop.sched, T0) + loop.sched.handle(Tick(), T0))
        return loop._loop()


def test_a_month_of_the_scheduler_loop_under_a_simulated_clock(tmp_path: Path, monkeypatch) -> None:
    soak = Soak(tmp_path, monkeypatch, DAYS)
    t0 = time.process_time()
    code = soak.run()
    cpu = time.process_time() - t0
    loop, lake, clock = soak.loop, soak.lake, soak.clock
    assert code == 0 and not soak.sim.running and not loop._dispatched, "the loop did not stop cleanly"
    assert clock.now > soak.end, f"the loop stopped at {clock.now - T0:.0f} s of {soak.end - T0:.0f}"
    cfg = loop.config
    assert {t.name for t in cfg.tables} == set(BASE) | set(DERIVED) | {"st"}

    print(f"soak: {DAYS:g} simulated days, {cpu:.1f} s CPU, {soak.sim.turns} turns of the loop, "
          f"{sum(len(c) for c in lake.commits.values())} commits, {loop.tuner.switches} tuner switches")
    problems = check_drained(soak)
    assert not problems, "after the month:\n" + "\n".join(problems)

    # what the month held (so a change that skips it shows)
    reloads = {k[0][1]: v for k, v in _samples(loop, "freshet_config_reloads").items()}
    hours = int(DAYS * 24)
    assert reloads.get("ok", 0) >= hours - 1 - soak.broken and reloads.get("rejected") == soak.broken, reloads
    assert loop.tuner.switches >= DAYS * 4 - 2
    if DAYS >= 9:  # the disk errors happened, were counted and retried
        assert _samples(loop, "freshet_loop_errors").get((("loop", "trace_write"),), 0) >= 1
        assert soak.store.write_errors >= 1
        assert any("cannot keep" in why for _, _, why in soak.refused)  # a 503: the actions file was not writable


def check_drained(soak: Soak) -> list[str]:
    """Nothing lost, and the drain invariants of tests/test_model.py: every problem, named."""
    loop, lake, truth, cfg = soak.loop, soak.lake, soak.truth, soak.loop.config
    out: list[str] = []
    for table, stream in BASE.items():  # each loaded once (SoakLake refuses a second load of a row)
        missing = sorted(soak.expected[table] - set(lake.state(table).partitions))
        if missing:
            out.append(f"{table}: {len(missing)} partitions that arrived while it was configured never "
                       f"loaded: {missing[:6]}")
        if not lake.rows.get(table, set()) <= truth.rows(stream):
            out.append(f"{table}: rows of no partition")
        if table in ("a", "b") and lake.rows.get(table) != truth.rows(stream):
            out.append(f"{table}: rows lost")
        if table in ("a", "b") and lake.state(table).freshness != max(e for _, e in truth.partitions[stream].values()):
            out.append(f"{table}: freshness {lake.state(table).freshness}, not the last partition's end")
    for name, t in sorted((t.name, t) for t in loop.sched.stats(soak.clock.now).tables):
        if t.state != "idle" or t.pending_partitions or t.recompute_pending or t.windows_old_sql:
            out.append(f"{name}: {t.state}, {t.pending_partitions} partitions pending, {t.recompute_pending} s to "
                       f"recompute, {t.windows_old_sql} windows on an old SQL")
    for name, (sources, g, _) in DERIVED.items():
        st = lake.state(name)
        safe = [lake.state(s).safe_freshness for s in sources]
        edge = None if None in safe else math.floor(min(safe) / g) * g
        if st.freshness != edge:
            out.append(f"{name}: computed through {st.freshness}, its sources' safe edge is {edge}")
            continue
        wins = lake.wins.get(name, {})
        if sorted(wins) != window_ends(st.origin, st.freshness, int(g)):
            out.append(f"{name}: windows missing or extra")
        wrong = [e for e, w in sorted(wins.items()) if w.value != truth.window(cfg, lake, name, e)]
        if wrong:
            out.append(f"{name}: {len(wrong)} windows are not their SQL over the final sources: {wrong[:3]}")
    if (got := lake.folded.get("st")) != (want := truth.state(cfg, lake, "st")):
        out.append(f"st: the state is not its increment folded over its source: {dict(got or {})} != {dict(want)}")
    if not soak.store.flush(10):
        out.append("the operator actions file is not written")
    kept = json.loads(store_path(cfg).read_text())
    if (kept["suspended"], kept["refresh"], kept["backfills"]) != ({}, {}, []):
        out.append(f"operator actions kept after the drain: {kept['suspended'], kept['refresh'], kept['backfills']}")
    landing = Path(cfg.warehouse.landing)
    left = sorted(p.name for s in STREAMS for p in (landing / s).iterdir() if p.is_dir())
    if left:
        out.append(f"{len(left)} partitions left in the landing zone: {left[:5]}")
    if (landing / "_quarantine").exists():
        out.append(f"partitions quarantined: {sorted(p.name for p in (landing / '_quarantine').rglob('*'))[:5]}")
    return out


def _samples(loop: SchedulerLoop, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    fams = {f.name: f for f in text_string_to_metric_families(generate_latest(loop.registry).decode())}
    return {tuple(sorted(s.labels.items())): s.value for s in fams[family].samples if s.name.endswith("_total")}

