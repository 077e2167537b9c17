"""Every producer and operator connection to Valkey has a socket timeout: a server that
accepts and never answers fails the call instead of blocking it for ever.

The silent server is a loopback socket that listens and never reads (the kernel completes
the handshake); the timeouts are checked where they reach the socket, not by the clock.

Run: .venv/bin/python -m pytest tests/service/test_valkey_timeouts.py -q
"""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def silent_url():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    finally:
        listener.close()


@pytest.fixture
def socket_waits(monkeypatch):
    """Each timeout set on a connection's socket, and each connection opened."""
    from kindling.drivers.valkey import client as client_module

    seen = {"waits": [], "connects": 0}
    real_arm, real_connect = client_module.Connection._arm, client_module.Connection._connect

    def arm(self):
        real_arm(self)
        seen["waits"].append(self.sock.gettimeout())

    def connect(self):
        seen["connects"] += 1
        real_connect(self)

    monkeypatch.setattr(client_module.Connection, "_arm", arm)
    monkeypatch.setattr(client_module.Connection, "_connect", connect)
    return seen


def test_a_silent_server_fails_the_producer_with_a_timeout(silent_url, socket_waits):
    from kindling.core.errors import EnqueueError
    from kindling.drivers.valkey.errors import TimeoutError as ValkeyTimeout
    from kindling.valkey import StreamProducer

    producer = StreamProducer(silent_url, stream="silent", socket_timeout=0.2)
    with pytest.raises(EnqueueError) as caught:
        producer.enqueue("job", 1)

    assert isinstance(caught.value.__cause__, ValkeyTimeout)
    assert "Timeout" in str(caught.value)
    assert socket_waits["connects"] == 1  # a timeout is not retried
    assert socket_waits["waits"] and set(socket_waits["waits"][1:]) == {0.2}  # [0]: the connect's own


def test_a_silent_server_fails_the_producers_room_check_too(silent_url, socket_waits):
    from kindling.drivers.valkey.errors import TimeoutError as ValkeyTimeout
    from kindling.valkey import StreamProducer

    producer = StreamProducer(silent_url, stream="silent", maxlen=10, socket_timeout=0.2)
    with pytest.raises(ValkeyTimeout):
        producer.enqueue("job", 1)
    assert socket_waits["connects"] == 1


def test_a_producer_has_a_socket_timeout_by_default():
    from kindling.shared.valkey.connection import DEFAULT_SOCKET_TIMEOUT
    from kindling.valkey import StreamProducer

    producer = StreamProducer("redis://127.0.0.1:1/0")
    assert producer.client.socket_timeout == DEFAULT_SOCKET_TIMEOUT and DEFAULT_SOCKET_TIMEOUT > 0


def test_the_urls_socket_timeout_wins_over_the_default():
    from kindling.valkey import StreamProducer

    producer = StreamProducer("redis://127.0.0.1:1/0?socket_timeout=0.5")
    assert producer.client.socket_timeout == 0.5


def test_every_connection_kindling_opens_has_a_socket_timeout():
    from kindling.shared.valkey.connection import connect
    from kindling.stores.valkey import ValkeyResultStore
    from kindling.tools.ops.dead_stream import DeadStream
    from kindling.valkey import StreamWorker

    url = "redis://127.0.0.1:1/0"
    clients = [connect(url), ValkeyResultStore(url).client, DeadStream(url).client,
               StreamWorker(url, store=ValkeyResultStore(url)).client]
    assert all(c.socket_timeout and c.socket_connect_timeout for c in clients), clients
