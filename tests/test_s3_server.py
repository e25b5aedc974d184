"""The S3 API the object-storage tests run against (tests/helpers_s3.py) answers the conditional
writes a lease on a bucket relies on: create-if-absent (`If-None-Match: *`) and
replace-if-unchanged (`If-Match: <ETag>`) refuse with 412 Precondition Failed."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.helpers_s3 import S3Server


def _status(err: ClientError) -> tuple[int, str]:
    return err.response["ResponseMetadata"]["HTTPStatusCode"], err.response["Error"]["Code"]


def test_create_if_absent_refuses_the_second_writer(s3: S3Server) -> None:
    c = s3.client()
    c.put_object(Bucket=s3.bucket, Key="_freshet/lease", Body=b"daemon-a", IfNoneMatch="*")
    with pytest.raises(ClientError) as exc:
        c.put_object(Bucket=s3.bucket, Key="_freshet/lease", Body=b"daemon-b", IfNoneMatch="*")
    assert _status(exc.value) == (412, "PreconditionFailed")
    assert c.get_object(Bucket=s3.bucket, Key="_freshet/lease")["Body"].read() == b"daemon-a"


def test_replace_if_unchanged_refuses_a_stale_etag(s3: S3Server) -> None:
    c = s3.client()
    first = c.put_object(Bucket=s3.bucket, Key="_freshet/lease", Body=b"a, renewed 0", IfNoneMatch="*")["ETag"]
    second = c.put_object(Bucket=s3.bucket, Key="_freshet/lease", Body=b"a, renewed 1", IfMatch=first)["ETag"]
    assert second != first
    with pytest.raises(ClientError) as exc:  # a writer that read the first version loses
        c.put_object(Bucket=s3.bucket, Key="_freshet/lease", Body=b"b, took over", IfMatch=first)
    assert _status(exc.value) == (412, "PreconditionFailed")
    assert c.get_object(Bucket=s3.bucket, Key="_freshet/lease")["Body"].read() == b"a, renewed 1"
    assert s3.keys("_freshet/") == ["_freshet/lease"]
