"""Replies that mean "the topology changed" (a failover, a node loading, a slot moving):
UNBLOCKED, READONLY, LOADING, MASTERDOWN, TRYAGAIN, CLUSTERDOWN. Nothing ran; the worker,
the producer and the drain read the map again (a single node: open the connection again)
and go on, none of them exits.

A loopback proxy in front of a real valkey-server answers the chosen command with each
reply (tests/support/valkey_proxy.py), as a node does during ``CLUSTER FAILOVER``. It also
loses the reply of a read the server ran (the connection closed after the entries were
delivered): those entries are the reader's pending ones, and it takes them back at its next
read, counted once, instead of leaving them until another consumer reclaims them.

Run: .venv/bin/python -m pytest tests/service/test_valkey_topology_replies.py -q
"""

from __future__ import annotations

import time
import uuid

import pytest
from support.valkey_proxy import LOST, Interposer, blocking_read, command

pytestmark = pytest.mark.valkey

REPLIES = {
    "UNBLOCKED": b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n",
    "READONLY": b"-READONLY You can't write against a read only replica.\r\n",
    "LOADING": b"-LOADING Valkey is loading the dataset in memory\r\n",
    "MASTERDOWN": b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
    "TRYAGAIN": b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
    "CLUSTERDOWN": b"-CLUSTERDOWN The cluster is down\r\n",
}


@pytest.fixture
def proxy(own_valkey):
    with Interposer(own_valkey.port) as proxy:
        yield proxy


def _registry(ran: list):
    from kindling.core.registry import Registry

    registry = Registry()
    registry.task(name="job")(ran.append)
    return registry


def _send(url: str, stream: str, n: int) -> None:
    from kindling.valkey import StreamProducer

    StreamProducer(url, stream=stream).enqueue_many([("job", [i], {}) for i in range(n)])


@pytest.mark.parametrize("cluster", [False, True], ids=["one node", "cluster client"])
@pytest.mark.parametrize("code", list(REPLIES))
def test_a_worker_whose_blocking_read_is_answered_with_a_topology_change_goes_on(own_valkey, proxy, code, cluster):
    from kindling.stores.results import MemoryResultStore
    from kindling.valkey import StreamWorker

    stream = f"topo:{uuid.uuid4().hex[:8]}"
    _send(own_valkey.url, stream, 5)
    proxy.answer(blocking_read, REPLIES[code])
    ran: list = []
    url = proxy.url + ("?cluster=true" if cluster else "")
    worker = StreamWorker(url, store=MemoryResultStore(), registry=_registry(ran), stream=stream, block_ms=50,
                          heartbeat=False, log=False)
    try:
        counts = worker.run(burst=True)
    finally:
        worker.client.close()
    assert len(proxy.answered) == 1  # the reply was sent to the worker's blocking read
    assert sorted(ran) == list(range(5)) and counts.get("succeeded") == 5
    if cluster:
        assert worker.client.router.refreshes >= 2  # the map was read again


@pytest.mark.parametrize("code", list(REPLIES))
def test_a_cluster_producer_answered_with_a_topology_change_sends_again_once_the_map_is_read(own_valkey, proxy, code):
    from kindling.valkey import StreamProducer

    stream = f"topo:{uuid.uuid4().hex[:8]}"
    proxy.answer(command("XADD"), REPLIES[code], times=3)
    producer = StreamProducer(proxy.url + "?cluster=true", stream=stream)
    sent = producer.enqueue_many([("job", [i], {}) for i in range(3)])
    assert len(proxy.answered) == 3
    assert len(sent) == 3 and producer.client.xlen(stream) == 3  # each sent once, after the map was read again
    assert producer.client.router.refreshes >= 2


@pytest.mark.parametrize("code", list(REPLIES))
def test_a_single_node_producer_says_not_sent_and_its_next_send_goes_through(own_valkey, proxy, code):
    from kindling.core.errors import EnqueueError, EnqueueUncertain
    from kindling.valkey import StreamProducer

    stream = f"topo:{uuid.uuid4().hex[:8]}"
    proxy.answer(command("XADD"), REPLIES[code], times=3)
    producer = StreamProducer(proxy.url, stream=stream)
    with pytest.raises(EnqueueError) as caught:
        producer.enqueue_many([("job", [i], {}) for i in range(3)])
    assert not isinstance(caught.value, EnqueueUncertain) and len(caught.value.failed) == 3
    # The server is back. A refusal raised at once (LOADING) closes the connection with the
    # other replies unread: how many of the XADDs the proxy answered, and whether the rest
    # reached the server after all (as commands written to a connection its client has
    # closed may), is a race. The second send's own entries are what this test reads.
    proxy.clear()
    sent = producer.enqueue_many([("job", [i], {}) for i in range(3)])  # the same producer goes on
    entries = {entry_id.decode() if isinstance(entry_id, bytes) else entry_id
               for entry_id, _ in producer.client.xrange(stream)}
    assert len(sent) == 3 and {s.entry for s in sent} <= entries


def _drain_through(own_valkey, proxy, reply: bytes, monkeypatch) -> None:
    """A drain of 4 queued jobs whose first blocking read the proxy answers with ``reply``:
    the drain goes on within its invocation and runs all 4."""
    from kindling.core.valkey.keys import flag_key
    from kindling.engine.runner import Runner
    from kindling.stores.results import MemoryResultStore
    from kindling.triggers.valkey.lambda_drain import drain

    stream = f"topo:{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("KINDLING_VALKEY_URL", proxy.url)
    monkeypatch.setenv("KINDLING_VALKEY_STREAMS", stream)
    _send(own_valkey.url, stream, 4)
    proxy.answer(blocking_read, reply)
    ran: list = []
    runner = Runner(_registry(ran), MemoryResultStore(), safety_ms=100, cutoff_ms=50, log=None)
    deadline = time.monotonic() + 3
    summary = drain(runner, {"kindling": "drain", "stream": stream, "flag": flag_key(stream)},
                    lambda: max(0, int((deadline - time.monotonic()) * 1000)), invoker=lambda e: None)
    assert len(proxy.answered) == 1
    assert sorted(ran) == list(range(4)) and summary["processed"] == 4


@pytest.mark.parametrize("code", list(REPLIES))
def test_the_drain_whose_blocking_read_is_answered_with_a_topology_change_goes_on(own_valkey, proxy, code, monkeypatch):
    _drain_through(own_valkey, proxy, REPLIES[code], monkeypatch)


@pytest.mark.parametrize("cluster", [False, True], ids=["one node", "cluster client"])
def test_entries_a_lost_read_delivered_come_back_with_the_next_read_counted_once(own_valkey, proxy, cluster):
    from kindling.stores.results import MemoryResultStore
    from kindling.valkey import StreamWorker

    stream = f"topo:{uuid.uuid4().hex[:8]}"
    _send(own_valkey.url, stream, 5)
    proxy.answer(blocking_read, LOST)
    worker = StreamWorker(proxy.url + ("?cluster=true" if cluster else ""), store=MemoryResultStore(),
                          registry=_registry([]), stream=stream, block_ms=50, visibility_ms=600_000,
                          heartbeat=False, log=False)
    try:
        with pytest.raises(ConnectionError):
            worker.fetch(50)  # the server delivered the five entries; their reply never came
        assert len(proxy.answered) == 1
        deliveries = worker.fetch(50)  # long before anyone may reclaim them (visibility_ms)
        entries = [e.decode() if isinstance(e, bytes) else e for e, _ in worker.client.xrange(stream)]
    finally:
        worker.client.close()
    assert [d.ref for d in deliveries] == entries and len(entries) == 5
    assert [d.attempts for d in deliveries] == [1] * 5  # taking them back is not a delivery


def test_a_worker_whose_read_reply_is_lost_runs_those_entries_without_waiting_for_a_reclaim(own_valkey, proxy):
    import threading

    from kindling.stores.results import MemoryResultStore
    from kindling.valkey import StreamWorker

    stream = f"topo:{uuid.uuid4().hex[:8]}"
    _send(own_valkey.url, stream, 5)
    proxy.answer(blocking_read, LOST)
    ran: list = []
    worker = StreamWorker(proxy.url, store=MemoryResultStore(), registry=_registry(ran), stream=stream,
                          block_ms=50, visibility_ms=600_000, heartbeat=False, log=False)
    counts: dict = {}
    burst = threading.Thread(target=lambda: counts.update(worker.run(burst=True)), daemon=True)
    burst.start()
    burst.join(20)  # a bound for the failing case: the entries would wait 10 minutes to be reclaimed
    worker.stop()
    burst.join(5)
    worker.client.close()
    assert len(proxy.answered) == 1
    assert sorted(ran) == list(range(5)) and counts.get("succeeded") == 5


def test_the_drain_whose_read_reply_is_lost_goes_on_and_runs_those_entries(own_valkey, proxy, monkeypatch):
    _drain_through(own_valkey, proxy, LOST, monkeypatch)
