"""The landing zone (DESIGN.md §4.3): discover, validate and announce partitions (§2.1).

A producer writes data files into `landing/<stream>/<id>/` and then, last and atomically,
`_partition.json` = `{"start", "end", "files", "rows", "safe_through"?}`. Only a complete manifest
makes a partition visible. Each one is validated before anything is loaded — manifest fields,
files inside the landing root, format, schema, every row's time in `(start, end]`, row count,
and a content fingerprint against the ids already loaded. A bad partition is moved to
`landing/_quarantine/<stream>/<id>/` with a `reason` file, counted, and never stops the others;
a good one becomes a `PartitionArrived` event for the Scheduler. Once its base job commits, the
executor archives it to `landing/_loaded/<stream>/<id>/`.

Validation reads Parquet metadata and the time column only, with pyarrow (about 1-3 ms for a
10,000-row partition here; a Spark read costs ~100 ms).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import re
import shutil
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse import times
from warehouse.config import FreshetConfig, StreamConfig
from warehouse.errors import WarehouseError
from warehouse.events import PartitionArrived, StartJob
from warehouse.times import iso

if TYPE_CHECKING:
    from warehouse.lake.recovery import RecoveryState

__all__ = [
    "MANIFEST",
    "Intake",
    "Partition",
    "PartitionRejected",
    "UnknownStream",
    "fingerprint",
    "parse_time",
    "validate_partition",
]

MANIFEST = "_partition.json"
QUARANTINE = "_quarantine"
LOADED = "_loaded"
PARTITION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=:+-]{0,127}$")
log = logging.getLogger("freshet.intake")


class PartitionRejected(WarehouseError):
    """A partition cannot be loaded as declared; `reason` says why (it is quarantined)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class UnknownStream(WarehouseError, KeyError):
    """A manifest for a stream the configuration does not declare."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown stream"


@dataclass(frozen=True, slots=True)
class Partition:
    """A validated partition: `(start, end]` of `stream`, with absolute file paths."""

    stream: str
    id: str
    start: float
    end: float
    rows: int
    files: tuple[str, ...]
    fingerprint: str
    safe_through: float | None = None

    def arrived(self) -> PartitionArrived:
        return PartitionArrived(stream=self.stream, partition_id=self.id, start=self.start, end=self.end,
                                rows=self.rows, safe_through=self.safe_through, files=self.files,
                                fingerprint=self.fingerprint)


def partition_id(end: float) -> str:
    """The default partition id, from its end time: `20261126T101500Z`."""
    return dt.datetime.fromtimestamp(end, dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def parse_time(value: Any, name: str) -> float:
    """ISO-8601 (naive = UTC) or epoch seconds → epoch seconds; PartitionRejected naming `name`."""
    try:
        return times.parse_time(value)
    except ValueError as e:
        raise PartitionRejected(f"bad field {name!r}: {e}") from None


def fingerprint(start: float, end: float, rows: int, files: list[tuple[str, Path]]) -> str:
    """sha256 over the interval, the row count and each file's name and bytes."""
    h = hashlib.sha256(json.dumps([round(start, 6), round(end, 6), rows]).encode())
    for name, path in sorted(files):
        h.update(b"\0" + name.encode() + b"\0")
        with open(path, "rb") as f:
            for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


# ---- schema checks --------------------------------------------------------------------------------
def _type_ok(declared: str, arrow_type: Any) -> bool:
    import pyarrow as pa

    d = declared.strip().lower()
    if d == "string":
        return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
    if d == "timestamp":
        return pa.types.is_timestamp(arrow_type) and arrow_type.unit in ("ms", "us")
    if d == "date":
        return pa.types.is_date32(arrow_type)
    if d == "double":
        return pa.types.is_float64(arrow_type)
    if d == "float":
        return pa.types.is_float32(arrow_type)
    if d == "long":
        return pa.types.is_int64(arrow_type)
    if d in ("int", "integer"):
        return pa.types.is_int32(arrow_type)
    if d == "boolean":
        return pa.types.is_boolean(arrow_type)
    if d == "binary":
        return pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)
    if d.startswith("decimal"):
        m = re.match(r"decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)", d)
        p, s = (int(m.group(1)), int(m.group(2))) if m else (10, 0)
        return pa.types.is_decimal(arrow_type) and arrow_type.precision == p and arrow_type.scale == s
    return False


def _arrow_type(declared: str) -> Any:
    import pyarrow as pa

    d = declared.strip().lower()
    simple = {"string": pa.string(), "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.date32(),
              "double": pa.float64(), "float": pa.float32(), "long": pa.int64(), "int": pa.int32(),
              "integer": pa.int32(), "boolean": pa.bool_(), "binary": pa.binary()}
    if d in simple:
        return simple[d]
    m = re.match(r"decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)", d)
    return pa.decimal128(int(m.group(1)), int(m.group(2))) if m else pa.decimal128(10, 0)


def _check_schema(stream: StreamConfig, name: str, schema: Any) -> None:
    declared = stream.schema_
    if not declared:
        return
    have = {f.name: f.type for f in schema}
    missing = [c for c in declared if c not in have]
    extra = [c for c in have if c not in declared]
    wrong = [f"{c} is {have[c]}, declared {declared[c]}" for c in declared if c in have and not _type_ok(declared[c], have[c])]
    problems = []
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    if extra:
        problems.append(f"undeclared column(s) {', '.join(extra)}")
    if wrong:
        problems.append("; ".join(wrong))
    if problems:
        hint = ""
        if any("timestamp[ns" in w for w in wrong):
            hint = " (Spark 3.5 cannot read nanosecond timestamps: write them as us, e.g. coerce_timestamps='us')"
        raise PartitionRejected(f"schema mismatch in {name}: {'; '.join(problems)}{hint}")


def _read_file(stream: StreamConfig, name: str, path: Path) -> tuple[int, Any]:
    """(row count, time column as int64 microseconds) of one data file, checking format and schema."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tcol = stream.time_column
    try:
        if stream.format == "parquet":
            import pyarrow.parquet as pq

            try:
                pf = pq.ParquetFile(path)
            except (pa.ArrowInvalid, OSError) as e:
                raise PartitionRejected(f"wrong format: {name} is not a parquet file ({e})") from None
            _check_schema(stream, name, pf.schema_arrow)
            rows = pf.metadata.num_rows
            times = pf.read(columns=[tcol]).column(tcol) if tcol in pf.schema_arrow.names else None
        else:
            schema = pa.schema([(c, _arrow_type(t)) for c, t in stream.schema_.items()]) if stream.schema_ else None
            if stream.format == "csv":
                import pyarrow.csv as pcsv

                convert = pcsv.ConvertOptions(column_types=schema) if schema is not None else None
                table = pcsv.read_csv(path, convert_options=convert)
            else:
                import pyarrow.json as pjson

                opts = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error") \
                    if schema is not None else None
                table = pjson.read_json(path, parse_options=opts)
            _check_schema(stream, name, table.schema)
            rows = table.num_rows
            times = table.column(tcol) if tcol in table.column_names else None
    except PartitionRejected:
        raise
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, ValueError) as e:
        raise PartitionRejected(f"wrong format: {name} cannot be read as {stream.format} ({e})") from None
    if times is not None and len(times):
        if pa.types.is_timestamp(times.type):
            times = pc.cast(times, pa.timestamp("us", tz=times.type.tz)).cast(pa.int64())
        else:
            raise PartitionRejected(f"schema mismatch in {name}: time column {tcol!r} is {times.type}, not a timestamp")
        if times.null_count:
            raise PartitionRejected(f"rows outside (start, end]: {name} has {times.null_count} row(s) with no {tcol}")
    return rows, times


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def validate_partition(stream: StreamConfig, pid: str, directory: Path, manifest: Any, landing: Path) -> Partition:
    """Check one partition as declared by `manifest` (DESIGN.md §4.3); PartitionRejected if not."""
    import pyarrow.compute as pc

    if not PARTITION_ID.match(pid):
        raise PartitionRejected(f"bad partition id {pid!r}: must match {PARTITION_ID.pattern}")
    if not isinstance(manifest, Mapping):
        raise PartitionRejected(f"malformed manifest: expected a JSON object, got {type(manifest).__name__}")
    missing = [k for k in ("start", "end", "files", "rows") if k not in manifest]
    if missing:
        raise PartitionRejected(f"missing field(s) {', '.join(repr(k) for k in missing)} in {MANIFEST}")
    start = parse_time(manifest["start"], "start")
    end = parse_time(manifest["end"], "end")
    if end <= start:
        raise PartitionRejected(f"end ({manifest['end']}) is not after start ({manifest['start']})")
    safe = manifest.get("safe_through")
    safe_through = None if safe is None else parse_time(safe, "safe_through")
    rows = manifest["rows"]
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise PartitionRejected(f"bad field 'rows': expected a count ≥ 0, got {rows!r}")
    files = manifest["files"]
    if not isinstance(files, list) or not all(isinstance(f, str) and f.strip() for f in files):
        raise PartitionRejected(f"bad field 'files': expected a list of relative file names, got {files!r}")
    if len(set(files)) != len(files):
        raise PartitionRejected("bad field 'files': a file is listed twice")

    root = landing.resolve()
    resolved: list[tuple[str, Path]] = []
    for f in files:
        p = Path(f)
        if p.is_absolute() or ".." in p.parts:
            raise PartitionRejected(f"file outside the landing zone: {f!r} (paths are relative to the partition directory)")
        full = directory / p
        real = full.resolve()
        if not _inside(real, root) or _inside(real, root / QUARANTINE):
            how = "is a symlink to" if full.is_symlink() else "resolves to"
            raise PartitionRejected(f"file outside the landing zone: {f!r} {how} {real}")
        if not real.is_file():
            raise PartitionRejected(f"file missing: {f!r} (in {directory})")
        resolved.append((f, real))

    total = 0
    lo_us, hi_us = round(start * 1e6), round(end * 1e6)
    for name, path in resolved:
        n, times = _read_file(stream, name, path)
        total += n
        if times is not None and len(times):
            tmin, tmax = pc.min(times).as_py(), pc.max(times).as_py()
            if tmin <= lo_us or tmax > hi_us:
                bad = pc.sum(pc.or_(pc.less_equal(times, lo_us), pc.greater(times, hi_us))).as_py()
                raise PartitionRejected(
                    f"rows outside (start, end]: {bad} row(s) of {name} have {stream.time_column} outside "
                    f"({iso(start)}, {iso(end)}] (min {iso(tmin / 1e6)}, max {iso(tmax / 1e6)})")
    if total != rows:
        raise PartitionRejected(f"row count: the manifest says {rows} rows, the files hold {total}")
    return Partition(stream=stream.name, id=pid, start=start, end=end, rows=rows,
                     files=tuple(str(p) for _, p in resolved),
                     fingerprint=fingerprint(start, end, rows, resolved), safe_through=safe_through)


def _free_path(parent: Path, name: str) -> Path:
    """`parent/name`, suffixed `.1`, `.2`… if taken; `parent` is created."""
    parent.mkdir(parents=True, exist_ok=True)
    dest = parent / name
    n = 0
    while dest.exists():
        n += 1
        dest = parent / f"{name}.{n}"
    return dest


def _move(src: Path, dest_parent: Path, name: str) -> Path:
    """Move directory `src` to `dest_parent/name` (suffixed if taken)."""
    dest = _free_path(dest_parent, name)
    shutil.move(str(src), str(dest))
    return dest


class Intake:
    """The landing zone of one warehouse. Thread-safe; see docs/warehouse.md §1."""

    def __init__(self, config: FreshetConfig, state: RecoveryState | None = None) -> None:
        self.config = config
        self.landing = Path(config.warehouse.landing).expanduser().resolve()
        self._lock = threading.RLock()
        self._pending: dict[tuple[str, str], Partition] = {}
        self._loaded: dict[str, dict[str, str]] = {}
        self._configure(config, state)
        self.accepted: Counter[str] = Counter()
        self.quarantined: Counter[str] = Counter()
        self.duplicates: Counter[str] = Counter()
        self.last_rejection: dict[str, str] = {}

    def _configure(self, config: FreshetConfig, state: RecoveryState | None) -> None:
        self.config = config
        self._streams = {s.name: s for s in config.streams}
        # a stream may feed several base tables: a partition is done when all of them loaded it
        self._tables_of: dict[str, list[str]] = {s: [] for s in self._streams}
        self._stream_of_table: dict[str, str] = {}
        for t in config.tables:
            if t.stream:
                self._tables_of.setdefault(t.stream, []).append(t.name)
                self._stream_of_table[t.name] = t.stream
        for ts in self._tables_of.values():
            for t in ts:
                self._loaded.setdefault(t, {})
        if state is not None:
            for t in self._loaded:
                if t in state.tables:
                    self._loaded[t].update(state.tables[t].partitions)
        self._pending = {k: p for k, p in self._pending.items() if k[0] in self._streams}

    def reconfigure(self, config: FreshetConfig, state: RecoveryState | None = None) -> None:
        """Apply a new config (SIGHUP): keep pending partitions of streams that remain."""
        with self._lock:
            self._configure(config, state)

    # ---- queries --------------------------------------------------------------------------------
    def partition(self, stream: str, pid: str) -> Partition:
        with self._lock:
            try:
                return self._pending[(stream, pid)]
            except KeyError:
                raise WarehouseError(f"partition {pid!r} of stream {stream!r} is not pending in the intake") from None

    def loaded_fingerprints(self, stream: str, pid: str) -> dict[str, str]:
        """table → the fingerprint it recorded for `pid` (tables that loaded it)."""
        with self._lock:
            return {t: self._loaded[t][pid] for t in self._tables_of.get(stream, []) if pid in self._loaded[t]}

    def pending(self) -> list[Partition]:
        with self._lock:
            return sorted(self._pending.values(), key=lambda p: (p.stream, p.end, p.start, p.id))

    # ---- discovery ------------------------------------------------------------------------------
    def scan(self) -> list[PartitionArrived]:
        """Discover complete partitions not seen yet; quarantine bad ones (§4.3)."""
        out: list[Partition] = []
        for stream in self._streams:
            sdir = self.landing / stream
            try:
                entries = sorted(os.scandir(sdir), key=lambda e: e.name)
            except (FileNotFoundError, NotADirectoryError):
                continue
            for e in entries:
                if e.name.startswith((".", "_")) or not e.is_dir(follow_symlinks=False):
                    continue
                with self._lock:
                    if (stream, e.name) in self._pending:
                        continue
                    mpath = Path(e.path) / MANIFEST
                    if not mpath.is_file():
                        continue  # not complete yet
                    try:
                        text = mpath.read_text()
                    except OSError as err:
                        log.warning("cannot read %s: %s", mpath, err)
                        continue
                    try:
                        data = json.loads(text)
                    except ValueError as err:
                        self._quarantine(stream, e.name, Path(e.path), f"malformed manifest: {MANIFEST} is not valid JSON ({err})")
                        continue
                    try:
                        p = self._accept(stream, e.name, Path(e.path), data)
                    except OSError as err:  # e.g. the producer is still moving files: next poll
                        log.warning("cannot check partition %s/%s yet: %s", stream, e.name, err)
                        continue
                    if p is not None:
                        out.append(p)
        out.sort(key=lambda p: (p.stream, p.end, p.start, p.id))
        return [p.arrived() for p in out]

    def submit(self, stream: str, manifest: Mapping[str, Any], pid: str | None = None) -> PartitionArrived | None:
        """Accept a POSTed manifest (files already in `landing/<stream>/<id>/`; the id defaults
        to the end time, `20261126T101500Z`).

        Returns the event, or None for an exact duplicate; raises PartitionRejected (the
        partition is quarantined) or UnknownStream.
        """
        if stream not in self._streams:
            raise UnknownStream(f"unknown stream {stream!r} (known: {', '.join(sorted(self._streams)) or 'none'})")
        if not isinstance(manifest, Mapping):
            raise PartitionRejected("malformed manifest: expected a JSON object")
        data = dict(manifest)
        pid = pid or data.pop("id", None)
        data.pop("id", None)
        if pid is None and "end" in data:  # default: the id is the end time, 20261126T101500Z
            with contextlib.suppress(PartitionRejected):
                pid = partition_id(parse_time(data["end"], "end"))
        if not isinstance(pid, str) or not PARTITION_ID.match(pid):
            raise PartitionRejected(f"bad partition id {pid!r}: must match {PARTITION_ID.pattern}")
        directory = self.landing / stream / pid
        with self._lock:
            key = (stream, pid)
            if key in self._pending:
                old = self._pending[key]
                new = validate_partition(self._streams[stream], pid, directory, data, self.landing)
                if new.fingerprint == old.fingerprint:
                    self.duplicates[stream] += 1
                    return None
                raise PartitionRejected(f"partition {pid!r} is already pending with different content")
            p = self._accept(stream, pid, directory, data, raise_on_reject=True)
            if p is None:
                return None
            directory.mkdir(parents=True, exist_ok=True)
            tmp = directory / f".{MANIFEST}.tmp"
            tmp.write_text(json.dumps(data, default=str))
            tmp.replace(directory / MANIFEST)
            return p.arrived()

    def _accept(self, stream: str, pid: str, directory: Path, data: Any, raise_on_reject: bool = False) -> Partition | None:
        try:
            p = validate_partition(self._streams[stream], pid, directory, data, self.landing)
            known = self.loaded_fingerprints(stream, pid)
            if any(fp != p.fingerprint for fp in known.values()):
                raise PartitionRejected(f"partition {pid!r} already loaded with different content")
        except PartitionRejected as err:
            self._quarantine(stream, pid, directory, err.reason, data if raise_on_reject else None)
            if raise_on_reject:
                raise
            return None
        if known and len(known) == len(self._tables_of.get(stream, [])):  # a re-delivery: a no-op
            self.duplicates[stream] += 1
            log.info("partition %s/%s is already loaded (same content): archived", stream, pid)
            if directory.exists():
                _move(directory, self.landing / LOADED / stream, pid)
            return None
        self._pending[(stream, pid)] = p
        self.accepted[stream] += 1
        return p

    def _quarantine(self, stream: str, pid: str, directory: Path, reason: str, manifest: Any = None) -> None:
        self.quarantined[stream] += 1
        self.last_rejection[stream] = reason
        qparent = self.landing / QUARANTINE / stream
        if directory.exists() and _inside(directory.resolve(), self.landing) and not directory.is_symlink():
            dest = _move(directory, qparent, pid)
        else:
            dest = _free_path(qparent, pid)
            dest.mkdir()
            if directory.is_symlink():
                directory.unlink()
        if manifest is not None:
            (dest / MANIFEST).write_text(json.dumps(manifest, default=str))
        (dest / "reason").write_text(reason + "\n")
        log.warning("quarantined partition %s/%s: %s", stream, pid, reason)

    def refuse(self, stream: str, pid: str, reason: str) -> None:
        """The Scheduler refused an accepted partition (e.g. no table reads its stream any more
        after a reload): quarantine it with the reason, as any bad partition."""
        with self._lock:
            self._pending.pop((stream, pid), None)
            self._quarantine(stream, pid, self.landing / stream / pid, reason)

    # ---- after a commit -------------------------------------------------------------------------
    def archive(self, job: StartJob) -> None:
        """A base job ended with its partitions in the Delta log (committed now or before)."""
        stream = self._stream_of_table.get(job.table)
        if stream is not None and job.arrivals:
            self.mark_loaded(job.table, stream, {p.partition_id: p.fingerprint for p in job.arrivals})

    def mark_loaded(self, table: str, stream: str, fingerprints: Mapping[str, str]) -> None:
        """Record ids committed to `table`; archive each directory to `landing/_loaded/<stream>/`
        once every base table of the stream has it."""
        with self._lock:
            self._loaded.setdefault(table, {}).update(fingerprints)
            tables = self._tables_of.get(stream, [table])
            for pid in fingerprints:
                if not all(pid in self._loaded.get(t, {}) for t in tables):
                    continue
                self._pending.pop((stream, pid), None)
                d = self.landing / stream / pid
                if d.is_dir():
                    try:
                        _move(d, self.landing / LOADED / stream, pid)
                    except OSError as err:  # archiving is housekeeping: never fail a committed job
                        log.warning("cannot archive %s: %s", d, err)
