"""Where the landing zone's objects live: the seam's (`warehouse.landing.seam`) local directory,
and `open_store`, which picks the implementation from `warehouse.landing` (docs/warehouse.md §3).

`LocalStore` is the directory the intake has always read, with the same calls in the same order.
Its `claim` always grants: a directory's rename is atomic and is itself the claim, so a second
mover's rename fails with `FileNotFoundError`.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.config_storage import landing_on_s3
from warehouse.errors import ConfigError
from warehouse.landing.manifest import QUARANTINE, PartitionRejected
from warehouse.landing.seam import DataFile, LandingStore
from warehouse.paths import local_path, split_bucket

if TYPE_CHECKING:
    from warehouse.config_storage import WarehousePaths

__all__ = ["LocalStore", "open_store"]


def open_store(paths: WarehousePaths) -> LandingStore:
    """The store of `paths.landing`: a local directory (a path or `file:` URI), or a bucket."""
    landing = paths.landing
    if landing_on_s3(landing):
        from warehouse.config_storage import S3Settings
        from warehouse.lake.s3a import s3_client
        from warehouse.landing.store_s3 import S3Store

        bucket, prefix = split_bucket(landing)  # (the config refuses a landing zone naming no bucket)
        return S3Store(s3_client(paths.s3 or S3Settings(), 50.0, attempts=3), bucket, prefix)
    root = local_path(landing)
    if root is None:
        raise ConfigError(f"warehouse.landing: {landing!r}: the landing zone must be a local path, a file: URI "
                          "or an s3a://bucket/prefix (the intake reads and moves its files)")
    return LocalStore(root)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


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


class LocalStore:
    """A landing zone in a local directory `root` (resolved, absolute)."""

    remote = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def _path(self, rel: str | Path) -> Path:
        return rel if isinstance(rel, Path) else self.root / rel if rel else self.root

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def where(self, rel: str) -> str:
        return str(self._path(rel))

    def children(self, rel: str) -> list[str] | None:
        """Sub-directories (not symlinks) of `rel`, sorted; None when `rel` is no directory."""
        try:
            entries = sorted(os.scandir(self._path(rel)), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return [e.name for e in entries if e.is_dir(follow_symlinks=False)]

    def is_file(self, rel: str) -> bool:
        return self._path(rel).is_file()

    def is_dir(self, rel: str) -> bool:
        return self._path(rel).is_dir()

    def read_text(self, rel: str) -> str:
        return self._path(rel).read_text()

    def write_text(self, rel: str, text: str, *, atomic: bool = False) -> None:
        """Write `rel`; `atomic`: its directory created, written beside it and renamed into place."""
        path = self._path(rel)
        if not atomic:
            path.write_text(text)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.tmp"
        tmp.write_text(text)
        tmp.replace(path)

    def data_files(self, directory: str | Path, names: tuple[str, ...]) -> list[DataFile]:
        """Each file resolved (symlinks followed) and checked to be a regular file inside the
        landing zone and outside its quarantine."""
        root = str(self.root)
        quarantine = os.path.join(root, QUARANTINE)
        base = self._path(directory)
        out = []
        for f in names:
            full = os.path.join(base, f)
            real = os.path.realpath(full)
            if not _under(real, root) or _under(real, quarantine):
                how = "is a symlink to" if os.path.islink(full) else "resolves to"
                raise PartitionRejected(f"file outside the landing zone: {f!r} {how} {real}", "outside_landing")
            try:
                st = os.stat(real)
            except OSError:
                st = None
            if st is None or not stat.S_ISREG(st.st_mode):
                raise PartitionRejected(f"file missing: {f!r} (in {base})", "file_missing")
            out.append(DataFile(f, real, st.st_size, Path(real)))
        return out

    def read_bytes(self, f: DataFile) -> bytes:
        assert f.path is not None
        return f.path.read_bytes()

    def local_file(self, f: DataFile, tmp: Path) -> Path:
        assert f.path is not None
        return f.path

    def arrow_source(self, uri: str) -> Any:
        return uri

    def claim(self, rel: str) -> bool:
        return True  # the rename is atomic: a second mover finds the directory gone

    def move(self, rel: str, parent: str, name: str) -> str:
        return self._rel(_move(self._path(rel), self._path(parent), name))

    def quarantine(self, rel: str, parent: str, name: str, move: bool) -> str:
        """Move `rel` into `parent` when it is a directory inside the landing zone; else make an
        empty one there (and remove a symlink standing at `rel`: it is never followed out)."""
        d = self._path(rel)
        if move and d.exists() and _inside(d.resolve(), self.root) and not d.is_symlink():
            return self.move(rel, parent, name)
        dest = _free_path(self._path(parent), name)
        dest.mkdir()
        if move and d.is_symlink():
            d.unlink()
        return self._rel(dest)
