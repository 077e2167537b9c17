"""Valkey Cluster for kindling's client: the slot map, MOVED and ASK, a pipeline per node, failover.

A :class:`~kindling.drivers.valkey.client.Valkey` client hands its commands to a :class:`Router`
once it knows it speaks to a cluster (a MOVED, ASK or CROSSSLOT reply, or ``cluster=True``);
this module is imported then, never for a single node.

The map. ``CLUSTER SLOTS``, asked of the node the URL names and then of any node known,
says which primary serves each of the 16,384 slots and how many replicas it has. It is
asked again after a MOVED (the map is out of date: a slot moved, or a replica was promoted)
and after a node could not be reached.

Routing. A command goes to the primary of its key's slot (:func:`key_slot`, hash tags
honoured); a command without a key to any primary; ``SCRIPT LOAD`` and ``FLUSHDB`` to every
primary; ``MGET``, ``DEL`` and ``EXISTS`` over keys of several slots are split by slot and
their replies joined, as valkey-py's cluster client does. A pipeline is cut into one
pipeline per node, each sent in one write with the scripts it runs loaded first; replies
come back in the order queued. A transaction must keep to one slot (a CROSSSLOT error).

Redirects and failover. MOVED: the slot's new owner is noted and the command sent there.
ASK (a slot being migrated): ASKING and the command, to the node named, once. The replies
that mean the topology changed (:data:`~kindling.drivers.valkey.errors.TOPOLOGY_CHANGED`: UNBLOCKED,
a blocking read a failover interrupted; READONLY, a primary demoted; LOADING, MASTERDOWN,
TRYAGAIN, CLUSTERDOWN), and a node refusing connections (a primary killed, its replica not
yet promoted): nothing ran, so the map is read again and the command sent again after a
pause (50 ms doubling to 1 s, at most :data:`ATTEMPTS` times, never past a
``deadline``). A connection lost *after* a write was sent is not retried (the client's rule:
a write is never sent twice): the error says it may have run, and the map is read again
before the next command.

Which nodes. Every address a node names (MOVED, ASK, CLUSTER SLOTS) is checked by a
:class:`NodePolicy` (``cluster_allow``; by default the configured node's network) before a
connection is opened to it: the password and the commands go only where the policy allows,
else :class:`~kindling.drivers.valkey.errors.UntrustedNodeError`. A redirect or map that cannot be
read is a :class:`~kindling.drivers.valkey.errors.ClusterMapError` (:func:`parse_redirect`,
:func:`parse_slots`), never the IndexError or TypeError parsing it would raise.
"""

from __future__ import annotations

import random
from time import monotonic, sleep

from kindling.core.policy import Retry
from kindling.core.valkey.keys import hash_tag
from kindling.drivers.valkey.commands import IDEMPOTENT, command_name, parse_reply
from kindling.drivers.valkey.errors import (
    ClusterMapError,
    ConnectionError,
    DeadlineExceeded,
    ResponseError,
    TimeoutError,
    UntrustedNodeError,
    topology_changed,
)

SLOTS = 16384
ATTEMPTS = 16
"""How many times one command is sent at most while a cluster redirects it or changes under
it (a failover takes the cluster's node timeout plus an election: about 2 s with a node
timeout of 1 s); the pauses between add up to about 12 s."""
RETRY = Retry(ATTEMPTS, base=0.05, cap=1.0, jitter=False)
"""The pauses while the cluster changes: 50 ms doubling to 1 s, none past the deadline."""

WAIT_MS = 1000
"""With ``wait_replicas``: how long a pipeline's WAIT waits for its replicas' acknowledgement."""
REREAD_S = 1.0
"""With ``wait_replicas``: how often the map is read again while a primary shows fewer
replicas than that. A replica joins ``CLUSTER SLOTS`` only seconds after it is attached
(once its link is seen healthy), and until it shows, writes to its primary are not waited
for; a map read at that moment would otherwise stand until a redirect."""

_TABLE: list[int] = []


def _crc16(data: bytes) -> int:
    """CRC-16/XMODEM, the cluster's key hash."""
    if not _TABLE:
        for i in range(256):
            crc = i << 8
            for _ in range(8):
                crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            _TABLE.append(crc & 0xFFFF)
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[(crc >> 8) ^ byte]
    return crc


def key_slot(key) -> int:
    """The slot of ``key`` (str or bytes): CRC16 of its hash tag, else of the whole key, mod 16384."""
    if isinstance(key, str):
        key = key.encode()
    elif not isinstance(key, bytes):
        key = str(key).encode() if not isinstance(key, bytes | bytearray | memoryview) else bytes(key)
    tag = hash_tag(key.decode("latin-1"))
    if tag is not None:
        key = tag.encode("latin-1")
    return _crc16(key) % SLOTS


# Commands that name no key: sent to any primary (BROADCAST: to every primary).
_KEYLESS = frozenset({
    "PING", "ECHO", "INFO", "TIME", "DBSIZE", "CLUSTER", "READONLY", "ASKING", "WAIT", "AUTH", "HELLO",
    "SCRIPT EXISTS", "SCRIPT FLUSH", "SCRIPT LOAD", "CLIENT", "CONFIG", "FLUSHDB", "FLUSHALL", "RANDOMKEY", "SCAN",
    "KEYS",
})
_BROADCAST = frozenset({"SCRIPT LOAD", "SCRIPT FLUSH", "FLUSHDB", "FLUSHALL"})
_SPLIT = frozenset({"MGET", "DEL", "EXISTS", "UNLINK", "TOUCH"})


def _word(value) -> str:
    return (value.decode() if isinstance(value, bytes | bytearray) else str(value)).upper()


def command_keys(args) -> list:
    """The keys ``args`` names, as the cluster reads them."""
    name = command_name(args)
    if name in ("EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"):
        return list(args[3 : 3 + int(args[2])])
    if name in ("XREAD", "XREADGROUP"):
        words = [_word(a) if isinstance(a, str | bytes) else "" for a in args]
        rest = list(args[words.index("STREAMS") + 1 :])
        return rest[: len(rest) // 2]
    if name in _SPLIT:
        return list(args[1:])
    if name in ("BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX"):
        return list(args[1:-1])
    if name in _KEYLESS or name.split(" ")[0] in ("CLUSTER", "CLIENT", "CONFIG", "SCRIPT"):
        return []
    if " " in name:  # XGROUP CREATE, XINFO GROUPS: the key follows the subcommand
        return list(args[1:2]) if " " in _word(args[0]) else list(args[2:3])
    return list(args[1:2])


def _malformed(what: str, value) -> ClusterMapError:
    shown = repr(value)
    return ClusterMapError(f"the cluster sent a malformed {what}: {shown[:200]}{'...' if len(shown) > 200 else ''}")


def _host(value, fallback: str) -> str:
    """A node's host as a reply names it: "" or "?" (unknown) is the node asked."""
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode("ascii")
        except UnicodeDecodeError:
            raise _malformed("host", value) from None
    if not isinstance(value, str) or any(c in value for c in " \t\r\n/@\x00"):
        raise _malformed("host", value)
    return value if value and value != "?" else fallback


def _port(value) -> int:
    if isinstance(value, bytes | bytearray | str):
        text = value.decode("ascii", "replace") if isinstance(value, bytes | bytearray) else value
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else -1
    if type(value) is not int or not 0 < value < 65536:
        raise _malformed("port", value)
    return value


def _slot(value) -> int:
    if isinstance(value, bytes | bytearray | str):
        text = value.decode("ascii", "replace") if isinstance(value, bytes | bytearray) else value
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else -1
    if type(value) is not int or not 0 <= value < SLOTS:
        raise _malformed("slot", value)
    return value


def parse_redirect(text: str, asked: str) -> tuple[int, tuple[str, int]]:
    """The slot and address of ``MOVED <slot> <host>:<port>`` (or ASK); an empty host is
    ``asked``, the node that answered. Anything else is a :class:`ClusterMapError`."""
    words = text.split(" ")
    if len(words) != 3 or words[0] not in ("MOVED", "ASK") or ":" not in words[2]:
        raise _malformed("redirect", text)
    host, _, port = words[2].rpartition(":")
    return _slot(words[1]), (_host(host, asked), _port(port))


def parse_slots(reply, asked: tuple[str, int]) -> list[tuple[int, int, tuple[str, int], int]]:
    """``CLUSTER SLOTS`` as ``(start, end, primary, replicas)`` ranges, each checked (slots
    in range, start before end, a host and a port); anything else is a ClusterMapError."""
    if not isinstance(reply, list):
        raise _malformed("CLUSTER SLOTS reply", reply)
    ranges = []
    for entry in reply:
        if not isinstance(entry, list) or len(entry) < 3 or not isinstance(entry[2], list) or len(entry[2]) < 2:
            raise _malformed("CLUSTER SLOTS entry", entry)
        start, end = _slot(entry[0]), _slot(entry[1])
        if start > end:
            raise _malformed("CLUSTER SLOTS range", entry)
        primary = entry[2]
        ranges.append((start, end, (_host(primary[0], asked[0]), _port(primary[1])), len(entry) - 3))
    return ranges


# Address scopes: a node named by the cluster must be in the scope of a configured one (the
# default rule, "network"). Checked on the address itself, before any connection.
_SCOPES = (
    ("loopback", ("127.0.0.0/8", "::1/128")),
    ("private", ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")),
    ("link-local", ("169.254.0.0/16", "fe80::/10")),
    ("unspecified", ("0.0.0.0/8", "::/128")),
)


def _ip(host: str) -> tuple[int, int] | None:
    """``(bits, value)`` of an IP address literal (an IPv4-mapped IPv6 one as IPv4); None for a name."""
    import _socket

    for family, bits in ((_socket.AF_INET, 32), (_socket.AF_INET6, 128)):
        try:
            value = int.from_bytes(_socket.inet_pton(family, host), "big")
        except (OSError, ValueError):
            continue
        if bits == 128 and value >> 32 == 0xFFFF:
            return 32, value & 0xFFFFFFFF
        return bits, value
    return None


def _network(text: str) -> tuple[int, int, int]:
    """``(bits, prefix, length)`` of "10.0.0.0/8" or of a single address."""
    address, _, length = text.partition("/")
    ip = _ip(address)
    if ip is None or (length and not (length.isdigit() and int(length) <= ip[0])):
        raise ValueError(f"not an address or network: {text!r}")
    bits, value = ip
    n = int(length) if length else bits
    return bits, value >> (bits - n), n


def _within(ip: tuple[int, int], network: tuple[int, int, int]) -> bool:
    bits, prefix, n = network
    return ip[0] == bits and ip[1] >> (bits - n) == prefix


_SCOPE_NETWORKS = [(name, [_network(n) for n in nets]) for name, nets in _SCOPES]


def _scope(ip: tuple[int, int]) -> str:
    return next((name for name, nets in _SCOPE_NETWORKS if any(_within(ip, n) for n in nets)), "public")


class NodePolicy:
    """Which addresses a cluster node may send the client to (MOVED, ASK, CLUSTER SLOTS),
    from the ``cluster_allow`` option: a comma-separated list of

    - ``network`` (the default): an address in the scope of the configured node's (its URL's
      host, or the addresses that name resolves to): loopback, private (RFC 1918, RFC 6598,
      IPv6 ULA), link-local or public, never from one to another; a host name, when it is
      the configured one or shares its parent domain (``node-2.example.internal`` for
      ``cfg.example.internal``);
    - networks and addresses (``10.0.0.0/8``, ``fd00::/8``, ``192.0.2.7``);
    - host names, exact or ``*.suffix``;
    - ``any``: every address, as valkey-py follows them.

    A refused address raises :class:`~kindling.drivers.valkey.errors.UntrustedNodeError` before a
    connection is opened: neither the password nor a command goes there."""

    def __init__(self, seed: str, allow: str | None) -> None:
        self.seed = seed.lower().rstrip(".")
        self.text = allow or "network"
        self.any = False
        self.network = False
        self.networks: list[tuple[int, int, int]] = []
        self.names: list[str] = []
        for item in (i.strip().lower() for i in self.text.split(",")):
            if item == "any":
                self.any = True
            elif item == "network":
                self.network = True
            elif item.startswith("*."):
                self.names.append(item[1:])  # ".suffix"
            elif "/" in item or _ip(item) is not None:
                self.networks.append(_network(item))
            elif item:
                self.names.append(item)
        self._scopes: set[str] | None = None
        self.passed: set[str] = {self.seed}

    def seed_scopes(self) -> set[str]:
        """The scopes of the configured node: of its address, or of those its name resolves to."""
        if self._scopes is None:
            ip = _ip(self.seed)
            if ip is not None:
                self._scopes = {_scope(ip)}
            else:
                import _socket

                try:
                    host = self.seed.encode("ascii") if self.seed.isascii() else self.seed
                    infos = _socket.getaddrinfo(host, None, 0, _socket.SOCK_STREAM)
                except (OSError, UnicodeError):
                    infos = []
                self._scopes = {_scope(i) for i in (_ip(info[4][0]) for info in infos) if i is not None}
        return self._scopes

    def allows(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if self.any or host in self.passed:
            return True
        ip = _ip(host)
        if ip is not None:
            if any(_within(ip, n) for n in self.networks):
                return True
            return self.network and _scope(ip) in self.seed_scopes() and _scope(ip) != "unspecified"
        if any(host == n or (n.startswith(".") and host.endswith(n)) for n in self.names):
            return True
        parent = self.seed.partition(".")[2]
        return self.network and _ip(self.seed) is None and "." in parent and host.endswith("." + parent)

    def check(self, address: tuple[str, int], named_by: str) -> None:
        host = address[0]
        if self.allows(host):
            self.passed.add(host.lower().rstrip("."))
            return
        raise UntrustedNodeError(
            f"a cluster node named {host}:{address[1]} ({named_by}), outside the addresses this client may "
            f"follow (cluster_allow={self.text!r}, configured node {self.seed}): refused, nothing was sent "
            f"there; if the node is yours, name it or its network in cluster_allow")


class _Part:
    """One command as sent: a whole command of the stack, or its keys of one slot."""

    __slots__ = ("owner", "args", "options", "slot", "positions", "reply", "ask")

    def __init__(self, owner: int, args: tuple, options: dict, slot: int | None, positions=None) -> None:
        self.owner, self.args, self.options, self.slot, self.positions = owner, args, options, slot, positions
        self.reply = _PENDING
        self.ask: tuple[str, int] | None = None


_PENDING = object()


class Router:
    """Where each command of a :class:`~kindling.drivers.valkey.client.Valkey` client goes on a cluster."""

    def __init__(self, seed) -> None:
        self.seed = seed
        self.seeds: list[tuple[str, int]] = [(seed.host, seed.port)]
        self.nodes: dict[tuple[str, int], object] = {}
        self.slots: list[tuple[str, int] | None] = []
        self.replicas: dict[tuple[str, int], int] = {}
        self.stale = True
        self.read_at = 0.0  # monotonic() of the last map read
        self.refreshes = 0  # how many times the map was read: a figure the tests look at
        self.wait_replicas = int(getattr(seed, "wait_replicas", 0) or 0)
        self.policy = NodePolicy(seed.host, getattr(seed, "cluster_allow", None))

    def close(self) -> None:
        nodes, self.nodes = self.nodes, {}
        for node in nodes.values():
            node.close()

    def node(self, address: tuple[str, int]):
        client = self.nodes.get(address)
        if client is None:
            client = self.nodes[address] = self.seed.for_node(*address)
        return client

    def primaries(self) -> list[tuple[str, int]]:
        if self.stale:
            self.refresh()
        return list(dict.fromkeys(a for a in self.slots if a is not None))

    # -- the map

    def refresh(self) -> None:
        """Read the slot map from the first node that answers: those known, then the seeds."""
        known = list(dict.fromkeys([*dict.fromkeys(a for a in self.slots if a is not None), *self.seeds]))
        random.shuffle(known)  # not always the one that just failed first
        error: BaseException | None = None
        for address in known:
            try:
                reply = self.node(address).execute_command("CLUSTER", "SLOTS")
            except ResponseError as exc:
                if "cluster support disabled" in str(exc):  # one plain node: every slot is its
                    self._set([[0, SLOTS - 1, [address[0].encode(), address[1]]]], address)
                    return
                error = exc
                continue
            except (ConnectionError, TimeoutError) as exc:
                error = exc
                continue
            if reply:
                try:
                    self._set(reply, address)
                except ConnectionError as exc:  # malformed, or naming a node outside those allowed
                    error = exc
                    continue
                return
        kind = type(error) if isinstance(error, UntrustedNodeError | ClusterMapError) else ConnectionError
        raise kind(f"no node of the cluster answered CLUSTER SLOTS ({len(known)} tried): {error}")

    def _set(self, reply, asked: tuple[str, int]) -> None:
        slots: list[tuple[str, int] | None] = [None] * SLOTS
        replicas: dict[tuple[str, int], int] = {}
        ranges = parse_slots(reply, asked)
        for _, _, address, _ in ranges:
            self.policy.check(address, "CLUSTER SLOTS")  # the whole map, before any of it is used
        for start, end, address, others in ranges:
            slots[start : end + 1] = [address] * (end + 1 - start)
            replicas[address] = others
        self.slots, self.replicas, self.stale = slots, replicas, False
        self.read_at = monotonic()
        self.refreshes += 1
        for address in replicas:
            if address not in self.seeds:
                self.seeds.append(address)

    def owner(self, slot: int | None) -> tuple[str, int]:
        if self.stale or not self.slots:
            self.refresh()
        if slot is None:
            return self.primaries()[0]
        address = self.slots[slot]
        if address is None:
            self.refresh()
            address = self.slots[slot]
        if address is None:
            raise ResponseError(f"CLUSTERDOWN Hash slot {slot} is not served by any node")
        return address

    # -- commands

    def execute_command(self, args: tuple, options: dict, deadline: float | None):
        """One command, run where it belongs, its reply shaped as the client shapes it."""
        name = command_name(args)
        if name in _BROADCAST:
            replies = [self.node(a).execute_command(*args, deadline=deadline) for a in self.primaries()]
            return replies[0]
        (reply,) = self.pipeline_replies([(args, options)], [], False, deadline)
        if isinstance(reply, ResponseError):
            if "_empty" in options:
                return options["_empty"]
            raise reply
        return parse_reply(name, reply, options)

    def pipeline_replies(self, stack: list, scripts: list, transaction: bool, deadline: float | None,
                         done: list | None = None) -> list:
        """A reply per command of ``stack`` (unshaped, errors in place), each part sent to its
        node. ``done`` holds ``(reply,)`` for a command already answered, None for one to send."""
        parts = []
        for i, (args, options) in enumerate(stack):
            if done is not None and done[i] is not None:
                continue
            parts.extend(self._parts(i, args, options))
        if transaction:
            self._transaction(parts, scripts, deadline)
        else:
            self._send(parts, scripts, deadline)
        replies = [d[0] if d is not None else _PENDING for d in done] if done is not None else [_PENDING] * len(stack)
        for i, (args, _) in enumerate(stack):
            if replies[i] is _PENDING:
                replies[i] = _join(args, [p for p in parts if p.owner == i])
        return replies

    def _parts(self, owner: int, args: tuple, options: dict) -> list[_Part]:
        keys = command_keys(args)
        if not keys:
            return [_Part(owner, args, options, None)]
        slots = [key_slot(k) for k in keys]
        if len(set(slots)) == 1 or command_name(args) not in _SPLIT:
            return [_Part(owner, args, options, slots[0])]
        by_slot: dict[int, list[int]] = {}
        for position, slot in enumerate(slots):
            by_slot.setdefault(slot, []).append(position)
        return [_Part(owner, (args[0], *(keys[p] for p in positions)), options, slot, positions)
                for slot, positions in by_slot.items()]

    def _send(self, parts: list[_Part], scripts: list, deadline: float | None) -> None:
        if self.wait_replicas and monotonic() - self.read_at >= REREAD_S and \
                any(n < self.wait_replicas for n in self.replicas.values()):
            self.stale = True  # a replica may have shown up since (REREAD_S)
        pending = everything = parts
        for attempt in RETRY.tries():
            retry: list[_Part] = []
            pause = False
            refused: ConnectionError | None = None
            by_node: dict[tuple[str, int], list[_Part]] = {}
            for part in pending:
                by_node.setdefault(part.ask or self.owner(part.slot), []).append(part)
            for address, group in by_node.items():
                stack = []
                for part in group:
                    if part.ask is not None:
                        stack.append((("ASKING",), {}))
                    stack.append((part.args, part.options))
                acks = min(self.wait_replicas, self.replicas.get(address, 0))
                waits = bool(acks) and not all(command_name(a) in IDEMPOTENT for a, _ in stack)
                if waits:
                    stack.append((("WAIT", acks, WAIT_MS), {}))  # the writes reach a replica before they count
                try:
                    replies = self.node(address).pipeline(transaction=False).raw_replies(stack, scripts, deadline)
                    acked = replies.pop() if waits else None
                except (ConnectionError, TimeoutError) as exc:
                    self.stale = True
                    if getattr(exc, "maybe_ran", False):
                        raise  # sent, the reply lost: never sent twice
                    retry += group  # refused before anything was sent: a node down, its replica not yet promoted
                    pause = True
                    continue
                ran = False  # a write of this group ran here (not redirected): WAIT's answer counts
                replies = iter(replies)
                for part in group:
                    if part.ask is not None:
                        next(replies)  # ASKING's OK
                        part.ask = None
                    reply = next(replies)
                    kind = str(reply.args[0]).split(" ", 1)[0] if type(reply) is ResponseError and reply.args else ""
                    if kind in ("MOVED", "ASK"):
                        self.stale = self.stale or kind == "MOVED"  # more than one slot moves at a time
                        try:
                            slot, where = parse_redirect(str(reply.args[0]), address[0])
                            self.policy.check(where, kind)
                        except ConnectionError as exc:  # malformed, or a node outside those allowed
                            self.stale = True
                            refused = refused or exc
                            continue
                        if kind == "MOVED":
                            if self.slots:
                                self.slots[slot] = where
                        else:
                            part.ask = where
                        retry.append(part)
                    elif topology_changed(reply):  # UNBLOCKED, READONLY, TRYAGAIN...: nothing ran
                        self.stale = True
                        pause = True
                        retry.append(part)
                    else:
                        part.reply = reply
                        ran = ran or command_name(part.args) not in IDEMPOTENT
                if waits and ran:
                    try:
                        _check_replicated(acked, acks, address)
                    except ConnectionError:
                        self.stale = True  # fewer replicas than the map says: it may have changed
                        raise
            if refused is not None:
                refused.maybe_ran = any(p.reply is not _PENDING for p in everything)
                raise refused
            if not retry:
                return
            if pause:
                _pause(attempt, deadline)
            pending = retry
        raise ConnectionError(f"the cluster kept redirecting or refusing {len(pending)} commands "
                              f"({command_name(pending[0].args)}, ...) after {ATTEMPTS} attempts")

    def _transaction(self, parts: list[_Part], scripts: list, deadline: float | None) -> None:
        slots = {p.slot for p in parts if p.slot is not None}
        if len(slots) > 1 or any(p.positions is not None for p in parts):
            raise ResponseError("CROSSSLOT Keys in request don't hash to the same slot "
                                "(a transaction on a cluster keeps to one hash tag)")
        slot = next(iter(slots), None)
        for attempt in RETRY.tries():
            pipe = self.node(self.owner(slot)).pipeline(transaction=True)
            try:
                replies = pipe.raw_replies([(p.args, p.options) for p in parts], scripts, deadline, redirects=True)
            except (ConnectionError, ResponseError) as exc:
                if not isinstance(exc, ConnectionError) and not topology_changed(exc):
                    raise
                self.stale = True
                if getattr(exc, "maybe_ran", False):
                    raise
                _pause(attempt, deadline)  # a refusal at queueing (READONLY, TRYAGAIN...): EXECABORT, nothing ran
                continue
            if replies and type(replies[0]) is ResponseError and str(replies[0].args[0]).startswith(("MOVED", "ASK")):
                self.stale = True
                continue
            for part, reply in zip(parts, replies, strict=True):
                part.reply = reply
            return
        raise ConnectionError(f"the cluster kept refusing a transaction of {len(parts)} commands")


def _check_replicated(confirmed: object, acks: int, address: tuple[str, int]) -> None:
    """WAIT's answer: fewer replicas than asked for within :data:`WAIT_MS` means the writes
    sit on the primary alone, where a failover could lose them. They must not count as done
    (a worker would acknowledge jobs whose records then vanish), nor as not done (the
    primary applied them): an outcome unknown, as a lost reply is."""
    if type(confirmed) is int and confirmed >= acks:
        return
    error = ConnectionError(f"writes to {address[0]}:{address[1]} reached {confirmed!r} of the {acks} "
                            f"replica(s) asked for within {WAIT_MS} ms: they may be lost in a failover")
    error.maybe_ran = True
    raise error


def _pause(attempt: int, deadline: float | None) -> None:
    if not RETRY.wait(attempt, deadline, sleep):
        raise DeadlineExceeded("the deadline passed while the cluster was changing")


def _join(args: tuple, parts: list[_Part]):
    """The reply of a command from its parts' (one part: its own reply)."""
    if len(parts) == 1 and parts[0].positions is None:
        return parts[0].reply
    for part in parts:
        if isinstance(part.reply, Exception):
            return part.reply
    if command_name(args) == "MGET":
        values = [None] * (len(args) - 1)
        for part in parts:
            for position, value in zip(part.positions, part.reply, strict=True):
                values[position] = value
        return values
    return sum(int(p.reply) for p in parts)
