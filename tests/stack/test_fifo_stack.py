"""template.yaml with FifoQueue=true and PeriodicTasks=true, deployed into LocalStack: the
jobs of a message group run in order under failure, the worker answers the ticker, and the
ticker rule runs the example periodic task (slow: waits for EventBridge's next minute)."""

from __future__ import annotations

import json

import boto3
import pytest

pytestmark = [pytest.mark.localstack, pytest.mark.slow]


@pytest.fixture(scope="module")
def fifo_stack(deploy_stack):
    return deploy_stack("kindling-fifo", {"FifoQueue": "true", "PeriodicTasks": "true", "MaxAttempts": "2"})


def test_a_group_waits_for_its_failed_job_and_other_groups_go_on(fifo_stack, localstack, monkeypatch):
    from kindling.producer.client import Call, Client

    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    assert fifo_stack["QueueUrl"].endswith(".fifo")
    client = Client(queue_url=fifo_stack["QueueUrl"], table=fifo_stack["ResultsTableName"])
    first, broken, after = client.enqueue_many([
        Call("echo", ["first"], group="g1"), Call("always_fails", ["broken"], group="g1"),
        Call("echo", ["after"], group="g1")])
    other = client.send(Call("echo", ["other"], group="g2"))
    assert after.result(timeout=120) == {"args": ["after"], "kwargs": {}}
    assert first.status() == "succeeded" and other.status() == "succeeded"
    dead, late = client.record(broken.id), client.record(after.id)
    assert dead["status"] == "dead" and dead["attempts"] == 2
    # In order: the job after the broken one started only once the broken one was dead.
    assert late["started_at"] >= dead["finished_at"]


def test_the_deployed_worker_answers_the_ticker(fifo_stack, localstack, monkeypatch):
    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    reply = boto3.client("lambda").invoke(FunctionName=fifo_stack["WorkerFunctionName"],
                                          Payload=json.dumps({"kindling": "tick"}).encode())
    body = json.loads(reply["Payload"].read())
    # functions/worker/periodic.py's heartbeat, rate(1 minute): this minute's fire and the one before
    assert body["kindling"] == "ticked" and body["failed"] == [], body
    assert len(body["enqueued"]) == 2 and all(i.startswith("sched.heartbeat.") for i in body["enqueued"])
    from kindling.producer.client import Client

    client = Client(queue_url=fifo_stack["QueueUrl"], table=fifo_stack["ResultsTableName"])
    for job_id in body["enqueued"]:
        assert client.result(job_id, timeout=120) == int(job_id.rpartition(".")[2])


def test_the_deployed_ticker_rule_invokes_the_worker_with_the_tick_event_every_minute(fifo_stack, localstack,
                                                                                    monkeypatch):
    """The rule's wiring: rate(1 minute), targeting the worker with exactly the event the
    test above invokes it with, and a permission that lets EventBridge invoke it. That
    EventBridge fires a rate rule is EventBridge's part (waiting a minute for it here proved
    only that)."""
    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    events, lam = boto3.client("events"), boto3.client("lambda")
    (rule,) = [r for r in events.list_rules()["Rules"]
               if r.get("ScheduleExpression") == "rate(1 minute)" and "kindling-fifo" in r["Name"]]
    assert rule["State"] == "ENABLED"
    (target,) = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    function = lam.get_function(FunctionName=fifo_stack["WorkerFunctionName"])["Configuration"]
    assert target["Arn"] == function["FunctionArn"]
    assert json.loads(target["Input"]) == {"kindling": "tick"}
    statements = json.loads(lam.get_policy(FunctionName=function["FunctionName"])["Policy"])["Statement"]
    assert any(st["Principal"] == {"Service": "events.amazonaws.com"} and st["Action"] == "lambda:InvokeFunction"
               and st.get("Condition", {}).get("ArnLike", {}).get("AWS:SourceArn") == rule["Arn"]
               for st in statements), statements