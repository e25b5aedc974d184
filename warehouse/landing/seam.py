"""The one seam under the landing zone (docs/warehouse.md §3): what the intake
(`warehouse.landing.intake`) and the validator (`warehouse.landing.manifest`) may ask of the place
partitions land in, addressed by *relative names* (`m/m-0001`, `_quarantine/m/m-0001/reason`,
posix separators, '' for the root):

* `children(rel)` — the sub-directories of `rel` (on S3: one delimited listing, `CommonPrefixes`);
* `is_file`, `is_dir`, `read_text`, `write_text` — one object each;
* `data_files(directory, names)` — a manifest's data files, with their sizes and the location a
  loader reads (a local path, or `s3a://bucket/key`), refusing a path outside the landing zone or
  a file missing (`PartitionRejected`); `read_bytes`, `local_file`, `arrow_source` read one;
* `move(rel, parent, name)` — a partition directory to `parent/name` (suffixed `.1`, `.2`… if
  taken): a rename on a disk, copies and deletes on S3, after a `claim`;
* `quarantine(rel, parent, name, move)` — `move`, or (not movable) a new empty directory there;
* `claim(rel)` — the right to move `rel` out of the landing zone: exactly one of the intakes
  sharing a landing zone gets it.

Implementations: `warehouse.landing.store.LocalStore` (a directory) and
`warehouse.landing.store_s3.S3Store` (a bucket); `warehouse.landing.store.open_store` picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["DataFile", "LandingStore"]


@dataclass(frozen=True, slots=True)
class DataFile:
    """One data file a manifest names: `name` as written in it, `uri` the loader reads (an absolute
    path, or `s3a://bucket/key`), its `size` in bytes, `path` when it is on this machine."""

    name: str
    uri: str
    size: int
    path: Path | None = None


class LandingStore(Protocol):
    """The operations the intake needs of a landing zone; see the module docstring."""

    location: str  # for messages: the directory, or s3a://bucket/prefix
    remote: bool  # files are read over the network (validation reads each once, into memory)

    def where(self, rel: str) -> str: ...
    def children(self, rel: str) -> list[str] | None: ...
    def is_file(self, rel: str) -> bool: ...
    def is_dir(self, rel: str) -> bool: ...
    def read_text(self, rel: str) -> str: ...
    def write_text(self, rel: str, text: str, *, atomic: bool = False) -> None: ...
    def data_files(self, directory: str, names: tuple[str, ...]) -> list[DataFile]: ...
    def read_bytes(self, f: DataFile) -> bytes: ...
    def local_file(self, f: DataFile, tmp: Path) -> Path: ...
    def arrow_source(self, uri: str) -> Any: ...
    def claim(self, rel: str) -> bool: ...
    def move(self, rel: str, parent: str, name: str) -> str: ...
    def quarantine(self, rel: str, parent: str, name: str, move: bool) -> str: ...
