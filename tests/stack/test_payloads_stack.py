"""Large payloads on the deployed stack (LocalStack): a 2 MiB argument goes to the stack's
payload bucket behind a pointer, the worker reads it with kindling's own S3 client
(path-style, as the local cloud needs), and the 2 MiB result it returns goes back to the
bucket behind the record's pointer; the client reads both back."""

import time

import boto3
import pytest
from kindling.core import codec
from kindling.core.envelope import decode_job
from kindling.core.errors import JobFailed
from kindling.producer.client import Client

pytestmark = pytest.mark.localstack

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def client(stack):
    return Client(queue_url=stack["QueueUrl"], table=stack["ResultsTableName"],
                  payload_bucket=stack["PayloadBucketName"])


def test_the_limit_is_the_deployed_queues(client):
    assert client.max_message_bytes == 1_048_576  # LocalStack 2026.3.0's default MaximumMessageSize


def test_a_2_mib_argument_and_a_2_mib_result_round_trip(client, stack):
    blob = "".join(chr(0x21 + i % 90) for i in range(2 * MIB - 7)) + "ünïcode"
    handle = client.enqueue("echo", blob)
    assert handle.result(timeout=120) == {"args": [blob], "kwargs": {}}
    record = client.record(handle.id)
    assert record["status"] == "succeeded" and "result" not in record
    ref = record["result_payload"]
    assert ref["bucket"] == stack["PayloadBucketName"] and ref["key"].startswith(f"results/{handle.id}/")
    assert ref["size"] > 2 * MIB
    s3 = boto3.client("s3")
    stored = s3.get_object(Bucket=ref["bucket"], Key=ref["key"])["Body"].read()
    assert codec.loads(stored) == {"args": [blob], "kwargs": {}}
    (args_object,) = s3.list_objects_v2(Bucket=ref["bucket"], Prefix=f"args/{handle.id}/")["Contents"]
    assert codec.loads(s3.get_object(Bucket=ref["bucket"], Key=args_object["Key"])["Body"].read()) == {
        "args": [blob], "kwargs": {}}


def test_a_job_whose_arguments_vanished_is_recorded_dead_with_the_reason(client, stack):
    s3 = boto3.client("s3")
    sqs = boto3.client("sqs")
    # The pointer names an object nobody wrote: sent as the client would, minus the upload.
    from kindling.core.envelope import encode_job, new_job
    from kindling.shared.payloads import argument_key

    job_id = f"vanished-{time.time_ns()}"
    key = argument_key(job_id, "0" * 64)  # where this job's arguments would be: the only key a worker reads
    job = new_job("echo", job_id=job_id, payload={
        "bucket": stack["PayloadBucketName"], "key": key, "size": 10, "sha256": "0" * 64})
    assert decode_job(encode_job(job)).payload["key"] == key
    assert "Contents" not in s3.list_objects_v2(Bucket=stack["PayloadBucketName"], Prefix=f"args/{job_id}/")
    sqs.send_message(QueueUrl=stack["QueueUrl"], MessageBody=encode_job(job).decode())
    with pytest.raises(JobFailed) as info:
        client.result(job.id, timeout=120)
    assert info.value.status == "dead" and info.value.error["type"] == "PayloadUnavailable"
    assert "NoSuchKey" in info.value.error["message"]
    assert client.record(job.id)["attempts"] == 1  # not retried: no attempt can bring it back
