"""SQS settlement without AWS: the event is read once, into deliveries that carry what settling
them needs; :func:`kindling.triggers.sqs.events.settlement` decides every message's fate from the outcomes
alone; :class:`kindling.triggers.sqs.port.SqsPort` carries that out, the same for the Lambda handler
(Lambda deletes) and the local loop (deletes itself)."""

from __future__ import annotations

import types

import pytest
from kindling.core.envelope import new_job
from kindling.core.errors import KindlingError
from kindling.engine.runner import Delivery, Outcome
from kindling.triggers.sqs import events as sqs
from kindling.triggers.sqs.port import SqsPort

ARN = "arn:aws:sqs:us-east-1:123456789012:jobs"
OTHER = "arn:aws:sqs:us-east-1:123456789012:reports"
DLQ = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dead"


def received(ref: str, *, queue: str = ARN, group: str | None = None, signature: str | None = None) -> Delivery:
    """SQS message ``ref`` as the trigger received it (settling never reads its body ``body of <ref>``):
    its receipt handle ``rh-<ref>``, its queue, group and signature."""
    return Delivery(ref, f"body of {ref}", 1, group=group, signature=signature, receipt=f"rh-{ref}", queue_arn=queue)


def outcome(ref: str, status: str, *, retry_in: int | None = None, reason: str | None = None) -> Outcome:
    o = Outcome(ref, f"job-{ref}", "t", status, 1)
    o.retry_in, o.reason = retry_in, reason
    return o


def test_a_delivery_carries_its_receipt_queue_group_and_signature_read_once_from_the_event():
    event = {"Records": [{
        "messageId": "m1", "receiptHandle": "rh1", "body": "{}", "eventSource": "aws:sqs", "eventSourceARN": ARN,
        "attributes": {"ApproximateReceiveCount": "2", "MessageGroupId": "g", "AWSTraceHeader": "Root=1-2-3"},
        "messageAttributes": {"kindling_signature": {"stringValue": "v1:k:mac", "dataType": "String"}}}]}
    (d,) = sqs.deliveries(event)  # signing off: the signature is carried for the DLQ, never checked
    assert (d.ref, d.receipt, d.queue_arn, d.group, d.signature, d.attempts, d.trace) == (
        "m1", "rh1", ARN, "g", "v1:k:mac", 2, "Root=1-2-3")
    assert d.source is None
    (signed,) = sqs.deliveries(event, signed=True)
    assert signed.source == "sqs:123456789012:jobs"


def test_settled_messages_are_deleted_and_handed_back_ones_reported_due_when_the_runner_says():
    batch = [received("ok"), received("skip"), received("bad"), received("late"), received("later"), received("plain")]
    outcomes = [outcome("ok", "succeeded"), outcome("skip", "skipped"), outcome("bad", "rejected"),
                outcome("late", "failed", retry_in=20), outcome("later", "deferred", retry_in=10**6),
                outcome("plain", "failed")]
    s = sqs.settlement(batch, outcomes)
    assert s.response == {"batchItemFailures": [{"itemIdentifier": r} for r in ("late", "later", "plain")]}
    assert s.deletes == {ARN: [{"Id": r, "ReceiptHandle": f"rh-{r}"} for r in ("ok", "skip", "bad")]}
    # A failure without a retry delay is left to the queue's visibility timeout; SQS's ceiling holds.
    assert s.visibility == {ARN: [{"Id": "late", "ReceiptHandle": "rh-late", "VisibilityTimeout": 20},
                                  {"Id": "later", "ReceiptHandle": "rh-later",
                                   "VisibilityTimeout": sqs.MAX_VISIBILITY_S - 1}]}  # a second for the clocks
    assert s.dlq_moves == {} and s.unrouted == []


def test_a_dead_job_is_moved_to_its_dlq_with_why_its_job_id_and_its_signature_then_deleted():
    batch = [received("d", signature="v1:k:mac"), received("f", group="g", queue=OTHER)]
    outcomes = [outcome("d", "dead", reason="boom"), outcome("f", "dead")]
    fifo_dlq = "https://sqs.us-east-1.amazonaws.com/123456789012/reports-dead.fifo"
    s = sqs.settlement(batch, outcomes, dlq_urls={ARN: DLQ, OTHER: fifo_dlq})
    assert s.response == {"batchItemFailures": []} and s.visibility == {}
    assert s.dlq_moves[DLQ] == [{"Id": "d", "MessageBody": "body of d", "MessageAttributes": {
        "kindling_reason": {"DataType": "String", "StringValue": "boom"},
        "kindling_job_id": {"DataType": "String", "StringValue": "job-d"},
        "kindling_signature": {"DataType": "String", "StringValue": "v1:k:mac"}}}]
    (moved,) = s.dlq_moves[fifo_dlq]
    assert moved["MessageGroupId"] == "g" and moved["MessageDeduplicationId"] == "f"
    assert moved["MessageAttributes"]["kindling_reason"]["StringValue"] == "dead"
    assert s.deletes == {ARN: [{"Id": "d", "ReceiptHandle": "rh-d"}], OTHER: [{"Id": "f", "ReceiptHandle": "rh-f"}]}
    assert s.moving == ["d", "f"]


def test_a_dead_job_with_no_dlq_for_its_queue_is_reported_back_at_once_for_the_redrive_policy():
    batch = [received("d"), received("e", queue=OTHER)]
    outcomes = [outcome("d", "dead"), outcome("e", "dead")]
    for s in (sqs.settlement(batch, outcomes), sqs.settlement(batch, outcomes, dlq_urls={ARN: DLQ})):
        assert "e" in [f["itemIdentifier"] for f in s.response["batchItemFailures"]]
        assert {"Id": "e", "ReceiptHandle": "rh-e", "VisibilityTimeout": 0} in s.visibility[OTHER]
    assert sqs.settlement(batch, outcomes).unrouted == []  # no DLQ configured at all: nothing to say
    assert sqs.settlement(batch, outcomes, dlq_urls={ARN: DLQ}).unrouted == [("e", OTHER)]


def test_a_move_that_did_not_go_through_is_reported_back_at_once_and_not_deleted():
    batch = [received("ok"), received("d1"), received("d2")]
    outcomes = [outcome("ok", "succeeded"), outcome("d1", "dead"), outcome("d2", "dead")]
    s = sqs.settlement(batch, outcomes, dlq_url=DLQ).unmoved(["d2"])
    assert s.response == {"batchItemFailures": [{"itemIdentifier": "d2"}]}
    assert s.visibility == {ARN: [{"Id": "d2", "ReceiptHandle": "rh-d2", "VisibilityTimeout": 0}]}
    assert s.deletes == {ARN: [{"Id": "ok", "ReceiptHandle": "rh-ok"}, {"Id": "d1", "ReceiptHandle": "rh-d1"}]}


class FakeSqs:
    """An SQS client under boto3's method names that records every call and refuses what it is told to."""

    def __init__(self, refuse_moves: set[str] = frozenset(), fail: set[str] = frozenset(), max_bytes: int = 262_144):
        self.calls: list[tuple[str, dict]] = []
        self.refuse_moves, self.fail, self.max_bytes = refuse_moves, fail, max_bytes

    def _call(self, name: str, params: dict) -> dict:
        self.calls.append((name, params))
        if name in self.fail:
            raise OSError(f"{name} failed")
        return {}

    def get_queue_attributes(self, **params):
        self._call("get_queue_attributes", params)
        return {"Attributes": {"MaximumMessageSize": str(self.max_bytes)}}

    def send_message_batch(self, **params):
        self._call("send_message_batch", params)
        entries = params["Entries"]
        return {"Successful": [{"Id": e["Id"]} for e in entries if e["Id"] not in self.refuse_moves],
                "Failed": [{"Id": e["Id"], "Code": "Refused", "Message": "no", "SenderFault": True}
                           for e in entries if e["Id"] in self.refuse_moves]}

    def change_message_visibility_batch(self, **params):
        return self._call("change_message_visibility_batch", params)

    def delete_message_batch(self, **params):
        return self._call("delete_message_batch", params)


class FakeRunner:
    verifier = None
    payload_bucket = ""

    def __init__(self):
        self.lines: list[dict] = []
        self.log = self.lines.append

    def payload_io(self):
        return types.SimpleNamespace(client=None)  # no S3: these follow-ups fit their messages


def port(client: FakeSqs, runner: FakeRunner | None = None, *, deletes: bool, route=None) -> SqsPort:
    return SqsPort(runner or FakeRunner(), lambda _deadline: client, route=route or (lambda job: "q-url"),
                   queue_url=lambda arn: f"url-of-{arn}", deletes=deletes)


def batch_with_every_fate():
    batch = [received("ok"), received("late"), received("d1"), received("d2")]
    outcomes = [outcome("ok", "succeeded"), outcome("late", "failed", retry_in=5), outcome("d1", "dead"),
                outcome("d2", "dead")]
    return sqs.settlement(batch, outcomes, dlq_url=DLQ)


def test_the_handler_and_the_loop_settle_one_outcome_list_alike_but_only_the_loop_deletes():
    lambda_sqs, loop_sqs = FakeSqs(refuse_moves={"d2"}), FakeSqs(refuse_moves={"d2"})
    handler_response = port(lambda_sqs, deletes=False).apply(batch_with_every_fate())
    loop_response = port(loop_sqs, deletes=True).apply(batch_with_every_fate())
    assert handler_response == loop_response == {"batchItemFailures": [{"itemIdentifier": "late"},
                                                                       {"itemIdentifier": "d2"}]}
    assert [c for c in loop_sqs.calls if c[0] != "delete_message_batch"] == lambda_sqs.calls
    assert [name for name, _ in lambda_sqs.calls] == ["send_message_batch", "change_message_visibility_batch"]
    (deleted,) = [p for name, p in loop_sqs.calls if name == "delete_message_batch"]
    assert deleted == {"QueueUrl": f"url-of-{ARN}", "Entries": [{"Id": "ok", "ReceiptHandle": "rh-ok"},
                                                                 {"Id": "d1", "ReceiptHandle": "rh-d1"}]}
    (changed,) = [p for name, p in lambda_sqs.calls if name == "change_message_visibility_batch"]
    assert changed["Entries"] == [{"Id": "late", "ReceiptHandle": "rh-late", "VisibilityTimeout": 5},
                                  {"Id": "d2", "ReceiptHandle": "rh-d2", "VisibilityTimeout": 0}]


def test_a_failed_dlq_call_or_visibility_change_is_logged_and_the_rest_of_the_batch_settled():
    client, runner = FakeSqs(fail={"send_message_batch", "change_message_visibility_batch"}), FakeRunner()
    response = port(client, runner, deletes=True).apply(batch_with_every_fate())
    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == {"late", "d1", "d2"}
    assert [line["kindling"] for line in runner.lines] == ["dlq_send_failed", "visibility_not_changed"]
    (deleted,) = [p for name, p in client.calls if name == "delete_message_batch"]
    assert deleted["Entries"] == [{"Id": "ok", "ReceiptHandle": "rh-ok"}]


def test_settlement_calls_go_ten_entries_at_a_time():
    batch = [received(f"m{i}") for i in range(23)]
    client = FakeSqs()
    port(client, deletes=True).apply(sqs.settlement(batch, [outcome(d.ref, "failed", retry_in=1) for d in batch]))
    assert [len(p["Entries"]) for _, p in client.calls] == [10, 10, 3]


def test_follow_ups_go_to_their_route_read_each_queues_size_once_and_fifo_queues_get_a_group_each():
    client = FakeSqs()
    routes = {"a": "https://sqs/1/a", "b": "https://sqs/1/b.fifo"}
    p = port(client, deletes=False, route=lambda job: routes[job.task])
    p.send([new_job("a"), new_job("b"), new_job("a")])
    p.send([new_job("b")])
    sizes = [params["QueueUrl"] for name, params in client.calls if name == "get_queue_attributes"]
    assert sizes == ["https://sqs/1/a", "https://sqs/1/b.fifo"]  # once per queue, at its first send
    sends = [params for name, params in client.calls if name == "send_message_batch"]
    assert [(s["QueueUrl"], len(s["Entries"])) for s in sends] == [
        ("https://sqs/1/a", 2), ("https://sqs/1/b.fifo", 1), ("https://sqs/1/b.fifo", 1)]
    fifo = sends[1]["Entries"][0]
    assert fifo["MessageGroupId"] == fifo["MessageDeduplicationId"] != sends[2]["Entries"][0]["MessageGroupId"]
    assert "MessageGroupId" not in sends[0]["Entries"][0]


def test_a_follow_up_sqs_refuses_raises():
    client = FakeSqs(refuse_moves={"0"})
    with pytest.raises(KindlingError, match="SQS refused 1 job"):
        port(client, deletes=False).send([new_job("a")])



class DownStore:
    """A result store that cannot be reached."""

    def begin_read(self, ids, deadline=None):
        from kindling.core.errors import StoreUnavailable

        raise StoreUnavailable("injected outage")


@pytest.mark.parametrize("signature", [None, "v1:k:mac"])
def test_a_job_handed_back_on_its_last_delivery_is_sent_again_as_a_new_message_not_left_to_the_redrive(signature):
    """The store is down on the delivery where the receive count reaches maxReceiveCount:
    nothing can be recorded, so the queue's redrive would move the message to the DLQ with no
    record (or a stale ``scheduled`` one). The worker sends it again instead (a new message,
    its count starting over, after the store's backoff) and lets this one be deleted."""
    from kindling.core.envelope import encode_job
    from kindling.core.registry import Registry
    from kindling.engine.runner import Runner

    r = Registry()
    r.task(name="add")(lambda a, b: a + b)
    runner = Runner(r, DownStore(), log=None, metrics=False, max_deliveries=5)
    earlier, last = (Delivery(f"m{n}", encode_job(new_job("add", [1, n])).decode(), n, signature=signature,
                              receipt=f"rh-m{n}", queue_arn=ARN) for n in (4, 5))
    outcomes = runner.run([earlier, last])
    assert [o.status for o in outcomes] == ["deferred", "deferred"]
    s = sqs.settlement([earlier, last], outcomes, dlq_url=DLQ)
    assert s.response == {"batchItemFailures": [{"itemIdentifier": "m4"}]}  # not its last: back after the backoff
    (resent,) = s.resends[ARN]
    assert (resent["Id"], resent["MessageBody"], resent["DelaySeconds"]) == ("m5", last.body, 32)
    assert resent.get("MessageAttributes", {}).get("kindling_signature", {}).get("StringValue") == signature
    client = FakeSqs()
    assert port(client, deletes=True).apply(s) == s.response
    sent = [p for name, p in client.calls if name == "send_message_batch"]
    assert [(p["QueueUrl"], [e["Id"] for e in p["Entries"]]) for p in sent] == [(f"url-of-{ARN}", ["m5"])]
    deleted = [e["Id"] for name, p in client.calls if name == "delete_message_batch" for e in p["Entries"]]
    assert deleted == ["m5"]


def test_a_resend_that_did_not_go_through_is_reported_as_any_hand_back_is():
    batch = [Delivery("m5", "body", 5, receipt="rh-m5", queue_arn=ARN)]
    o = outcome("m5", "deferred", retry_in=32)
    o.resend = True
    s = sqs.settlement(batch, [o])
    client = FakeSqs(refuse_moves={"m5"})
    assert port(client, deletes=True).apply(s) == {"batchItemFailures": [{"itemIdentifier": "m5"}]}
    assert not [p for name, p in client.calls if name == "delete_message_batch"]


@pytest.mark.parametrize("kind", ["not_due", "over_the_rate_limit", "behind_a_failed_fifo_job", "no_time_left"])
def test_every_hand_back_ends_in_a_terminal_record_on_the_last_delivery(kind):
    """Whatever would hand a job back (its due time ahead, its task's rate limit, an earlier
    job of its FIFO group failing, the invocation's time running short), on the delivery where
    the receive count reaches maxReceiveCount the job is recorded dead and moved by the worker."""
    from kindling.core.envelope import encode_job
    from kindling.core.registry import Registry
    from kindling.engine.runner import Runner
    from kindling.stores.results import MemoryResultStore

    r = Registry()
    r.task(name="add")(lambda a, b: a + b)
    r.task(name="rated", rate_limit="1/h")(lambda a, b: a + b)
    r.task(name="flop")(lambda a, b: 1 / 0)
    store = MemoryResultStore()
    runner = Runner(r, store, log=None, metrics=False, max_deliveries=5, cutoff_ms=10**9 if kind == "no_time_left"
                    else 500)
    task = {"over_the_rate_limit": "rated"}.get(kind, "add")
    job = new_job(task, [1, 2], not_before=new_job("add", []).enqueued_at + 3_600_000 if kind == "not_due" else None)
    group = "g" if kind == "behind_a_failed_fifo_job" else None
    batch = []
    if kind == "behind_a_failed_fifo_job":
        batch.append(Delivery("first", encode_job(new_job("flop", [1, 2])), 1, group=group, queue_arn=ARN))
    if kind == "over_the_rate_limit":
        runner.run([Delivery("other", encode_job(new_job("rated", [0, 0])), 1, queue_arn=ARN)])  # its one run
    earlier = Delivery("earlier", encode_job(job), 4, group=group, receipt="rh-earlier", queue_arn=ARN)
    assert runner.run([*batch, earlier], remaining_ms=(lambda: 60_000))[-1].status == "deferred"  # handed back
    last = Delivery("last", encode_job(job), 5, group=group, receipt="rh-last", queue_arn=ARN)
    outcomes = runner.run([*batch, last], remaining_ms=(lambda: 60_000))
    assert (outcomes[-1].status, store.records[job.id]["status"]) == ("dead", "dead")
    assert sqs.settlement([*batch, last], outcomes, dlq_url=DLQ).moving == ["last"]
