"""On LocalStack's S3: a job's payload pointer is read only inside the deployment's payload
bucket under its own ``args/<job id>/`` key; any other is refused unread, in one sentence that
says nothing about the object (buckets of this module's own; the runner is run here)."""

from __future__ import annotations

import uuid
from hashlib import sha256

import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.shared import payloads
from kindling.stores.results import MemoryResultStore
from support.s3 import CountingS3

pytestmark = pytest.mark.localstack

SECRET = b'{"db_password": "hunter2-hunter2-hunter2"}'  # 43 bytes
registry = Registry()


@registry.task(name="size")
def size(blob):
    return len(blob)




@pytest.fixture
def buckets(aws):
    """(the payload bucket, another bucket holding a 43-byte secret), both emptied and deleted after."""
    import boto3

    s3 = boto3.client("s3")
    names = [f"kindling-pl-{uuid.uuid4().hex[:8]}", f"kindling-other-{uuid.uuid4().hex[:8]}"]
    for name in names:
        s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=names[1], Key="config/secret.json", Body=SECRET)
    yield names
    for name in names:
        for item in s3.list_objects_v2(Bucket=name).get("Contents", []):
            s3.delete_object(Bucket=name, Key=item["Key"])
        s3.delete_bucket(Bucket=name)


def run(s3, bucket, job_id, ref):
    d = Delivery("m1", encode_job(new_job("size", job_id=job_id, payload=ref)).decode(), 1)
    [o] = Runner(registry, MemoryResultStore(), log=None, metrics=False, s3=s3, payload_bucket=bucket).run([d])
    return o


def test_a_pointer_outside_this_jobs_arguments_is_refused_unread_and_alike(aws, buckets):
    bucket, other = buckets
    s3 = CountingS3(aws["AWS_ENDPOINT_URL"])
    digest = sha256(SECRET).hexdigest()
    messages = set()
    for b, key in [(other, "config/secret.json"), (other, "config/nothing.json"), (other, f"args/victim/{digest}"),
                   (bucket, f"results/victim/{digest}"), (bucket, f"args/someone-else/{digest}")]:
        o = run(s3, bucket, "victim", {"bucket": b, "key": key, "size": len(SECRET), "sha256": digest})
        message = o.record["error"]["message"]
        assert o.status == "dead" and "bytes" not in message and key not in message and b not in message
        messages.add(message)
    assert len(messages) == 1 and s3.reads == []

    job = new_job("size")
    ref = payloads.put(s3, bucket, "args", job.id, payloads.encode_arguments(["abcd"], {}))
    assert run(s3, bucket, job.id, ref).record["result"] == "4"
