"""Signed jobs on a Valkey stream: the signature rides in the entry's ``sig`` field (and, for a
delayed job, in its scheduled-set member), bound to the stream.

Against a real valkey-server (tests/support/valkey.py, on a free loopback port).
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from kindling.core.valkey.keys import dead_key, scheduled_key

pytestmark = pytest.mark.valkey

KEY = b"v" * 32


@pytest.fixture(scope="module")
def url(start_valkey) -> str:
    return start_valkey().url


@pytest.fixture
def stream() -> str:
    return f"sig:{uuid.uuid4().hex[:8]}"


def keyring(key=KEY, key_id="k1"):
    from kindling.shared.signed import Keyring

    value = json.dumps({"current": key_id, "keys": {key_id: base64.b64encode(key).decode()}})
    return Keyring("arn:test", fetch=lambda ref, deadline: value)


class Setup:
    def __init__(self, url: str, stream: str):
        from kindling.core.registry import Registry
        from kindling.shared.signed import Verifier
        from kindling.stores.results import MemoryResultStore
        from kindling.valkey import StreamWorker

        self.ran: list = []
        self.store = MemoryResultStore()
        reg = Registry()

        @reg.task(name="add")
        def add(a, b):
            self.ran.append((a, b))
            return a + b

        self.worker = StreamWorker(url, registry=reg, store=self.store, stream=stream, block_ms=50, heartbeat=False,
                                   log=False, verifier=Verifier(keyring()), metrics=False)

    def drain(self) -> list:
        outcomes = []
        for _ in range(5):
            batch = self.worker.fetch(50)
            if batch:
                outcomes += self.worker.process(batch)
        return outcomes


def producer(url, stream, **options):
    from kindling.valkey import StreamProducer

    return StreamProducer(url, stream=stream, signing=options.pop("signing", ""), **options)


def test_a_signed_job_runs_and_unsigned_or_forged_ones_are_recorded_rejected(url, stream):
    from kindling.valkey import FIELD, connect

    setup = Setup(url, stream)
    good = producer(url, stream, signing=keyring()).enqueue("add", 1, 2)
    unsigned = producer(url, stream).enqueue("add", 3, 4)
    wrong_key = producer(url, stream, signing=keyring(key=b"w" * 32)).enqueue("add", 5, 6)
    other_stream = producer(url, stream + ":other", signing=keyring()).enqueue("add", 7, 8)
    client = connect(url)
    # replayed from another stream that trusts the same key: entry copied with its signature
    ((_, fields),) = client.xrange(stream + ":other")
    client.xadd(stream, {FIELD: fields[FIELD], b"sig": fields[b"sig"]})
    # the body altered after signing
    sig = producer(url, stream + ":x", signing=keyring()).keyring.sign(f"valkey:{stream}", b'{"a":1}')
    client.xadd(stream, {FIELD: b'{"a":2}', b"sig": sig})

    outcomes = setup.drain()
    by_status: dict[str, list] = {}
    for o in outcomes:
        by_status.setdefault(o.status, []).append(o)
    assert setup.ran == [(1, 2)]
    assert [o.job_id for o in by_status["succeeded"]] == [good.id]
    rejected = by_status["rejected"]
    assert len(rejected) == 4
    assert sum("unsigned message" in o.reason for o in rejected) == 1
    assert sum("bad signature" in o.reason for o in rejected) == 3  # wrong key, other stream, altered body
    for job in (unsigned, wrong_key):
        assert job.id not in setup.store.records  # recorded under the entry's own key, not the claimed id
    assert other_stream.id not in setup.store.records
    assert all(o.job_id.startswith("rejected#") for o in rejected)
    assert client.xlen(stream) == 0  # every entry settled: rejected ones acknowledged and deleted


def test_a_delayed_signed_job_keeps_its_signature_through_the_scheduled_set(url, stream):
    import time

    setup = Setup(url, stream)
    p = producer(url, stream, signing=keyring())
    from kindling.producer.client import Call

    (sent,) = p.enqueue_many([Call("add", (2, 2), delay=0.5)])
    unsigned = producer(url, stream).enqueue_many([Call("add", (9, 9), delay=0.5)])[0]
    early = {o.job_id if o.status == "deferred" else "rejected": o.status for o in setup.drain()}
    assert early == {sent.id: "deferred", "rejected": "rejected"}  # judged on its first read, not when due
    assert setup.store.records[sent.id]["status"] == "scheduled" and p.client.zcard(scheduled_key(stream)) == 1
    time.sleep(0.6)
    outcomes = setup.drain()  # moved back onto the stream from the scheduled set, signature and all
    assert [(o.job_id, o.status) for o in outcomes] == [(sent.id, "succeeded")]
    assert setup.ran == [(2, 2)] and unsigned.id not in setup.store.records


def test_signing_keeps_the_signature_on_the_dead_stream(url, stream):
    from kindling.core.registry import Registry
    from kindling.shared.signed import Verifier
    from kindling.stores.results import MemoryResultStore
    from kindling.valkey import StreamWorker, connect

    reg = Registry()

    @reg.task(name="boom", max_attempts=1)
    def boom():
        raise ValueError("no")

    worker = StreamWorker(url, registry=reg, store=MemoryResultStore(), stream=stream, block_ms=50, heartbeat=False,
                          log=False, verifier=Verifier(keyring()), metrics=False)
    producer(url, stream, signing=keyring()).enqueue("boom")
    (o,) = worker.process(worker.fetch(50))
    assert o.status == "dead"
    ((_, fields),) = connect(url).xrange(dead_key(stream))
    assert fields[b"sig"].startswith(b"v1:k1:")
