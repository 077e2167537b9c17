"""ValkeyResultStore on a real valkey-server: what it adds to the contract every store keeps
(tests/contract/test_result_store.py): expiries, waiters that block, writes seen at once."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.valkey, pytest.mark.stores("valkey")]


def ttl(store, job_id: str) -> int:
    """The expiry of a record, under its documented key ``<prefix>:result:<id>``."""
    return store.client.execute_command("TTL", f"{store.prefix}:result:{job_id}")


def test_records_expire_after_the_store_s_ttl(store):
    store.write([{"id": "a", "status": "succeeded", "attempts": 1}, {"id": "b", "status": "failed", "attempts": 1}])
    assert 0 < ttl(store, "a") <= 60 and 0 < ttl(store, "b") <= 60


def test_a_waiter_wakes_on_a_final_record_and_waits_through_a_failure(store):
    store.write([{"id": "j", "status": "failed", "attempts": 1}])
    assert store.wait("j", timeout=0.05) is None
    store.write([{"id": "j", "status": "dead", "attempts": 2}])
    assert store.wait("j", timeout=1)["status"] == "dead"
    assert store.wait("j", timeout=1)["status"] == "dead"  # the token is put back for the next waiter


def test_a_chord_record_keeps_its_expiry_through_its_claim_and_its_mark(store):
    key = "chord#c2"
    store.count_member(key, 0, 1, ok=True, at_ms=1_790_000_000_123, ttl_s=60)
    assert 0 < ttl(store, key) <= 60
    assert store.claim_chord(key, "c2.then", at_ms=1_790_000_000_200) is True
    store.mark_chord_sent(key, at_ms=1_790_000_000_400)
    assert 0 < ttl(store, key) <= 60
    assert store.record(key)["updated_at"] == 1_790_000_000_123  # milliseconds survive the server's JSON


def test_a_batch_s_records_are_there_before_the_runner_finishes_it(store):
    """A long-lived worker reads its write back only after its next read of the stream: the
    Valkey store writes at once, so a waiter sees the result without waiting for that read."""
    from kindling.core.envelope import encode_job, new_job
    from kindling.core.registry import Registry
    from kindling.engine.runner import Delivery, Runner

    reg = Registry()
    reg.task(name="add")(lambda a, b: a + b)
    job = new_job("add", [1, 2])
    runner = Runner(reg, store, log=None)
    batch = runner.execute(runner.begin([Delivery("m1", encode_job(job).decode(), 1)]))
    assert store.read_states([job.id]) == {job.id: ("succeeded", 1)}  # written before finish()
    assert [o.status for o in runner.finish(batch)] == ["succeeded"]


def test_a_client_that_takes_no_deadline_still_sends_nothing_past_one():
    """A valkey-py client passed as ``client=`` has no deadline of its own (its socket timeout
    bounds a call once sent): a deadline already passed still ends the call before it is sent."""
    import time

    from kindling.core.errors import StoreUnavailable
    from kindling.valkey import ValkeyResultStore

    class Pipeline:  # valkey-py's: execute() takes no deadline
        def __init__(self, sent):
            self.sent = sent

        def mget(self, keys):
            self.queued = keys

        def execute(self):
            self.sent.append(self.queued)
            return [[None] * len(self.queued)]

    class Client:
        sent: list = []

        def pipeline(self, transaction=True):
            return Pipeline(self.sent)

    store = ValkeyResultStore("redis://127.0.0.1:6379", client=Client())
    with pytest.raises(StoreUnavailable, match="deadline"):
        store.read_states(["a"], deadline=time.monotonic() - 1)
    assert Client.sent == []
    assert store.read_states(["a"], deadline=time.monotonic() + 60) == {} and len(Client.sent) == 1
