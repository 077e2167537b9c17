"""What a cluster node answers is checked before the client acts on it: a malformed MOVED,
ASK or CLUSTER SLOTS reply is the client's own error (ClusterMapError, a ConnectionError:
nothing ran), never an IndexError, ValueError or TypeError; an address outside those the
client may follow (``cluster_allow``) is refused (UntrustedNodeError) before a connection is
made to it. No sockets: the nodes are fakes that record where the router would connect.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kindling.drivers.valkey import cluster
from kindling.drivers.valkey.errors import ClusterMapError, ConnectionError, ResponseError, UntrustedNodeError


class Node:
    def __init__(self, net: Net, address: tuple[str, int]) -> None:
        self.net, self.address = net, address

    def execute_command(self, *args, deadline=None):
        reply = self.net.slots
        if isinstance(reply, Exception):
            raise reply
        return reply

    def pipeline(self, transaction=False):
        return self

    def raw_replies(self, stack, scripts, deadline, redirects=False):
        return [self.net.answer(self.address, args) for args, _ in stack]

    def close(self) -> None:
        pass


class Net:
    """The seed client handed to a Router: every node it would open is recorded in ``opened``."""

    host, port, wait_replicas = "127.0.0.1", 7000, 0

    def __init__(self, slots, answers=(), cluster_allow=None) -> None:
        self.slots, self.answers, self.cluster_allow = slots, list(answers), cluster_allow
        self.opened: list[tuple[str, int]] = []

    def for_node(self, host: str, port: int) -> Node:
        self.opened.append((host, port))
        return Node(self, (host, port))

    def answer(self, address, args):
        if args[0] == "ASKING":
            return b"OK"
        return self.answers.pop(0) if self.answers else b"value"


ONE_NODE = [[0, 16383, [b"127.0.0.1", 7000]]]


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch):
    monkeypatch.setattr(cluster, "_pause", lambda attempt, deadline: None)


def _get(net: Net):
    return cluster.Router(net).execute_command(("GET", "k"), {}, None)


@pytest.mark.parametrize("text", [
    "MOVED 99999 127.0.0.1:7001",  # a slot past 16383: was IndexError
    "MOVED -5 127.0.0.1:7001",  # was written at slots[-5]
    "MOVED x 127.0.0.1:7001",  # was ValueError
    "MOVED 12 127.0.0.1:port",
    "MOVED 12 127.0.0.1:70000",
    "MOVED 12 127.0.0.1",
    "MOVED 12",  # a wrong word count: was ValueError
    "MOVED 12 127.0.0.1:7001 extra",
    "ASK 12 127.0.0.1:",
    "ASK",
])
def test_a_malformed_redirect_is_the_clients_own_error(text):
    net = Net(ONE_NODE, [ResponseError(text)])
    with pytest.raises(ClusterMapError, match="malformed"):
        _get(net)
    assert net.opened == [("127.0.0.1", 7000)]


@pytest.mark.parametrize("reply", [
    b"not a list", 7, [b"x"], [[0, 16383]], [[0, 16383, b"127.0.0.1"]], [[0, 99999, [b"127.0.0.1", 7000]]],
    [[200, 100, [b"127.0.0.1", 7000]]], [[0, 16383, [b"127.0.0.1", b"x"]]], [[0, 16383, [b"\xff", 7000]]],
    [[0, 16383, [None, 7000]]], [[b"a", 16383, [b"127.0.0.1", 7000]]],
])
def test_a_malformed_slot_map_is_the_clients_own_error(reply):
    with pytest.raises(ClusterMapError, match="malformed"):
        _get(Net(reply))


def test_a_well_formed_redirect_is_followed():
    net = Net(ONE_NODE, [ResponseError("ASK 12 127.0.0.1:7001"), b"there"])
    assert _get(net) == b"there"
    assert ("127.0.0.1", 7001) in net.opened


@pytest.mark.parametrize("text", ["MOVED 12 10.0.0.7:6379", "ASK 12 10.0.0.7:6379", "MOVED 12 evil.example:6379",
                                  "MOVED 12 [::ffff:8.8.8.8]:1", "MOVED 12 8.8.8.8:6379", "MOVED 12 0.0.0.0:6379"])
def test_a_redirect_outside_the_configured_network_is_refused_before_any_connection(text):
    net = Net(ONE_NODE, [ResponseError(text)])
    with pytest.raises(UntrustedNodeError, match="cluster_allow") as refused:
        _get(net)
    assert not refused.value.maybe_ran
    assert net.opened == [("127.0.0.1", 7000)]  # the seed only: nothing opened toward the named host


def test_a_slot_map_naming_a_node_outside_the_network_is_refused_whole():
    net = Net([[0, 100, [b"127.0.0.1", 7000]], [101, 16383, [b"10.1.2.3", 7000]]])
    with pytest.raises(UntrustedNodeError, match=r"10\.1\.2\.3"):
        _get(net)
    assert net.opened == [("127.0.0.1", 7000)]


def test_an_allow_list_names_the_networks_and_names_a_cluster_may_send_the_client_to():
    net = Net(ONE_NODE, [ResponseError("ASK 12 10.9.8.7:6379"), b"v"], cluster_allow="network,10.0.0.0/8")
    assert _get(net) == b"v" and ("10.9.8.7", 6379) in net.opened  # a fake node: no socket
    named = Net(ONE_NODE, [ResponseError("ASK 12 node-3.cache.internal:6379"), b"v"],
                cluster_allow="*.cache.internal")
    assert _get(named) == b"v" and ("node-3.cache.internal", 6379) in named.opened
    refused = Net(ONE_NODE, [ResponseError("MOVED 12 10.9.8.7:6379")], cluster_allow="*.cache.internal")
    with pytest.raises(UntrustedNodeError):
        _get(refused)
    anywhere = Net(ONE_NODE, [ResponseError("ASK 12 8.8.4.4:6379"), b"v"], cluster_allow="any")
    assert _get(anywhere) == b"v" and ("8.8.4.4", 6379) in anywhere.opened


@pytest.mark.parametrize(("seed", "named", "followed"), [
    ("10.0.1.5", "10.0.2.9", True),  # another subnet of the same private network (another zone)
    ("10.0.1.5", "192.168.1.1", True),  # private to private
    ("10.0.1.5", "8.8.8.8", False),  # private to public
    ("10.0.1.5", "127.0.0.1", False),  # private to loopback
    ("10.0.1.5", "169.254.169.254", False),  # to the instance metadata service
    ("203.0.113.9", "10.0.0.1", False),  # public to private
    ("127.0.0.1", "::1", True),
    ("cfg.abc.use1.cache.amazonaws.com", "abc-0001-001.abc.use1.cache.amazonaws.com", True),
    ("cfg.abc.use1.cache.amazonaws.com", "abc.use1.cache.amazonaws.com.evil.example", False),
    ("cfg.abc.use1.cache.amazonaws.com", "other.use1.cache.amazonaws.com", False),
    ("10.0.1.5", "node.example", False),
])
def test_the_default_follows_addresses_of_the_configured_nodes_network_only(seed, named, followed, monkeypatch):
    import _socket

    monkeypatch.setattr(_socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("10.0.0.3", 0))])  # no DNS
    assert cluster.NodePolicy(seed, None).allows(named) is followed


def test_an_allow_list_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="10.0.0.0/99"):
        cluster.NodePolicy("127.0.0.1", "10.0.0.0/99")


# -- anything a node may answer --------------------------------------------------------------

_words = st.sampled_from(["MOVED", "ASK", "TRYAGAIN", "READONLY", "UNBLOCKED", "ERR", "CLUSTERDOWN", ""])
_tokens = st.one_of(st.integers(-10, 70000).map(str), st.text(max_size=12),
                    st.builds(lambda h, p: f"{h}:{p}", st.sampled_from(["127.0.0.1", "", "10.0.0.1", "::1", "?"]),
                              st.integers(-1, 70000)))
_errors = st.builds(lambda w, rest: ResponseError(" ".join([w, *rest])), _words, st.lists(_tokens, max_size=4))
_values = st.recursive(st.one_of(st.none(), st.integers(-5, 70000), st.binary(max_size=12), st.text(max_size=8),
                                 _errors),
                       lambda inner: st.lists(inner, max_size=4), max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.builds(lambda w, rest: " ".join([w, *rest]), _words, st.lists(_tokens, max_size=4)),
                      st.text(max_size=40)))
def test_the_redirect_parser_returns_a_slot_and_address_or_its_own_error(text):
    try:
        slot, (host, port) = cluster.parse_redirect(text, "127.0.0.1")
    except ClusterMapError:
        return
    assert 0 <= slot < cluster.SLOTS and 0 < port < 65536 and host


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slots=st.one_of(_values, st.just(ONE_NODE)), answers=st.lists(_values, max_size=20))
def test_the_router_answers_any_reply_with_a_value_or_the_clients_own_error(slots, answers):
    net = Net(slots, answers)
    with contextlib.suppress(ResponseError, ConnectionError):  # the client's own: anything else fails the test
        _get(net)
    assert all(host in ("127.0.0.1", "::1") for host, _ in net.opened)  # never past the loopback network
