"""The daemon's HTTP API: FastAPI on one port, OpenAPI at /docs and /openapi.json.

Read endpoints serve the latest Scheduler snapshot (never the live engine); the one mutating
endpoint hands a partition manifest (docs/warehouse.md §3) to the daemon, which writes it into the
landing zone so it takes the same validation and quarantine path as a producer's manifest.

* `GET /metrics`   — Prometheus exposition of `ops.metrics`.
* `GET /healthz`   — the process is alive.
* `GET /readyz`    — 200 once the Spark session is up and recovery is done, else 503; a standby
  waiting for the warehouse lease says `"status": "standby"`, with 200 if asked `?standby=ok`
  (Kubernetes: both pods ready for rollouts, ops/podrole.py routes the traffic).
* `GET /v1/tables` — per table: freshness, safe freshness, staleness at request time, priority,
  inherited priority (§3.3), target, pending ΔF, running job, last result, learned α/β (§2.4).
* `GET /v1/tracks` — the tracks and the track plan (§3.2).
* `GET /v1/status` — the process: ready or why not, the config it runs, the last SIGHUP reload
  (`ok`, or `rejected` / `failed` with the reason: the old config kept running).
* `POST /v1/tables/{table}/suspend|resume|refresh` — operator actions (`ops.actions`): 202 with
  the action's status; `refresh` with `{"from": …, "to": …}` is a backfill of a derived table.
* `POST /v1/streams/{stream}/partitions` — 202 with the partition id. The body is parsed as JSON
  and handed, off the event loop, to the landing zone's one validator
  (`warehouse.landing.manifest`), exactly like a manifest dropped into the landing zone.

Every refused POST is logged (`request rejected`, with the client address and the reason) and
counted in `freshet_api_requests_rejected_total{reason}` (each reason exported from the start).

Security: bind 127.0.0.1 unless told otherwise; when a bearer token is configured
(`FRESHET_API_TOKEN` or the file named by `FRESHET_API_TOKEN_FILE`) every mutating endpoint
requires `Authorization: Bearer <token>`; request bodies are capped (`max_body` bytes); errors are
JSON `{"error": "...", "status": N}` whose message names the problem.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ops.auth import load_token
from ops.listen import parse_listen
from ops.metrics import extrapolate
from warehouse.errors import FreshetError
from warehouse.landing.intake import Submitted, UnknownStream
from warehouse.landing.manifest import JSON_SCHEMA, REJECTION_KINDS, PartitionRejected
from warehouse.stats import SchedulerStats, TableStats
from warehouse.times import iso, parse_time

__all__ = [
    "REJECTION_REASONS", "ApiError", "ApiServer", "Backend", "create_app", "load_token", "parse_listen",
    "parse_time", "table_view",
]

MAX_BODY = 64 * 1024
log = logging.getLogger("freshet.api")

#: The `reason` label of `freshet_api_requests_rejected_total`: the request's fault before the
#: manifest is read (401 unauthorized, 403 forbidden, 400 bad_json, 413 body_too_large,
#: 415 unsupported_media_type, 404 unknown_stream, 503 not_accepting), then the landing zone's
#: rejection kinds (422, `warehouse.landing.manifest.REJECTION_KINDS`); `no_route` is a mutating
#: request to a path or method the API does not serve (404, 405).
REJECTION_REASONS = ("unauthorized", "forbidden", "bad_json", "body_too_large", "unsupported_media_type",
                     "unknown_stream", "not_accepting", *REJECTION_KINDS, "no_route",
                     "unknown_table", "bad_action", "suspended")  # the last three: ops.actions


class ApiError(Exception):
    """An error with an HTTP status and a message naming the problem (converted at the edge);
    `reason` is its label in `freshet_api_requests_rejected_total`."""

    def __init__(self, status: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason


class Backend(Protocol):
    """What the API needs from the daemon."""

    def snapshot(self) -> SchedulerStats | None: ...

    def ready(self) -> tuple[bool, str]: ...

    def standby(self) -> bool: ...

    def streams(self) -> list[str]: ...

    def submit_partition(self, stream: str, manifest: Any) -> Submitted:
        """Hand a manifest (the JSON body as sent) to the landing zone; called in a worker thread.
        Raise UnknownStream, PartitionRejected, or ApiError (e.g. 503 while starting)."""
        ...

    def operator_action(self, table: str, action: str, body: Any) -> dict[str, Any]:
        """Keep and queue an operator action (`ops.actions`); raise ActionRejected or ApiError."""
        ...

    def actions_view(self, table: str) -> dict[str, Any] | None:
        """A table's kept operator actions for `/v1/tables` (None: not known yet)."""
        ...

    def status(self) -> dict[str, Any]:
        """The process for `/v1/status`: readiness, the config it runs, the last reload."""
        ...


def table_view(t: TableStats, snap_now: float, now: float, actions: dict[str, Any] | None = None) -> dict[str, Any]:
    """One table as JSON, with staleness computed at `now` (§2.1); `actions`: its operator actions."""
    e = extrapolate(t, snap_now, now)
    u = t.upkeep
    return {
        "name": t.name, "kind": t.kind, "state": t.state,
        "freshness": t.freshness, "freshness_iso": iso(t.freshness),
        "safe_freshness": t.safe_freshness, "safe_freshness_iso": iso(t.safe_freshness),
        "arrived": t.arrived, "arrived_iso": iso(t.arrived),
        "staleness": e.staleness, "target_staleness": t.target_staleness,
        "within_target": None if (t.target_staleness is None or e.staleness is None)
        else e.staleness <= t.target_staleness,
        "time_within_target_ratio": (e.time_within_target / e.observed_time) if e.observed_time > 0 else None,
        "priority": t.priority, "inherited_priority": t.inherited_priority, "period": t.period,
        "backlog": t.backlog, "pending_delta": t.pending_delta, "pending_partitions": t.pending_partitions,
        "running_partitions": t.running_partitions,
        "running_job": t.running_job, "running_track": t.running_track,
        "last_result": t.last_result, "consecutive_failures": t.consecutive_failures,
        "jobs_released": t.jobs_released, "jobs_overdue": t.jobs_overdue, "jobs_completed": t.jobs_completed, "jobs_failed": t.jobs_failed,
        "alpha": t.alpha, "beta": t.beta, "home_tracks": list(t.home_tracks),
        "weighted_staleness": e.weighted_staleness_area,
        "suspended": t.suspended, "refresh_requested": t.refresh_requested,
        **(actions or {}),
        "maintenance": None if u is None else {
            "optimize_every": u.optimize_every, "commits_since_optimize": u.commits_since_optimize,
            "vacuum_every": u.vacuum_every, "last_optimize": u.last_optimize, "last_optimize_iso": iso(u.last_optimize),
            "last_vacuum": u.last_vacuum, "last_vacuum_iso": iso(u.last_vacuum), "next_vacuum": u.next_vacuum,
            "files": u.files, "bytes_reclaimed": u.bytes_reclaimed, "jobs_ok": dict(u.jobs_ok),
            "jobs_failed": dict(u.jobs_failed)},
        # derived tables (warehouse.recompute): refresh mode, SQL version, what is left to rewrite
        "refresh_mode": t.refresh_mode, "sql_version": t.sql_version, "windows_old_sql": t.windows_old_sql,
        "recompute_pending": t.recompute_pending, "windows_recomputed": t.windows_recomputed,
        "late_rows_unfolded": t.late_rows_unfolded,  # stateful: late rows its state has not folded yet
    }


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status)


def _validation_message(errors: list[Any]) -> str:
    parts = []
    for e in errors:
        loc = [str(p) for p in e.get("loc", ()) if p != "body"]
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc) or 'body'}: {msg}")
    return "; ".join(parts)


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses an endpoint answers with (docs/operations.md §2):
    every one is a JSON object with `error` (what is wrong) and `status_code`."""
    schema = {"type": "object", "properties": {"error": {"type": "string"}, "status_code": {"type": "integer"}}}
    return {code: {"description": "error", "content": {"application/json": {"schema": schema}}} for code in codes}


def create_app(backend: Backend, registry: CollectorRegistry, *, token: str | None = None,
               open_without_token: bool = True, max_body: int = MAX_BODY,
               clock: Callable[[], float] = time.time) -> FastAPI:
    """Build the app. With no `token`, mutating endpoints are open only if `open_without_token`
    (the daemon sets it when it listens on loopback) and refused with 403 otherwise."""
    app = FastAPI(title="Freshet", version="0.1.0",
                  description="Update scheduler for streaming data warehouses (DataDepot, TKDE 2011).")
    rejected = Counter("freshet_api_requests_rejected", "POSTs refused by the HTTP API, by reason "
                       "(a 422 names the landing zone's rejection kind)", ["reason"], registry=registry)
    for reason in REJECTION_REASONS:
        rejected.labels(reason=reason)

    def reject(request: Request, stream: str | None, err: ApiError) -> None:
        client = request.client
        rejected.labels(reason=err.reason or "no_route").inc()
        log.warning("request rejected", extra={
            "client": f"{client.host}:{client.port}" if client else None, "path": request.url.path,
            "stream": stream, "status": err.status, "reason": err.reason, "error": err.message})

    @app.exception_handler(ApiError)
    async def _api_error(_req: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.message)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(req: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code in (404, 405):  # a mistyped path or method: name what was asked for
            detail = f"{req.method} {req.url.path}: {detail} (the API: /docs)"
        if req.method not in ("GET", "HEAD", "OPTIONS"):  # e.g. a producer POSTing to a mistyped path
            reject(req, None, ApiError(exc.status_code, detail, "no_route"))
        return _error(exc.status_code, detail)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_req: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, _validation_message(list(exc.errors())))

    def authorize(request: Request) -> None:
        if token is None:
            if open_without_token:
                return
            raise ApiError(403, "mutating endpoints are disabled: the API listens beyond loopback and no token "
                                "is configured (set FRESHET_API_TOKEN or FRESHET_API_TOKEN_FILE)", "forbidden")
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if not header:
            raise ApiError(401, "missing bearer token: send 'Authorization: Bearer <token>'", "unauthorized")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
            raise ApiError(403, "invalid bearer token", "forbidden")

    async def read_json(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                if int(declared) > max_body:
                    raise ApiError(413, f"request body is {declared} bytes; the limit is {max_body}",
                                   "body_too_large")
            except ValueError:
                raise ApiError(400, f"bad Content-Length {declared!r}", "bad_json") from None
        body = bytearray()
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > max_body:
                raise ApiError(413, f"request body exceeds the limit of {max_body} bytes", "body_too_large")
        ctype = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype not in ("application/json", ""):
            raise ApiError(415, f"content type {ctype!r} is not supported; send application/json",
                           "unsupported_media_type")
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ApiError(400, f"malformed JSON body: {e}", "bad_json") from None

    @app.get("/metrics", include_in_schema=True, summary="Prometheus exposition", response_class=PlainTextResponse,
             responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}},
                              "description": "the Prometheus text format"}})
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", summary="the process is alive")
    async def healthz() -> dict[str, Any]:  # on the event loop: never queues behind worker threads
        return {"status": "ok", "time": clock()}

    @app.get("/readyz", summary="ready: Spark session up and recovery done (?standby=ok: a standby too)",
             responses=_errors(503))
    def readyz(standby: str | None = None) -> JSONResponse:
        ok, reason = backend.ready()
        if ok:
            return JSONResponse({"status": "ready"})
        if backend.standby():
            return JSONResponse({"status": "standby", "error": reason, "status_code": 200 if standby == "ok" else 503},
                                status_code=200 if standby == "ok" else 503)
        return JSONResponse({"status": "not ready", "error": reason or "starting", "status_code": 503},
                            status_code=503)

    def snapshot() -> SchedulerStats:
        snap = backend.snapshot()
        if snap is None:
            raise ApiError(503, "the scheduler has not published its state yet (recovery in progress)")
        return snap

    @app.get("/v1/tables", summary="tables, stalest first", responses=_errors(503))
    def tables() -> dict[str, Any]:
        snap = snapshot()
        now = clock()
        rows = [table_view(t, snap.now, now, backend.actions_view(t.name)) for t in snap.tables]
        rows.sort(key=lambda r: (r["staleness"] is None, -(r["staleness"] or 0.0), r["name"]))
        return {"now": now, "snapshot_time": snap.now, "weighted_staleness": sum(r["weighted_staleness"]
                for r in rows), "tables": rows}

    @app.get("/v1/tables/{table}", summary="one table", responses=_errors(404, 503))
    def table(table: str) -> dict[str, Any]:
        snap = snapshot()
        for t in snap.tables:
            if t.name == table:
                return table_view(t, snap.now, clock(), backend.actions_view(t.name))
        raise ApiError(404, f"unknown table {table!r}; known: {', '.join(sorted(t.name for t in snap.tables))}")

    @app.get("/v1/status", summary="the daemon: readiness, its config, the last SIGHUP reload and why it failed")
    def status() -> dict[str, Any]:
        return {"now": clock(), **backend.status()}

    @app.get("/v1/tracks", summary="tracks and the track plan (§3.2)", responses=_errors(503))
    def tracks() -> dict[str, Any]:
        snap = snapshot()
        p = snap.plan
        return {
            "tracks": [{"track": t.track, "running_job": t.running_job, "running_table": t.running_table,
                        "busy_time": t.busy_time, "clusters": list(t.clusters), "free": t.free}
                       for t in snap.tracks],
            "plan": {"partitioner": p.partitioner, "tracks": p.tracks,
                     "clusters": [list(c) for c in p.clusters], "home_tracks": [list(h) for h in p.home_tracks],
                     "free_tracks": list(p.free_tracks), "utilization": p.utilization, "feasible": p.feasible,
                     "note": p.note},
            "pending_jobs": snap.pending_jobs, "running_jobs": snap.running_jobs,
        }

    @app.get("/", include_in_schema=False, response_class=HTMLResponse)
    def page(minutes: float = 30.0, refresh: int = 10) -> Response:
        """The status page (`ops.page`): HTML from the same bodies as /v1/tables, /v1/tracks."""
        from ops.page import bad_param, starting_page, status_page

        if (why := bad_param(minutes, refresh)) is not None:
            raise ApiError(422, why)
        try:
            tbody, trbody = tables(), tracks()
        except ApiError as e:
            return HTMLResponse(starting_page(e.message, refresh), status_code=e.status)
        return HTMLResponse(status_page(backend, tbody, trbody, minutes=minutes, refresh=refresh))

    async def action(table: str, name: str, request: Request) -> JSONResponse:
        from ops.actions import ActionRejected

        try:
            authorize(request)
            declared = request.headers.get("content-length")
            body = None if declared in (None, "0") else await read_json(request)
            try:
                out = await run_in_threadpool(backend.operator_action, table, name, body)
            except ActionRejected as e:
                raise ApiError(e.status, e.message, e.reason) from None
        except ApiError as e:
            reject(request, None, e)
            raise
        return JSONResponse(out, status_code=202)

    action_errors = _errors(400, 401, 403, 404, 409, 413, 415, 422, 503)

    @app.post("/v1/tables/{table}/suspend", status_code=202, responses=action_errors,
              summary="suspend a table: no jobs until resumed")
    async def suspend(table: str, request: Request) -> JSONResponse:
        return await action(table, "suspend", request)

    @app.post("/v1/tables/{table}/resume", status_code=202, responses=action_errors, summary="resume a suspended table")
    async def resume(table: str, request: Request) -> JSONResponse:
        return await action(table, "resume", request)

    @app.post("/v1/tables/{table}/refresh", status_code=202, responses=action_errors,
              summary="update a table now; with from/to, recompute that range of a derived table (backfill)")
    async def refresh(table: str, request: Request) -> JSONResponse:
        return await action(table, "refresh", request)

    @app.post("/v1/streams/{stream}/partitions", status_code=202,
              responses={200: {"description": "the same partition again: a duplicate, a no-op"},
                         **_errors(400, 401, 403, 404, 413, 415, 422, 503)},
              summary="announce a partition (the manifest of docs/warehouse.md §3)",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": JSON_SCHEMA}}}})
    async def post_partition(stream: str, request: Request) -> JSONResponse:
        try:
            authorize(request)
            data = await read_json(request)
            known = backend.streams()
            if stream not in known:
                raise ApiError(404, f"unknown stream {stream!r}; known streams: {', '.join(sorted(known)) or 'none'}",
                               "unknown_stream")
            try:  # validation reads and hashes files: off the event loop, so /healthz stays fast
                sub = await run_in_threadpool(backend.submit_partition, stream, data)
            except UnknownStream as e:
                raise ApiError(404, str(e), "unknown_stream") from None
            except PartitionRejected as e:
                if e.quarantined and e.partition is not None:
                    msg = f"partition {e.partition!r} rejected (quarantined): {e.reason}"
                else:
                    msg = f"manifest rejected: {e.reason}"
                raise ApiError(422, msg, e.kind) from None
        except ApiError as e:
            reject(request, stream, e)
            raise
        if sub.arrived is None:
            return JSONResponse({"stream": stream, "partition": sub.partition_id, "status": "duplicate"},
                                status_code=200)
        return JSONResponse({"stream": stream, "partition": sub.partition_id, "status": "accepted"}, status_code=202)

    return app


class ApiServer:
    """uvicorn serving `app` from a background thread (signals stay with the daemon's main thread)."""

    def __init__(self, app: FastAPI, host: str, port: int, *, log_level: str = "warning") -> None:
        import uvicorn

        self.host = host
        self._config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off",
                                      access_log=False, timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(self._config)
        self._thread: Any = None

    def start(self, timeout: float = 10.0) -> int:
        """Start serving; return the bound port (useful with port 0). Raise FreshetError if binding fails."""
        import threading

        self._thread = threading.Thread(target=self._server.run, name="freshet-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise FreshetError(f"the HTTP API could not listen on {self.host}:{self._config.port}")
            if time.monotonic() > deadline:
                raise FreshetError(f"the HTTP API did not start on {self.host}:{self._config.port}")
            time.sleep(0.02)
        return self.port

    @property
    def port(self) -> int:
        for srv in getattr(self._server, "servers", []):
            for sock in srv.sockets:
                return int(sock.getsockname()[1])
        return int(self._config.port)

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)

