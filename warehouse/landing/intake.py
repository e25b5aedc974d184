"""The landing zone (docs/warehouse.md §3): discover, validate and announce partitions (§2.1).

A producer writes data files into `landing/<stream>/<id>/` and then, last and atomically,
`_partition.json` (or POSTs the same manifest to the HTTP API, which hands it to `submit`). Each
partition is checked by the one validator (`warehouse.landing.manifest`) and then against what the
intake knows: the ids pending or loaded (a re-delivery with the same content is a no-op, other
content is a conflict) and the windows of the stream's other partitions (an overlap is refused
unless the stream sets `allow_overlap`). A bad partition is moved to
`landing/_quarantine/<stream>/<id>/` with a `reason` file, counted, and never stops the others; a
good one becomes a `PartitionArrived` event for the Scheduler. Once its base jobs have committed
it (`archive`), its directory moves to `landing/_loaded/<stream>/<id>/`.

The landing zone is a local directory or a bucket (`warehouse.landing: s3a://bucket/prefix`): the
intake reads and moves it only through its store (`warehouse.landing.seam`).

Concurrency: the scanner thread and any number of HTTP threads call in at once. Validation (reading
and hashing files) runs under a claim on the partition's `(stream, id)` only, so partitions are
validated in parallel and two submissions of one id are serialised; the intake lock guards only
the dictionaries and is held for microseconds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.config import FreshetConfig, StreamConfig
from warehouse.errors import WarehouseError
from warehouse.events import PartitionArrived, StartJob
from warehouse.landing.manifest import (  # noqa: F401 — re-exported: the landing zone's public names
    MANIFEST,
    PARTITION_ID,
    QUARANTINE,
    Partition,
    PartitionRejected,
    _arrow_type,
    fingerprint,
    manifest_id,
    parse_manifest,
    parse_time,
    partition_id,
    validate_partition,
)
from warehouse.landing.seam import LandingStore
from warehouse.landing.store import LocalStore, open_store
from warehouse.landing.windows import Windows
from warehouse.times import iso

if TYPE_CHECKING:
    from warehouse.lake.recovery import RecoveryState

__all__ = [
    "MANIFEST",
    "Intake",
    "Partition",
    "PartitionRejected",
    "Submitted",
    "UnknownStream",
    "Windows",
    "fingerprint",
    "intake_readers",
    "parse_time",
    "validate_partition",
]

LOADED = "_loaded"
UNKNOWN_EVERY = 10.0  # seconds between two listings of the landing zone for directories of no stream
log = logging.getLogger("freshet.intake")


class UnknownStream(WarehouseError, KeyError):
    """A manifest for a stream the configuration does not declare."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown stream"


@dataclass(frozen=True, slots=True)
class Submitted:
    """The answer to a POSTed manifest: its id, and the event (None: an exact duplicate, a no-op)."""

    partition_id: str
    arrived: PartitionArrived | None


Readers = tuple[dict[str, "StreamConfig"], dict[str, list[str]], dict[str, str]]


def intake_readers(config: FreshetConfig) -> Readers:
    """The streams of `config` by name, the base tables reading each, the stream of each base
    table: all the intake takes of a config (a reload builds it off the scheduler loop)."""
    streams = {s.name: s for s in config.streams}
    tables_of: dict[str, list[str]] = {s: [] for s in streams}
    stream_of: dict[str, str] = {}
    for t in config.tables:
        if t.stream:
            tables_of.setdefault(t.stream, []).append(t.name)
            stream_of[t.name] = t.stream
    return streams, tables_of, stream_of


@dataclass(slots=True)
class _Unmoved:
    """A quarantine decided but not finished (the move or the reason file failed: a full disk, a
    permission): `scan` retries it; until then the partition stays where it is, skipped."""

    directory: str  # relative to the landing zone (warehouse.landing.store)
    reason: str
    manifest: Any
    move: bool
    dest: str | None = None  # set once the directory (or the quarantine entry) exists


class Intake:
    """The landing zone of one warehouse. Thread-safe; see docs/warehouse.md §1.

    `clock` is the daemon's clock (epoch seconds): a partition ending more than the stream's
    `max_future_skew` beyond it is quarantined, so freshness never runs ahead of real time.
    """

    def __init__(self, config: FreshetConfig, state: RecoveryState | None = None, *,
                 clock: Callable[[], float] = time.time,
                 on_count: Callable[[str, str], None] | None = None) -> None:
        self.config = config
        self.store: LandingStore = open_store(config.warehouse)  # a directory, or a bucket
        self.landing: Path | None = self.store.root if isinstance(self.store, LocalStore) else None
        self._clock = clock
        self._on_count = on_count  # (counter, stream) at each count: pushed to Prometheus by the daemon
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str], list[Any]] = {}  # key → [lock, holders + waiters]
        self._pending: dict[tuple[str, str], Partition] = {}
        self._owed: dict[tuple[str, str], frozenset[str]] = {}  # the base tables a partition arrived for
        self._loaded: dict[str, dict[str, str]] = {}
        self._windows: dict[str, Windows] = {}
        self.accepted: Counter[str] = Counter()
        self.quarantined: Counter[str] = Counter()
        self.duplicates: Counter[str] = Counter()
        self.quarantine_failures: Counter[str] = Counter()  # moves into quarantine that failed (retried)
        self.unknown: dict[str, int] = {}  # complete partitions now under directories naming no stream
        self._unknown_seen: set[tuple[str, str]] = set()
        self._unknown_at = -math.inf  # when the landing zone's root was last listed for them
        self.last_rejection: dict[str, str] = {}
        self._unmoved: dict[tuple[str, str], _Unmoved] = {}  # quarantines to finish (scan retries them)
        self._streams: dict[str, StreamConfig] = {}
        self._tables_of: dict[str, list[str]] = {}  # stream → the base tables reading it
        self._stream_of_table: dict[str, str] = {}
        self._configure(config, state)

    def _count(self, counter: str, stream: str) -> None:
        """One more in `counter` (accepted, quarantined, duplicates, quarantine_failures) for `stream`."""
        getattr(self, counter)[stream] += 1
        if self._on_count is not None:
            self._on_count(counter, stream)

    def _configure(self, config: FreshetConfig, state: RecoveryState | None, readers: Readers | None = None) -> None:
        """Take `config` (`readers`: its streams and tables, `intake_readers`, prepared off the
        loop by a reload); `state`: what the Delta log holds of the tables to start from it. Only
        what changed is touched: the streams added or removed, the tables in `state`."""
        had, was = set(self._stream_of_table), self._streams
        self.config = config
        # a stream may feed several base tables: a partition is done when all of them loaded it
        self._streams, self._tables_of, self._stream_of_table = readers if readers is not None else intake_readers(config)
        for t in self._stream_of_table:
            if t not in self._loaded:
                self._loaded[t] = {}
        for s in [s for s in self._windows if s not in self._streams]:
            del self._windows[s]
        for s in self._streams:
            if s not in was:
                self._windows.setdefault(s, Windows())
                for counter in (self.accepted, self.quarantined, self.duplicates, self.quarantine_failures):
                    counter.setdefault(s, 0)  # every key exists from the start: readers iterate without the lock
        if state is not None:
            for t, st in state.tables.items():
                stream = self._stream_of_table.get(t)
                if stream is None:
                    continue
                self._loaded[t].update(st.partitions)
                for pid, (start, end) in st.windows.items():
                    self._windows[stream].add(pid, start, end)
        if len(self._streams) != len(was) or any(s not in self._streams for s in was):
            self._pending = {k: p for k, p in self._pending.items() if k[0] in self._streams}
            self._owed = {k: o for k, o in self._owed.items() if k[0] in self._streams}
        self._settle_pending(had)

    def _settle_pending(self, had: set[str]) -> None:
        """After a reload (under the lock): a pending partition that a table new to its stream has
        not loaded is announced again at the next scan. It arrived before that table was there, or
        while it was away (removed and added back), so the Scheduler never gave it to it; a table
        that has it pending counts the re-delivery as a duplicate, and the executor skips what a
        table's Delta log holds. A table a reload removes keeps its claim (`_owed`): a partition it
        had not loaded stays pending, in the landing zone, until that table returns and loads it,
        or a restart finds every table of its stream holding it and archives it."""
        for key in list(self._pending):
            if any(t not in had and key[1] not in self._loaded.get(t, {}) for t in self._tables_of.get(key[0], [])):
                del self._pending[key]  # (its window stays: overlapping() leaves its own id out)

    def reconfigure(self, config: FreshetConfig, state: RecoveryState | None = None,
                    readers: Readers | None = None) -> None:
        """Apply a new config (SIGHUP): keep pending partitions of streams that remain. `readers`:
        `intake_readers(config)`, prepared off the scheduler loop."""
        with self._lock:
            self._configure(config, state, readers)

    # ---- queries --------------------------------------------------------------------------------
    def partition(self, stream: str, pid: str) -> Partition:
        with self._lock:
            try:
                return self._pending[(stream, pid)]
            except KeyError:
                raise WarehouseError(f"partition {pid!r} of stream {stream!r} is not pending in the intake") from None

    def pending(self) -> list[Partition]:
        with self._lock:
            return sorted(self._pending.values(), key=lambda p: (p.stream, p.end, p.start, p.id))

    # ---- one claim per partition ------------------------------------------------------------------
    @contextlib.contextmanager
    def _claim(self, key: tuple[str, str], wait: bool = True) -> Iterator[bool]:
        """Hold `key` (one partition) while it is validated, settled and moved; yields False when
        `wait` is False and someone else holds it."""
        with self._lock:
            claim = self._claims.get(key)
            if claim is None:
                claim = self._claims[key] = [threading.Lock(), 0]
            claim[1] += 1
        got = claim[0].acquire(blocking=wait)
        try:
            yield got
        finally:
            if got:
                claim[0].release()
            with self._lock:
                claim[1] -= 1
                if claim[1] == 0:
                    del self._claims[key]

    # ---- discovery ------------------------------------------------------------------------------
    def scan(self) -> list[PartitionArrived]:
        """Discover complete partitions not seen yet; quarantine bad ones (§4.3)."""
        out: list[Partition] = []
        now = self._clock()
        self._retry_quarantines()
        for stream in list(self._streams):
            names = self.store.children(stream)  # on a bucket: one delimited listing of <stream>/
            for name in names or ():
                if name.startswith((".", "_")):
                    continue
                key = (stream, name)
                with self._lock:
                    if key in self._pending or key in self._unmoved:
                        continue
                with self._claim(key, wait=False) as got:
                    if got:
                        p = self._discover(stream, name, f"{stream}/{name}", now)
                        if p is not None:
                            out.append(p)
        if now - self._unknown_at >= UNKNOWN_EVERY:
            self._unknown_at = now
            self._scan_unknown()
        out.sort(key=lambda p: (p.stream, p.end, p.start, p.id))
        return [p.arrived() for p in out]

    def _scan_unknown(self) -> None:
        """Complete partitions under a directory that names no configured stream (a producer's
        typo, a stream not configured yet) are never loaded: each is logged once, counted per
        directory in `unknown` while it is there, and left in place, so a reload that adds the
        stream picks it up."""
        seen: set[tuple[str, str]] = set()
        try:
            dirs = [d for d in self.store.children("") or () if not d.startswith((".", "_")) and d not in self._streams]
            for d in dirs:
                new = []
                for e in self.store.children(d) or ():
                    if not e.startswith((".", "_")) and self.store.is_file(f"{d}/{e}/{MANIFEST}"):
                        seen.add((d, e))
                        if (d, e) not in self._unknown_seen:
                            self._unknown_seen.add((d, e))
                            new.append(e)
                if new:
                    log.warning("landing zone: %s/ names no configured stream, so its partition(s) %s are not "
                                "loaded (left in place); known streams: %s", d, ", ".join(sorted(new)[:5])
                                + (f" and {len(new) - 5} more" if len(new) > 5 else ""),
                                ", ".join(sorted(self._streams)))
        except FileNotFoundError:  # no landing zone (yet): nothing waits in it
            pass
        except OSError as err:
            log.warning("cannot list the landing zone %s: %s", self.store.location, err)
            return
        self._unknown_seen = seen
        self.unknown = dict(Counter(d for d, _ in seen))

    def _discover(self, stream: str, pid: str, directory: str, now: float) -> Partition | None:
        """One directory of the landing zone, under its claim."""
        mpath = f"{directory}/{MANIFEST}"
        if not self.store.is_file(mpath):
            return None  # not complete yet (or moved away by a concurrent submission)
        try:
            text = self.store.read_text(mpath)
        except OSError as err:
            log.warning("cannot read %s: %s", self.store.where(mpath), err)
            return None
        try:
            data = json.loads(text)
        except ValueError as err:
            result: Partition | PartitionRejected | None = PartitionRejected(
                f"malformed manifest: {MANIFEST} is not valid JSON ({err})", "malformed")
        else:
            try:
                result = self._validate(stream, pid, directory, data, now)
            except OSError as err:  # e.g. the producer is still moving files: next poll
                log.warning("cannot check partition %s/%s yet: %s", stream, pid, err)
                return None
        try:
            out = self._settle(stream, pid, directory, result, None)
        except UnknownStream:  # removed by a reload meanwhile
            return None
        return out if isinstance(out, Partition) else None

    def submit(self, stream: str, manifest: Mapping[str, Any]) -> Submitted:
        """Accept a POSTed manifest (files already in `landing/<stream>/<id>/`; the id defaults
        to the end time, `20261126T101500Z`) and write it as that directory's `_partition.json`.

        Raises UnknownStream, or PartitionRejected: the partition is quarantined unless the
        rejection says `quarantined=False` (the manifest names no usable partition directory).
        """
        if stream not in self._streams:
            raise UnknownStream(f"unknown stream {stream!r} (known: {', '.join(sorted(self._streams)) or 'none'})")
        pid = manifest_id(manifest)  # PartitionRejected(quarantined=False): it names no partition
        data = {k: v for k, v in manifest.items() if k != "id"}
        directory = f"{stream}/{pid}"
        with self._claim((stream, pid)):
            result = self._validate(stream, pid, directory, manifest, self._clock())
            out = self._settle(stream, pid, directory, result, data)
            if isinstance(out, PartitionRejected):
                out.partition = pid
                raise out
            if out is None:
                return Submitted(pid, None)
            self.store.write_text(f"{directory}/{MANIFEST}", json.dumps(data, default=str), atomic=True)
            return Submitted(pid, out.arrived())

    def _validate(self, stream: str, pid: str, directory: str, data: Any,
                  now: float) -> Partition | PartitionRejected | None:
        """The one validator (`warehouse.landing.manifest`); no intake lock held.

        A partition every base table of the stream has loaded has had its files archived to
        `_loaded/<stream>/<id>/`: a re-delivery of its manifest alone (a producer retrying its
        POST) is checked against the archived files instead, and is a duplicate if they match.
        If the archive was deleted, only the declaration can be compared: None (a duplicate) when
        its window is the loaded one, a conflict otherwise."""
        try:
            sc = self._streams[stream]
        except KeyError:
            raise UnknownStream(f"unknown stream {stream!r}") from None
        try:
            return validate_partition(sc, parse_manifest(data, pid), directory, self.store, now)
        except PartitionRejected as err:
            if err.kind != "file_missing":
                return err
            missing = err
        with self._lock:
            tables = self._tables_of.get(stream, [])
            loaded = bool(tables) and all(pid in self._loaded.get(t, {}) for t in tables)
            window = self._windows[stream].window(pid) if stream in self._windows else None
        if not loaded:
            return missing
        archived = f"{LOADED}/{stream}/{pid}"
        try:
            if self.store.is_dir(archived):
                return validate_partition(sc, parse_manifest(data, pid), archived, self.store, now)
            m = parse_manifest(data, pid)
        except PartitionRejected as err:
            return err
        if window is not None and window != (m.start, m.end):
            return PartitionRejected(f"partition {pid!r} already loaded with different content (window "
                                     f"({iso(window[0])}, {iso(window[1])}], sent ({iso(m.start)}, {iso(m.end)}])",
                                     "conflict")
        log.info("partition %s/%s is already loaded and its files are gone from %s: its content cannot be "
                 "compared, its window is the loaded one: a duplicate", stream, pid, self.store.where(LOADED))
        return None

    def _settle(self, stream: str, pid: str, directory: str, result: Partition | PartitionRejected | None,
                record: Any) -> Partition | PartitionRejected | None:
        """Decide, under the intake lock, what a validated (or rejected) partition becomes:
        accepted (returned), a duplicate (None) or quarantined (the rejection, returned). Moves
        its directory afterwards, outside the lock (the caller holds the partition's claim).
        `record` is the manifest to keep in quarantine when it is not in the directory (a POST).
        `result` None: `_validate` found it loaded already, a duplicate."""
        key = (stream, pid)
        move, archive, err = True, False, None
        with self._lock:
            cfg = self._streams.get(stream)
            if cfg is None:
                raise UnknownStream(f"unknown stream {stream!r}")
            old = self._pending.get(key)
            if result is None:
                self._count("duplicates", stream)
                archive = True
            elif old is not None:
                if isinstance(result, Partition) and result.fingerprint == old.fingerprint:
                    self._count("duplicates", stream)
                    return None
                # the directory holds the pending partition: keep it, quarantine only the manifest
                err = PartitionRejected(f"partition {pid!r} is already pending with different content", "conflict")
                move = False
            elif isinstance(result, PartitionRejected):
                err = result
            else:
                p = result
                tables = self._tables_of.get(stream, [])
                known = [self._loaded[t][pid] for t in tables if pid in self._loaded.get(t, {})]
                if any(fp != p.fingerprint for fp in known):
                    err = PartitionRejected(f"partition {pid!r} already loaded with different content", "conflict")
                elif known and len(known) == len(tables):  # a re-delivery: a no-op
                    self._count("duplicates", stream)
                    archive = True
                else:
                    other = None if cfg.allow_overlap else self._windows[stream].overlapping(p.start, p.end, pid)
                    if other is not None:
                        err = PartitionRejected(
                            f"overlaps partition {other[2]} ({iso(other[0])}, {iso(other[1])}] of stream "
                            f"{stream!r} (set allow_overlap: true on the stream if its partitions may overlap)",
                            "overlap")
                    else:
                        self._pending[key] = p
                        self._owed[key] = frozenset(tables) | self._owed.get(key, frozenset())
                        self._windows[stream].add(pid, p.start, p.end)
                        self._count("accepted", stream)
                        return p
            if err is not None:
                self._count("quarantined", stream)
                self.last_rejection[stream] = err.reason
        if archive:
            log.info("partition %s/%s is already loaded (same content): archived", stream, pid)
            try:
                if self.store.is_dir(directory):
                    self.store.move(directory, f"{LOADED}/{stream}", pid)
            except OSError as e:  # archiving is housekeeping: the duplicate is answered all the same
                log.warning("cannot archive %s: %s", self.store.where(directory), e)
            return None
        assert err is not None
        self._quarantine(stream, pid, directory, err.reason, record, move=move)
        return err

    def _quarantine(self, stream: str, pid: str, directory: str, reason: str, manifest: Any = None,
                    *, move: bool = True) -> bool:
        """Move the partition to `_quarantine/<stream>/<id>/` with its reason (the caller holds its
        claim and has counted it). An OSError (a full disk) is logged and counted in
        `quarantine_failures`, never raised: the quarantine is finished by a later `scan`, and the
        partition stays where it is meanwhile. True when done."""
        key = (stream, pid)
        with self._lock:
            todo = self._unmoved.pop(key, None) or _Unmoved(directory, reason, manifest, move)
        try:
            if todo.dest is None:
                todo.dest = self.store.quarantine(todo.directory, f"{QUARANTINE}/{stream}", pid, todo.move)
            if todo.manifest is not None:
                self.store.write_text(f"{todo.dest}/{MANIFEST}", json.dumps(todo.manifest, default=str))
            self.store.write_text(f"{todo.dest}/reason", todo.reason + "\n")
        except OSError as err:
            with self._lock:
                self._unmoved[key] = todo
                self._count("quarantine_failures", stream)
            log.warning("cannot quarantine partition %s/%s yet (%s: %s); retrying at the next scan",
                        stream, pid, todo.reason, err)
            return False
        log.warning("quarantined partition %s/%s: %s", stream, pid, todo.reason)
        return True

    def _retry_quarantines(self) -> None:
        """Finish the quarantines whose move failed (`_quarantine`)."""
        with self._lock:
            keys = list(self._unmoved)
        for key in keys:
            with self._claim(key, wait=False) as got:
                if got and key in self._unmoved:
                    u = self._unmoved[key]
                    self._quarantine(key[0], key[1], u.directory, u.reason, u.manifest, move=u.move)

    def unquarantined(self) -> list[tuple[str, str]]:
        """(stream, id) of partitions quarantined whose move has not succeeded yet."""
        with self._lock:
            return sorted(self._unmoved)

    def refuse(self, stream: str, pid: str, reason: str) -> None:
        """The Scheduler refused an accepted partition (e.g. no table reads its stream any more
        after a reload): quarantine it with the reason, as any bad partition."""
        with self._claim((stream, pid)):
            with self._lock:
                self._owed.pop((stream, pid), None)
                if self._pending.pop((stream, pid), None) is None:
                    # not pending: refused already (another base table of the stream failed on the
                    # same partition) or loaded by every table. Once per partition.
                    log.info("partition %s/%s is not pending: not quarantined again (%s)", stream, pid, reason)
                    return
                if stream in self._windows:
                    self._windows[stream].discard(pid)
                self._count("quarantined", stream)
                self.last_rejection[stream] = reason
            self._quarantine(stream, pid, f"{stream}/{pid}", reason)

    # ---- after a failed job ----------------------------------------------------------------------
    def recheck(self, job: StartJob) -> dict[str, str]:
        """After a failed base job: its partitions that can no longer be loaded as accepted → why.

        Each partition's directory is checked again by the one validator, every data file is read
        in full (a Parquet file can have a sound footer over corrupt pages), and the fingerprint is
        compared with the one taken at acceptance: a file deleted, truncated or rewritten since
        then makes the partition unloadable for good — it is quarantined, not retried forever.
        An I/O error that is not a missing file (a full disk, say) is not the partition's fault.
        """
        stream = self._stream_of_table.get(job.table)
        if stream is None or stream not in self._streams:
            return {}
        sc = self._streams[stream]
        bad: dict[str, str] = {}
        for a in job.arrivals:
            directory = f"{stream}/{a.partition_id}"
            try:
                data = json.loads(self.store.read_text(f"{directory}/{MANIFEST}"))
                part = validate_partition(sc, parse_manifest(data, a.partition_id), directory, self.store, a.end)
                if part.fingerprint != a.fingerprint:
                    raise PartitionRejected("its files are not the ones validated at acceptance (fingerprint changed)")
                if sc.format == "parquet":
                    import pyarrow as pa
                    import pyarrow.parquet as pq

                    for f in part.files:
                        src = self.store.arrow_source(f)  # (on a bucket: read into memory; an OSError is no verdict)
                        try:
                            pq.read_table(src, use_threads=False)
                        except (pa.ArrowException, OSError) as e:
                            raise PartitionRejected(f"{Path(f).name} cannot be read: {e}") from None
            except PartitionRejected as e:
                bad[a.partition_id] = f"unloadable after acceptance: {e.reason}"
            except FileNotFoundError:
                bad[a.partition_id] = f"unloadable after acceptance: {MANIFEST} is gone from {self.store.where(directory)}"
            except ValueError as e:
                bad[a.partition_id] = f"unloadable after acceptance: {MANIFEST} is not valid JSON any more ({e})"
            except OSError as e:
                log.warning("cannot recheck partition %s/%s: %s", stream, a.partition_id, e)
        return bad

    # ---- after a commit -------------------------------------------------------------------------
    def archive(self, job: StartJob) -> None:
        """A base job ended with its partitions in the Delta log (committed now or before). A time
        slice (the partition ends after the job's window) leaves its partition pending."""
        stream = self._stream_of_table.get(job.table)
        done = {p.partition_id: p.fingerprint for p in job.arrivals if p.end <= job.end}
        if stream is not None and done:
            self.mark_loaded(job.table, stream, done)

    def mark_loaded(self, table: str, stream: str, fingerprints: Mapping[str, str]) -> None:
        """Record ids committed to `table`; archive each directory to `landing/_loaded/<stream>/`
        once every base table of the stream has it."""
        with self._lock:
            self._loaded.setdefault(table, {}).update(fingerprints)
            tables = frozenset(self._tables_of.get(stream, [table]))
            done = [pid for pid in fingerprints
                    if all(pid in self._loaded.get(t, {}) for t in tables | self._owed.get((stream, pid), tables))]
        for pid in done:
            self._archive(stream, pid)

    def _archive(self, stream: str, pid: str) -> None:
        """`landing/<stream>/<pid>/` to `landing/_loaded/<stream>/`: every table of the stream has it."""
        # never wait (the scheduler loop calls this): if a re-delivery of `pid` is being
        # validated, it will find the id loaded and archive (or quarantine) the directory itself
        with self._claim((stream, pid), wait=False) as got:
            d = f"{stream}/{pid}"
            if got and self.store.is_dir(d):
                try:
                    self.store.move(d, f"{LOADED}/{stream}", pid)
                except OSError as err:  # archiving is housekeeping: never fail a committed job
                    log.warning("cannot archive %s: %s", self.store.where(d), err)
            with self._lock:
                self._pending.pop((stream, pid), None)
                self._owed.pop((stream, pid), None)
