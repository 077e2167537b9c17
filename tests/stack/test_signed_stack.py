"""template.yaml with SigningSecretArn, deployed into LocalStack: the deployed worker reads the
keys from Secrets Manager with kindling's own client, runs jobs kindling.producer.client signed, and
records an unsigned one and one signed for another queue ``rejected`` without running them.
Bodies reach the function byte for byte, as on AWS (LocalStack's SQS poller re-serializes JSON
bodies; infra/localstack/plugin's ``sqs_bodies_as_sent`` hook undoes that)."""

from __future__ import annotations

import base64
import json
import os
import time
import uuid

import boto3
import pytest

pytestmark = [pytest.mark.localstack, pytest.mark.slow]


@pytest.fixture(scope="module")
def signed_stack(deploy_stack):
    keys = {"current": "k1", "keys": {"k1": base64.b64encode(os.urandom(32)).decode()}}
    arn = boto3.client("secretsmanager").create_secret(Name=f"kindling-signing-{uuid.uuid4().hex[:8]}",
                                                       SecretString=json.dumps(keys))["ARN"]
    return dict(deploy_stack("kindling-signed", {"SigningSecretArn": arn}), SigningSecretArn=arn)


def _record(table: str, key: str, timeout: float = 120) -> dict:
    ddb = boto3.client("dynamodb")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        item = ddb.get_item(TableName=table, Key={"id": {"S": key}}, ConsistentRead=True).get("Item")
        if item:
            return item
        time.sleep(1)
    raise AssertionError(f"no record {key} after {timeout} s")


def test_a_signed_job_runs_and_unsigned_or_misbound_ones_are_rejected(signed_stack, localstack, monkeypatch):
    from kindling.core import jobsig
    from kindling.core.envelope import encode_job, new_job
    from kindling.producer.client import Client
    from kindling.shared.signed import Keyring

    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    url, table = signed_stack["QueueUrl"], signed_stack["ResultsTableName"]
    keyring = Keyring(signed_stack["SigningSecretArn"])
    client = Client(url, table, signing=keyring)  # its compact bodies, as any producer sends them
    sqs = boto3.client("sqs")

    good = client.enqueue("echo", "signed", "ünïcødé ✓")
    assert good.result(timeout=120) == {"args": ["signed", "ünïcødé ✓"], "kwargs": {}}
    batch = client.enqueue_many([("echo", ["batch", 1], {}), ("echo", ["batch", 2], {})])
    assert [h.result(timeout=120)["args"] for h in batch] == [["batch", 1], ["batch", 2]]

    def send(job, destination=None) -> str:
        body = encode_job(job).decode()  # the bytes Client sends (orjson, set up by Client())
        attributes = {}
        if destination is not None:
            value = keyring.sign(destination, body)
            attributes = {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": value}}
        return sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)["MessageId"]

    unsigned_job, misbound_job = (new_job("echo", [n]) for n in ("unsigned", "misbound"))
    unsigned = send(unsigned_job)
    misbound = send(misbound_job, jobsig.sqs_destination(url.rsplit("/", 1)[0] + "/another-teams-queue"))

    cases = ((unsigned, unsigned_job, "unsigned message"), (misbound, misbound_job, "bad signature"))
    for message_id, job, why in cases:
        record = _record(table, f"rejected#{message_id}")
        assert record["status"]["S"] == "rejected" and record["job_id"]["S"] == job.id
        assert why in record["error"]["M"]["message"]["S"]
        assert "Item" not in boto3.client("dynamodb").get_item(TableName=table, Key={"id": {"S": job.id}})


def test_a_body_reaches_the_function_byte_for_byte(signed_stack, localstack, monkeypatch):
    """The worker verifies the signature over the body it receives, so a signed body that runs
    arrived unchanged. These bodies are ones a JSON re-serialization on the way would change:
    unusual spacing, a newline, non-ASCII characters unescaped, a JSON string (not an object)."""
    from kindling.core import jobsig
    from kindling.core.envelope import new_job, to_dict
    from kindling.producer.client import Client
    from kindling.shared.signed import Keyring

    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    url, table = signed_stack["QueueUrl"], signed_stack["ResultsTableName"]
    keyring = Keyring(signed_stack["SigningSecretArn"])
    client = Client(url, table, signing=keyring)
    sqs = boto3.client("sqs")

    def send(body: str) -> str:
        value = keyring.sign(jobsig.sqs_destination(url), body)
        attributes = {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": value}}
        return sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)["MessageId"]

    args = ["spaced", "Grüße, 東京 ✓ \u00e9 — \t"]
    job = new_job("echo", args)
    body = " \n" + json.dumps(to_dict(job), ensure_ascii=False, separators=(" ,  ", " :\t")) + "\n "
    assert body != json.dumps(json.loads(body))
    send(body)
    assert client.result(job.id, timeout=120) == {"args": args, "kwargs": {}}

    # A JSON string body: parsed and dumped again it would lose its quotes and fail the signature
    # check; delivered as sent, it passes it and is rejected for what it is, not an object.
    message_id = send(json.dumps("not a job"))
    record = _record(table, f"rejected#{message_id}")
    assert record["status"]["S"] == "rejected"
    message = record["error"]["M"]["message"]["S"]
    assert "signature" not in message and "object" in message, message
