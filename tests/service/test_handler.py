"""The Lambda handler end to end against moto: SQS events in, DynamoDB records out."""

import time
import uuid

import boto3
import pytest
from kindling.core import codec
from kindling.core.envelope import encode_job, new_job
from kindling.producer.client import Client
from kindling.triggers.sqs.handler import LambdaWorker


@pytest.fixture
def worker(table, monkeypatch):
    import tasks  # noqa: F401  the example tasks in functions/worker

    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_MAX_ATTEMPTS", "3")
    return LambdaWorker(log=None)


@pytest.fixture
def client(table):
    return Client(queue_url="unused", table=table)


class Context:
    aws_request_id = "req-1"

    def __init__(self, remaining_ms=30_000):
        self.deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self):
        return int((self.deadline - time.monotonic()) * 1000)


def record(body, message_id=None, receive_count=1):
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": "rh",
        "body": body,
        "attributes": {"ApproximateReceiveCount": str(receive_count)},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:jobs",
        "awsRegion": "us-east-1",
    }


def job_body(task, *args, **kwargs):
    job = new_job(task, args, kwargs)
    return job.id, encode_job(job).decode()


def failures(response):
    return {f["itemIdentifier"] for f in response["batchItemFailures"]}


def test_mixed_batch_reports_exactly_the_failed_ids(worker, client):
    ok_id, ok = job_body("echo", 1, x=2)
    boom_id, boom = job_body("always_fails", "nope")
    unknown_id, unknown = job_body("no_such_task")
    records = [record(ok), record(boom, "m-boom"), record("{malformed", "m-bad"), record(unknown, "m-unknown")]
    response = worker({"Records": records}, Context())
    assert failures(response) == {"m-boom"}
    assert client.result(ok_id, timeout=1) == {"args": [1], "kwargs": {"x": 2}}
    assert client.status(boom_id) == "failed"
    assert client.record(boom_id)["error"]["message"] == "nope"
    bad = client.record("rejected#m-bad")
    assert bad["status"] == "rejected" and bad["raw"] == "{malformed" and "not JSON" in bad["error"]["message"]
    assert client.record(unknown_id)["error"]["message"] == "unknown task 'no_such_task'"


def test_a_duplicate_delivery_of_a_succeeded_job_is_not_run_again(worker, client):
    job_id, body = job_body("flaky", fails=0)
    assert failures(worker({"Records": [record(body)]}, Context())) == set()
    first = client.record(job_id)
    assert failures(worker({"Records": [record(body, receive_count=2)]}, Context())) == set()
    assert client.record(job_id) == first  # not rewritten: the task did not run again


def test_the_remaining_time_cutoff_hands_back_unstarted_jobs(worker, client):
    bodies = [job_body("sleep", 300) for _ in range(6)]
    records = [record(b, f"m{i}") for i, (_, b) in enumerate(bodies)]
    # 2.2 s left, 1 s kept back for the write, 0.5 s cutoff: ~3 sleeps start, the rest go back.
    response = worker({"Records": records}, Context(remaining_ms=2200))
    handed_back = failures(response)
    assert 2 <= len(handed_back) <= 5
    for i, (job_id, _) in enumerate(bodies):
        if f"m{i}" in handed_back:
            assert client.status(job_id) is None  # never started, never recorded
        else:
            assert client.status(job_id) == "succeeded"


def test_the_last_attempt_is_recorded_dead_and_moved_to_the_dlq_by_the_worker(worker, client, monkeypatch):
    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    worker.dlq_url = dlq
    job_id, body = job_body("always_fails", "last words")
    for attempt in (1, 2):
        assert failures(worker({"Records": [record(body, "m-dead", receive_count=attempt)]}, Context())) == {"m-dead"}
    response = worker({"Records": [record(body, "m-dead", receive_count=3)]}, Context())
    assert failures(response) == set()  # acknowledged: the worker moved it itself
    rec = client.record(job_id)
    assert rec["status"] == "dead" and rec["attempts"] == 3 and rec["error"]["message"] == "last words"
    moved = sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in moved] == [body]
    assert moved[0]["MessageAttributes"]["kindling_job_id"]["StringValue"] == job_id
    with pytest.raises(Exception, match="is dead: RuntimeError: last words"):
        client.result(job_id, timeout=1)


def test_without_a_dlq_url_a_dead_job_is_reported_for_the_redrive_policy(worker, client):
    job_id, body = job_body("always_fails", "last words")
    for attempt in (1, 2, 3):
        response = worker({"Records": [record(body, "m-dead", receive_count=attempt)]}, Context())
    assert failures(response) == {"m-dead"} and client.status(job_id) == "dead"


def test_on_the_queues_last_delivery_a_job_is_recorded_dead_before_redrive(worker, client, monkeypatch):
    monkeypatch.setenv("KINDLING_MAX_RECEIVES", "5")
    w = LambdaWorker(log=None)
    job_id, body = job_body("echo", 1)
    response = w({"Records": [record(body, "m-last", receive_count=5)]}, Context())
    assert failures(response) == {"m-last"}
    rec = client.record(job_id)
    assert rec["status"] == "dead" and rec["error"]["type"] == "TooManyDeliveries"


def test_async_tasks_run_concurrently_within_a_batch(worker, client):
    """Ten 300 ms async sleeps, concurrency 16: they overlap, so their runs intersect."""
    bodies = [job_body("async_sleep", 300) for _ in range(10)]
    response = worker({"Records": [record(b) for _, b in bodies]}, Context())
    assert failures(response) == set()
    spans = [(r["started_at"], r["finished_at"]) for r in (client.record(j) for j, _ in bodies)]
    latest_start = max(s for s, _ in spans)
    earliest_finish = min(f for _, f in spans)
    assert latest_start < earliest_finish  # every job started before any finished


def test_a_results_table_that_is_down_hands_everything_back(monkeypatch, moto_endpoint):
    import tasks  # noqa: F401

    monkeypatch.setenv("KINDLING_TABLE", "no-such-table")
    w = LambdaWorker(log=None)
    _, body = job_body("noop")
    response = w({"Records": [record(body, "m1"), record("x", "m2")]}, Context())
    assert failures(response) == {"m1", "m2"}


def test_events_that_are_not_sqs_are_refused_clearly(worker):
    with pytest.raises(Exception, match="not an SQS event or a drain event"):
        worker({"hello": "world"}, Context())


def test_results_are_json_in_dynamodb(worker, client, table):
    job_id, body = job_body("echo", "é", n=1.5)
    worker({"Records": [record(body)]}, Context())
    item = boto3.client("dynamodb").get_item(TableName=table, Key={"id": {"S": job_id}})["Item"]
    assert codec.loads(item["result"]["S"]) == {"args": ["é"], "kwargs": {"n": 1.5}}
    assert item["worker"]["M"]["request_id"]["S"] == "req-1"
    assert int(item["expires_at"]["N"]) > time.time() + 6 * 86_400


def test_failed_jobs_come_back_after_the_retry_delay_not_the_visibility_timeout(table, monkeypatch):
    """A real queue on moto: the failed message is visible again after ~1 s, not 300 s."""
    import tasks  # noqa: F401

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}", Attributes={"VisibilityTimeout": "300"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    _, body = job_body("always_fails")
    sqs.send_message(QueueUrl=url, MessageBody=body)
    msg = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["ApproximateReceiveCount"])["Messages"][0]
    event = {"Records": [{**record(body, msg["MessageId"]), "receiptHandle": msg["ReceiptHandle"],
                          "eventSourceARN": arn}]}
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_RETRY_DELAY", "1")
    response = LambdaWorker(log=None)(event, Context())
    assert failures(response) == {msg["MessageId"]}
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages") is None  # not yet
    again = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=3).get("Messages")
    assert again and again[0]["MessageId"] == msg["MessageId"]


def test_a_deeply_nested_body_is_rejected_and_its_batch_mates_succeed(worker, client):
    """40 KB of '[' (SQS accepts it; AWS passes bodies through verbatim) in a real event shape."""
    ok_id, ok = job_body("echo", 1)
    poison = "[" * 40_000
    response = worker({"Records": [record(poison, "m-poison"), record(ok, "m-ok")]}, Context())
    assert failures(response) == set()  # nothing handed back: neither message returns
    assert client.record("rejected#m-poison")["status"] == "rejected"
    assert client.status(ok_id) == "succeeded"


def test_a_task_raising_system_exit_fails_alone(worker, client, monkeypatch):
    import tasks

    monkeypatch.setattr(tasks.echo, "fn", lambda *a, **k: (_ for _ in ()).throw(SystemExit(2)))
    exit_id, exiting = job_body("echo", "x")
    ok_id, ok = job_body("noop")
    response = worker({"Records": [record(exiting, "m-exit"), record(ok, "m-ok")]}, Context())
    assert failures(response) == {"m-exit"}
    assert client.record(exit_id)["error"]["type"] == "SystemExit"
    assert client.status(ok_id) == "succeeded"


def test_an_all_succeeded_batch_makes_one_read_and_one_write_to_dynamodb(worker, monkeypatch):
    """Counted at the SigV4 client: the round-trip budget of the common case."""
    from kindling.drivers.aws import JsonClient

    calls = []
    start = JsonClient.start

    def counting(self, operation, payload, **kwargs):
        calls.append(operation)
        return start(self, operation, payload, **kwargs)

    monkeypatch.setattr(JsonClient, "start", counting)
    response = worker({"Records": [record(job_body("echo", i)[1]) for i in range(10)]}, Context())
    assert failures(response) == set()
    assert calls == ["BatchGetItem", "BatchWriteItem"]
