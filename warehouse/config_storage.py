"""Where the warehouse lives (warehouse.config's `warehouse` section): the paths of the tables and
the landing zone, the lease, and the S3A connector for an `s3a://` root (docs/warehouse.md §2)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from warehouse.config_base import Duration, Strict
from warehouse.paths import is_local, split_bucket

__all__ = ["S3Settings", "WarehousePaths", "landing_on_s3"]

_ENDPOINT = re.compile(r"^https?://[A-Za-z0-9.-]+(?::\d{1,5})?/?$|^https?://\[[0-9A-Fa-f:.]+\](?::\d{1,5})?/?$")


def landing_on_s3(landing: str) -> bool:
    """`warehouse.landing: s3a://bucket/prefix` (canonical) or `s3://bucket/prefix`: the same objects."""
    return landing.lower().startswith(("s3://", "s3a://"))


class S3Settings(Strict):
    """The S3A connector for `warehouse.root: s3a://bucket/prefix` (docs/warehouse.md §2): which S3 API,
    how to address buckets, and where the credentials come from — never the credentials themselves."""

    endpoint: str | None = Field(None, description="the S3 API's URL, http(s)://host[:port]; absent: AWS's "
                                                    "endpoint for the region")
    region: str | None = Field(None, pattern=r"^[a-z0-9-]{1,64}$", description="the bucket's region "
                               "(e.g. eu-west-1); absent: us-east-1 with an endpoint, else the SDK finds it")
    path_style: bool = Field(False, description="address buckets as http://host/bucket/key (MinIO, moto, "
                             "Ceph) instead of http://bucket.host/key")
    credentials: Literal["env", "default"] = Field(
        "default", description="env: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) of the "
                               "daemon's environment; default: the AWS SDK's default chain (environment, web "
                               "identity, profile, container, instance)")

    @field_validator("endpoint")
    @classmethod
    def _endpoint_url(cls, endpoint: str | None) -> str | None:
        if endpoint is not None and not _ENDPOINT.match(endpoint.strip()):
            raise ValueError(f"endpoint {endpoint!r} is not an S3 API URL: expected http(s)://host[:port], "
                             f"with no path (the bucket is in warehouse.root)")
        return None if endpoint is None else endpoint.strip().rstrip("/")


class WarehousePaths(Strict):
    root: str = Field("./data", description="where the Delta tables live (path or URI)")
    landing: str = Field("./landing", description="the landing zone producers write partitions into: a "
                         "directory, or s3a://bucket/prefix (s3:// is the same bucket)")
    trace: str | None = Field(None, description="append observed arrivals and job durations here")
    state: str | None = Field(None, description="a local directory for the daemon's own files (operator "
                              "actions, lineage runs, the tuner's trace); default: _freshet under a local root, "
                              "else beside a local landing zone; needed when both are in a bucket")
    lease_timeout: Duration = Field(30.0, gt=0, le=3600, description="seconds without renewal after which "
                                    "another daemon may take over the warehouse lease (ops.lease)")
    s3: S3Settings | None = Field(None, description="the S3 API of an s3a:// root or landing zone (endpoint, "
                                                    "region, path-style access, where credentials come from)")

    @model_validator(mode="after")
    def _s3_root(self) -> WarehousePaths:
        scheme = self.root.split("://", 1)[0].lower() if "://" in self.root else ""
        if self.s3 is not None and scheme != "s3a" and not landing_on_s3(self.landing):
            hint = f": Spark reaches S3 through S3A, write s3a://{self.root.split('://', 1)[1]}" \
                if scheme in ("s3", "s3n") else ""
            raise ValueError(f"s3 configures the S3 API, but root {self.root!r} is not an s3a:// URI, nor is "
                             f"landing {self.landing!r}{hint}")
        if landing_on_s3(self.landing) and not split_bucket(self.landing)[0]:
            raise ValueError(f"landing {self.landing!r} names no bucket: expected s3a://bucket/prefix")
        if self.state is None and not is_local(self.root) and not is_local(self.landing):
            raise ValueError(f"root {self.root!r} and landing {self.landing!r} are both URIs: set warehouse.state "
                             f"to a local directory for the daemon's own files (operator actions, lineage runs, "
                             f"the tuner's trace)")
        if self.state is not None and not is_local(self.state):
            raise ValueError(f"state {self.state!r} must be a local directory, not a URI")
        return self
