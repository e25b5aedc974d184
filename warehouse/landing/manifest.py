"""Partition manifests and their one validator (docs/warehouse.md §3).

A manifest declares a partition of a stream: `{"start", "end", "files", "rows", "safe_through"?}`
(plus `"id"` when POSTed). The same two functions check it whether it was dropped into the landing
zone as `_partition.json` or POSTed to the HTTP API:

1. `parse_manifest(data, pid)` — the declaration alone, pure: an object with exactly the known
   fields, a usable id, times that parse, `end > start`, a row count, file names relative to the
   partition directory.
2. `validate_partition(stream, manifest, directory, store, now)` — the declaration against the
   stream and the files, read through the landing zone's store (`warehouse.landing.seam`): `end`
   at most `max_future_skew` beyond `now` (freshness never runs ahead of real time), files inside
   the landing root, format, schema, every row's time in `(start, end]`, the row count, and a
   content fingerprint.

Both raise `PartitionRejected(reason, kind)`; `kind` is one of `REJECTION_KINDS` (a metric label).
What the intake knows beyond one partition — ids already pending or loaded, overlapping windows —
is checked by `warehouse.landing.intake.Intake`.

Validation reads Parquet metadata and the time column only, with pyarrow: no Spark read, which
would cost far more than the check.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse import times
from warehouse.config import StreamConfig
from warehouse.errors import WarehouseError
from warehouse.events import PartitionArrived
from warehouse.times import iso

if TYPE_CHECKING:
    from warehouse.landing.seam import LandingStore

__all__ = [
    "FIELDS",
    "JSON_SCHEMA",
    "MANIFEST",
    "PARTITION_ID",
    "REJECTION_KINDS",
    "Manifest",
    "Partition",
    "PartitionRejected",
    "fingerprint",
    "manifest_id",
    "parse_manifest",
    "parse_time",
    "partition_id",
    "usable_id",
    "validate_partition",
]

MANIFEST = "_partition.json"
QUARANTINE = "_quarantine"
SMALL_FILE = 8 << 20  # bytes: a Parquet file up to this size is read once, then parsed and hashed in memory
PARTITION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=:+-]{0,127}$")
FIELDS = ("id", "start", "end", "files", "rows", "safe_through")

#: Why a partition was rejected — the `kind` of `PartitionRejected`, and a metric label:
#: malformed (fields, types, times, end ≤ start), bad_id, outside_landing (a path escaping the
#: landing zone), file_missing, bad_data (format, schema, rows outside (start, end], row count),
#: future (end beyond the clock + max_future_skew), conflict (the id is already pending or loaded
#: with other content), overlap (the window overlaps another partition of the stream).
REJECTION_KINDS = ("malformed", "bad_id", "outside_landing", "file_missing", "bad_data", "future",
                   "conflict", "overlap")


class PartitionRejected(WarehouseError):
    """A partition cannot be loaded as declared; `reason` says why, `kind` is one of REJECTION_KINDS.

    `quarantined` is False when the rejection names no partition the intake could quarantine (no
    usable id): the caller logs and counts it instead. `partition` is the id, once known.
    """

    def __init__(self, reason: str, kind: str = "bad_data", *, quarantined: bool = True,
                 partition: str | None = None) -> None:
        assert kind in REJECTION_KINDS, kind
        super().__init__(reason)
        self.kind, self.quarantined, self.partition = kind, quarantined, partition


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed manifest: the declaration of one partition, not yet checked against its files."""

    id: str
    start: float
    end: float
    files: tuple[str, ...]
    rows: int
    safe_through: float | None = None


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


#: The manifest as a JSON Schema (the OpenAPI request body of POST /v1/streams/{stream}/partitions).
JSON_SCHEMA: dict[str, Any] = {
    "title": "Manifest",
    "type": "object",
    "additionalProperties": False,
    "required": ["start", "end", "files", "rows"],
    "properties": {
        "id": {"type": "string", "pattern": PARTITION_ID.pattern,
               "description": "partition id: the directory landing/<stream>/<id>/ holding the files; "
                              "default: the end time, 20261126T101500Z"},
        "start": {"anyOf": [{"type": "string"}, {"type": "number"}],
                  "description": "event time interval (start, end]: ISO-8601 (naive = UTC) or epoch seconds"},
        "end": {"anyOf": [{"type": "string"}, {"type": "number"}],
                "description": "at most the stream's max_future_skew beyond the daemon's clock"},
        "files": {"type": "array", "items": {"type": "string"},
                  "description": "data files, relative to the partition directory; [] for an empty partition"},
        "rows": {"type": "integer", "minimum": 0, "description": "row count the files must hold"},
        "safe_through": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}],
                         "description": "punctuation: nothing at or before it arrives later (§2.2)"},
    },
}


def partition_id(end: float) -> str:
    """The default partition id, from its end time: `20261126T101500Z`."""
    return dt.datetime.fromtimestamp(end, dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def usable_id(pid: Any) -> bool:
    """Whether `pid` names a directory inside `landing/<stream>/` that the intake may own: one path
    component, not reserved (`.x`, `_quarantine`). A bad id that is usable is quarantined under its
    own name; any other (`../x`, `a/b`, not a string) names no partition and is only refused."""
    return (isinstance(pid, str) and 0 < len(pid.encode()) <= 200 and not pid.startswith((".", "_"))
            and not any(c in pid for c in "/\\\0"))


def parse_time(value: Any, name: str) -> float:
    """ISO-8601 (naive = UTC) or epoch seconds → epoch seconds; PartitionRejected naming `name`."""
    try:
        return times.parse_time(value)
    except ValueError as e:
        raise PartitionRejected(f"bad field {name!r}: {e}", "malformed") from None


def manifest_id(data: Any) -> str:
    """The id a POSTed manifest names: its `id`, else its end time (`20261126T101500Z`).

    PartitionRejected with `quarantined=False` when it names no directory the intake may own
    (not an object, no id and no valid end, an id such as `../x`): such a request is refused,
    logged and counted, and nothing is quarantined.
    """
    if not isinstance(data, Mapping):
        raise PartitionRejected(f"malformed manifest: expected a JSON object, got {type(data).__name__}",
                                "malformed", quarantined=False)
    pid = data.get("id")
    if pid is None:
        if "end" not in data:
            raise PartitionRejected("missing field(s) 'id' and 'end'", "malformed", quarantined=False)
        try:
            pid = partition_id(times.parse_time(data["end"]))
        except (ValueError, OverflowError, OSError) as e:
            raise PartitionRejected(f"bad field 'end': {e}", "malformed", quarantined=False) from None
    if not usable_id(pid):
        raise PartitionRejected(f"bad partition id {pid!r}: must match {PARTITION_ID.pattern}", "bad_id",
                                quarantined=False)
    return pid


def parse_manifest(data: Any, pid: str) -> Manifest:
    """Check the declaration of partition `pid` alone (step 1 of the module docstring): `pid` is
    the directory's name (a file drop) or `manifest_id(data)` (a POST). PartitionRejected if
    anything is wrong."""
    if not isinstance(data, Mapping):
        raise PartitionRejected(f"malformed manifest: expected a JSON object, got {type(data).__name__}",
                                "malformed")
    if not PARTITION_ID.match(pid):
        raise PartitionRejected(f"bad partition id {pid!r}: must match {PARTITION_ID.pattern}", "bad_id")
    declared = data.get("id")
    if declared is not None and declared != pid:
        raise PartitionRejected(f"bad field 'id': {declared!r} is not the partition directory {pid!r}",
                                "malformed")
    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        raise PartitionRejected(f"unknown field(s) {', '.join(repr(k) for k in unknown)} in the manifest "
                                f"(known: {', '.join(FIELDS)})", "malformed")
    missing = [k for k in ("start", "end", "files", "rows") if k not in data]
    if missing:
        raise PartitionRejected(f"missing field(s) {', '.join(repr(k) for k in missing)} in {MANIFEST}", "malformed")
    start = parse_time(data["start"], "start")
    end = parse_time(data["end"], "end")
    if end <= start:
        raise PartitionRejected(f"end ({data['end']}) is not after start ({data['start']})", "malformed")
    safe = data.get("safe_through")
    safe_through = None if safe is None else parse_time(safe, "safe_through")
    rows = data["rows"]
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise PartitionRejected(f"bad field 'rows': expected a count ≥ 0, got {rows!r}", "malformed")
    files = data["files"]
    if not isinstance(files, list) or not all(isinstance(f, str) and f.strip() for f in files):
        raise PartitionRejected(f"bad field 'files': expected a list of relative file names, got {files!r}",
                                "malformed")
    if len(set(files)) != len(files):
        raise PartitionRejected("bad field 'files': a file is listed twice", "malformed")
    for f in files:
        p = Path(f)
        if p.is_absolute() or ".." in p.parts or "\0" in f:
            raise PartitionRejected(f"file outside the landing zone: {f!r} (paths are relative to the "
                                    "partition directory)", "outside_landing")
    return Manifest(id=pid, start=start, end=end, files=tuple(files), rows=rows, safe_through=safe_through)


def fingerprint(start: float, end: float, rows: int, files: list[tuple[str, Path]],
                contents: Mapping[str, bytes] | None = None) -> str:
    """sha256 over the interval, the row count and each file's name and bytes (`contents[name]`
    when the file was already read)."""
    h = hashlib.sha256(json.dumps([round(start, 6), round(end, 6), rows]).encode())
    for name, path in sorted(files):
        h.update(b"\0" + name.encode() + b"\0")
        data = contents.get(name) if contents else None
        if data is not None:
            h.update(data)
            continue
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
    have = dict(zip(schema.names, schema.types, strict=True))
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


def _parquet_time_bounds(pf: Any, schema: Any, tcol: str) -> tuple[int, int] | None:
    """(min, max) of the time column in microseconds from the row groups' statistics, without
    reading any data; None when a row group has no statistics or nulls (then the column is read)."""
    import pyarrow as pa

    typ = schema.field(tcol).type
    factor = {"ms": 1000, "us": 1}.get(typ.unit) if pa.types.is_timestamp(typ) else None
    md = pf.metadata
    ci = next((i for i in range(md.num_columns) if md.schema.column(i).path == tcol), None)
    if factor is None or ci is None or md.num_row_groups == 0:
        return None
    lo = hi = None
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(ci).statistics
        if st is None or not st.has_min_max or st.null_count is None or st.null_count > 0:
            return None
        lo = st.min_raw if lo is None else min(lo, st.min_raw)
        hi = st.max_raw if hi is None else max(hi, st.max_raw)
    assert lo is not None and hi is not None
    return lo * factor, hi * factor


def _times_us(name: str, tcol: str, ts: Any) -> Any:
    """The time column as int64 microseconds; PartitionRejected for a non-timestamp or nulls."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_timestamp(ts.type):
        raise PartitionRejected(f"schema mismatch in {name}: time column {tcol!r} is {ts.type}, not a timestamp")
    if ts.null_count:
        raise PartitionRejected(f"rows outside (start, end]: {name} has {ts.null_count} row(s) with no {tcol}")
    return pc.cast(ts, pa.timestamp("us", tz=ts.type.tz)).cast(pa.int64())


def _read_file(stream: StreamConfig, name: str, path: Path, data: bytes | None = None) -> tuple[int, Any]:
    """(row count, time column) of one data file (`data`: its bytes, when read into memory), checking
    format and schema. The time column is int64 microseconds, or only its (min, max) when Parquet
    statistics give them; None if absent."""
    import pyarrow as pa

    tcol = stream.time_column
    try:
        if stream.format == "parquet":
            import pyarrow.parquet as pq

            try:
                pf = pq.ParquetFile(path if data is None else pa.BufferReader(data))
            except (pa.ArrowInvalid, OSError) as e:
                raise PartitionRejected(f"wrong format: {name} is not a parquet file ({e})") from None
            schema = pf.schema_arrow  # built on every access: once
            _check_schema(stream, name, schema)
            rows = pf.metadata.num_rows
            if tcol not in schema.names or rows == 0:
                return rows, None
            bounds = _parquet_time_bounds(pf, schema, tcol)
            if bounds is not None:
                return rows, bounds
            ts = pf.read(columns=[tcol], use_threads=False).column(tcol)
        else:
            schema = pa.schema([(c, _arrow_type(t)) for c, t in stream.schema_.items()]) if stream.schema_ else None
            if stream.format == "csv":
                import pyarrow.csv as pcsv

                convert = pcsv.ConvertOptions(column_types=schema) if schema is not None else None
                table = pcsv.read_csv(path if data is None else pa.BufferReader(data), convert_options=convert)
            else:
                import pyarrow.json as pjson

                opts = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error") \
                    if schema is not None else None
                table = pjson.read_json(path if data is None else pa.BufferReader(data), parse_options=opts)
            _check_schema(stream, name, table.schema)
            rows = table.num_rows
            ts = table.column(tcol) if tcol in table.column_names else None
    except PartitionRejected:
        raise
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, ValueError) as e:
        raise PartitionRejected(f"wrong format: {name} cannot be read as {stream.format} ({e})") from None
    if ts is None or not len(ts):
        return rows, None
    return rows, _times_us(name, tcol, ts)


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    d, rest = divmod(s, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    out = "".join(f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s")) if v)
    return out or f"{seconds:g}s"


def validate_partition(stream: StreamConfig, manifest: Manifest, directory: str, store: LandingStore,
                       now: float) -> Partition:
    """Check `manifest` against `stream` and the files in `directory` of the landing zone `store`
    (`warehouse.landing.seam`; `directory` relative to it) — step 2 of the module docstring — with
    `now` the daemon's clock; PartitionRejected if the partition cannot be loaded as declared."""
    import pyarrow as pa
    import pyarrow.compute as pc

    start, end, rows = manifest.start, manifest.end, manifest.rows
    if end > now + stream.max_future_skew:
        raise PartitionRejected(
            f"end {iso(end)} is {_duration(end - now)} beyond the daemon's clock ({iso(now, 'seconds')}); "
            f"stream {stream.name!r} allows {_duration(stream.max_future_skew)} (max_future_skew)", "future")
    found = store.data_files(directory, manifest.files)

    total = 0
    lo_us, hi_us = round(start * 1e6), round(end * 1e6)
    contents: dict[str, bytes] = {}  # small files are read once: parsed and hashed from memory
    resolved: list[tuple[str, Path]] = []  # (name, a path on this machine) of the others
    with contextlib.ExitStack() as stack:
        for f in found:
            if f.size <= SMALL_FILE and (stream.format == "parquet" or store.remote):
                contents[f.name] = store.read_bytes(f)
                path = f.path or Path(f.uri)
            else:  # a large file on a bucket: downloaded once, to a directory removed at the end
                path = store.local_file(f, Path(stack.enter_context(tempfile.TemporaryDirectory())))
            resolved.append((f.name, path))
            data = contents.get(f.name)
            n, ts = _read_file(stream, f.name, path, data)
            total += n
            if ts is None:
                continue
            tmin, tmax = ts if isinstance(ts, tuple) else (pc.min(ts).as_py(), pc.max(ts).as_py())
            if tmin <= lo_us or tmax > hi_us:
                if isinstance(ts, tuple):  # the statistics say some rows are outside: count them
                    import pyarrow.parquet as pq

                    tcol = stream.time_column
                    src = path if data is None else pa.BufferReader(data)
                    ts = _times_us(f.name, tcol, pq.read_table(src, columns=[tcol]).column(tcol))
                bad = pc.sum(pc.or_(pc.less_equal(ts, lo_us), pc.greater(ts, hi_us))).as_py()
                raise PartitionRejected(
                    f"rows outside (start, end]: {bad} row(s) of {f.name} have {stream.time_column} outside "
                    f"({iso(start)}, {iso(end)}] (min {iso(tmin / 1e6)}, max {iso(tmax / 1e6)})")
        if total != rows:
            raise PartitionRejected(f"row count: the manifest says {rows} rows, the files hold {total}")
        digest = fingerprint(start, end, rows, resolved, contents)
    return Partition(stream=stream.name, id=manifest.id, start=start, end=end, rows=rows,
                     files=tuple(f.uri for f in found), fingerprint=digest, safe_through=manifest.safe_through)
