"""template.yaml rendered with five named queues (infra/queues/render.py) and deployed into
LocalStack: every queue has its own trigger, limit and dead-letter queue, and a job sent to
each one is run by the worker from that queue and recorded succeeded. The same stack sets
the table's scale knobs: eight by_status shards (StatusIndexShards), and warm throughput,
which LocalStack accepts and ignores (its AWS::DynamoDB::Table provider passes no
WarmThroughput to CreateTable: tests/tooling/test_template_table.py checks the template)."""

from __future__ import annotations

import time

import boto3
import pytest

pytestmark = [pytest.mark.localstack, pytest.mark.slow]

QUEUES = {"reports": "Reports", "bulk_2": "Bulk2", "thumb-nails": "ThumbNails", "emails": "Emails",
          "exports": "Exports"}


@pytest.fixture(scope="module")
def five(named_queues_stack):
    return named_queues_stack


@pytest.fixture
def client(five, localstack, monkeypatch):
    from kindling.producer.client import Client

    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KINDLING_QUEUES", five["QueueRoutes"])  # as a producer is configured
    return Client(queue_url=five["QueueUrl"], table=five["ResultsTableName"])


def _attributes(url: str, *names: str) -> dict:
    return boto3.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=list(names))["Attributes"]


def test_every_named_queue_is_deployed_with_its_trigger_limit_dlq_and_policy(five, client):
    assert client.queues == {name: five[f"Queue{qid}Url"] for name, qid in QUEUES.items()}
    mappings = boto3.client("lambda").list_event_source_mappings(
        FunctionName=five["WorkerFunctionName"])["EventSourceMappings"]
    limits = {m["EventSourceArn"]: m["ScalingConfig"]["MaximumConcurrency"] for m in mappings}
    for name, qid in QUEUES.items():
        url = five[f"Queue{qid}Url"]
        attrs = _attributes(url, "QueueArn", "RedrivePolicy", "Policy")
        assert url.endswith(f"/kindling-five-{name}")
        assert limits[attrs["QueueArn"]] == {"reports": 3, "exports": 4}.get(name, 2)
        dlq_arn = _attributes(five[f"Queue{qid}DeadLetterQueueUrl"], "QueueArn")["QueueArn"]
        assert dlq_arn in attrs["RedrivePolicy"]
        # The producer accounts may send to the queue (not to its DLQ); nothing goes without TLS.
        assert "111111111111" in attrs["Policy"] and "222222222222" in attrs["Policy"]
        assert "aws:SecureTransport" in attrs["Policy"]
    assert len(limits) == 1 + len(QUEUES)


def test_a_job_sent_to_each_named_queue_runs_from_it_and_is_recorded_succeeded(five, client):
    from kindling.producer.client import Call

    handles = {name: client.send(Call("echo", [f"via {name}"], queue=name)) for name in QUEUES}
    results = {name: handle.result(timeout=180) for name, handle in handles.items()}
    assert results == {name: {"args": [f"via {name}"], "kwargs": {}} for name in QUEUES}
    records = {name: client.record(handle.id) for name, handle in handles.items()}
    assert {name: r["status"] for name, r in records.items()} == dict.fromkeys(QUEUES, "succeeded")
    # Sent to, and so only run from, its own queue: none of them through the jobs queue.
    assert _attributes(five["QueueUrl"], "ApproximateNumberOfMessages")["ApproximateNumberOfMessages"] == "0"


def _id_in_shard(prefix: str, shard: int) -> str:
    """A job id whose by_status shard is ``shard`` of 8 (and so not the one 4 shards give)."""
    return next(f"{prefix}-{n}" for n in range(1000) if sum(f"{prefix}-{n}".encode()) % 8 == shard)


def test_the_worker_writes_the_deployments_status_shards_and_a_listing_reads_them(five, client, monkeypatch):
    from kindling.producer.client import Call
    from kindling.tools.ops import Stack
    from kindling.tools.ops.query import list_jobs

    env = boto3.client("lambda").get_function_configuration(FunctionName=five["WorkerFunctionName"])
    assert env["Environment"]["Variables"]["KINDLING_STATUS_SHARDS"] == "8"
    ids = {name: _id_in_shard(f"eight-{name}", 4 + i % 4) for i, name in enumerate(QUEUES)}
    for name, job_id in ids.items():
        client.send(Call("always_fails", [f"dies on {name}"], queue=name, job_id=job_id))
    records = {}
    deadline = time.monotonic() + 180
    while len(records) < len(ids) and time.monotonic() < deadline:
        records = {j: r for j in ids.values() if (r := client.record(j)) and r["status"] == "dead"}
        time.sleep(1)
    assert {j: r["status_shard"] for j, r in records.items()} == {
        j: f"dead#{4 + i % 4}" for i, j in enumerate(ids.values())}
    monkeypatch.setenv("KINDLING_STATUS_SHARDS", "8")  # operators set what the stack sets
    listed = list_jobs(Stack(table=five["ResultsTableName"], queue_url=five["QueueUrl"]), status="dead", since_ms=0,
                       limit=1000)
    assert set(ids.values()) <= {r["id"] for r in listed}

