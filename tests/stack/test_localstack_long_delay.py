"""A 2-hour countdown on SQS (LocalStack), on a shortened clock and hop: the job waits its
two hours in hops that re-time the message (ChangeMessageVisibility), runs exactly once when
due, and none of the hops uses an attempt. It is sent at once (no DelaySeconds), so its
record says ``scheduled``, with its due time, from the first receive until it runs.

The clock kindling reads (``now_ms``) runs SPEED times faster than the wall clock, and SQS's
limits shrink to match: a message delay of at most 1 s (SQS: 900 s) and a hop of at most 3 s
(SQS: 12 hours); the rule that joins them is the one a deployed worker runs."""

from __future__ import annotations

import threading
import time
import uuid

import boto3
import pytest
from kindling.core import envelope
from kindling.core.registry import Registry
from kindling.engine import runner
from kindling.producer import client as client_module
from kindling.producer.client import Call, Client
from kindling.triggers.sqs import events as sqs
from kindling.triggers.sqs.loop import SqsWorker
from support import create_results_table

pytestmark = pytest.mark.localstack

SPEED = 600  # 2 hours pass in 12 s
COUNTDOWN_S = 7200


@pytest.fixture
def fast_clock(monkeypatch):
    t0, start = time.monotonic(), envelope.now_ms()

    def now_ms() -> int:
        return start + int((time.monotonic() - t0) * SPEED * 1000)

    for module in (envelope, runner, client_module):
        monkeypatch.setattr(module, "now_ms", now_ms)
    monkeypatch.setattr(client_module, "SQS_MAX_DELAY", 1)
    monkeypatch.setattr(sqs, "MAX_VISIBILITY_S", 3)
    return now_ms


@pytest.fixture
def queue_and_table(localstack, monkeypatch):
    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    suffix = uuid.uuid4().hex[:8]
    sqs_client, ddb = boto3.client("sqs"), boto3.client("dynamodb")
    dlq = sqs_client.create_queue(QueueName=f"long-delay-dlq-{suffix}")["QueueUrl"]
    dlq_arn = sqs_client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs_client.create_queue(QueueName=f"long-delay-{suffix}", Attributes={
        "VisibilityTimeout": "30",
        "RedrivePolicy": f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"100"}}'})["QueueUrl"]
    table = f"long-delay-{suffix}"
    create_results_table(ddb, table)
    ddb.get_waiter("table_exists").wait(TableName=table)
    yield url, table
    sqs_client.delete_queue(QueueUrl=url)
    sqs_client.delete_queue(QueueUrl=dlq)
    ddb.delete_table(TableName=table)


def test_a_two_hour_countdown_runs_once_when_due_and_its_hops_use_no_attempt(fast_clock, queue_and_table):
    url, table = queue_and_table
    registry = Registry()
    runs: list[int] = []

    @registry.task(name="long.due")
    def due() -> str:
        runs.append(fast_clock())
        return "ran"

    sent_at = fast_clock()
    handle = Client(queue_url=url, table=table).send(Call(due, [], {}, delay=COUNTDOWN_S))
    seen: list[tuple[str, int, int | None]] = []  # the record as a reader sees it while the job waits
    stop = threading.Event()

    def watch() -> None:
        reader = Client(queue_url=url, table=table)
        while not stop.is_set():
            r = reader.record(handle.id)
            if r is not None:
                seen.append((r["status"], r["attempts"], r.get("due_at")))
            stop.wait(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    worker = SqsWorker(url, table, registry, wait=1, log=None, metrics=False)
    try:
        counts = worker.run(burst=True, idle_timeout=30)
    finally:
        stop.set()
        watcher.join(10)

    record = Client(queue_url=url, table=table).record(handle.id)
    assert len(runs) == 1, counts
    assert runs[0] >= sent_at + COUNTDOWN_S * 1000  # not before it was due
    assert counts.get("deferred", 0) >= 2, counts  # it came back early and was re-timed
    assert (record["status"], record["attempts"]) == ("succeeded", 1)  # the hops used no attempt
    waiting = [s for s in seen if s[0] == "scheduled"]
    assert waiting, seen  # jobs show said it was scheduled while it waited
    assert {(status, attempts) for status, attempts, _ in waiting} == {("scheduled", 0)}
    due_at = waiting[0][2]
    assert sent_at + COUNTDOWN_S * 1000 <= due_at <= sent_at + COUNTDOWN_S * 1000 + 600_000, (sent_at, due_at)
