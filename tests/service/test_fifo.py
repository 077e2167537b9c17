"""FIFO queues: message groups in order; after a failure, the rest of that group waits."""

import uuid

import boto3
import pytest
from kindling.core.envelope import decode_job, encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.followups import next_id
from kindling.engine.runner import Runner
from kindling.producer.client import Call, Client
from kindling.stores.results import MemoryResultStore
from kindling.triggers.sqs import events as sqs
from kindling.triggers.sqs.loop import SqsWorker
from support.sqs import fifo_queue_with_dlq


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""
    r.ran = []

    @r.task(name="step")
    def step(n):
        r.ran.append(n)

    @r.task(name="astep")
    async def astep(n):
        r.ran.append(n)

    @r.task(name="fail")
    def fail(n):
        r.ran.append(n)
        raise RuntimeError(f"step {n} broke")


def fifo_event(*items):
    """A Lambda event from a FIFO queue: (group, task, arg) per message, in order."""
    records = []
    for i, (group, task, arg) in enumerate(items):
        body = encode_job(new_job(task, [arg])).decode()
        records.append({"messageId": f"m{i}", "receiptHandle": f"rh{i}", "body": body,
                        "attributes": {"ApproximateReceiveCount": "1", "MessageGroupId": group},
                        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:jobs.fifo"})
    return {"Records": records}


def test_after_a_failure_the_rest_of_its_group_is_handed_back_unstarted(reg):
    event = fifo_event(("a", "step", 1), ("b", "step", 10), ("a", "fail", 2), ("b", "astep", 11),
                       ("a", "step", 3), ("b", "step", 12))
    batch = sqs.deliveries(event)
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False).run(batch)
    assert [o.status for o in outcomes] == ["succeeded", "succeeded", "failed", "succeeded", "deferred", "succeeded"]
    assert reg.ran == [1, 10, 2, 11, 12]  # in batch order, one at a time; 3 never started
    assert "FIFO group 'a'" in outcomes[4].reason
    assert outcomes[4].retry_in == outcomes[2].retry_in  # back no sooner than the job it waits for
    assert {f["itemIdentifier"] for f in sqs.settlement(batch, outcomes).response["batchItemFailures"]} == {"m2", "m4"}


def test_a_dead_job_does_not_stop_its_group(reg):
    event = fifo_event(("a", "fail", 1), ("a", "step", 2))
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False, max_attempts=1).run(sqs.deliveries(event))
    assert [o.status for o in outcomes] == ["dead", "succeeded"]


def test_a_rejected_message_does_not_stop_its_group(reg):
    event = fifo_event(("a", "nope", 1), ("a", "step", 2))
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False).run(sqs.deliveries(event))
    assert [o.status for o in outcomes] == ["rejected", "succeeded"]


def test_dead_letters_of_a_fifo_queue_carry_their_group(reg):
    event = fifo_event(("a", "fail", 1))
    batch = sqs.deliveries(event)
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False, max_attempts=1).run(batch)
    (entry,) = sqs.settlement(batch, outcomes, dlq_url="https://sqs/1/dlq.fifo").dlq_moves["https://sqs/1/dlq.fifo"]
    assert entry["MessageGroupId"] == "a" and entry["MessageDeduplicationId"] == "m0"


def test_the_client_sends_groups_to_a_fifo_queue_and_refuses_what_fifo_cannot_do(moto_endpoint):
    client = boto3.client("sqs")
    url = client.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    producer = Client(queue_url=url, table="unused")
    producer.enqueue_many([Call("step", [n], group="g1") for n in range(3)])
    producer.send(Call("step", [9], group="g2"))
    messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert [m["Attributes"]["MessageGroupId"] for m in messages][:3] == ["g1"] * 3
    with pytest.raises(ValueError, match="needs group="):
        producer.send(Call("step", [1]))
    with pytest.raises(ValueError, match="no per-message delay"):
        producer.send(Call("step", [1], group="g1", delay=5))
    with pytest.raises(ValueError, match="needs a FIFO queue"):
        Client(queue_url="http://127.0.0.1:1/000000000000/jobs", table="t").send(Call("step", [1], group="g"))


def test_the_local_loop_keeps_each_group_in_order_and_moves_a_dead_job_to_the_fifo_dlq_in_its_group(reg, table):
    url, dlq = fifo_queue_with_dlq(f"loop-{uuid.uuid4().hex[:8]}")
    producer = Client(queue_url=url, table=table)
    doomed = producer.send(Call("fail", [1], group="a"))
    producer.send(Call("step", [2], group="a"))

    counts = SqsWorker(url, table, registry=reg, wait=1, log=None, max_attempts=2).run(burst=True, idle_timeout=10)

    # Both came in one batch: step 2 was handed back unstarted after step 1 failed in their group.
    assert counts == {"failed": 1, "deferred": 1, "dead": 1, "succeeded": 1} and sorted(reg.ran) == [1, 1, 2]
    (message,) = boto3.client("sqs").receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, AttributeNames=["All"],
                                                     MessageAttributeNames=["All"])["Messages"]
    assert decode_job(message["Body"]).id == doomed.id and message["Attributes"]["MessageGroupId"] == "a"
    assert "step 1 broke" in message["MessageAttributes"]["kindling_reason"]["StringValue"]  # the worker moved it


def test_the_local_loop_sends_a_chains_next_step_to_a_fifo_queue(reg, table):
    url, _ = fifo_queue_with_dlq(f"chain-{uuid.uuid4().hex[:8]}")
    producer = Client(queue_url=url, table=table)
    first = producer.send(Call("step", [1], group="a", chain=[{"task": "step", "args": [], "kwargs": {}}]))

    counts = SqsWorker(url, table, registry=reg, wait=1, log=None).run(burst=True, idle_timeout=10)

    assert counts == {"succeeded": 2} and reg.ran == [1, None]  # step 1 returned None: step 2's argument
    assert producer.status(next_id(first.id)) == "succeeded"
