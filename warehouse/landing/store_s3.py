"""The landing zone on a bucket: `warehouse.landing: s3a://bucket/prefix` (docs/warehouse.md §3).

The same layout as a local landing zone, as object keys: producers PUT `<prefix>/<stream>/<id>/<file>`
and then, last, `<prefix>/<stream>/<id>/_partition.json` (one PutObject is atomic: the manifest is
there whole or not at all). Archived partitions go to `<prefix>/_loaded/`, quarantined ones to
`<prefix>/_quarantine/`: a scan lists only `<prefix>/<stream>/` with the delimiter `/`, so what was
moved away never costs it a request again.

An object store has no rename: `move` copies each object to its new key, then deletes the manifest
(from then on the partition is gone from the stream's view) and then the rest. Two intakes may
meet on one landing zone (a leader and its successor during a takeover): before moving, a mover
`claim`s the directory by a conditional PutObject of `<dir>/.claim` (`If-None-Match: *`), so of
two movers exactly one copies. A claim left by a mover that died is stale after `CLAIM_STALE`
seconds of the bucket's own clock (its `Last-Modified` against the `Date` of the same answer: no
two hosts' clocks are compared) and is then taken over with `If-Match` on its ETag — again by one.
A mover that died after the manifest's deletion leaves data files without a manifest: never
loaded (a partition is complete only with its manifest), and left for an operator to delete.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import os
import posixpath
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from warehouse.lake.s3a import s3_status
from warehouse.landing.manifest import MANIFEST, PartitionRejected
from warehouse.landing.seam import DataFile
from warehouse.paths import split_bucket

__all__ = ["CLAIM", "CLAIM_STALE", "S3Store"]

CLAIM = ".claim"
CLAIM_STALE = 300.0  # seconds of the bucket's clock after which a claim's holder is presumed dead
OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _oserror(err: Exception, what: str) -> OSError:
    """A failed request as the OSError a local file operation raises (404: FileNotFoundError)."""
    if s3_status(err) == 404:
        code = getattr(err, "response", {}).get("Error", {}).get("Code")
        return FileNotFoundError(f"{what}: no such bucket" if code == "NoSuchBucket" else f"{what}: no such object")
    return OSError(f"{what}: {err}")


class S3Store:
    """A landing zone under `s3://bucket/prefix`, through the boto3 `client`."""

    remote = True

    def __init__(self, client: Any, bucket: str, prefix: str = "", *, owner: str = OWNER) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix.strip("/")
        self.owner = owner
        self.location = f"s3a://{bucket}/{self.prefix}" if self.prefix else f"s3a://{bucket}"

    # ---- names ----
    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}".strip("/") if self.prefix else rel.strip("/")

    def _dir(self, rel: str) -> str:
        k = self.key(rel)
        return f"{k}/" if k else ""

    def uri(self, key: str) -> str:
        return f"s3a://{self.bucket}/{key}"

    def where(self, rel: str) -> str:
        return self.uri(self.key(rel))

    def _key_of(self, uri: str) -> str:
        bucket, key = split_bucket(uri)
        assert bucket == self.bucket, uri
        return key

    # ---- listing ----
    def _pages(self, prefix: str, delimiter: str | None = None, limit: int | None = None) -> Iterator[dict]:
        kw: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if delimiter:
            kw["Delimiter"] = delimiter
        if limit:
            kw["MaxKeys"] = limit
        try:
            while True:
                page = self.client.list_objects_v2(**kw)
                yield page
                if limit or not page.get("IsTruncated"):
                    return
                kw["ContinuationToken"] = page["NextContinuationToken"]
        except Exception as err:
            if isinstance(err, OSError):
                raise
            raise _oserror(err, f"cannot list {self.uri(prefix)}") from err

    def objects(self, rel: str) -> list[dict]:
        """Every object under the directory `rel` (Key, Size, ETag…)."""
        return [o for page in self._pages(self._dir(rel)) for o in page.get("Contents", [])]

    def children(self, rel: str) -> list[str] | None:
        """The sub-directories of `rel`, sorted: one delimited listing (per 1,000 of them)."""
        base = self._dir(rel)
        names = [p["Prefix"][len(base):].rstrip("/") for page in self._pages(base, "/")
                 for p in page.get("CommonPrefixes", [])]
        return sorted(n for n in names if n)

    def is_dir(self, rel: str) -> bool:
        return any(page.get("KeyCount", len(page.get("Contents", []))) for page in self._pages(self._dir(rel), limit=1))

    def is_file(self, rel: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self.key(rel))
            return True
        except Exception as err:
            if s3_status(err) == 404:
                return False
            raise _oserror(err, f"cannot read {self.where(rel)}") from err

    # ---- objects ----
    def _get(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as err:
            raise _oserror(err, f"cannot read {self.uri(key)}") from err

    def read_text(self, rel: str) -> str:
        return self._get(self.key(rel)).decode()

    def write_text(self, rel: str, text: str, *, atomic: bool = False) -> None:
        """One PutObject: atomic on S3 either way."""
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key(rel), Body=text.encode())
        except Exception as err:
            raise _oserror(err, f"cannot write {self.where(rel)}") from err

    def data_files(self, directory: str, names: tuple[str, ...]) -> list[DataFile]:
        """One listing of the partition directory gives every file's presence and size."""
        base = self._dir(directory)
        sizes = {o["Key"]: int(o["Size"]) for o in self.objects(directory)}
        out = []
        for f in names:
            norm = posixpath.normpath(f.replace("\\", "/"))
            if norm.startswith(("../", "/")) or norm in ("..", "."):
                raise PartitionRejected(f"file outside the landing zone: {f!r} resolves to {norm}", "outside_landing")
            key = base + norm
            if key not in sizes or norm == CLAIM:
                raise PartitionRejected(f"file missing: {f!r} (in {self.uri(base)})", "file_missing")
            out.append(DataFile(f, self.uri(key), sizes[key]))
        return out

    def read_bytes(self, f: DataFile) -> bytes:
        return self._get(self._key_of(f.uri))

    def local_file(self, f: DataFile, tmp: Path) -> Path:
        """A large file, downloaded once into `tmp` to be read from disk."""
        dest = tmp / f"{len(list(tmp.iterdir()))}-{posixpath.basename(f.name)}"
        try:
            self.client.download_file(self.bucket, self._key_of(f.uri), str(dest))
        except Exception as err:
            raise _oserror(err, f"cannot read {f.uri}") from err
        return dest

    def arrow_source(self, uri: str) -> Any:
        import pyarrow as pa

        return pa.BufferReader(self._get(self._key_of(uri)))

    # ---- claim and move ----
    def claim(self, rel: str) -> bool:
        """Take the directory `rel` for a move: a conditional PutObject of `rel/.claim`. True for
        exactly one of any number of callers; a claim older than CLAIM_STALE is taken over."""
        key = self._dir(rel) + CLAIM
        body = json.dumps({"owner": self.owner, "at": time.time()}).encode()
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*")
            return True
        except Exception as err:
            if s3_status(err) not in (409, 412):
                raise _oserror(err, f"cannot claim {self.uri(key)}") from err
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as err:
            if s3_status(err) == 404:  # released meanwhile: the directory has moved
                return False
            raise _oserror(err, f"cannot claim {self.uri(key)}") from err
        date = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        now = email.utils.parsedate_to_datetime(date).timestamp() if date else time.time()
        if now - head["LastModified"].timestamp() < CLAIM_STALE:
            return False
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body, IfMatch=head["ETag"])
            return True
        except Exception as err:
            if s3_status(err) in (404, 409, 412):
                return False
            raise _oserror(err, f"cannot claim {self.uri(key)}") from err

    def _free(self, parent: str, name: str) -> str:
        rel = f"{parent}/{name}"
        n = 0
        while self.is_dir(rel):
            n += 1
            rel = f"{parent}/{name}.{n}"
        return rel

    def move(self, rel: str, parent: str, name: str) -> str:
        """Claim `rel`, copy its objects under `parent/name` (suffixed if taken), delete the
        manifest, then the rest, then the claim. FileNotFoundError when it is gone or another
        intake holds its claim (the same as a local rename losing a race)."""
        src = self._dir(rel)
        objs = [o["Key"] for o in self.objects(rel)]
        if not [k for k in objs if k != src + CLAIM]:
            raise FileNotFoundError(f"{self.uri(src)}: no such directory")
        if not self.claim(rel):
            raise FileNotFoundError(f"{self.uri(src)}: being moved by another intake")
        objs = [o["Key"] for o in self.objects(rel) if o["Key"] != src + CLAIM]  # as of the claim
        if not objs:  # moved by another intake between the listing and the claim
            self.client.delete_object(Bucket=self.bucket, Key=src + CLAIM)
            raise FileNotFoundError(f"{self.uri(src)}: no such directory")
        dest = self._free(parent, name)
        dkey = self._dir(dest)
        try:
            for k in objs:
                self.client.copy_object(Bucket=self.bucket, Key=dkey + k[len(src):],
                                        CopySource={"Bucket": self.bucket, "Key": k})
            for k in sorted(objs, key=lambda k: k != src + MANIFEST):  # the manifest first
                self.client.delete_object(Bucket=self.bucket, Key=k)
            self.client.delete_object(Bucket=self.bucket, Key=src + CLAIM)
        except Exception as err:
            with contextlib.suppress(Exception):  # a later move starts again: what is left, to a new name
                self.client.delete_object(Bucket=self.bucket, Key=src + CLAIM)
            raise _oserror(err, f"cannot move {self.uri(src)} to {self.uri(dkey)}") from err
        return dest

    def quarantine(self, rel: str, parent: str, name: str, move: bool) -> str:
        """Move `rel` into `parent`, or (nothing to move) name a free directory there: it exists
        once the reason is written into it."""
        if move and any(o["Key"] != self._dir(rel) + CLAIM for o in self.objects(rel)):
            return self.move(rel, parent, name)
        return self._free(parent, name)
