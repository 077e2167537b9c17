"""template.yaml with SigningSecretArn, deployed into LocalStack: the deployed worker reads the
keys from Secrets Manager with kindling's own client, runs a signed job, and records an
unsigned one and one signed for another queue ``rejected`` without running them."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import uuid
from pathlib import Path

import boto3
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.localstack, pytest.mark.slow]


@pytest.fixture(scope="module")
def signed_stack(localstack):
    sys.path.insert(0, str(ROOT / "infra/localstack"))
    from deploy import deploy

    saved = {k: os.environ.get(k) for k in localstack}
    os.environ.update(localstack)
    keys = {"current": "k1", "keys": {"k1": base64.b64encode(os.urandom(32)).decode()}}
    arn = boto3.client("secretsmanager").create_secret(Name=f"kindling-signing-{uuid.uuid4().hex[:8]}",
                                                       SecretString=json.dumps(keys))["ARN"]
    try:
        outputs = deploy("kindling-signed", {"SigningSecretArn": arn})
        yield dict(outputs, SigningSecretArn=arn)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _record(table: str, key: str, timeout: float = 120) -> dict:
    ddb = boto3.client("dynamodb")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        item = ddb.get_item(TableName=table, Key={"id": {"S": key}}, ConsistentRead=True).get("Item")
        if item:
            return item
        time.sleep(1)
    raise AssertionError(f"no record {key} after {timeout} s")


def _body(job) -> str:
    """The envelope as LocalStack hands it to the function: its SQS poller parses a JSON body
    and dumps it again with the standard library's separators (a parity bug; AWS delivers the
    body as sent), so a body is signed here in that form for the signature to hold."""
    from kindling.envelope import encode_job

    return json.dumps(json.loads(encode_job(job)))


def test_a_signed_job_runs_and_unsigned_or_misbound_ones_are_rejected(signed_stack, localstack, monkeypatch):
    from kindling import jobsig
    from kindling.envelope import new_job
    from kindling.signed import Keyring

    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    url, table = signed_stack["QueueUrl"], signed_stack["ResultsTableName"]
    keyring = Keyring(signed_stack["SigningSecretArn"])
    sqs = boto3.client("sqs")

    def send(job, destination=None) -> str:
        body = _body(job)
        attributes = {}
        if destination is not None:
            value = keyring.sign(destination, body)
            attributes = {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": value}}
        return sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)["MessageId"]

    good_job, unsigned_job, misbound_job = (new_job("echo", [n]) for n in ("signed", "unsigned", "misbound"))
    send(good_job, jobsig.sqs_destination(url))
    unsigned = send(unsigned_job)
    misbound = send(misbound_job, jobsig.sqs_destination(url.rsplit("/", 1)[0] + "/another-teams-queue"))

    assert _record(table, good_job.id)["status"]["S"] == "succeeded"
    cases = ((unsigned, unsigned_job, "unsigned message"), (misbound, misbound_job, "bad signature"))
    for message_id, job, why in cases:
        record = _record(table, f"rejected#{message_id}")
        assert record["status"]["S"] == "rejected" and record["job_id"]["S"] == job.id
        assert why in record["error"]["M"]["message"]["S"]
        assert "Item" not in boto3.client("dynamodb").get_item(TableName=table, Key={"id": {"S": job.id}})
