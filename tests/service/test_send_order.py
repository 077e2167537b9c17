"""The producer's send pipeline keeps each FIFO message group in call order (moto's SQS):
a group's batches go one after the other, only batches of different groups in parallel."""

import uuid

import boto3
import pytest
from kindling.core.envelope import decode_job
from kindling.producer.client import Call, Client, EnqueueError
from support.sqs import fifo_queue_with_dlq


@pytest.fixture
def fifo_url(moto_endpoint):
    return fifo_queue_with_dlq(f"order-{uuid.uuid4().hex[:8]}")[0]


def received_by_group(queue_url: str) -> dict[str, list]:
    """Every message's first argument, per message group, in the order the queue gives them."""
    sqs, groups = boto3.client("sqs"), {}
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30, WaitTimeSeconds=1,
                                  AttributeNames=["MessageGroupId"]).get("Messages", [])
        if not got:
            return groups
        for m in got:
            groups.setdefault(m["Attributes"]["MessageGroupId"], []).append(decode_job(m["Body"].encode()).args[0])
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])


def test_two_hundred_jobs_of_one_group_reach_the_queue_in_call_order(fifo_url):
    handles = Client(queue_url=fifo_url, table="unused").enqueue_many(
        [Call("step", [n], group="g") for n in range(200)])
    assert len(handles) == 200
    assert received_by_group(fifo_url) == {"g": list(range(200))}


def test_interleaved_groups_each_reach_the_queue_in_call_order(fifo_url):
    calls = [Call("step", [f"{g}{n}"], group=g) for n in range(60) for g in ("a", "b")]
    Client(queue_url=fifo_url, table="unused").enqueue_many(calls, concurrency=8)
    assert received_by_group(fifo_url) == {g: [f"{g}{n}" for n in range(60)] for g in ("a", "b")}


class RefusingGroup:
    """An SQS client that fails every SendMessageBatch holding group ``group``'s ``nth``
    (0-based) call, and passes the others to moto."""

    def __init__(self, group: str, nth: int):
        self._sqs, self.group, self.nth, self.calls = boto3.client("sqs"), group, nth, 0

    def send_message_batch(self, QueueUrl, Entries):  # noqa: N803 - boto3's names
        if any(e.get("MessageGroupId") == self.group for e in Entries):
            self.calls += 1
            if self.calls - 1 == self.nth:
                self.calls -= 1  # every retry of this batch is refused too
                raise ConnectionError("refused")
        return self._sqs.send_message_batch(QueueUrl=QueueUrl, Entries=Entries)

    def __getattr__(self, name):
        return getattr(self._sqs, name)


def test_a_group_whose_batch_is_not_accepted_sends_none_of_its_later_jobs(fifo_url, monkeypatch):
    import kindling.producer.client

    monkeypatch.setattr(kindling.producer.client, "_sleep", lambda attempt: None)
    client = Client(queue_url=fifo_url, table="unused")
    client._sqs = RefusingGroup("a", nth=1)  # a's second batch (jobs a10-a19)
    calls = [Call("step", [f"a{n}"], group="a", job_id=f"a{n}") for n in range(35)]
    calls += [Call("step", [f"b{n}"], group="b", job_id=f"b{n}") for n in range(15)]
    with pytest.raises(EnqueueError) as info:
        client.enqueue_many(calls)
    assert set(info.value.failed) == {f"a{n}" for n in range(10, 35)}
    assert "a10" in info.value.failed["a25"]  # says which earlier job held it back
    assert [h.id for h in info.value.sent] == [f"a{n}" for n in range(10)] + [f"b{n}" for n in range(15)]
    assert received_by_group(fifo_url) == {"a": [f"a{n}" for n in range(10)], "b": [f"b{n}" for n in range(15)]}


def test_batches_pack_many_small_groups_and_keep_each_group_in_one_lane():
    from kindling.shared.sqs_send import plan

    def message(ref, group):
        return (ref, "x" * 10, {"MessageGroupId": group})

    small = [message(f"s{n}", f"g{n}") for n in range(25)]  # 25 one-job groups
    big = [message(f"b{n}", "big") for n in range(23)]
    lanes = plan(small[:12] + big + small[12:], fifo=True, max_bytes=262_144)
    refs = [[[m[0] for m in batch] for batch in lane] for lane in lanes]
    assert [f"b{n}" for n in range(23)] == [r for lane in refs for batch in lane for r in batch if r[0] == "b"]
    big_lane = next(lane for lane in refs if any(r.startswith("b") for r in lane[0]))
    assert big_lane == [[f"b{n}" for n in range(10)], [f"b{n}" for n in range(10, 20)], ["b20", "b21", "b22"]]
    other = [lane for lane in refs if lane is not big_lane]
    assert all(len(lane) == 1 for lane in other)  # each small batch may go at once
    assert sorted(len(lane[0]) for lane in other) == [5, 10, 10]


def test_a_standard_queue_batches_go_in_any_order():
    from kindling.shared.sqs_send import plan

    lanes = plan([(str(n), "x", {}) for n in range(25)], fifo=False, max_bytes=262_144)
    assert [[len(batch) for batch in lane] for lane in lanes] == [[10], [10], [5]]


def test_a_batch_holds_at_most_the_queue_s_message_size_in_all():
    from kindling.shared.sqs_send import plan

    lanes = plan([(str(n), "x" * 400, {"MessageGroupId": "g"}) for n in range(6)], fifo=True, max_bytes=1024)
    assert [[len(batch) for batch in lane] for lane in lanes] == [[2, 2, 2]]
