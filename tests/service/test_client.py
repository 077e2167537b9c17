"""The producer client against moto's SQS: batching, concurrency, order and refusals."""

import boto3
import pytest
from kindling.core.envelope import decode_job
from kindling.producer.client import Call, Client, EnqueueError, PayloadTooLarge


@pytest.fixture
def queue_url(moto_endpoint):
    import uuid

    return boto3.client("sqs").create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}")["QueueUrl"]


def drain(queue_url: str) -> list[dict]:
    sqs, bodies = boto3.client("sqs"), []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return bodies
        bodies += [decode_job(m["Body"].encode()) for m in got]
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])


@pytest.mark.parametrize("concurrency", [1, 4])
def test_enqueue_many_sends_every_job_once_and_returns_handles_in_order(queue_url, concurrency):
    calls = [("echo", [i], {}) for i in range(95)]  # ten batches, the last one of five
    handles = Client(queue_url=queue_url, table="unused").enqueue_many(calls, concurrency=concurrency)
    jobs = {job.id: job for job in drain(queue_url)}
    assert len(handles) == 95 and set(jobs) == {h.id for h in handles}
    assert [jobs[h.id].args for h in handles] == [[i] for i in range(95)]


def test_an_oversized_payload_is_refused_before_anything_is_sent(queue_url):
    client = Client(queue_url=queue_url, table="unused")
    with pytest.raises(PayloadTooLarge, match="the queue takes at most"):
        client.enqueue_many([("echo", ["small"], {}), ("echo", ["x" * (client.max_message_bytes + 1)], {})])
    assert drain(queue_url) == []


def test_a_queue_that_does_not_exist_names_every_job_not_sent(moto_endpoint, monkeypatch):
    import kindling.producer.client

    monkeypatch.setattr(kindling.producer.client, "_sleep", lambda attempt: None)
    missing = moto_endpoint + "/000000000000/no-such-queue"
    with pytest.raises(EnqueueError) as info:
        Client(queue_url=missing, table="unused").enqueue_many([Call("noop", job_id=f"j{i}") for i in range(12)])
    assert set(info.value.failed) == {f"j{i}" for i in range(12)} and info.value.sent == []


def test_concurrency_must_be_positive(queue_url):
    with pytest.raises(ValueError, match="concurrency"):
        Client(queue_url=queue_url, table="unused").enqueue_many([("noop", [], {})], concurrency=0)


def test_revoke_records_the_job_revoked_and_refuses_a_finished_one(table):
    import pytest
    from kindling.core.errors import KindlingError
    from kindling.producer.client import Client
    from kindling.stores.results import DynamoResultStore

    client = Client(queue_url="unused", table=table)
    client.revoke("job-r1", task="resize")
    assert client.status("job-r1") == "revoked"
    with pytest.raises(KindlingError, match="is revoked"):
        client.result("job-r1", timeout=0)
    DynamoResultStore(table).write([{"id": "job-r2", "status": "succeeded", "attempts": 1, "result": "1"}])
    with pytest.raises(KindlingError, match="already succeeded"):
        client.revoke("job-r2")


def test_kindling_jobs_revoke(table, capsys):
    from kindling.tools.cli import main

    assert main(["jobs", "revoke", "job-r3", "--table", table]) == 0
    assert "job-r3 revoked" in capsys.readouterr().out
    assert main(["jobs", "revoke", "job-r3", "--table", table]) == 0  # revoking twice is harmless
