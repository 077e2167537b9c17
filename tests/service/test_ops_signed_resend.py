"""Operator tools and signed jobs (moto): ``jobs retry``, the dashboard's retry and ``dlq
redrive`` never trade a signed job for a copy the worker rejects, and never act on a DLQ
message whose signature they could check and did not verify."""

import base64
import json
import threading
import uuid

import boto3
import pytest
from kindling.core import jobsig
from kindling.core.envelope import encode_job, new_job
from kindling.core.status import DEAD, REJECTED, SUCCEEDED
from kindling.producer.client import Call, Client
from kindling.tools import cli
from kindling.tools.dashboard import make_server
from kindling.tools.ops import OpsError
from kindling.tools.ops.dlq import redrive
from kindling.tools.ops.revive import RetryRefused, retry_job
from test_ops import BROKEN, indexed_table, stack, work  # noqa: F401  (fixtures and the worker loop)
from test_ops_dashboard import TOKEN, request


@pytest.fixture
def signing(moto_endpoint, monkeypatch) -> str:
    """A signing secret on moto, named by KINDLING_SIGNING_SECRET (producer, worker, operator)."""
    keys = {"current": "k1", "keys": {"k1": base64.b64encode(b"o" * 32).decode()}}
    arn = boto3.client("secretsmanager").create_secret(Name=f"sig-{uuid.uuid4().hex[:8]}",
                                                       SecretString=json.dumps(keys))["ARN"]
    monkeypatch.setenv("KINDLING_SIGNING_SECRET", arn)
    return arn


def dlq_messages(stack) -> list[dict]:  # noqa: F811
    return boto3.client("sqs").receive_message(QueueUrl=stack.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                                               MessageAttributeNames=["All"]).get("Messages", [])


def signed_dead_job(stack, job_id: str) -> Client:  # noqa: F811
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("emails.send", ["ada@example.com"], job_id=job_id))
    work(stack)
    assert client.record(job_id)["status"] == DEAD
    assert jobsig.ATTRIBUTE in dlq_messages(stack)[0]["MessageAttributes"]
    return client


def test_retry_without_the_secret_refuses_a_signed_job_and_keeps_its_dlq_message(stack, signing, monkeypatch,  # noqa: F811
                                                                                 capsys):
    client = signed_dead_job(stack, "signed-1")
    monkeypatch.delenv("KINDLING_SIGNING_SECRET")  # an operator without the secret
    with pytest.raises(RetryRefused, match="KINDLING_SIGNING_SECRET"):
        retry_job(stack, "signed-1")
    assert cli.main(["jobs", "retry", "signed-1", "--table", stack.table, "--queue-url", stack.queue_url]) == 1
    err = capsys.readouterr().err
    assert "signed" in err and "Traceback" not in err
    record = client.record("signed-1")
    assert record["status"] == DEAD and record.get("generation", 1) == 1  # not revived
    [kept] = dlq_messages(stack)
    assert jobsig.ATTRIBUTE in kept["MessageAttributes"]  # the signed message is still there

    monkeypatch.setenv("KINDLING_SIGNING_SECRET", signing)  # with it, the same retry runs the job
    BROKEN["on"] = False
    retry_job(stack, "signed-1")
    work(stack)
    assert client.record("signed-1")["status"] == SUCCEEDED


def test_the_dashboards_retry_refuses_it_the_same_way(stack, signing, monkeypatch):  # noqa: F811
    client = signed_dead_job(stack, "signed-dash")
    monkeypatch.delenv("KINDLING_SIGNING_SECRET")
    srv = make_server(stack, host="127.0.0.1", port=0, token=TOKEN, sample_backlog=False)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        status, refused = request(srv.server_address[1], "POST", "/api/job/signed-dash/retry",
                                  {"X-Kindling-Dashboard": "1"})
    finally:
        srv.shutdown()
        srv.server_close()
    assert status == 409 and "signed" in refused["error"]
    assert client.record("signed-dash")["status"] == DEAD and len(dlq_messages(stack)) == 1


def forge(stack, job_id: str, signature: str | None) -> None:  # noqa: F811
    """A message for ``job_id`` put in the DLQ by someone without the key: its body points
    the job at a chord it never belonged to."""
    body = encode_job(new_job("emails.send", ["mallory@example.com"], job_id=job_id,
                              parent={"id": "someone-elses-chord", "index": 0, "size": 2, "then": None})).decode()
    attributes = {"kindling_job_id": {"DataType": "String", "StringValue": job_id}}
    if signature is not None:
        attributes[jobsig.ATTRIBUTE] = {"DataType": "String", "StringValue": signature}
    boto3.client("sqs").send_message(QueueUrl=stack.dlq_url, MessageBody=body, MessageAttributes=attributes)


@pytest.mark.parametrize("signature", [None, "v1:k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
def test_retry_with_the_secret_refuses_a_dlq_message_whose_signature_does_not_verify(stack, signing,  # noqa: F811
                                                                                     signature):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("emails.send", ["ada@example.com"], job_id="victim"))
    work(stack)
    boto3.client("sqs").purge_queue(QueueUrl=stack.dlq_url)  # the real message is gone
    forge(stack, "victim", signature)
    with pytest.raises(RetryRefused, match="signature"):
        retry_job(stack, "victim")
    assert client.record("victim")["status"] == DEAD  # nothing acted on
    assert stack.dynamodb.get_item(TableName=stack.table, Key={"id": {"S": "chord#someone-elses-chord"}}).get(
        "Item") is None
    assert len(dlq_messages(stack)) == 1  # left in the DLQ, for the operator to look at
    assert boto3.client("sqs").receive_message(QueueUrl=stack.queue_url).get("Messages", []) == []


def test_retry_refuses_to_sign_a_body_the_worker_rejected_for_its_signature(stack, signing):  # noqa: F811
    body = encode_job(new_job("ops.ok", [1], job_id="laundered")).decode()
    boto3.client("sqs").send_message(QueueUrl=stack.queue_url, MessageBody=body)  # unsigned
    work(stack)
    [record] = [r for r in stack.dynamodb.scan(TableName=stack.table)["Items"] if r["status"]["S"] == REJECTED]
    with pytest.raises(RetryRefused, match="signature"):
        retry_job(stack, record["id"]["S"])
    assert boto3.client("sqs").receive_message(QueueUrl=stack.queue_url).get("Messages", []) == []


def test_redrive_without_the_secret_refuses_to_revive_signed_jobs_and_moves_nothing(stack, signing,  # noqa: F811
                                                                                   monkeypatch, capsys):
    client = signed_dead_job(stack, "signed-r")
    monkeypatch.delenv("KINDLING_SIGNING_SECRET")
    with pytest.raises(OpsError, match="KINDLING_SIGNING_SECRET"):
        redrive(stack, move_task=False, progress=lambda line: None)
    assert cli.main(["dlq", "redrive", "--table", stack.table, "--queue-url", stack.queue_url]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert client.record("signed-r")["status"] == DEAD and len(dlq_messages(stack)) == 1

    # Moved as they are, signatures and all, the worker checks them itself.
    report = redrive(stack, revive_dead=False, move_task=False, progress=lambda line: None)
    assert report["moved"] == 1


def test_redrive_with_the_secret_leaves_a_badly_signed_message_in_the_dlq(stack, signing):  # noqa: F811
    client = signed_dead_job(stack, "signed-ok")
    client.send(Call("emails.send", ["x@y"], job_id="victim-2"))
    work(stack)
    for m in dlq_messages(stack):  # victim-2's real message goes; a forged one takes its place
        if "victim-2" in m["Body"]:
            boto3.client("sqs").delete_message(QueueUrl=stack.dlq_url, ReceiptHandle=m["ReceiptHandle"])
    forge(stack, "victim-2", "v1:k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    lines: list[str] = []
    report = redrive(stack, progress=lines.append)
    assert report["revived"] == 1 and report["revive_refused"] == 1 and report["moved"] == 1
    assert any("victim-2" in line and "signature" in line for line in lines)
    assert client.record("victim-2")["status"] == DEAD
    [left] = dlq_messages(stack)
    assert "mallory" in left["Body"]
    BROKEN["on"] = False
    work(stack)
    assert client.record("signed-ok")["status"] == SUCCEEDED
