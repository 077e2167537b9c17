"""The async producer (``await client.aenqueue``, ``await producer.aenqueue``, ``await
task.adelay``): concurrent awaits share batches (one SendMessageBatch of up to 10, one
pipeline of XADDs per round trip), each await returns its own job's handle or its own
error, and cancelling one await loses or breaks none of the others.

Against moto's SQS and a real valkey-server (tests/support/valkey.py).
"""

from __future__ import annotations

import asyncio
import math
import threading
import uuid

import boto3
import pytest
from kindling.core.envelope import decode_job
from kindling.core.errors import EnqueueError
from kindling.core.registry import Registry
from kindling.core.valkey.keys import FIELD
from kindling.drivers.valkey.client import Valkey
from kindling.producer import dispatch
from kindling.producer.client import Call, Client
from kindling.valkey import StreamProducer

# -- SQS ---------------------------------------------------------------------------------

@pytest.fixture
def queue_url(moto_endpoint):
    return boto3.client("sqs").create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}")["QueueUrl"]


def drain(queue_url: str) -> list:
    sqs, jobs = boto3.client("sqs"), []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return jobs
        jobs += [decode_job(m["Body"].encode()) for m in got]
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])


def count_batches(client: Client) -> list[int]:
    """The number of entries of every SendMessageBatch the client makes, as sent."""
    sizes: list[int] = []
    client.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch",
                                    lambda params, **_: sizes.append(len(params["Entries"])))
    return sizes


class RefusingSqs:
    """moto's SQS, except that SQS refuses (sender's fault) every entry whose body holds ``mark``."""

    def __init__(self, sqs, mark: str, gate: threading.Event | None = None):
        self.sqs, self.mark, self.gate = sqs, mark, gate

    def __getattr__(self, name):
        return getattr(self.sqs, name)

    def send_message_batch(self, QueueUrl, Entries):  # noqa: N803 - boto3's names
        if self.gate is not None:
            self.gate.wait(10)
        refused = [e for e in Entries if self.mark in e["MessageBody"]]
        kept = [e for e in Entries if self.mark not in e["MessageBody"]]
        response = self.sqs.send_message_batch(QueueUrl=QueueUrl, Entries=kept) if kept else {"Successful": []}
        response["Failed"] = [{"Id": e["Id"], "SenderFault": True, "Code": "InvalidMessageContents",
                               "Message": "refused for the test"} for e in refused]
        return response


@pytest.mark.parametrize("n", [1, 10, 95, 250])
def test_n_concurrent_aenqueues_make_ceil_n_over_10_sendmessagebatch_calls(queue_url, n):
    client = Client(queue_url=queue_url, table="unused")
    sizes = count_batches(client)

    async def main():
        return await asyncio.gather(*(client.aenqueue("echo", i) for i in range(n)))

    handles = asyncio.run(main())
    assert len(sizes) == math.ceil(n / 10) and sum(sizes) == n
    jobs = {job.id: job for job in drain(queue_url)}
    assert [jobs[h.id].args for h in handles] == [[i] for i in range(n)]  # each await: its own job


def test_an_entry_sqs_refuses_fails_its_own_await_only(queue_url):
    client = Client(queue_url=queue_url, table="unused")
    client._sqs = RefusingSqs(client.sqs, "refuse-me")

    async def main():
        return await asyncio.gather(*(client.aenqueue("echo", "refuse-me" if i == 4 else i) for i in range(10)),
                                    return_exceptions=True)

    outcomes = asyncio.run(main())
    assert isinstance(outcomes[4], EnqueueError) and "InvalidMessageContents" in str(outcomes[4])
    [refused_id] = outcomes[4].failed
    on_queue = {job.id for job in drain(queue_url)}
    assert on_queue == {o.id for i, o in enumerate(outcomes) if i != 4} and refused_id not in on_queue


def test_errors_reach_their_own_awaits_in_order(queue_url):
    reg = Registry()

    @reg.task(name="add")
    def add(a, b):
        return a + b

    client = Client(queue_url=queue_url, table="unused")
    client._sqs = RefusingSqs(client.sqs, "refuse-me")
    calls = [Call("echo", [0]), Call(add, [1]), Call("echo", ["refuse-me"]), Call("echo", [3], delay=15 * 86_400),
             Call("echo", [4])]

    async def main():
        return await asyncio.gather(*(client.asend(c) for c in calls), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert [type(o).__name__ for o in outcomes] == ["JobHandle", "TypeError", "EnqueueError", "ValueError",
                                                    "JobHandle"]
    assert "14 days" in str(outcomes[3]) or "1209600" in str(outcomes[3]), str(outcomes[3])
    assert sorted(job.args[0] for job in drain(queue_url)) == [0, 4]


def test_cancelling_one_await_loses_none_of_the_others(queue_url):
    client = Client(queue_url=queue_url, table="unused")
    gate = threading.Event()
    client._sqs = RefusingSqs(client.sqs, "never", gate=gate)

    async def main():
        tasks = [asyncio.ensure_future(client.aenqueue("echo", i)) for i in range(25)]
        await asyncio.sleep(0.05)  # three batches out, held at the gate
        tasks[3].cancel()  # in a batch that has left: sent anyway
        gate.set()
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert isinstance(outcomes[3], asyncio.CancelledError)
    args = sorted(job.args[0] for job in drain(queue_url))
    assert args == list(range(25))
    assert all(o.id for i, o in enumerate(outcomes) if i != 3)


def test_task_adelay_sends_through_the_installed_client(queue_url):
    reg = Registry()

    @reg.task(name="add")
    def add(a, b):
        return a + b

    client = Client(queue_url=queue_url, table="unused")
    sizes = count_batches(client)
    previous = dispatch.set_producer(client)
    try:
        async def main():
            return await asyncio.gather(*(add.adelay(i, 1) for i in range(12)))

        handles = asyncio.run(main())
    finally:
        dispatch.set_producer(previous)
    assert sorted(sizes) == [2, 10]
    assert sorted(job.args for job in drain(queue_url)) == sorted([i, 1] for i in range(12))
    assert {h.task for h in handles} == {"add"}


def test_task_adelay_raises_a_bad_call_before_anything_is_sent(queue_url):
    reg = Registry()

    @reg.task(name="add")
    def add(a, b):
        return a + b

    with pytest.raises(TypeError):
        asyncio.run(add.adelay(1, 2, 3))


# -- Valkey ------------------------------------------------------------------------------

@pytest.fixture
def stream() -> str:
    return f"aenqueue:{uuid.uuid4().hex[:8]}"


def count_pipelines(producer: StreamProducer) -> list[int]:
    """The number of commands of every pipeline the producer executes."""
    sizes: list[int] = []
    make = producer.client.pipeline

    def pipeline(*args, **kwargs):
        pipe = make(*args, **kwargs)
        execute = pipe.execute

        def counted(*a, **k):
            sizes.append(len(pipe.command_stack))
            return execute(*a, **k)

        pipe.execute = counted
        return pipe

    producer.client.pipeline = pipeline
    return sizes


@pytest.mark.valkey
def test_a_thousand_concurrent_stream_aenqueues_go_in_two_pipelines(valkey_url, stream):
    producer = StreamProducer(valkey_url, stream=stream, reader=False)
    sizes = count_pipelines(producer)

    async def main():
        return await asyncio.gather(*(producer.aenqueue("echo", i) for i in range(1000)))

    sent = asyncio.run(main())
    assert sizes == [500, 500]  # StreamProducer's CHUNK per round trip
    entries = Valkey.from_url(valkey_url).xrange(stream)
    assert len(entries) == 1000 and {s.entry for s in sent} == {e[0].decode() for e in entries}


@pytest.mark.valkey
def test_an_xadd_the_server_refuses_fails_only_its_own_await(valkey_url, stream):
    r = Valkey.from_url(valkey_url)
    r.set(f"{stream}:refused", "not a stream")  # an XADD to it is refused (WRONGTYPE)
    producer = StreamProducer(valkey_url, stream=stream, reader=False)
    make = producer.client.pipeline

    def pipeline(*args, **kwargs):  # the even-numbered jobs' XADDs go where the server refuses them
        pipe = make(*args, **kwargs)
        xadd = pipe.xadd

        def routed(name, fields, *a, **k):
            even = decode_job(fields[FIELD]).args[0] % 2 == 0
            return xadd(f"{stream}:refused" if even else name, fields, *a, **k)

        pipe.xadd = routed
        return pipe

    producer.client.pipeline = pipeline

    async def main():
        calls = [Call("echo", [i]) for i in range(6)]
        return await asyncio.gather(*(producer.asend(c) for c in calls), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert [type(o).__name__ for o in outcomes] == ["EnqueueError", "Sent"] * 3
    assert all("WRONGTYPE" in str(o) for o in outcomes[0::2])
    assert r.xlen(stream) == 3


@pytest.mark.valkey
def test_cancelling_one_stream_await_before_it_leaves_sends_the_others(valkey_url, stream):
    producer = StreamProducer(valkey_url, stream=stream, reader=False)

    async def main():
        tasks = [asyncio.ensure_future(producer.aenqueue("echo", i)) for i in range(20)]
        await asyncio.sleep(0)  # every call waits for the flush that runs next
        tasks[7].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert isinstance(outcomes[7], asyncio.CancelledError)
    entries = Valkey.from_url(valkey_url).xrange(stream)
    assert sorted(decode_job(e[1][b"job"]).args[0] for e in entries) == [i for i in range(20) if i != 7]
