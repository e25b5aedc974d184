"""OpenLineage events for every update job (the `lineage:` section of the config).

Each job the Scheduler starts — a base append (or a time slice of one partition), a derived window,
a recompute or SQL-change rewrite (`kind="recompute"`), OPTIMIZE, VACUUM — is one OpenLineage *run*
of the job `<namespace>/<table>`: START when a track takes it, then COMPLETE or FAIL (with the
reason). Inputs are the source Delta tables at the exact versions the job read (a base job: the
landing directory of its stream, with the partition ids it loaded as a subset facet); the output is
the table at the version written, with the rows. The window `(start, end]` is the run's nominal time
(§2.1); the `freshet` run facet carries the job kind, priority and the staleness before and the one
expected after (§2.3: S = τ − F).

**Runs a restart finds open.** A run is STARTed when its job starts and closed by its COMPLETE or
FAIL; a daemon killed between the two (SIGKILL, a crash, a stop with jobs still running) would
leave it STARTed in the catalog for ever. So every run started and not yet closed is kept in
`_freshet/lineage_runs.json` under the warehouse root (`OpenRuns`: one small JSON file, replaced
atomically), a run leaving it once its closing event was delivered (or dropped); after a restart the
daemon closes each run left there with ABORT and an error message saying why
(`LineageEmitter.close_abandoned`, called once it holds the warehouse lease).

A lineage endpoint that is down or slow never delays or fails a job: the daemon's scheduler loop
only puts an event on a bounded queue (`buffer`); one background thread sends them in order, and
retries a failed send with doubling back-off (`retries` times) before dropping it. An event that
finds the queue full is dropped at once. Both are counted in
`freshet_lineage_events_dropped_total{reason}` on the registry given.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import attr
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    BaseFacet,
    RunFacet,
    base_subset_dataset,
    dataset_version_dataset,
    error_message_run,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    sql_job,
)
from openlineage.client.transport import Transport
from openlineage.client.transport.console import ConsoleConfig, ConsoleTransport
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport, TokenProvider
from openlineage.client.uuid import generate_new_uuid
from prometheus_client import CollectorRegistry, Counter

from ops.logs import RepeatedFailure
from warehouse.config import FreshetConfig, LineageConfig, TableConfig
from warehouse.errors import ConfigError
from warehouse.events import JobFailed, JobFinished, StartJob
from warehouse.lake.delta import table_path
from warehouse.paths import state_dir
from warehouse.times import iso
from warehouse.upkeep import MAINTENANCE_KINDS

__all__ = ["FACET_SCHEMA", "PRODUCER", "FreshetRunFacet", "LineageEmitter", "OpenRuns", "abort_event", "dataset_id",
           "run_event"]

log = logging.getLogger("freshet.lineage")

PRODUCER = "urn:freshet:scheduler"  # a URI naming Freshet as the producer of the events
FACET_SCHEMA_URL = "urn:freshet:lineage:1#/$defs/FreshetRunFacet"
MAX_BACKOFF = 30.0  # seconds between two tries of one event at most

FACET_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:freshet:lineage:1",
    "$defs": {"FreshetRunFacet": {
        "description": "What Freshet's Scheduler knew of an update job when it started it (DataDepot, TKDE 2011)",
        "type": "object",
        "properties": {
            "kind": {"type": "string", "description": "base, derived, recompute (late data, a SQL change, a "
                                                      "backfill), optimize or vacuum"},
            "timeSlice": {"type": "boolean", "description": "a base job loading part of one partition (§3.4)"},
            "full": {"type": "boolean", "description": "a full refresh: the whole table rewritten"},
            "reasons": {"type": "array", "items": {"type": "string"},
                        "description": "a recompute's causes: late, sql, upstream, a backfill's reason"},
            "priority": {"type": "number", "description": "the table's priority p_i (§2.3)"},
            "jobId": {"type": "integer", "description": "the job's id in the daemon's log lines"},
            "track": {"type": "integer", "minimum": 0},
            "estimateSeconds": {"type": "number", "description": "E(n) = α + β·n (§2.4)"},
            "stalenessBeforeSeconds": {"type": "number", "description": "τ − F_i when the job started"},
            "expectedStalenessAfterSeconds": {"type": "number",
                                              "description": "τ + E(n) − F_i after the job"},
            "sqlVersion": {"type": "string"},
        },
        "required": ["kind", "priority", "track", "jobId", "stalenessBeforeSeconds", "expectedStalenessAfterSeconds"],
    }},
}


@attr.define
class FreshetRunFacet(RunFacet):
    """The `freshet` run facet (schema: FACET_SCHEMA)."""

    kind: str
    priority: float
    track: int
    jobId: int  # noqa: N815
    stalenessBeforeSeconds: float  # noqa: N815 — OpenLineage facets are camelCase
    expectedStalenessAfterSeconds: float  # noqa: N815
    estimateSeconds: float = 0.0  # noqa: N815
    timeSlice: bool = False  # noqa: N815
    full: bool = False
    reasons: list[str] = attr.field(factory=list)
    sqlVersion: str = ""  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA_URL


def dataset_id(location: str) -> tuple[str, str]:
    """(namespace, name) of a table or directory after OpenLineage's naming rules: a local path
    is `file` + the absolute path; `s3a://bucket/wh/t` is `s3://bucket` + `wh/t`."""
    u = urlparse(location)
    if not u.scheme or u.scheme == "file" or len(u.scheme) == 1:  # a plain path (or a Windows drive)
        return "file", os.path.abspath(os.path.expanduser(u.path if u.scheme == "file" else location))
    scheme = "s3" if u.scheme in ("s3a", "s3n") else u.scheme
    return f"{scheme}://{u.netloc}", u.path.lstrip("/")


def _facets(*pairs: tuple[str, BaseFacet | None]) -> dict[str, Any]:
    return {k: v for k, v in pairs if v is not None}


def _time_slice(job: StartJob) -> bool:
    """A base job loading part of its one partition (§3.4: chopping below a partition)."""
    return (job.kind == "base" and len(job.arrivals) == 1
            and (job.start > job.arrivals[0].start or job.end < job.arrivals[0].end))


def _query(tc: TableConfig | None) -> str | None:
    """The SQL a table's jobs run: a derived table's `sql`, a stateful table's `increment`."""
    if tc is None:
        return None
    return tc.increment if tc.is_stateful else tc.sql


def run_event(config: FreshetConfig, lineage: LineageConfig, job: StartJob, run_id: str, started: float,
              now: float, outcome: JobFinished | JobFailed | None = None) -> RunEvent:
    """The OpenLineage RunEvent of `job` (START when `outcome` is None), pure but for its input."""
    tc = next((t for t in config.tables if t.name == job.table), None)
    was = job.new_freshness - job.delta_f  # F_i before the job (§2.1): delta_f = F_new − F
    facet = FreshetRunFacet(
        kind=job.kind, priority=float(tc.priority) if tc is not None else 0.0, track=job.track, jobId=job.job_id,
        stalenessBeforeSeconds=round(started - was, 3),
        expectedStalenessAfterSeconds=round(started + job.estimate - job.new_freshness, 3),
        estimateSeconds=round(job.estimate, 3), timeSlice=_time_slice(job), full=job.full,
        reasons=list(job.reasons), sqlVersion=job.sql_version)
    run_facets = _facets(
        ("nominalTime", nominal_time_run.NominalTimeRunFacet(nominalStartTime=iso(job.start, "milliseconds"),
                                                             nominalEndTime=iso(job.end, "milliseconds"))),
        ("freshet", facet),
        ("errorMessage", error_message_run.ErrorMessageRunFacet(
            message=outcome.reason or "job failed", programmingLanguage="python")
         if isinstance(outcome, JobFailed) else None))
    job_facets = _facets(
        ("jobType", job_type_job.JobTypeJobFacet(processingType="BATCH", integration="FRESHET",
                                                 jobType=job.kind.upper())),
        ("sql", sql_job.SQLJobFacet(query=query, dialect="spark") if (query := _query(tc)) else None))
    read = dict(outcome.read) if isinstance(outcome, JobFinished) else {}
    inputs: list[InputDataset] = []
    if job.kind in MAINTENANCE_KINDS:
        pass  # OPTIMIZE and VACUUM rewrite or delete the table's own files: the output says which table
    elif job.arrivals and tc is not None and tc.stream is not None:
        ns, name = dataset_id(os.path.join(config.warehouse.landing, tc.stream))
        subset = base_subset_dataset.InputSubsetInputDatasetFacet(
            inputCondition=base_subset_dataset.PartitionSubsetCondition(partitions=[
                base_subset_dataset.Partition(
                    identifier=a.partition_id, dimensions={"start": iso(a.start), "end": iso(a.end), "rows": a.rows})
                for a in job.arrivals]))
        inputs.append(InputDataset(namespace=ns, name=name, inputFacets={"subset": subset}))
    else:
        for src in job.sources:
            ns, name = dataset_id(table_path(config, src))
            version = read.get(src)
            inputs.append(InputDataset(namespace=ns, name=name, facets=_facets(
                ("version", dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(version))
                 if version is not None else None))))
    ns, name = dataset_id(table_path(config, job.table))
    done = isinstance(outcome, JobFinished)
    output = OutputDataset(
        namespace=ns, name=name,
        facets=_facets(("version", dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=str(outcome.version)) if done and outcome.version is not None else None)),
        outputFacets=_facets(("outputStatistics", output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=outcome.rows) if done and job.kind not in MAINTENANCE_KINDS else None)))
    state = RunState.START if outcome is None else RunState.COMPLETE if done else RunState.FAIL
    return RunEvent(eventType=state, eventTime=iso(now, "milliseconds"), producer=PRODUCER,
                    run=Run(runId=run_id, facets=run_facets),
                    job=Job(namespace=lineage.namespace, name=job.table, facets=job_facets),
                    inputs=inputs, outputs=[output])


ABANDONED = ("the Freshet daemon stopped while this job ran (killed, crashed, or stopped before the job ended); "
             "the restarted daemon recovered the table from its Delta log, where a job that did not commit left "
             "nothing")


def abort_event(run: dict[str, Any], now: float) -> RunEvent:
    """ABORT of a run a restart found open (`OpenRuns`), with why in its errorMessage facet."""
    return RunEvent(eventType=RunState.ABORT, eventTime=iso(now, "milliseconds"), producer=PRODUCER,
                    run=Run(runId=run["run_id"], facets={"errorMessage": error_message_run.ErrorMessageRunFacet(
                        message=f"{ABANDONED} (job {run.get('job_id')}, started {iso(run.get('started'))})",
                        programmingLanguage="python")}),
                    job=Job(namespace=run["namespace"], name=run["job"]), inputs=[], outputs=[])


class OpenRuns:
    """The runs STARTed and not closed yet, kept in one small JSON file (run id → namespace, job,
    job id, start), replaced atomically (temp file, rename) at each change; thread-safe.
    Without a file (`path` None: the warehouse and the landing zone are both URIs) only in memory."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._runs: dict[str, dict[str, Any]] = {}
        self._failures = RepeatedFailure(log, "cannot write the open OpenLineage runs; a restart may not close them",
                                         "the open OpenLineage runs are written again", every=60.0,
                                         path=str(path))

    def left(self) -> list[dict[str, Any]]:
        """The runs a previous daemon left open, from the file (a file that cannot be read: none)."""
        if self.path is None:
            return []
        try:
            runs = json.loads(self.path.read_text()).get("runs", {})
        except FileNotFoundError:
            return []
        except (OSError, ValueError, AttributeError) as e:
            log.warning("cannot read the open OpenLineage runs; not closing them",
                        extra={"path": str(self.path), "error": f"{type(e).__name__}: {e}"})
            return []
        return [{**r, "run_id": k} for k, r in sorted(runs.items()) if isinstance(r, dict) and r.get("job")]

    def adopt(self, runs: list[dict[str, Any]]) -> None:
        """Keep `runs` (left open by a previous daemon) until their ABORT is delivered."""
        with self._lock:
            self._runs.update({r["run_id"]: {k: v for k, v in r.items() if k != "run_id"} for r in runs})
            self._write()

    def add(self, run_id: str, namespace: str, job: StartJob, began: float) -> None:
        with self._lock:
            self._runs[run_id] = {"namespace": namespace, "job": job.table, "job_id": job.job_id, "started": began}
            self._write()

    def remove(self, run_id: str) -> None:
        with self._lock:
            if self._runs.pop(run_id, None) is not None:
                self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps({"runs": self._runs}, sort_keys=True))
            os.replace(tmp, self.path)  # no fsync: it must survive the process killed, not a power cut
        except OSError as e:  # a full or read-only disk: the jobs go on; a restart may miss these runs
            self._failures.failed(e)
        else:
            self._failures.ok()


def runs_path(config: FreshetConfig) -> Path | None:
    """`<warehouse.root>/_freshet/lineage_runs.json` (a local root; else beside the landing zone)."""
    base = state_dir(config.warehouse.root, config.warehouse.landing, config.warehouse.state)
    return None if base is None else base / "lineage_runs.json"


def make_transport(lineage: LineageConfig, environ: dict[str, str] | None = None) -> Transport:
    """The openlineage-python transport of the `lineage:` section (ConfigError: a missing API key)."""
    if lineage.transport == "console":
        return ConsoleTransport(ConsoleConfig())
    if lineage.transport == "file":
        assert lineage.url is not None  # LineageConfig checks it
        return FileTransport(FileConfig(log_file_path=lineage.url.removeprefix("file://"), append=True))
    env = os.environ if environ is None else environ
    auth: TokenProvider = TokenProvider({})
    if lineage.api_key_env is not None:
        key = env.get(lineage.api_key_env)
        if not key:
            raise ConfigError(f"lineage.api_key_env: the environment variable {lineage.api_key_env} is not set "
                              f"(it holds the lineage server's API key)")
        auth = ApiKeyTokenProvider({"apiKey": key})
    assert lineage.url is not None
    # no retries inside one send: the emitter's thread retries with its own back-off
    return HttpTransport(HttpConfig(url=lineage.url, endpoint=lineage.endpoint, timeout=lineage.timeout, auth=auth,
                                    retry={"total": 0, "connect": 0, "read": 0, "status_forcelist": []}))


class LineageEmitter:
    """Turns StartJob / JobFinished / JobFailed into OpenLineage events, sent off the caller's thread.

    `started`, `finished` and `failed` never block and never raise: the scheduler loop calls them.
    Without a `lineage:` section every call returns at once (`enabled` is False).
    """

    def __init__(self, config: FreshetConfig, registry: CollectorRegistry, *,
                 transport: Transport | None = None, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.lineage = config.lineage
        self.enabled = self.lineage is not None
        self.clock = clock
        self.dropped = Counter("freshet_lineage_events_dropped", "OpenLineage events not delivered: the buffer "
                               "was full, or every retry failed", ["reason"], registry=registry)
        self.sent = Counter("freshet_lineage_events_sent", "OpenLineage events delivered", registry=registry)
        for reason in ("buffer_full", "undeliverable"):
            self.dropped.labels(reason=reason)
        self._runs: dict[int, tuple[str, float]] = {}  # job id → (run id, when it started)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.lineage is None:
            return
        self.open = OpenRuns(runs_path(config))  # STARTed, not closed yet: closed after a restart
        # each event, with the run it closes (its COMPLETE, FAIL or ABORT) once delivered or dropped
        self._queue: queue.Queue[tuple[RunEvent, str | None]] = queue.Queue(maxsize=self.lineage.buffer)
        self.client = OpenLineageClient(transport=transport or make_transport(self.lineage))
        self._failures = RepeatedFailure(log, "cannot send an OpenLineage event; retrying with back-off",
                                         "OpenLineage events are delivered again", every=60.0,
                                         transport=self.lineage.transport, url=self.lineage.url)
        self._thread = threading.Thread(target=self._drain, name="freshet-lineage", daemon=True)
        self._thread.start()

    def reconfigure(self, config: FreshetConfig) -> None:
        """A reloaded config (SIGHUP): the tables follow it; a changed `lineage:` section needs a
        restart (the sender and its transport are made once) and is logged as such."""
        self.config = config
        if config.lineage != self.lineage:
            log.warning("the lineage: section changed; it takes effect at the next restart",
                        extra={"running": None if self.lineage is None else self.lineage.transport})

    # -- called by the scheduler loop --
    def started(self, job: StartJob, now: float) -> None:
        if not self.enabled:
            return
        run_id = str(generate_new_uuid())
        self._runs[job.job_id] = (run_id, now)
        assert self.lineage is not None
        self.open.add(run_id, self.lineage.namespace, job, now)
        self._offer(job, run_id, now, now, None)

    def close_abandoned(self, now: float) -> int:
        """ABORT every run a previous daemon left open (STARTed, never closed: it was killed while
        the job ran); call once the warehouse lease is held. How many were queued."""
        if not self.enabled:
            return 0
        runs = self.open.left()
        self.open.adopt(runs)
        queued = 0
        for run in runs:
            try:
                self._queue.put_nowait((abort_event(run, now), run["run_id"]))
            except queue.Full:  # kept in the file: the next restart closes it
                self.dropped.labels(reason="buffer_full").inc()
                continue
            except Exception:  # a bug here must not stop the daemon
                log.exception("cannot build an OpenLineage ABORT", extra={"run": run.get("run_id")})
                continue
            queued += 1
        if runs:
            log.info("closing OpenLineage runs left open by the previous daemon",
                     extra={"runs": len(runs), "jobs": sorted({r["job"] for r in runs})})
        return queued

    def finished(self, job: StartJob, event: JobFinished, now: float | None = None) -> None:
        self._end(job, event, now)

    def failed(self, job: StartJob, event: JobFailed, now: float | None = None) -> None:
        self._end(job, event, now)

    def ended(self, job: StartJob, event: JobFinished | JobFailed, now: float | None = None) -> None:
        """COMPLETE or FAIL, after the event's type."""
        self._end(job, event, now)

    def _end(self, job: StartJob, event: JobFinished | JobFailed, now: float | None) -> None:
        if not self.enabled:
            return
        now = self.clock() if now is None else now
        run_id, began = self._runs.pop(job.job_id, None) or (str(generate_new_uuid()), now)
        self._offer(job, run_id, began, now, event)

    def _offer(self, job: StartJob, run_id: str, began: float, now: float,
               outcome: JobFinished | JobFailed | None) -> None:
        try:
            assert self.lineage is not None
            ev = run_event(self.config, self.lineage, job, run_id, began, now, outcome)
        except Exception:  # a bug here must not stop the daemon: log it, count it as dropped
            log.exception("cannot build an OpenLineage event", extra={"table": job.table, "job": job.job_id})
            self.dropped.labels(reason="undeliverable").inc()
            return
        try:
            self._queue.put_nowait((ev, None if outcome is None else run_id))
        except queue.Full:
            self.dropped.labels(reason="buffer_full").inc()
            if outcome is not None:
                self.open.remove(run_id)  # its close is lost either way: a restart's ABORT would be wrong

    # -- the background thread --
    def _drain(self) -> None:
        assert self.lineage is not None
        while not self._stop.is_set():
            try:
                ev, closes = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                if self._send(ev) and closes is not None:
                    self.open.remove(closes)
            finally:
                self._queue.task_done()

    def _send(self, ev: RunEvent) -> bool:
        """Send one event; on failure retry after 0.5 s, 1 s, 2 s … (at most MAX_BACKOFF), then drop.
        False only when the sender stopped before it was sent or dropped."""
        assert self.lineage is not None
        tries = 0
        while True:
            try:
                self.client.emit(ev)
            except Exception as e:  # down, slow (timeout), refusing: retry, then drop
                self._failures.failed(e)
                tries += 1
                if tries > self.lineage.retries:
                    self.dropped.labels(reason="undeliverable").inc()
                    return True
                if self._stop.wait(min(MAX_BACKOFF, 0.5 * 2 ** (tries - 1))):
                    return False
            else:
                self._failures.ok()
                self.sent.inc()
                return True

    def flush(self, timeout: float) -> bool:
        """Wait until every queued event was sent or dropped (tests, shutdown); True if it was."""
        if not self.enabled:
            return True
        end = time.monotonic() + timeout
        while self._queue.unfinished_tasks:  # queued or being sent
            if time.monotonic() >= end:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Stop the sender after at most `timeout` seconds of draining; what is left is not sent."""
        if self._thread is None:
            return
        self.flush(timeout)
        self._stop.set()
        self._thread.join(timeout=1.0)
