"""A producer whose pipeline ran but whose reply was lost: the jobs may be on the stream and
the producer may hold the kick flag. It says so (EnqueueUncertain, with the ids), and it
invokes the drain anyway, so a flag it may hold never blocks other producers' kicks.

Against a real valkey-server; the reply is lost by reading it off the socket and then
failing as a dropped connection would (the server has executed everything by then).

Run: .venv/bin/python -m pytest tests/service/test_valkey_lost_reply.py -q
"""

from __future__ import annotations

import time
import uuid

import pytest
from kindling.core.valkey.keys import flag_key

pytestmark = pytest.mark.valkey


@pytest.fixture
def stream(own_valkey, monkeypatch) -> str:
    name = f"lost:{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("KINDLING_VALKEY_URL", own_valkey.url)
    monkeypatch.setenv("KINDLING_VALKEY_STREAMS", name)
    return name


@pytest.fixture
def lose_next_pipeline_reply(monkeypatch):
    """The next multi-command reply is read from the socket, then the connection drops."""
    from kindling.drivers.valkey import client as client_module

    real = client_module.Connection.read
    state = {"armed": True, "skip": 0}  # skip: multi-command replies to let through first

    def read(self, count):
        replies = real(self, count)
        if state["armed"] and count > 1:
            if state["skip"]:
                state["skip"] -= 1
                return replies
            state["armed"] = False
            raise ConnectionResetError(104, "Connection reset by peer")
        return replies

    monkeypatch.setattr(client_module.Connection, "read", read)
    return state


def _ids_on(client, stream: str) -> set[str]:
    from kindling.core.envelope import decode_job

    return {decode_job(fields[b"job"]).id for _, fields in client.xrange(stream)}


def _drain(event: dict) -> dict:
    from kindling.core.registry import Registry
    from kindling.engine.runner import Runner
    from kindling.stores.results import MemoryResultStore
    from kindling.triggers.valkey.lambda_drain import drain

    registry = Registry()
    registry.task(name="job")(lambda i: i)
    deadline = time.monotonic() + 5
    runner = Runner(registry, MemoryResultStore(), safety_ms=100, cutoff_ms=50, log=None)
    return drain(runner, event, lambda: max(0, int((deadline - time.monotonic()) * 1000)), invoker=lambda e: None)


def test_a_lost_reply_is_an_uncertain_outcome_naming_the_jobs_and_the_drain_is_still_kicked(
        own_valkey, stream, lose_next_pipeline_reply):
    from kindling.core.errors import EnqueueError, EnqueueUncertain
    from kindling.valkey import StreamProducer

    kicks: list[dict] = []
    producer = StreamProducer(own_valkey.url, stream=stream, invoker=kicks.append)
    with pytest.raises(EnqueueUncertain) as caught:
        producer.enqueue_many([("job", [i], {}) for i in range(5)])

    error = caught.value
    assert isinstance(error, EnqueueError)  # callers catching EnqueueError still catch it
    assert "may have been added" in str(error)
    assert set(error.unknown) == _ids_on(producer.client, stream) and len(error.unknown) == 5
    assert all(i in str(error) for i in error.unknown)
    assert error.failed == {} and error.sent == []  # nothing known to be lost, nothing known to be sent
    assert kicks == [{"kindling": "drain", "stream": stream, "flag": flag_key(stream)}]

    # The drain it kicked holds and frees the flag; the next producer's kick works.
    assert _drain(kicks[0])["processed"] == 5
    others: list[dict] = []
    StreamProducer(own_valkey.url, stream=stream, invoker=others.append).enqueue_many(
        [("job", [i], {}) for i in range(3)])
    assert len(others) == 1
    assert _drain(others[0])["processed"] == 3


def test_a_lost_reply_and_a_failed_invoke_release_the_flag_for_the_next_producer(
        own_valkey, stream, lose_next_pipeline_reply):
    from kindling.core.errors import EnqueueUncertain
    from kindling.valkey import StreamProducer

    def unreachable(event):
        raise OSError("Lambda is unreachable")

    producer = StreamProducer(own_valkey.url, stream=stream, invoker=unreachable)
    with pytest.raises(EnqueueUncertain):
        producer.enqueue_many([("job", [i], {}) for i in range(5)])

    assert producer.client.exists(flag_key(stream)) == 0
    others: list[dict] = []
    StreamProducer(own_valkey.url, stream=stream, invoker=others.append).enqueue("job", 9)
    assert len(others) == 1
    assert _drain(others[0])["processed"] == 6


def test_a_canvas_send_through_a_stream_producer_reports_the_same_uncertain_outcome(
        own_valkey, stream, lose_next_pipeline_reply):
    from kindling.core.errors import EnqueueUncertain
    from kindling.core.registry import Registry
    from kindling.producer import dispatch
    from kindling.producer.client import Call
    from kindling.valkey import StreamProducer

    kicks: list[dict] = []
    dispatch.set_producer(StreamProducer(own_valkey.url, stream=stream, invoker=kicks.append))
    try:
        with pytest.raises(EnqueueUncertain) as caught:
            dispatch.send_many([Call("job", [i]) for i in range(4)], Registry())
    finally:
        dispatch.set_producer(None)
    assert len(caught.value.unknown) == 4 and len(kicks) == 1


def test_a_server_that_cannot_be_reached_means_not_sent_and_no_kick():
    from kindling.core.errors import EnqueueError, EnqueueUncertain
    from kindling.valkey import StreamProducer
    from support import free_port

    kicks: list[dict] = []
    producer = StreamProducer(f"redis://127.0.0.1:{free_port()}/0", stream="nowhere", invoker=kicks.append)
    with pytest.raises(EnqueueError) as caught:
        producer.enqueue_many([("job", [i], {}) for i in range(3)])
    assert not isinstance(caught.value, EnqueueUncertain)
    assert len(caught.value.failed) == 3 and kicks == []


def test_refused_additions_are_not_sent_but_a_flag_taken_is_still_kicked(own_valkey, stream):
    from kindling.core.errors import EnqueueError, EnqueueUncertain
    from kindling.valkey import StreamProducer

    kicks: list[dict] = []
    producer = StreamProducer(own_valkey.url, stream=stream, invoker=kicks.append)
    producer.client.set(stream, b"not a stream")  # every XADD is refused (WRONGTYPE); the SET NX is not
    with pytest.raises(EnqueueError) as caught:
        producer.enqueue_many([("job", [i], {}) for i in range(3)])
    assert not isinstance(caught.value, EnqueueUncertain)
    assert len(caught.value.failed) == 3 and all("WRONGTYPE" in r for r in caught.value.failed.values())
    assert producer.client.exists(flag_key(stream)) == 0 or len(kicks) == 1


def test_a_lost_reply_to_the_extra_drains_flags_still_kicks_those_drains(own_valkey, stream, lose_next_pipeline_reply):
    from kindling.valkey import StreamProducer

    kicks: list[dict] = []
    producer = StreamProducer(own_valkey.url, stream=stream, invoker=kicks.append, max_drains=3, backlog_per_drain=2)
    lose_next_pipeline_reply["skip"] = 1  # the XADDs' round trip goes through; the extra flags' is lost
    sent = producer.enqueue_many([("job", [i], {}) for i in range(6)])

    assert len(sent) == 6 and not lose_next_pipeline_reply["armed"]
    assert [k["flag"] for k in kicks] == [flag_key(stream), flag_key(stream, 1), flag_key(stream, 2)]
