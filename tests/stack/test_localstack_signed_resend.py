"""On LocalStack: ``jobs retry`` and ``dlq redrive`` never trade a signed job for a copy the
worker rejects, and never act on a DLQ message whose signature fails the check. Queues,
table and secret are this module's own; the worker is kindling.triggers.sqs.loop's, run here."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.core.status import DEAD, SUCCEEDED
from kindling.producer.client import Call, Client
from kindling.tools.ops import OpsError, Stack
from kindling.tools.ops.dlq import redrive
from kindling.tools.ops.revive import RetryRefused, retry_job
from kindling.triggers.sqs.loop import SqsWorker
from support import create_results_table

pytestmark = pytest.mark.localstack

BROKEN = {"on": True}
registry = Registry()


@registry.task(name="mail.send", max_attempts=1)
def send_mail(to):
    if BROKEN["on"]:
        raise RuntimeError(f"smtp refused {to}")
    return f"sent to {to}"



@pytest.fixture
def deployment(aws, monkeypatch):
    """A jobs queue with its DLQ, a results table and a signing secret of this test's own;
    KINDLING_SIGNING_SECRET names the secret (producer, worker and operator)."""
    import boto3

    name = f"sigops-{uuid.uuid4().hex[:8]}"
    sqs, ddb, sm = boto3.client("sqs"), boto3.client("dynamodb"), boto3.client("secretsmanager")
    dlq = sqs.create_queue(QueueName=f"{name}-dead")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=name, Attributes={
        "VisibilityTimeout": "5", "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "10"})})[
        "QueueUrl"]
    create_results_table(ddb, name)
    ddb.get_waiter("table_exists").wait(TableName=name)
    keys = {"current": "k1", "keys": {"k1": base64.b64encode(uuid.uuid4().bytes * 2).decode()}}
    secret = sm.create_secret(Name=name, SecretString=json.dumps(keys))["ARN"]
    monkeypatch.setenv("KINDLING_SIGNING_SECRET", secret)
    BROKEN["on"] = True
    stack = Stack(table=name, queue_url=url, dlq_url=dlq)
    yield stack, secret
    for queue in (url, dlq):
        sqs.delete_queue(QueueUrl=queue)
    ddb.delete_table(TableName=name)
    sm.delete_secret(SecretId=secret, ForceDeleteWithoutRecovery=True)


def work(stack: Stack) -> None:
    SqsWorker(stack.queue_url, stack.table, registry=registry, wait=1, log=None).run(burst=True, idle_timeout=5)


def dlq_messages(stack: Stack) -> list[dict]:
    import boto3

    return boto3.client("sqs").receive_message(QueueUrl=stack.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                                               WaitTimeSeconds=1, MessageAttributeNames=["All"]).get("Messages", [])


def forge(stack: Stack, job_id: str) -> None:
    """A message for ``job_id`` put in the DLQ by someone without the key."""
    import boto3

    body = encode_job(new_job("mail.send", ["mallory@example.com"], job_id=job_id)).decode()
    boto3.client("sqs").send_message(QueueUrl=stack.dlq_url, MessageBody=body, MessageAttributes={
        "kindling_job_id": {"DataType": "String", "StringValue": job_id},
        "kindling_signature": {"DataType": "String", "StringValue": "v1:k1:" + "A" * 43 + "="}})


def test_retry_without_the_secret_refuses_a_signed_job_and_with_it_runs_the_job(deployment, monkeypatch):
    stack, secret = deployment
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("mail.send", ["ada@example.com"], job_id="ls-signed"))
    work(stack)
    assert client.record("ls-signed")["status"] == DEAD

    monkeypatch.delenv("KINDLING_SIGNING_SECRET")
    with pytest.raises(RetryRefused, match="KINDLING_SIGNING_SECRET"):
        retry_job(stack, "ls-signed")
    assert client.record("ls-signed")["status"] == DEAD
    [kept] = dlq_messages(stack)
    assert "kindling_signature" in kept["MessageAttributes"]

    monkeypatch.setenv("KINDLING_SIGNING_SECRET", secret)
    BROKEN["on"] = False
    retry_job(stack, "ls-signed")
    work(stack)
    assert client.record("ls-signed")["status"] == SUCCEEDED


def test_a_badly_signed_dlq_message_is_refused_by_retry_and_left_in_the_dlq_by_redrive(deployment, monkeypatch):
    stack, _ = deployment
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("mail.send", ["ada@example.com"], job_id="ls-real"))
    client.send(Call("mail.send", ["bob@example.com"], job_id="ls-victim"))
    work(stack)
    assert client.record("ls-victim")["status"] == DEAD
    for m in dlq_messages(stack):  # the victim's real message goes; a forged one takes its place
        if "ls-victim" in m["Body"]:
            stack.sqs.delete_message(QueueUrl=stack.dlq_url, ReceiptHandle=m["ReceiptHandle"])
    forge(stack, "ls-victim")

    with pytest.raises(RetryRefused, match="signature"):
        retry_job(stack, "ls-victim")
    assert client.record("ls-victim")["status"] == DEAD

    secret = __import__("os").environ["KINDLING_SIGNING_SECRET"]
    monkeypatch.delenv("KINDLING_SIGNING_SECRET")
    with pytest.raises(OpsError, match="KINDLING_SIGNING_SECRET"):
        redrive(stack, progress=lambda line: None)
    monkeypatch.setenv("KINDLING_SIGNING_SECRET", secret)

    lines: list[str] = []
    report = redrive(stack, progress=lines.append)
    assert (report["revived"], report["revive_refused"], report["moved"], report["left"]) == (1, 1, 1, 1)
    assert client.record("ls-victim")["status"] == DEAD
    [left] = dlq_messages(stack)
    assert "mallory" in left["Body"]
    BROKEN["on"] = False
    work(stack)
    assert client.record("ls-real")["status"] == SUCCEEDED
