"""Valkey Cluster for kindling's client: the slot map, MOVED and ASK, a pipeline per node, failover.

A :class:`~kindling.valkey.client.Valkey` client hands its commands to a :class:`Router`
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
that mean the topology changed (:data:`~kindling.valkey.errors.TOPOLOGY_CHANGED`: UNBLOCKED,
a blocking read a failover interrupted; READONLY, a primary demoted; LOADING, MASTERDOWN,
TRYAGAIN, CLUSTERDOWN), and a node refusing connections (a primary killed, its replica not
yet promoted): nothing ran, so the map is read again and the command sent again after a
pause (50 ms doubling to 1 s, at most :data:`ATTEMPTS` times, never past a
``deadline``). A connection lost *after* a write was sent is not retried (the client's rule:
a write is never sent twice): the error says it may have run, and the map is read again
before the next command.
"""

from __future__ import annotations

import random
from time import monotonic, sleep

from kindling.valkey.commands import IDEMPOTENT, command_name, parse_reply
from kindling.valkey.errors import (
    ConnectionError,
    DeadlineExceeded,
    ResponseError,
    TimeoutError,
    topology_changed,
)
from kindling.valkey.keys import hash_tag

SLOTS = 16384
ATTEMPTS = 16
"""How many times one command is sent at most while a cluster redirects it or changes under
it (a failover takes the cluster's node timeout plus an election: about 2 s with a node
timeout of 1 s); the pauses between add up to about 12 s."""

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


def _address(value, fallback: str) -> str:
    host = value.decode() if isinstance(value, bytes) else str(value or "")
    return host if host and host != "?" else fallback


class _Part:
    """One command as sent: a whole command of the stack, or its keys of one slot."""

    __slots__ = ("owner", "args", "options", "slot", "positions", "reply", "ask")

    def __init__(self, owner: int, args: tuple, options: dict, slot: int | None, positions=None) -> None:
        self.owner, self.args, self.options, self.slot, self.positions = owner, args, options, slot, positions
        self.reply = _PENDING
        self.ask: tuple[str, int] | None = None


_PENDING = object()


class Router:
    """Where each command of a :class:`~kindling.valkey.client.Valkey` client goes on a cluster."""

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
                self._set(reply, address)
                return
        raise ConnectionError(f"no node of the cluster answered CLUSTER SLOTS ({len(known)} tried): {error}")

    def _set(self, reply, asked: tuple[str, int]) -> None:
        slots: list[tuple[str, int] | None] = [None] * SLOTS
        replicas: dict[tuple[str, int], int] = {}
        for start, end, primary, *others in reply:
            address = (_address(primary[0], asked[0]), int(primary[1]))
            for slot in range(int(start), int(end) + 1):
                slots[slot] = address
            replicas[address] = len(others)
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
        pending = parts
        for attempt in range(1, ATTEMPTS + 1):
            retry: list[_Part] = []
            pause = False
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
                except (ConnectionError, TimeoutError) as exc:
                    self.stale = True
                    if getattr(exc, "maybe_ran", False):
                        raise  # sent, the reply lost: never sent twice
                    retry += group  # refused before anything was sent: a node down, its replica not yet promoted
                    pause = True
                    continue
                if waits:
                    _check_replicated(replies[-1], acks, address)
                replies = iter(replies)
                for part in group:
                    if part.ask is not None:
                        next(replies)  # ASKING's OK
                        part.ask = None
                    reply = next(replies)
                    kind = str(reply.args[0]).split(" ", 1)[0] if type(reply) is ResponseError and reply.args else ""
                    if kind == "MOVED":
                        _, slot, where = str(reply.args[0]).split(" ")
                        host, _, port = where.rpartition(":")
                        if self.slots:
                            self.slots[int(slot)] = (host or address[0], int(port))
                        self.stale = True  # more than one slot moves at a time: read the whole map again
                        retry.append(part)
                    elif kind == "ASK":
                        _, _, where = str(reply.args[0]).split(" ")
                        host, _, port = where.rpartition(":")
                        part.ask = (host or address[0], int(port))
                        retry.append(part)
                    elif topology_changed(reply):  # UNBLOCKED, READONLY, TRYAGAIN...: nothing ran
                        self.stale = True
                        pause = True
                        retry.append(part)
                    else:
                        part.reply = reply
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
        for attempt in range(1, ATTEMPTS + 1):
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
    wait = min(0.05 * 2 ** (attempt - 1), 1.0)
    if deadline is not None:
        left = deadline - monotonic()
        if left <= wait:
            raise DeadlineExceeded("the deadline passed while the cluster was changing")
    sleep(wait)


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
