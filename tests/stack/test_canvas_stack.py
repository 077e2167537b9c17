"""Chains and chords on the deployed stack (LocalStack): the worker enqueues a chain's next
step and a chord's callback on the jobs queue and counts members with UpdateItem; a result
kept in the payload bucket is passed on, and a follow-up over the queue's limit goes there.

Run: KINDLING_LOCALSTACK_PORT=P .venv/bin/python -m pytest tests/stack/test_canvas_stack.py -q
"""

import time

import boto3
import pytest
from kindling import chain, group
from kindling.core.errors import JobFailed
from kindling.engine.followups import chord_key
from kindling.producer.client import Client

pytestmark = pytest.mark.localstack


@pytest.fixture(scope="module")
def client(stack):
    import kindling.producer.dispatch as dispatch

    c = Client(queue_url=stack["QueueUrl"], table=stack["ResultsTableName"],
               payload_bucket=stack["PayloadBucketName"])
    dispatch.set_producer(c)
    yield c
    dispatch.set_producer(None)


@pytest.fixture(scope="module")
def tasks():
    import tasks as module  # functions/worker: the tasks the deployed worker runs

    return module


def _log_lines(function: str, since_ms: int, text: str, timeout: float = 30.0) -> list[str]:
    """The worker's log lines containing ``text``: read once some have shown up (CloudWatch Logs
    on LocalStack trail the invocations), and again a few seconds later to catch any more."""
    logs = boto3.client("logs")

    def read() -> list[str]:
        pages = logs.get_paginator("filter_log_events").paginate(logGroupName=f"/aws/lambda/{function}",
                                                                 startTime=since_ms)
        return [e["message"] for page in pages for e in page["events"] if text in e["message"]]

    deadline = time.monotonic() + timeout
    while not read() and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(5)
    return read()


def test_a_group_of_100_calls_its_callback_exactly_once(client, tasks, stack):
    since = int(time.time() * 1000) - 1000
    handle = group([tasks.add.s(i, i) for i in range(100)]).then(tasks.total.s(extra=1)).delay()
    assert handle.result(timeout=180) == sum(2 * i for i in range(100)) + 1
    record = client.record(chord_key(handle.id))
    assert record["status"] == "completed" and record["size"] == 100
    assert sorted(map(int, record["done"])) == list(range(100)) and "dead" not in record
    callback = client.record(handle.callback_id)
    assert callback["status"] == "succeeded" and callback["attempts"] == 1
    # every member ran once, and the callback was enqueued once
    members = [client.record(i) for i in handle.member_ids]
    assert all(m["status"] == "succeeded" and m["attempts"] == 1 for m in members)
    sent = _log_lines(stack["WorkerFunctionName"], since, handle.id)
    assert len([line for line in sent if '"chord_completed"' in line]) == 1, sent


def test_a_chain_of_three_feeds_each_result_to_the_next(client, tasks):
    handle = chain(tasks.add.s(1, 2), tasks.add.s(10), tasks.add.s(y=100)).delay()
    assert handle.result(timeout=90) == 113
    assert [client.record(i)["result"] for i in handle.ids] == ["3", "13", "113"]


def test_a_dead_member_fails_the_chord_on_the_stack(client, tasks):
    handle = group([tasks.add.s(1), tasks.always_fails.s("member down").set(max_attempts=1)]).then(
        tasks.total.s()).delay()
    with pytest.raises(JobFailed, match="member 1"):
        handle.result(timeout=120)
    assert client.record(chord_key(handle.id))["status"] == "dead"
    time.sleep(3)
    assert client.record(handle.callback_id) is None


def test_a_2_mib_result_is_passed_on_to_the_next_step_through_s3(client, tasks, stack):
    """echo's 2 MiB result is kept in S3 (too large for its record), the worker passes it on,
    and the next step's message (over the queue's 1 MiB) carries its arguments in S3 too."""
    from kindling.engine.followups import next_id

    blob = "".join(chr(0x21 + i % 90) for i in range(2 * 1024 * 1024))
    handle = chain(tasks.echo.s(blob), tasks.echo.s()).delay()
    first = {"args": [blob], "kwargs": {}}
    assert handle.result(timeout=180) == {"args": [first], "kwargs": {}}
    assert handle.ids[1] == next_id(handle.ids[0])
    records = [client.record(i) for i in handle.ids]
    assert all(r["status"] == "succeeded" and r["attempts"] == 1 and "result_payload" in r for r in records)
    s3 = boto3.client("s3")
    (moved,) = s3.list_objects_v2(Bucket=stack["PayloadBucketName"], Prefix=f"args/{handle.ids[1]}/")["Contents"]
    assert moved["Size"] > 2 * 1024 * 1024
