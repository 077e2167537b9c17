"""A job's payload pointer is read only inside the deployment's payload bucket, under the
key its producer gives a job's arguments (``args/<job id>/<sha256>``): anything else is
refused before S3 is asked, with one message that says nothing about the object (moto)."""

from hashlib import sha256

import boto3
import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.shared import payloads
from kindling.stores.results import MemoryResultStore
from support.s3 import CountingS3

SECRET = b'{"db_password": "hunter2-hunter2-hunter2"}'  # 43 bytes


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""

    @r.task(name="size")
    def size(blob):
        return len(blob)


@pytest.fixture
def s3(moto_endpoint):
    return CountingS3(moto_endpoint)


@pytest.fixture
def other(moto_endpoint):
    """Another bucket the worker's role can read, holding a secret of 43 bytes."""
    import uuid

    name = f"other-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=name)
    boto3.client("s3").put_object(Bucket=name, Key="config/secret.json", Body=SECRET)
    return name


def run(reg, s3, bucket, job_id, ref):
    d = Delivery("m1", encode_job(new_job("size", job_id=job_id, payload=ref)).decode(), 1)
    [o] = Runner(reg, MemoryResultStore(), log=None, metrics=False, s3=s3, payload_bucket=bucket).run([d])
    return o


def pointer_to(bucket, key, data=SECRET):
    return {"bucket": bucket, "key": key, "size": len(data), "sha256": sha256(data).hexdigest()}


def places(bucket, other, job_id):
    digest = sha256(SECRET).hexdigest()
    return {
        "another bucket": (other, "config/secret.json"),
        "another bucket, absent": (other, "config/nothing.json"),
        "another bucket, the producer's key shape": (other, f"args/{job_id}/{digest}"),
        "a result of this job": (bucket, f"results/{job_id}/{digest}"),
        "another job's arguments": (bucket, f"args/someone-else/{digest}"),
        "outside args/": (bucket, f"config/{job_id}/{digest}"),
        "another object of this job": (bucket, f"args/{job_id}/other"),
    }


def test_a_pointer_anywhere_but_this_jobs_arguments_is_refused_unread_and_alike(reg, s3, bucket, other):
    boto3.client("s3").put_object(Bucket=bucket, Key="results/victim/x", Body=SECRET)
    messages = set()
    for where, (b, key) in places(bucket, other, "victim").items():
        o = run(reg, s3, bucket, "victim", pointer_to(b, key))
        assert o.status == "dead", where
        message = o.record["error"]["message"]
        assert "bytes" not in message and key not in message and b not in message, where
        messages.add(message)
    assert len(messages) == 1  # present or absent, here or there: the same words
    assert s3.reads == []  # S3 was never asked


def test_a_worker_without_a_payload_bucket_reads_no_pointer(reg, s3, other):
    o = run(reg, s3, "", "victim", pointer_to(other, "config/secret.json"))
    message = o.record["error"]["message"]
    assert o.status == "dead" and "bytes" not in message and other not in message and s3.reads == []


def test_the_producers_own_pointer_is_read(reg, s3, bucket):
    job = new_job("size")
    ref = payloads.put(s3, bucket, "args", job.id, payloads.encode_arguments(["abcd"], {}))
    assert run(reg, s3, bucket, job.id, ref).record["result"] == "4"
    assert s3.reads == [(bucket, f"args/{job.id}/{ref['sha256']}")]
