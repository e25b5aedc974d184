"""Operator actions, as Snowflake's `ALTER DYNAMIC TABLE … SUSPEND | RESUME | REFRESH`
and Airflow/Dagster backfills give their users:

- **suspend** a table: no job of it starts (a running one finishes); arrivals are still accepted
  and kept; its dependents wait at their trailing edge (which stops at the table's freshness).
- **resume** it: what arrived meanwhile is loaded, as one job (§2.4) or chopped (§3.4).
- **refresh** it now: its next update job goes ahead of every waiting job, on the first free
  track. With a time range (`--from/--to`, derived tables only) it is a **backfill**: the range
  is recomputed as benefit-ranked recompute jobs, like late data. The range is cut to what the
  table holds (its origin to its freshness, the answer says about how many windows); one with
  none of it is refused, naming the range. `--cancel ID` (`{"cancel": ID}`) cancels an unfinished
  backfill: what it has not rewritten yet is forgotten (`CancelBackfill`).

Each request comes in through the HTTP API (`POST /v1/tables/{table}/{suspend|resume|refresh}`,
the same bearer token as `POST /v1/streams/{stream}/partitions`) or the CLI (`freshet suspend|
resume|refresh TABLE`), is validated here against the config and the latest snapshot, logged,
counted (`freshet_operator_actions_total{table,action}`) and **kept with the warehouse** in
`<warehouse.root>/_freshet/actions.json` (written atomically: temp file, fsync, rename) before
it is handed to the scheduler loop — so it survives a restart: on start the daemon re-applies
every suspension, pending refresh and unfinished backfill (`OperatorActions.restore`).

`OperatorActions.apply` is the one place that hands them to the engine, as events through its one
door (`Scheduler.handle`): `Suspend`, `Resume`, `Refresh` and — for a backfill — `Backfill(table,
start, end, reason)` (warehouse.events); each one the engine took is recorded in the trace
(sim.trace `action` lines), so a replay applies it too.
A backfill is finished when the recompute jobs of its table (StartJob kind `RECOMPUTE_KIND`), or its
full-refresh jobs (`full`), have covered its range, or when the engine refuses it; until then a
restart hands it to the engine again (recompute is idempotent: `replaceWhere`, docs/warehouse.md §5).
A request is written before memory changes (answered 202 only once kept); what the scheduler
loop forgets (a refresh served — the one served, by its id, not one requested since — a backfill
covered) changes memory at once and is written by a writer thread, so the loop never waits for the
disk; a write that fails (a full disk) is logged, counted (`ActionStore.write_errors`) and retried,
and the daemon keeps running. The history keeps the last 200 actions, in memory as on file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import tempfile
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.config import FreshetConfig
from warehouse.errors import FreshetError
from warehouse.events import Backfill, CancelBackfill, OperatorAction, Refresh, Resume, StartJob, Suspend
from warehouse.paths import state_dir
from warehouse.stats import SchedulerStats
from warehouse.times import iso, parse_time

__all__ = ["ACTIONS", "RECOMPUTE_KIND", "ActionRejected", "ActionRequest", "ActionStore", "OperatorActions",
           "parse_time_arg", "store_path"]

log = logging.getLogger("freshet")

ACTIONS = ("suspend", "resume", "refresh", "backfill", "cancel_backfill")  # the `action` label of the counter
RECOMPUTE_KIND = "recompute"  # StartJob.kind of the engine's recompute jobs
HISTORY = 200  # actions kept in the file's history


class ActionRejected(Exception):
    """A request refused: `status` (HTTP), a message naming the problem, a `reason` label."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """An accepted action on its way to the scheduler loop (the daemon's event queue)."""

    action: str
    table: str
    start: float | None = None
    end: float | None = None
    reason: str = ""
    backfill_id: str | None = None
    windows: int | None = None  # a backfill: about how many windows it rewrites (the answer says so)
    refresh_id: str | None = None  # a refresh: which request (settling forgets only the one served)

    @property
    def label(self) -> str:
        """A backfill's reason as its recompute jobs carry it (StartJob.reasons)."""
        return f"backfill {self.backfill_id}: {self.reason}".strip().rstrip(":")

    def event(self) -> OperatorAction:
        """The engine event for this action (warehouse.events)."""
        if self.action in ("backfill", "cancel_backfill"):
            assert self.start is not None and self.end is not None
            kind = Backfill if self.action == "backfill" else CancelBackfill
            return kind(table=self.table, start=self.start, end=self.end, reason=self.label)
        return {"suspend": Suspend, "resume": Resume, "refresh": Refresh}[self.action](table=self.table,
                                                                                        reason=self.reason)


def store_path(config: FreshetConfig) -> Path:
    """`<warehouse.root>/_freshet/actions.json` (a local root; else beside the landing zone)."""
    if (base := state_dir(config.warehouse.root, config.warehouse.landing, config.warehouse.state)) is not None:
        return base / "actions.json"
    raise FreshetError(f"operator actions are kept under a local warehouse.root or landing; both are URIs "
                       f"({config.warehouse.root!r}, {config.warehouse.landing!r})")


@dataclass
class _State:
    """The kept state. Its entries (dicts) are never changed in place, only replaced, so a copy of
    the containers (`copy`) is a snapshot a writer can serialize without the lock."""

    suspended: dict[str, dict[str, Any]] = field(default_factory=dict)  # table → {since, reason}
    refresh: dict[str, dict[str, Any]] = field(default_factory=dict)  # table → {requested, id}
    backfills: list[dict[str, Any]] = field(default_factory=list)  # {id, table, start, end, covered, …}
    history: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=HISTORY))  # the last HISTORY

    def copy(self) -> _State:
        return _State(dict(self.suspended), dict(self.refresh), list(self.backfills),
                      deque(self.history, maxlen=HISTORY))

    def body(self) -> str:
        return json.dumps({"version": 1, "suspended": self.suspended, "refresh": self.refresh,
                           "backfills": self.backfills, "history": list(self.history)}, indent=1, sort_keys=True)


class ActionStore:
    """The actions' state, one small JSON file written atomically; thread-safe.

    Two kinds of change. An operator's request (`record`, an HTTP thread) is written first and
    kept in memory only once the file holds it: an action answered 202 survives a restart, one
    that could not be written changed nothing. The scheduler loop's changes (a refresh served,
    a backfill covered or dropped) only forget what is done: they change memory at once, under
    a lock held for microseconds, and a writer thread writes them after — the loop never waits
    for a disk, nor behind an HTTP thread's write. A write that fails (a full disk) is logged,
    counted (`write_errors`) and retried every `retry_every` seconds; the daemon keeps running.
    A crash before such a write re-applies the refresh or backfill at the next start, which
    is safe (a recompute is idempotent). `flush` waits for the writer (the daemon's stop).
    """

    def __init__(self, path: Path, retry_every: float = 5.0) -> None:
        self.path = path
        self.retry_every = retry_every
        self._lock = threading.Lock()  # memory: held for a copy or a small change, never for I/O
        self._write_lock = threading.Lock()  # the file: one writer at a time, in snapshot order
        self._state = _State()
        self._changed = self._written = 0  # generations of the loop's changes: made, on file
        self._writer: threading.Thread | None = None
        self._wake = threading.Event()
        self.write_errors = 0
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            raise FreshetError(f"cannot read the operator actions in {path}: {e}") from None
        refresh = {t: r if "id" in r else {**r, "id": _new_id()} for t, r in dict(raw.get("refresh", {})).items()}
        self._state = _State(suspended=dict(raw.get("suspended", {})), refresh=refresh,
                             backfills=list(raw.get("backfills", [])),
                             history=deque(raw.get("history", []), maxlen=HISTORY))

    def _write(self, body: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".actions-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _commit(self, change: Callable[[_State], Any]) -> Any:
        """An operator's change: written with everything in memory, then kept; its result.
        OSError: nothing changed. Only HTTP threads call this (they wait for the disk)."""
        with self._write_lock:
            with self._lock:
                new, gen = self._state.copy(), self._changed
            change(new)
            self._write(new.body())
            with self._lock:  # the loop may have changed memory meanwhile: apply the change to that
                result = change(self._state)
                self._written = max(self._written, gen)
            return result

    def _change(self, change: Callable[[_State], Any]) -> Any:
        """The scheduler loop's change: in memory now, on file by the writer thread; its result."""
        with self._lock:
            result = change(self._state)
            self._changed += 1
            self._start_writer()
        return result

    def _start_writer(self) -> None:  # under self._lock
        if self._writer is None and self._changed > self._written:
            self._writer = threading.Thread(target=self._drain, name="freshet-actions-writer", daemon=True)
            self._writer.start()

    def _drain(self) -> None:
        """The writer thread: write until the file holds every change, then end."""
        while True:
            with self._write_lock:
                with self._lock:
                    if self._changed <= self._written:
                        self._writer = None
                        return
                    gen, snap = self._changed, self._state.copy()
                try:
                    self._write(snap.body())
                except OSError as e:
                    error: OSError | None = e
                else:
                    error = None
                    with self._lock:
                        self._written = max(self._written, gen)
            if error is not None:
                self.write_errors += 1
                log.warning("cannot write the operator actions file; will retry", extra={
                    "path": str(self.path), "error": str(error), "retry_in": self.retry_every})
                self._wake.wait(self.retry_every)
                self._wake.clear()

    @property
    def owed(self) -> bool:
        """A change of the kept state is not written yet (the writer is at it, or the disk fails)."""
        return self._changed > self._written

    def retry(self) -> None:
        """Make sure a writer is at what is owed (it retries by itself every `retry_every`)."""
        with self._lock:
            self._start_writer()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the file holds every change (at most `timeout` s); whether it does."""
        self._wake.set()  # a writer waiting out a disk error tries again now
        writer = self._writer
        if writer is not None:
            writer.join(timeout)
        return not self.owed

    def record(self, req: ActionRequest, now: float) -> dict[str, Any]:
        """Apply `req` to the kept state and write it; the history entry. OSError: not kept."""
        entry = {"action": req.action, "table": req.table, "time": now, "reason": req.reason}
        rid = req.refresh_id or _new_id()
        if req.action in ("backfill", "cancel_backfill"):
            entry.update(id=req.backfill_id)
        if req.action == "backfill":
            entry.update(start=req.start, end=req.end)

        def change(s: _State) -> None:
            if req.action == "suspend":
                s.suspended.setdefault(req.table, {"since": now, "reason": req.reason})
                s.refresh.pop(req.table, None)
            elif req.action == "resume":
                s.suspended.pop(req.table, None)
            elif req.action == "refresh":
                s.refresh[req.table] = {"requested": now, "id": rid}
            elif req.action == "cancel_backfill":
                s.backfills = [b for b in s.backfills if b["id"] != req.backfill_id]
            else:
                s.backfills = [*s.backfills, {"id": req.backfill_id, "table": req.table, "start": req.start,
                                              "end": req.end, "requested": now, "reason": req.reason, "covered": []}]
            s.history.append(entry)

        self._commit(change)
        return entry

    def suspended(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._state.suspended)

    def refreshes(self) -> list[str]:
        with self._lock:
            return sorted(self._state.refresh)

    def refresh_ids(self) -> dict[str, str]:
        """table → the id of the refresh kept for it (each request gets a new one)."""
        with self._lock:
            return {t: r["id"] for t, r in self._state.refresh.items()}

    def history(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._state.history)

    def backfills(self, table: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(b) for b in self._state.backfills if table is None or b["table"] == table]

    def refresh_done(self, served: dict[str, str]) -> None:
        """The refreshes `served` (table → id) are done: each is forgotten unless a newer request
        of its table (another id) came in since; that one is kept for its own job."""
        def change(s: _State) -> None:
            for t, rid in served.items():
                if s.refresh.get(t, {}).get("id") == rid:
                    del s.refresh[t]

        with self._lock:
            if not any(self._state.refresh.get(t, {}).get("id") == rid for t, rid in served.items()):
                return
        self._change(change)

    def covered(self, table: str, start: float, end: float) -> list[str]:
        """A job of `table` rewrote `(start, end]`: the ids of the backfills now done (and gone)."""
        def change(s: _State) -> list[str]:
            done, keep = [], []
            for b in s.backfills:
                if b["table"] == table and start < b["end"] and end > b["start"]:
                    b = {**b, "covered": _merge([*b["covered"], [start, end]])}
                    if any(lo <= b["start"] and hi >= b["end"] for lo, hi in b["covered"]):
                        done.append(b["id"])
                        continue
                keep.append(b)
            s.backfills = keep
            return done

        with self._lock:
            if not any(b["table"] == table and start < b["end"] and end > b["start"] for b in self._state.backfills):
                return []
        return self._change(change)

    def forget(self, backfill_id: str, why: str) -> None:
        """A backfill the engine refused (e.g. nothing computed in its range any more) is dropped."""
        def change(s: _State) -> None:
            s.backfills = [b for b in s.backfills if b["id"] != backfill_id]

        log.info("backfill dropped", extra={"backfill": backfill_id, "why": why})
        self._change(change)


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


def _merge(intervals: list[list[float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def _uncovered(start: float, end: float, covered: list[list[float]]) -> list[tuple[float, float]]:
    """The parts of `(start, end]` outside the `covered` ranges (merged, sorted)."""
    out, at = [], start
    for lo, hi in covered:
        if lo > at:
            out.append((at, min(lo, end)))
        at = max(at, hi)
    if at < end:
        out.append((at, end))
    return [(lo, hi) for lo, hi in out if hi > lo]


def parse_time_arg(value: Any, name: str) -> float:
    """`from`/`to` of a backfill: `warehouse.times.parse_time`, plus epoch seconds as a string (the
    CLI passes argv); the error names the field."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    try:
        return parse_time(value)
    except ValueError as e:
        raise ValueError(f"{name}: expected an ISO 8601 time (2025-11-24T16:00:00Z) or epoch seconds: {e}") from None


class OperatorActions:
    """Validate, keep, count and queue operator actions; apply them in the scheduler loop."""

    def __init__(self, store: ActionStore, config: Callable[[], FreshetConfig],
                 snapshot: Callable[[], SchedulerStats | None], enqueue: Callable[[ActionRequest], None],
                 count: Callable[[str, str], None], clock: Callable[[], float],
                 record: Callable[[float, OperatorAction], None] | None = None) -> None:
        self.store = store
        self._config, self._snapshot, self._enqueue = config, snapshot, enqueue
        self._count, self._clock = count, clock
        self._record = record  # the trace (sim.trace ActionRecord): every action the engine took
        self._handed: dict[str, str] = {}  # table → id of the refresh handed to the engine (not one queued)

    # ---- in an HTTP worker thread -----------------------------------------------------------------
    def request(self, table: str, action: str, body: Any) -> dict[str, Any]:
        """Validate and keep one action; raise ActionRejected naming the problem."""
        cfg = self._config()
        names = [t.name for t in cfg.tables]
        if table not in names:
            raise ActionRejected(404, f"unknown table {table!r}; known: {', '.join(sorted(names))}", "unknown_table")
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise ActionRejected(422, "the body must be a JSON object such as {\"reason\": \"…\"}", "bad_action")
        allowed = {"reason"} | ({"from", "to", "cancel"} if action == "refresh" else set())
        extra = sorted(set(body) - allowed)
        if extra:
            raise ActionRejected(422, f"{action}: unknown field(s) {', '.join(extra)} (allowed: "
                                      f"{', '.join(sorted(allowed))})", "bad_action")
        reason = body.get("reason", "")
        if not isinstance(reason, str) or len(reason) > 500:
            raise ActionRejected(422, "reason: expected a string of at most 500 characters", "bad_action")
        suspended = table in self.store.suspended()
        req = ActionRequest(action, table, reason=reason, refresh_id=_new_id() if action == "refresh" else None)
        status = {"suspend": "suspended", "resume": "resumed", "refresh": "refresh requested"}[action]
        if action == "suspend" and suspended:
            status = "already suspended"
        elif action == "resume" and not suspended:
            status = "not suspended"
        elif action == "refresh" and "cancel" in body:
            req = self._cancel(table, body, reason)
            status = "backfill cancelled"
        elif action == "refresh":
            if suspended:
                raise ActionRejected(409, f"table {table!r} is suspended; resume it first", "suspended")
            if "from" in body or "to" in body:
                req = self._backfill(cfg, table, body, reason)
                status = "backfill requested"
        try:
            entry = self.store.record(req, self._clock())
        except OSError as e:
            self.store.write_errors += 1
            log.error("cannot keep an operator action", extra={"action": req.action, "table": table,
                                                               "path": str(self.store.path), "error": str(e)})
            raise ActionRejected(503, f"cannot keep the action in {self.store.path}: {e.strerror or e}; nothing "
                                      "was changed, try again", "store_unwritable") from None
        self._count(table, req.action)
        log.info("operator action", extra={k: v for k, v in {
            "action": req.action, "table": table, "reason": reason or None, "status": status,
            "from": iso(req.start, "seconds") if req.start is not None else None,
            "to": iso(req.end, "seconds") if req.end is not None else None, "backfill": req.backfill_id}.items()
            if v is not None})
        self._enqueue(req)
        out = {"table": table, "action": req.action, "status": status, "time": entry["time"]}
        if req.action in ("backfill", "cancel_backfill"):
            out.update(id=req.backfill_id, start=req.start, end=req.end, start_iso=iso(req.start),
                       end_iso=iso(req.end))
        if req.action == "backfill":
            out["windows"] = req.windows
        return out

    def _cancel(self, table: str, body: dict[str, Any], reason: str) -> ActionRequest:
        extra = sorted(set(body) - {"cancel", "reason"})
        if extra:
            raise ActionRejected(422, f"cancel: no other field than `reason` goes with it (got {', '.join(extra)})",
                                 "bad_action")
        bid = body["cancel"]
        b = next((b for b in self.store.backfills(table) if b["id"] == bid), None)
        if b is None:
            known = ", ".join(b["id"] for b in self.store.backfills(table)) or "none"
            raise ActionRejected(404, f"no unfinished backfill {bid!r} of table {table!r} (unfinished: {known})",
                                 "unknown_backfill")
        return ActionRequest("cancel_backfill", table, b["start"], b["end"], b.get("reason", ""), bid)

    def _backfill(self, cfg: FreshetConfig, table: str, body: dict[str, Any], reason: str) -> ActionRequest:
        tc = cfg.table(table)
        if tc.is_base:
            raise ActionRejected(422, f"a backfill recomputes a derived table; {table!r} is a base table loaded "
                                      f"from stream {tc.stream!r} (refresh it without --from/--to)", "bad_action")
        if "from" not in body or "to" not in body:
            raise ActionRejected(422, "a backfill needs both `from` and `to`", "bad_action")
        try:
            start, end = parse_time_arg(body["from"], "from"), parse_time_arg(body["to"], "to")
        except ValueError as e:
            raise ActionRejected(422, str(e), "bad_action") from None
        if end <= start:
            raise ActionRejected(422, f"from {iso(start)} must be before to {iso(end)}", "bad_action")
        snap = self._snapshot()
        row = next((t for t in snap.tables if t.name == table), None) if snap is not None else None
        fresh = row.freshness if row is not None else None
        if fresh is None or start >= fresh:
            raise ActionRejected(422, f"table {table!r} is computed through {iso(fresh) or 'nothing yet'}; "
                                      f"nothing to recompute from {iso(start)}", "bad_action")
        origin = row.origin if row is not None and row.origin is not None else start
        if end <= origin:
            raise ActionRejected(422, f"table {table!r} holds windows from {iso(origin)} to {iso(fresh)}; the range "
                                      f"{iso(start)} .. {iso(end)} has none of them: nothing to recompute",
                                 "bad_action")
        # cut to what the table holds, as the engine does: a range the store can see covered
        start, end = max(start, origin), min(end, fresh)
        step = tc.granularity or row.period if row is not None else None
        windows = max(1, math.ceil((end - start) / step - 1e-9)) if step else None
        return ActionRequest("backfill", table, start, end, reason, uuid.uuid4().hex[:12], windows)

    # ---- in the scheduler loop: the one place that calls the engine --------------------------------
    def apply(self, sched: Any, req: ActionRequest, now: float) -> list[StartJob]:
        """Hand one kept action to the engine (`handle`, its one door). A table removed by a
        reload meanwhile is logged, not raised: input never stops the daemon."""
        event = req.event()
        try:
            jobs = sched.handle(event, now)
        except FreshetError as e:
            log.warning("operator action not applied", extra={"action": req.action, "table": req.table,
                                                              "error": str(e)})
            if req.action == "backfill" and req.backfill_id is not None:  # never left in the file for ever
                self.store.forget(req.backfill_id, str(e))
            return []
        if self._record is not None:
            self._record(now, event)
        if req.action == "refresh" and req.refresh_id is not None:
            self._handed[req.table] = req.refresh_id
            self.settle(sched)
        return jobs

    def restore(self, sched: Any, now: float, tables: set[str] | None = None) -> list[StartJob]:
        """Re-apply what the file keeps: on start, for every table; after a reload, for the tables
        it added (`tables`) — a table removed and re-added is new to the engine, not to the file."""
        names = {t.name for t in self._config().tables}
        if tables is not None:
            names &= tables
        jobs: list[StartJob] = []
        for table in sorted(self.store.suspended()):
            if table in names:
                jobs += self.apply(sched, ActionRequest("suspend", table), now)
        for table, rid in sorted(self.store.refresh_ids().items()):
            if table in names:
                jobs += sched.handle(Refresh(table=table), now)
                self._handed[table] = rid
                if self._record is not None:
                    self._record(now, Refresh(table=table))
        for b in self.store.backfills():
            if b["table"] in names:  # what its jobs have not rewritten yet (`covered`): never a range twice
                for lo, hi in _uncovered(b["start"], b["end"], b.get("covered", [])):
                    jobs += self.apply(sched, ActionRequest("backfill", b["table"], lo, hi, b.get("reason", ""),
                                                            b["id"]), now)
        self.settle(sched)
        restored = {"suspended": sorted(self.store.suspended()), "refresh": self.store.refreshes(),
                    "backfills": [b["id"] for b in self.store.backfills()]}
        if any(restored.values()):
            log.info("operator actions restored", extra=restored)
        return jobs

    @property
    def unsettled(self) -> bool:
        """Refreshes handed to the engine that may have ended, or a write owed: `settle` has work."""
        return bool(self._handed) or self.store.owed

    def settle(self, sched: Any) -> None:
        """Forget refreshes handed to the engine that it no longer holds (their job started, or
        nothing to load) — by id: one requested again since (still queued for the scheduler loop,
        not the engine's yet) is kept. Cheap: memory only (`ActionStore`)."""
        self.store.retry()
        done = {t: rid for t, rid in self._handed.items() if not sched.refresh_pending(t)}
        if done:
            for t in done:
                del self._handed[t]
            self.store.refresh_done(done)

    def job_finished(self, job: StartJob) -> None:
        """A recompute job, or a full refresh (a derived job that overwrites the table from its
        origin), rewrote `(start, end]`: the backfills it covers are done."""
        self.store.retry()
        if job.kind == RECOMPUTE_KIND or job.full:
            for bid in self.store.covered(job.table, job.start, job.end):
                log.info("backfill done", extra={"table": job.table, "backfill": bid})

    def view(self, table: str) -> dict[str, Any]:
        """What `/v1/tables` shows of a table's actions."""
        sus = self.store.suspended().get(table)
        return {"suspended_since": sus["since"] if sus else None,
                "suspend_reason": sus.get("reason") if sus else None,
                "backfills": [{"id": b["id"], "start": b["start"], "end": b["end"], "start_iso": iso(b["start"]),
                               "end_iso": iso(b["end"]), "covered": b["covered"]} for b in self.store.backfills(table)]}


# ---- the CLI: freshet suspend|resume|refresh TABLE ------------------------------------------------------
def _add(parser: argparse.ArgumentParser, backfill: bool) -> None:
    from ops.status import DEFAULT_URL

    parser.add_argument("table", help="the table")
    parser.add_argument("--reason", default="", help="why (kept in the log and the actions file)")
    if backfill:
        parser.add_argument("--from", dest="start", help="backfill: recompute from this time (ISO 8601 or epoch)")
        parser.add_argument("--to", dest="end", help="backfill: up to this time")
        parser.add_argument("--cancel", metavar="ID", help="cancel the unfinished backfill ID (its jobs not started)")
    parser.add_argument("--url", help=f"the daemon's HTTP API (default: the `listen:` of --config, else "
                                      f"$FRESHET_URL, else {DEFAULT_URL})")
    parser.add_argument("--config", help="the daemon's config file: its API is at the file's `listen:`")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the daemon")


def _main(action: str, args: argparse.Namespace) -> int:
    import httpx

    from ops.auth import load_token
    from ops.status import daemon_url

    body: dict[str, Any] = {"reason": args.reason} if args.reason else {}
    if getattr(args, "start", None) is not None or getattr(args, "end", None) is not None:
        body.update({"from": args.start, "to": args.end})
    if getattr(args, "cancel", None):
        body["cancel"] = args.cancel
    token = load_token()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = daemon_url(args.url, args.config)
    try:
        r = httpx.post(f"{base}/v1/tables/{args.table}/{action}", json=body, headers=headers, timeout=args.timeout)
    except httpx.HTTPError as e:
        raise FreshetError(f"cannot reach the daemon at {base}: {e}") from None
    try:
        answer = r.json()
    except ValueError:
        answer = {"error": r.text}
    if r.status_code >= 300:
        raise FreshetError(f"{action} {args.table}: {answer.get('error', r.text)} (HTTP {r.status_code})")
    extra = f" {answer['start_iso']} .. {answer['end_iso']} (id {answer['id']})" if answer.get("id") else ""
    if answer.get("windows"):
        extra += f", about {answer['windows']} window(s)"
    print(f"{args.table}: {answer.get('status', 'accepted')}{extra}")
    return 0


COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "suspend": (lambda p: _add(p, False), lambda a: _main("suspend", a)),
    "resume": (lambda p: _add(p, False), lambda a: _main("resume", a)),
    "refresh": (lambda p: _add(p, True), lambda a: _main("refresh", a)),
}
