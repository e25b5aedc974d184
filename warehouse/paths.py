"""The one resolver of local paths (docs/architecture.md): everything that touches the warehouse root or
the landing zone on this machine — the lease, the Delta tables, the operator-actions store, the
tuner's trace — asks `local_path`, so they all agree on where a configured location is.

A location is *local* when it is a plain path (`~/wh`, `./data`, `/srv/wh`) or a `file:` URI
(`file:///srv/wh`, `file:/srv/wh`, `file://localhost/srv/wh`); anything else with a scheme
(`s3a://bucket/wh`, `abfss://…`, `hdfs://…`) is a URI that Spark reads and is left alone.
A local one is resolved once: `file:` removed (percent escapes decoded), `~` expanded, and a
relative path taken from the current directory — the directory `freshet run` was started in,
as the config's `./data` default intends — then made absolute.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

__all__ = ["is_local", "local_path", "split_bucket"]

_FILE = re.compile(r"^file:(//localhost(?=/)|//)?", re.IGNORECASE)


def is_local(location: str) -> bool:
    """A plain path or a `file:` URI: this process reads and writes it itself."""
    return "://" not in location or _FILE.match(location) is not None


def local_path(location: str) -> Path | None:
    """The absolute local path `location` names, or None for a URI that is not `file:`."""
    m = _FILE.match(location)
    if m is not None:
        location = unquote(location[m.end():])
    elif "://" in location:
        return None
    return Path(location).expanduser().resolve()


def split_bucket(uri: str) -> tuple[str, str]:
    """(bucket, the rest: a prefix or key, as written) of an object-store URI (`s3a://bucket/…`);
    the bucket is '' when the URI names none."""
    bucket, _, rest = uri.split("://", 1)[1].partition("/")
    return bucket, rest


def state_dir(root: str, landing: str, state: str | None = None) -> Path | None:
    """Where the daemon keeps its own files (operator actions, lineage runs, the tuner's trace):
    `warehouse.state` when set, else `_freshet` under the warehouse root when it is local, else
    beside the landing zone; None when both are URIs and no state directory is set (the config
    refuses that)."""
    if state is not None:
        return local_path(state)
    for location in (root, landing):
        if (base := local_path(location)) is not None:
            return base / "_freshet"
    return None
