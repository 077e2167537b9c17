"""A StreamProducer returns handles as the SQS client does: ``status()``, ``result()`` and
``revoke()`` read the result store the deployment uses (the Valkey result store, or the
DynamoDB table), and say what to configure when there is none.

Against a real valkey-server (tests/support/valkey.py) and DynamoDB on moto.
"""

from __future__ import annotations

import uuid

import pytest
from kindling.core.errors import JobFailed, KindlingError
from kindling.producer import dispatch

pytestmark = pytest.mark.valkey


@pytest.fixture
def stream() -> str:
    return f"handles:{uuid.uuid4().hex[:8]}"


@pytest.fixture
def no_results_env(monkeypatch):
    for name in ("KINDLING_TABLE", "KINDLING_RESULTS", "KINDLING_WORKER_FUNCTION"):
        monkeypatch.delenv(name, raising=False)


def drain(url: str, stream: str, reg, store) -> None:
    from kindling.valkey import StreamWorker

    StreamWorker(url, registry=reg, store=store, stream=stream, block_ms=50, heartbeat=False, log=False,
                 metrics=False).run(burst=True)


def check_handles(url: str, stream: str, reg, producer, worker_store) -> None:
    before = dispatch.set_producer(producer)
    try:
        handle = reg.get("add").delay(1, 2)
    finally:
        dispatch.set_producer(before)
    assert handle.entry is not None and handle.task == "add"  # what a Sent always carried
    assert handle.status() is None  # on the stream, not run yet
    from kindling.producer.client import Call

    revoked = producer.send(Call("add", [5, 5]))
    revoked.revoke()
    assert revoked.status() == "revoked"
    drain(url, stream, reg, worker_store)
    assert handle.result(timeout=10) == 3 and handle.status() == "succeeded"
    with pytest.raises(JobFailed, match="revoked"):
        revoked.result(timeout=10)
    assert reg.runs == [("add", 1, 2)]


def test_delay_through_a_stream_producer_returns_a_handle_reading_the_valkey_result_store(
        valkey_url, stream, reg, no_results_env, monkeypatch):
    from kindling.valkey import StreamProducer, ValkeyResultStore

    monkeypatch.setenv("KINDLING_RESULTS", "valkey")  # as `kindling worker` and `kindling jobs` read it
    producer = StreamProducer(valkey_url, stream=stream)
    check_handles(valkey_url, stream, reg, producer, ValkeyResultStore(valkey_url))


def test_delay_through_a_stream_producer_returns_a_handle_reading_the_results_table(
        valkey_url, stream, reg, table, no_results_env, monkeypatch):
    from kindling.stores.results import DynamoResultStore
    from kindling.valkey import StreamProducer

    monkeypatch.setenv("KINDLING_TABLE", table)
    producer = StreamProducer(valkey_url, stream=stream)
    check_handles(valkey_url, stream, reg, producer, DynamoResultStore(table))


def test_a_stream_producer_takes_the_reader_it_is_given(valkey_url, stream, reg, no_results_env):
    from kindling.valkey import StreamProducer, ValkeyResultStore

    store = ValkeyResultStore(valkey_url, prefix=f"p{uuid.uuid4().hex[:6]}")
    check_handles(valkey_url, stream, reg, StreamProducer(valkey_url, stream=stream, reader=store), store)


def test_a_handle_without_a_result_store_says_what_to_configure(valkey_url, stream, no_results_env):
    from kindling.valkey import StreamProducer

    sent = StreamProducer(valkey_url, stream=stream).enqueue("add", 1, 2)
    for read in (sent.status, sent.result, sent.revoke):
        with pytest.raises(KindlingError, match="KINDLING_TABLE.*KINDLING_RESULTS=valkey.*reader="):
            read()
