"""Delays past SQS's 15 minutes: the message is sent at once and the delay rides in the
envelope's ``not_before``: the worker's admission records the job ``scheduled`` (with its due
time) and re-times it (a hop of up to 12 hours per delivery, no attempt counted) until it is
due; ``eta=`` is a countdown to a moment (Celery's)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from kindling.core.batch import Delivery
from kindling.core.envelope import Call, encode_job, new_job, now_ms
from kindling.core.registry import Registry
from kindling.engine.runner import Runner
from kindling.producer.client import Client
from kindling.stores.memory import MemoryResultStore
from kindling.triggers.sqs import events as sqs


class FakeSqs:
    def __init__(self):
        self.sent = []

    def send_message(self, **kwargs):
        self.sent.append(kwargs)
        return {"MessageId": "m1"}

    def get_queue_attributes(self, **kwargs):
        return {"Attributes": {"MaximumMessageSize": "262144"}}


@pytest.fixture
def client():
    c = Client(queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/jobs", table="results")
    c._sqs = FakeSqs()
    return c


def test_a_two_hour_countdown_is_sent_at_once_with_a_not_before(client):
    """No DelaySeconds: the worker receives it at once and records it scheduled, so
    ``jobs show`` says when it is due from the start."""
    before = now_ms()
    client.send(Call("tasks.add", [1, 2], delay=7200))
    sent = client.sqs.sent[0]
    assert "DelaySeconds" not in sent
    not_before = json.loads(sent["MessageBody"])["not_before"]
    assert before + 7_200_000 <= not_before <= now_ms() + 7_200_000


def test_a_countdown_within_15_minutes_is_the_message_delay_alone(client):
    client.send(Call("tasks.add", [1, 2], delay=600))
    sent = client.sqs.sent[0]
    assert sent["DelaySeconds"] == 600 and "not_before" not in json.loads(sent["MessageBody"])


def test_a_countdown_past_sqs_retention_is_refused(client):
    with pytest.raises(ValueError, match="14 days"):
        client.send(Call("tasks.add", [1, 2], delay=15 * 86_400))


def test_eta_is_the_countdown_to_that_moment():
    r = Registry()

    @r.task(name="add")
    def add(a, b):
        return a + b

    sent = []

    class Producer:
        def send(self, call):
            sent.append(call)

    from kindling.producer import dispatch

    before = dispatch.set_producer(Producer())
    try:
        add.apply_async((1, 2), eta=dt.datetime.now(dt.UTC) + dt.timedelta(hours=2))
        add.apply_async((1, 2), eta=dt.datetime.now(dt.UTC) - dt.timedelta(hours=2))  # past: at once
        with pytest.raises(ValueError, match="countdown or eta"):
            add.apply_async((1, 2), eta=dt.datetime.now(dt.UTC), countdown=5)
    finally:
        dispatch.set_producer(before)
    assert 7190 <= sent[0].delay <= 7200 and sent[1].delay == 0


def test_an_early_delivery_is_re_timed_to_its_due_time_without_an_attempt_and_runs_once_when_due():
    r = Registry()
    runs = []

    @r.task(name="add")
    def add(a, b):
        runs.append((a, b))
        return a + b

    store = MemoryResultStore()
    runner = Runner(r, store, log=None, metrics=False, max_deliveries=100)
    due = now_ms() + 7_200_000  # received at once: no DelaySeconds
    job = new_job("add", [1, 2], not_before=due)
    first = Delivery("m1", encode_job(job), 1, receipt="r1", queue_arn="arn:aws:sqs:eu-west-1:123456789012:jobs")
    [o] = runner.run([first])
    assert (o.status, runs) == ("deferred", [])
    record = store.records[job.id]  # recorded scheduled: no attempt used
    assert (record["status"], record["attempts"], record["due_at"]) == ("scheduled", 0, due)
    hop = sqs.settlement([first], [o], in_flight_s=5).visibility[first.queue_arn][0]["VisibilityTimeout"]
    assert 7190 <= hop <= 7200  # re-timed to its due time, a hop under SQS's 12 hours

    later = new_job("add", [1, 2], job_id=job.id, not_before=now_ms() - 1)  # the hop is over: due
    [o] = runner.run([Delivery("m1", encode_job(later), 2, receipt="r2")])
    assert (o.status, o.attempts, runs) == ("succeeded", 1, [(1, 2)])


def _runner(registry, store, **options):
    return Runner(registry, store, log=None, metrics=False, **options)


def _add_registry(runs):
    r = Registry()

    @r.task(name="add")
    def add(a, b):
        runs.append((a, b))
        return a + b

    return r


def test_a_job_not_due_on_its_last_delivery_is_recorded_dead_not_handed_back_to_the_dlq():
    """Each hop is a receive: on the delivery where the count reaches maxReceiveCount the job
    gets a terminal record (dead, moved by the worker) instead of going back to the queue, whose
    redrive would move it unrecorded and leave it ``scheduled`` for ever."""
    store, runs = MemoryResultStore(), []
    runner = _runner(_add_registry(runs), store, max_deliveries=5)
    job = new_job("add", [1, 2], not_before=now_ms() + 86_400_000)
    [first] = runner.run([Delivery("m1", encode_job(job), 1)])
    assert (first.status, store.records[job.id]["status"]) == ("deferred", "scheduled")
    [last] = runner.run([Delivery("m1", encode_job(job), 5)])
    record = store.records[job.id]
    assert (last.status, record["status"], record["error"]["type"], runs) == ("dead", "dead", "TooManyDeliveries", [])


def test_a_due_time_the_queue_s_receive_count_cannot_reach_is_rejected_on_its_first_delivery():
    """3 days in 12-hour hops takes 7 deliveries: a queue that moves a message on its 5th
    refuses the job at once, with the reason, instead of recording it dead days later."""
    store, runs = MemoryResultStore(), []
    runner = _runner(_add_registry(runs), store, max_deliveries=5)
    job = new_job("add", [1, 2], not_before=now_ms() + 3 * 86_400_000)
    [o] = runner.run([Delivery("m1", encode_job(job), 1)])
    record = store.records[job.id]
    assert (o.status, record["status"], runs) == ("rejected", "rejected", [])
    assert "maxReceiveCount" in record["error"]["message"]
    near = new_job("add", [1, 2], not_before=now_ms() + 86_400_000)  # 3 hops: within 5
    assert runner.run([Delivery("m2", encode_job(near), 1)])[0].status == "deferred"


def test_a_stream_s_hand_backs_cost_no_delivery_so_its_receive_count_refuses_no_delay():
    store = MemoryResultStore()
    runner = _runner(_add_registry([]), store, max_deliveries=5)
    job = new_job("add", [1, 2], not_before=now_ms() + 3 * 86_400_000)
    [o] = runner.run([Delivery("e1", encode_job(job), 1, counts_runs=True)])
    assert (o.status, store.records[job.id]["status"]) == ("deferred", "scheduled")


@pytest.mark.parametrize("retention_s", [None, 4 * 86_400])
def test_a_due_time_past_the_queue_s_retention_is_rejected_on_every_delivery(retention_s):
    """A producer other than Client (any envelope, a Celery eta) can ask for any due time: the
    worker refuses one its queue would delete first (its retention, else 14 days)."""
    store, runs = MemoryResultStore(), []
    runner = _runner(_add_registry(runs), store, retention_s=retention_s)
    limit_s = retention_s or 14 * 86_400
    far = new_job("add", [1, 2], not_before=now_ms() + (limit_s + 3600) * 1000)
    within = new_job("add", [1, 2], not_before=now_ms() + (limit_s - 3600) * 1000)
    year_9999 = new_job("add", [1, 2], not_before=253_402_300_799_000)
    outcomes = runner.run([Delivery("a", encode_job(far), 1), Delivery("b", encode_job(within), 1),
                           Delivery("c", encode_job(year_9999), 3)])
    assert [o.status for o in outcomes] == ["rejected", "deferred", "rejected"]
    assert "retention" in store.records[far.id]["error"]["message"] and runs == []


def test_a_celery_eta_past_retention_is_rejected():
    from support.celery_messages import celery_body

    store = MemoryResultStore()
    runner = _runner(_add_registry([]), store)
    eta = (dt.datetime.now(dt.UTC) + dt.timedelta(days=400)).isoformat()
    [o] = runner.run([Delivery("m1", celery_body("add", [1, 2], {}, task_id="celery-far", eta=eta), 1)])
    assert (o.status, store.records["celery-far"]["status"]) == ("rejected", "rejected")
    assert "retention" in store.records["celery-far"]["error"]["message"]
