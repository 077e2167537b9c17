"""Revoke on the deployed stack: a job revoked before it runs is skipped by the duplicate
check its batch makes anyway, and never runs."""

import time

import boto3
import pytest
from kindling.producer.client import Call, Client

pytestmark = pytest.mark.localstack


def test_a_job_revoked_while_it_waits_in_the_queue_is_skipped_and_never_runs(stack, localstack, monkeypatch):
    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    client = Client(queue_url=stack["QueueUrl"], table=stack["ResultsTableName"])
    revoked = client.send(Call("echo", ["revoked"], delay=4))
    client.revoke(revoked.id, task="echo")
    kept = client.send(Call("echo", ["kept"], delay=4))
    assert kept.result(timeout=120) == {"args": ["kept"], "kwargs": {}}
    sqs, deadline = boto3.client("sqs"), time.monotonic() + 60
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed"]
    while time.monotonic() < deadline:  # until the revoked job's message was delivered and deleted
        attrs = sqs.get_queue_attributes(QueueUrl=stack["QueueUrl"], AttributeNames=names)["Attributes"]
        if not any(int(attrs[n]) for n in names):
            break
        time.sleep(0.3)
    else:
        raise AssertionError(f"the jobs queue did not drain: {attrs}")
    record = client.record(revoked.id)
    assert record["status"] == "revoked" and record["attempts"] == 0 and "result" not in record
