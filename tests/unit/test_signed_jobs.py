"""Signed jobs: what a worker with signing on runs, and what it records ``rejected``."""

import base64
import json

import pytest
from kindling.core import jobsig
from kindling.core.envelope import encode_job, new_job
from kindling.engine.runner import Delivery, Runner
from kindling.shared.signed import Keyring, Verifier
from kindling.stores.results import MemoryResultStore

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:jobs"
K1 = b"k" * 32
K2 = b"q" * 32


def secret(current="k2", **keys) -> str:
    keys = keys or {"k1": K1, "k2": K2}
    return json.dumps({"current": current, "keys": {k: base64.b64encode(v).decode() for k, v in keys.items()}})


class FakeSecret:
    def __init__(self, value: str):
        self.value = value
        self.reads = 0
        self.fail = False

    def __call__(self, ref, deadline):
        self.reads += 1
        if self.fail:
            raise OSError("secrets manager down")
        return self.value


def body(*args) -> str:
    return encode_job(new_job("add", args)).decode()


def run(reg, deliveries, fetch=None):
    store = MemoryResultStore()
    fetch = fetch or FakeSecret(secret())
    runner = Runner(reg, store, verifier=Verifier(Keyring("arn:secret", fetch=fetch)), log=None, metrics=False)
    return runner.run(deliveries), store


def signed(text, key_id="k2", key=K2, destination=None, ref="m1") -> Delivery:
    destination = destination or jobsig.sqs_destination(QUEUE_ARN)
    return Delivery(ref, text, 1, signature=jobsig.sign(key_id, key, destination, text),
                    source=jobsig.sqs_destination(QUEUE_ARN))


def test_a_validly_signed_job_runs(reg):
    (o,), store = run(reg, [signed(body(1, 2))])
    assert o.status == "succeeded" and reg.runs == [("add", 1, 2)]


def test_an_older_key_still_listed_is_accepted(reg):
    (o,), _ = run(reg, [signed(body(1, 2), key_id="k1", key=K1)])
    assert o.status == "succeeded"


@pytest.mark.parametrize("forge, why", [
    (lambda b: Delivery("m1", b, 1, signature=None, source=jobsig.sqs_destination(QUEUE_ARN)), "unsigned"),
    (lambda b: signed(b, key=b"x" * 32), "bad signature"),                      # wrong key
    (lambda b: signed(b, key_id="k9"), "unknown key id"),                       # wrong key id
    (lambda b: signed(b, key_id="k1", key=K2), "bad signature"),                # key relabelled
    (lambda b: _altered(signed(b)), "bad signature"),                           # body altered
    (lambda b: signed(b, destination="sqs:123456789012:other-team"), "bad signature"),  # another queue
    (lambda b: signed(b, destination="valkey:jobs"), "bad signature"),          # a stream
    (lambda b: Delivery("m1", b, 1, signature="v1:k2:not base64!", source="sqs:1:jobs"), "malformed"),
    (lambda b: Delivery("m1", b, 1, signature="garbage", source="sqs:1:jobs"), "malformed"),
    (lambda b: Delivery("m1", b, 1, signature=signed(b).signature, source=None), "destination is unknown"),
])
def test_a_forged_message_is_recorded_rejected_and_never_run(reg, forge, why):
    text = body(1, 2)
    (o,), store = run(reg, [forge(text)])
    assert o.status == "rejected" and why in o.reason
    assert reg.runs == []
    # recorded under its message's own key, never the job id it claims (a forger could take a real job's)
    claimed = json.loads(text)["id"]
    assert claimed not in store.records
    record = store.records["rejected#m1"]
    assert record["status"] == "rejected" and record["job_id"] == claimed and record["task"] == "add"
    assert why in record["error"]["message"]


def _altered(d: Delivery) -> Delivery:
    d.body = d.body.replace("[1,2]", "[1,3]").replace("[1, 2]", "[1, 3]")
    assert "3" in d.body
    return d


def test_a_forged_copy_cannot_take_over_a_real_jobs_id(reg):
    job = new_job("add", (1, 2))
    text = encode_job(job).decode()
    forged = Delivery("m-forged", text.replace("[1,2]", "[5,5]").replace("[1, 2]", "[5, 5]"), 1,
                      signature=None, source="sqs:123456789012:jobs")
    (bad, good), store = run(reg, [forged, signed(text, ref="m-real")])
    assert (bad.status, good.status) == ("rejected", "succeeded")
    assert store.records[job.id]["status"] == "succeeded" and reg.runs == [("add", 1, 2)]


def test_a_batch_is_handed_back_when_the_keys_cannot_be_read(reg):
    fetch = FakeSecret(secret())
    fetch.fail = True
    outcomes, store = run(reg, [signed(body(1, 2)), Delivery("m2", body(3, 4), 1)], fetch)
    assert [o.status for o in outcomes] == ["deferred", "deferred"]
    assert "signing keys unavailable" in outcomes[0].reason and "secrets manager down" in outcomes[0].reason
    assert store.records == {} and reg.runs == []


def test_a_new_key_id_is_picked_up_at_once_within_bounds():
    now = [0.0]
    fetch = FakeSecret(secret(k1=K1, current="k1"))
    ring = Keyring("arn:secret", fetch=fetch, max_age=300, min_refresh=30, clock=lambda: now[0])
    verifier = Verifier(ring)
    assert verifier.prepare() is None and fetch.reads == 1
    fetch.value = secret()  # k2 rotated in
    now[0] = 40.0
    text = body(1, 2)
    assert verifier.check(signed(text)) is None and fetch.reads == 2
    # made-up key ids cost at most one read per min_refresh
    for _ in range(5):
        assert "unknown key id" in verifier.check(signed(text, key_id="k9"))
    assert fetch.reads == 2
    now[0] = 75.0
    verifier.check(signed(text, key_id="k9"))
    assert fetch.reads == 3


def test_the_keys_are_re_read_when_stale_and_kept_if_the_re_read_fails():
    now = [0.0]
    fetch = FakeSecret(secret())
    ring = Keyring("arn:secret", fetch=fetch, max_age=300, min_refresh=30, clock=lambda: now[0])
    ring.load()
    now[0] = 100.0
    ring.load()
    assert fetch.reads == 1
    now[0] = 301.0
    fetch.fail = True
    ring.load()  # a failed re-read keeps the old keys
    assert fetch.reads == 2 and ring.current()[0] == "k2"
    fetch.fail = False
    fetch.value = secret(current="k1")
    now[0] = 320.0
    ring.load()
    assert fetch.reads == 2  # within min_refresh of the failed try
    now[0] = 332.0
    ring.load()
    assert ring.current()[0] == "k1"


@pytest.mark.parametrize("value, message", [
    ("not json", "not JSON"),
    ("[]", "must be"),
    (json.dumps({"current": "a", "keys": {}}), "must be"),
    (json.dumps({"current": "a", "keys": {"a": "%%%"}}), "not base64"),
    (json.dumps({"current": "a", "keys": {"a": base64.b64encode(b"short").decode()}}), "shorter"),
    (json.dumps({"current": "b", "keys": {"a": base64.b64encode(K1).decode()}}), "current key id"),
    (json.dumps({"current": "a:b", "keys": {"a:b": base64.b64encode(K1).decode()}}), "key id must be"),
])
def test_a_bad_key_set_is_refused_without_echoing_key_material(value, message):
    with pytest.raises(jobsig.KeySetError, match=message) as info:
        jobsig.parse_keys(value)
    assert base64.b64encode(K1).decode() not in str(info.value)


def test_the_mac_is_hmac_sha256_over_key_id_destination_and_body():
    import hashlib
    import hmac

    expected = hmac.new(K1, b"kindling-job-v1\nk1\nsqs:1:q\n{}", hashlib.sha256).digest()
    assert jobsig.mac(K1, "k1", "sqs:1:q", b"{}") == expected
    assert jobsig.mac(b"z" * 100, "k1", "d", b"x") == hmac.new(b"z" * 100, b"kindling-job-v1\nk1\nd\nx",
                                                                 hashlib.sha256).digest()


def test_a_queue_url_and_its_arn_name_the_same_destination():
    assert jobsig.sqs_destination(QUEUE_URL) == jobsig.sqs_destination(QUEUE_ARN) == "sqs:123456789012:jobs"
    assert jobsig.sqs_destination("http://localhost:4566/000000000000/q.fifo") == "sqs:000000000000:q.fifo"
    for bad in ("jobs", "arn:aws:sqs:us-east-1:jobs", "https://sqs.amazonaws.com/"):
        with pytest.raises(ValueError):
            jobsig.sqs_destination(bad)


def test_with_signing_off_the_runner_reads_no_signature(reg):
    store = MemoryResultStore()
    (o,) = Runner(reg, store, log=None, metrics=False).run([Delivery("m1", body(1, 2), 1)])
    assert o.status == "succeeded"


def _lambda_record(message: dict, queue_arn: str) -> dict:
    """A received SQS message as Lambda's event source mapping hands it to the function."""
    attributes = {name: {"stringValue": a["StringValue"], "stringListValues": [], "binaryListValues": [],
                         "dataType": a["DataType"]} for name, a in message.get("MessageAttributes", {}).items()}
    return {"messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"], "body": message["Body"],
            "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": attributes,
            "eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": "us-east-1"}


@pytest.mark.service  # a moto server: to move to tests/service
def test_end_to_end_a_signed_producer_runs_and_an_unsigned_one_is_rejected(table, monkeypatch):
    """kindling.producer.client signs with boto3's session; the Lambda worker reads the secret with
    kindling's own client at its first batch and checks the attribute Lambda hands it."""
    import boto3
    import tasks  # noqa: F401  the example tasks in functions/worker
    from kindling.producer.client import Client
    from kindling.triggers.sqs.handler import LambdaWorker

    arn = boto3.client("secretsmanager").create_secret(Name=f"signing-{table}", SecretString=secret())["ARN"]
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"jobs-{table}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    good = Client(queue_url=url, table=table, signing=arn).enqueue("echo", 2, 3)
    monkeypatch.delenv("KINDLING_SIGNING_SECRET", raising=False)
    bad = Client(queue_url=url, table=table).enqueue("echo", 4, 5)
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert len(messages) == 2

    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_SIGNING_SECRET", arn)
    worker = LambdaWorker(log=None)
    response = worker({"Records": [_lambda_record(m, queue_arn) for m in messages]}, None)
    assert response == {"batchItemFailures": []}
    records = {i["id"]["S"]: i for i in boto3.client("dynamodb").scan(TableName=table)["Items"]}
    assert records[good.id]["status"]["S"] == "succeeded"
    assert bad.id not in records
    (rejected,) = [r for r in records.values() if r["status"]["S"] == "rejected"]
    assert rejected["job_id"]["S"] == bad.id and "unsigned message" in rejected["error"]["M"]["message"]["S"]
    assert worker.runner.verifier.keyring.reads == 1
