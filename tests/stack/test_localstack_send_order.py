"""On LocalStack's SQS: the producer's send pipeline keeps each FIFO message group in call
order (queues of this module's own; no stack deployed)."""

from __future__ import annotations

import uuid

import pytest
from kindling.client import Call, Client
from kindling.envelope import decode_job

pytestmark = pytest.mark.localstack


@pytest.fixture(scope="module")
def aws(localstack):
    """The session's LocalStack (started if none answers: never skipped)."""
    env = localstack
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        patch.delenv("AWS_SESSION_TOKEN", raising=False)
        yield env


@pytest.fixture
def fifo_url(aws):
    import boto3

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"order-{uuid.uuid4().hex[:8]}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)


def received_by_group(queue_url: str) -> dict[str, list]:
    import boto3

    sqs, groups = boto3.client("sqs"), {}
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30, WaitTimeSeconds=1,
                                  AttributeNames=["MessageGroupId"]).get("Messages", [])
        if not got:
            return groups
        for m in got:
            groups.setdefault(m["Attributes"]["MessageGroupId"], []).append(decode_job(m["Body"].encode()).args[0])
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])


def test_two_hundred_jobs_of_one_group_reach_the_queue_in_call_order(fifo_url):
    handles = Client(queue_url=fifo_url, table="unused").enqueue_many(
        [Call("step", [n], group="g") for n in range(200)])
    assert len(handles) == 200
    assert received_by_group(fifo_url) == {"g": list(range(200))}


def test_interleaved_groups_each_reach_the_queue_in_call_order(fifo_url):
    calls = [Call("step", [f"{g}{n}"], group=g) for n in range(60) for g in ("a", "b")]
    Client(queue_url=fifo_url, table="unused").enqueue_many(calls, concurrency=8)
    assert received_by_group(fifo_url) == {g: [f"{g}{n}" for n in range(60)] for g in ("a", "b")}
