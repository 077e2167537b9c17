"""template.yaml with named queues deployed into LocalStack (the named-queues stack: ``reports:3``
among five): a task routed to ``reports`` is run by the worker from that queue, and its dead job
lands in that queue's own dead-letter queue, not the jobs queue's."""

from __future__ import annotations

import time

import boto3
import pytest

pytestmark = [pytest.mark.localstack, pytest.mark.slow]


@pytest.fixture(scope="module")
def routed_stack(named_queues_stack):
    return named_queues_stack


@pytest.fixture
def client(routed_stack, localstack, monkeypatch):
    from kindling.producer.client import Client

    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    # As a producer is configured: KINDLING_QUEUES from the stack's QueueRoutes output.
    monkeypatch.setenv("KINDLING_QUEUES", routed_stack["QueueRoutes"])
    return Client(queue_url=routed_stack["QueueUrl"], table=routed_stack["ResultsTableName"])


def _arn(url: str) -> str:
    attrs = boto3.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return attrs["QueueArn"]


def _dead_letters(url: str, job_id: str, wait_s: float = 30) -> set[str]:
    """The job ids the dead-letter queue holds (deleting what it reads, so a rerun on the same
    stack starts clean), once ``job_id`` is among them or ``wait_s`` has passed."""
    sqs, found, deadline = boto3.client("sqs"), set(), time.monotonic() + wait_s
    while job_id not in found and time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                  MessageAttributeNames=["All"]).get("Messages", [])
        found |= {m["MessageAttributes"]["kindling_job_id"]["StringValue"] for m in got}
        if got:
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    return found


def test_the_stack_deploys_the_named_queue_with_its_own_trigger_and_limit(routed_stack, client):
    assert f"reports={routed_stack['QueueReportsUrl']}" in routed_stack["QueueRoutes"].split(",")
    assert client.queues["reports"] == routed_stack["QueueReportsUrl"]
    assert routed_stack["QueueReportsUrl"].endswith("/kindling-five-reports")
    mappings = boto3.client("lambda").list_event_source_mappings(
        FunctionName=routed_stack["WorkerFunctionName"])["EventSourceMappings"]
    by_queue = {m["EventSourceArn"]: m for m in mappings}
    reports = by_queue[_arn(routed_stack["QueueReportsUrl"])]
    assert reports["ScalingConfig"] == {"MaximumConcurrency": 3}
    assert reports["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert by_queue[_arn(routed_stack["QueueUrl"])]["ScalingConfig"] == {"MaximumConcurrency": 10}
    redrive = boto3.client("sqs").get_queue_attributes(QueueUrl=routed_stack["QueueReportsUrl"],
                                                       AttributeNames=["RedrivePolicy"])["Attributes"]
    assert _arn(routed_stack["QueueReportsDeadLetterQueueUrl"]) in redrive["RedrivePolicy"]


def test_a_routed_task_runs_from_its_queue_and_its_dead_job_lands_in_that_queues_dlq(routed_stack, client):
    from kindling.core.registry import Registry
    from kindling.producer.client import Call

    # The producer's view of the worker's "echo": the same name, routed by the task itself.
    echo = Registry().task(name="echo", queue="reports")(lambda *args, **kwargs: None)
    routed = client.enqueue(echo, "by the task")
    overridden = client.send(Call("echo", ["by the send"], queue="reports"))
    doomed = client.send(Call("always_fails", ["routed to die"], queue="reports"))
    assert routed.result(timeout=120) == {"args": ["by the task"], "kwargs": {}}
    assert overridden.result(timeout=60) == {"args": ["by the send"], "kwargs": {}}
    # The dead job's message is moved by the worker to the DLQ of the queue the event says it
    # came from: landing in the reports DLQ shows it was sent to, and run from, that queue.
    deadline = time.monotonic() + 120
    while client.status(doomed.id) != "dead" and time.monotonic() < deadline:
        time.sleep(1)
    record = client.record(doomed.id)
    assert record["status"] == "dead" and record["attempts"] == 2
    assert doomed.id in _dead_letters(routed_stack["QueueReportsDeadLetterQueueUrl"], doomed.id)
    assert doomed.id not in _dead_letters(routed_stack["DeadLetterQueueUrl"], doomed.id, wait_s=3)


def test_retry_finds_a_dead_job_in_its_queues_dlq_and_the_worker_runs_it_from_that_queue(routed_stack, client):
    """``kindling jobs retry`` as an operator runs it (KINDLING_QUEUES from QueueRoutes, no
    queue named): the job is found in the reports DLQ, revived, and sent back to reports,
    where the worker runs it again; still failing, it dies again into the reports DLQ."""
    from kindling.producer.client import Call
    from kindling.tools.ops import Stack
    from kindling.tools.ops.revive import RetryRefused, retry_job

    doomed = client.send(Call("always_fails", ["retried on its own queue"], queue="reports"))
    stack = Stack(table=routed_stack["ResultsTableName"], queue_url=routed_stack["QueueUrl"])
    deadline = time.monotonic() + 120
    while True:  # the worker writes the record, then moves the message
        try:
            done = retry_job(stack, doomed.id, search=100)
            break
        except RetryRefused:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    assert done["queue"] == "reports" and done["generation"] == 2 and done["previous_status"] == "dead"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        record = client.record(doomed.id)
        if record["status"] == "dead" and record.get("generation") == 2:
            break
        time.sleep(1)
    assert record["status"] == "dead" and record["generation"] == 2 and record["attempts"] == 2
    assert doomed.id in _dead_letters(routed_stack["QueueReportsDeadLetterQueueUrl"], doomed.id)
    assert doomed.id not in _dead_letters(routed_stack["DeadLetterQueueUrl"], doomed.id, wait_s=3)
