"""kindling's S3 GET against LocalStack's S3: bounded by what the caller accepts (a payload
pointer's size), the bytes boto3 reads when within it, and a clear refusal past it.

Uses the session's LocalStack and a bucket of its own, deleted at the end.
"""

from __future__ import annotations

import hashlib
import os
import uuid

import pytest

pytestmark = pytest.mark.localstack

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def endpoint(localstack):
    """The session's LocalStack (started if none answers: never skipped)."""
    return localstack["AWS_ENDPOINT_URL"]


@pytest.fixture
def env(endpoint, monkeypatch):
    for name in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("AWS_ENDPOINT_URL", endpoint), ("AWS_ACCESS_KEY_ID", "test"),
                        ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_REGION", "us-east-1"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    return endpoint


@pytest.fixture
def bucket(env):
    import boto3

    s3 = boto3.client("s3")
    name = f"kindling-bounded-get-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    yield name
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=name, Key=item["Key"])
    s3.delete_bucket(Bucket=name)


def put(bucket: str, key: str, body: bytes) -> None:
    import boto3

    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def test_an_object_within_the_bound_reads_as_boto3_reads_it(bucket):
    import boto3
    from kindling.drivers.aws.s3 import S3Client

    body = os.urandom(8 * MiB)
    put(bucket, "whole", body)
    ours = S3Client().get_object(bucket, "whole", max_bytes=len(body))
    theirs = boto3.client("s3").get_object(Bucket=bucket, Key="whole")["Body"].read()
    assert hashlib.sha256(ours).digest() == hashlib.sha256(theirs).digest() == hashlib.sha256(body).digest()


def test_an_object_over_the_bound_is_refused_with_its_size(bucket):
    from kindling.drivers import aws
    from kindling.drivers.aws.s3 import S3Client

    put(bucket, "big", b"x" * (8 * MiB))
    with pytest.raises(aws.AwsError) as info:
        S3Client().get_object(bucket, "big", max_bytes=100)
    assert (info.value.code, info.value.retryable) == ("ObjectTooLarge", False)
    assert "8,388,608 bytes" in info.value.message


def test_an_empty_object_reads_as_empty_under_any_bound(bucket):
    from kindling.drivers.aws.s3 import S3Client

    put(bucket, "empty", b"")
    s3 = S3Client()
    assert s3.get_object(bucket, "empty", max_bytes=0) == b""
    assert s3.get_object(bucket, "empty", max_bytes=10) == b""


def test_a_pointer_naming_fewer_bytes_than_its_object_is_lost(bucket):
    from kindling.core.errors import PayloadUnavailable
    from kindling.drivers.aws.s3 import S3Client
    from kindling.shared import payloads

    body = b"y" * MiB
    put(bucket, "args/J/big", body)
    ref = {"bucket": bucket, "key": "args/J/big", "size": 100, "sha256": hashlib.sha256(body[:100]).hexdigest()}
    with pytest.raises(PayloadUnavailable, match="larger than the pointer says 100 bytes") as info:
        payloads.fetch(S3Client(), ref)
    assert (info.value.lost, info.value.retryable) == (True, False)
