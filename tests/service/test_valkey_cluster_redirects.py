"""Where a cluster node may send the client, against a real server: a redirect or slot map
naming an address outside the configured node's network is refused before any connection
(the password and the command go nowhere), an allow-list widens that, and over TLS a node
named by the cluster must hold a certificate for the name it was given.

A loopback proxy (tests/support/valkey_proxy.py) answers for the server; every connection
the client tries is checked to be a loopback one before its socket is made.

Run: .venv/bin/python -m pytest tests/service/test_valkey_cluster_redirects.py -q
"""

from __future__ import annotations

import uuid

import pytest
from support.valkey_proxy import Interposer, command

pytestmark = [pytest.mark.valkey, pytest.mark.valkey_options("--requirepass", "secret")]  # its own server's

LOOPBACK = ("127.0.0.1", "::1", "localhost")


class OffLoopback(Exception):
    """The client tried to connect past the loopback network (stopped before a socket)."""


@pytest.fixture
def connects(monkeypatch) -> list[str]:
    """The hosts the client connects to; a non-loopback one raises OffLoopback instead."""
    from kindling.drivers.valkey.client import Connection

    real = Connection._connect
    hosts: list[str] = []

    def connect(self):
        hosts.append(self.client.host)
        if self.client.host not in LOOPBACK:
            raise OffLoopback(f"{self.client.host}:{self.client.port}")
        return real(self)

    monkeypatch.setattr(Connection, "_connect", connect)
    return hosts


@pytest.fixture
def proxy(own_valkey):
    with Interposer(own_valkey.port) as proxy:
        yield proxy


def _client(url: str, **options):
    from kindling.drivers.valkey.client import Valkey

    return Valkey.from_url(url.replace("redis://", "redis://:secret@"), socket_timeout=5, **options)


@pytest.mark.parametrize("reply", [b"-MOVED 866 10.0.0.7:6379\r\n", b"-ASK 866 10.0.0.7:6379\r\n",
                                   b"-MOVED 866 evil.example:6379\r\n"])
def test_a_redirect_to_an_address_outside_the_network_is_refused_before_connecting(proxy, connects, reply):
    from kindling.drivers.valkey.errors import ConnectionError, UntrustedNodeError

    proxy.answer(command("SET"), reply)
    client = _client(proxy.url + "?cluster=true")
    key = f"r:{uuid.uuid4().hex[:8]}"
    with pytest.raises(UntrustedNodeError, match="cluster_allow") as refused:
        client.set(key, "job data")
    assert isinstance(refused.value, ConnectionError) and not refused.value.maybe_ran
    assert set(connects) <= {"127.0.0.1"}  # never toward the named host
    assert client.get(key) is None  # nothing ran


def test_a_slot_map_naming_an_address_outside_the_network_is_refused(proxy, connects):
    from kindling.drivers.valkey.errors import UntrustedNodeError

    proxy.answer(command("CLUSTER", "SLOTS"), b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$8\r\n10.0.0.7\r\n:6379\r\n",
                 times=99)
    with pytest.raises(UntrustedNodeError, match=r"10\.0\.0\.7:6379"):
        _client(proxy.url + "?cluster=true").get("k")
    assert set(connects) <= {"127.0.0.1"}


def test_an_allow_list_lets_the_client_follow_a_redirect_to_its_networks(proxy, connects):
    proxy.answer(command("GET"), b"-ASK 866 10.0.0.7:6379\r\n")
    client = _client(proxy.url + "?cluster=true&cluster_allow=network,10.0.0.0/8")
    with pytest.raises(OffLoopback, match=r"10\.0\.0\.7:6379"):  # followed: stopped by the test, not the client
        client.get("k")


def test_a_redirect_within_the_network_is_followed(proxy, own_valkey, connects):
    proxy.answer(command("SET"), f"-ASK 866 127.0.0.1:{own_valkey.port}\r\n".encode())
    client = _client(proxy.url + "?cluster=true")
    key = f"r:{uuid.uuid4().hex[:8]}"
    assert client.set(key, "v") is True
    assert proxy.answered and client.get(key) == b"v"


def test_over_tls_a_node_named_by_the_cluster_must_hold_a_certificate_for_that_name(start_valkey, tmp_path):
    from kindling.drivers.valkey.client import Valkey
    from kindling.drivers.valkey.errors import ConnectionError
    from support.tls import self_signed_cert

    cert, key = self_signed_cert(tmp_path)  # for 127.0.0.1 only
    tls = start_valkey("--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert),
                       "--tls-auth-clients", "no", tls=True)
    client = Valkey.from_url(f"rediss://127.0.0.1:{tls.port}/0?cluster=true&cluster_allow=any&ssl_ca_certs={cert}",
                             socket_timeout=5)
    assert client.ping() is True  # the map: this one node, under the name its certificate holds
    router = client.router
    assert router.node(("127.0.0.1", tls.port)).ping() is True
    with pytest.raises(ConnectionError, match="certificate verify failed"):  # the same server, another name
        router.node(("localhost", tls.port)).ping()
