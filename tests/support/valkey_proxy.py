"""A loopback RESP proxy in front of a real valkey-server that answers chosen commands itself.

``Interposer(port).start()`` listens on a free loopback port and forwards every command to
the server on ``port``, one at a time, relaying each reply in order. ``answer(match, reply,
times)`` makes it answer the next ``times`` commands that ``match`` (a predicate on the
command's arguments, as bytes) with the raw ``reply`` instead, without forwarding them: a
server answering a blocking XREADGROUP with ``-UNBLOCKED ...`` as a failover does, or an
XADD with ``-READONLY ...``. ``answered`` lists the commands it answered that way, so a test
can show the reply it meant to provoke was sent. ``answer(match, LOST)`` forwards the command
and reads the server's reply, then closes the client's connection without it: a reply lost
after the server ran the command (a blocking read that delivered entries, then the
connection dropped by a failover).

A thread per client connection; each command waits for its reply before the next is
forwarded (a pipeline costs a round trip per command: loopback, and fine for tests).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

from support import free_port

LOST = b""
"""The reply that is never sent: the command runs on the server, the client's connection is closed."""


class _Buffered:
    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.data = sock, b""

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError
        self.data += chunk

    def line(self) -> bytes:
        while b"\r\n" not in self.data:
            self._fill()
        line, self.data = self.data.split(b"\r\n", 1)
        return line

    def exactly(self, n: int) -> bytes:
        while len(self.data) < n:
            self._fill()
        out, self.data = self.data[:n], self.data[n:]
        return out


def read_value(reader: _Buffered) -> tuple[bytes, object]:
    """One RESP2 value: its raw bytes, and (for arrays of bulk strings) its parts."""
    line = reader.line()
    raw = line + b"\r\n"
    kind, rest = line[:1], line[1:]
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return raw, None
        data = reader.exactly(n + 2)
        return raw + data, data[:-2]
    if kind == b"*":
        n = int(rest)
        parts = []
        for _ in range(max(n, 0)):
            part_raw, part = read_value(reader)
            raw += part_raw
            parts.append(part)
        return raw, parts
    return raw, rest


def command(*words: str) -> Callable[[list], bool]:
    """A matcher: a command whose first words are ``words`` (any case)."""
    wanted = [w.upper().encode() for w in words]
    return lambda args: [a.upper() if isinstance(a, bytes) else a for a in args[: len(wanted)]] == wanted


def blocking_read(args: list) -> bool:
    """XREADGROUP ... BLOCK n ...: the read a worker waits in."""
    upper = [a.upper() for a in args if isinstance(a, bytes)]
    return bool(upper) and upper[0] == b"XREADGROUP" and b"BLOCK" in upper


class Interposer:
    def __init__(self, port: int) -> None:
        self.target = port
        self.port = free_port()
        self.rules: list[list] = []  # [match, reply, times left]
        self.answered: list[list] = []
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def answer(self, match: Callable[[list], bool], reply: bytes, times: int = 1) -> None:
        with self.lock:
            self.rules.append([match, reply, times])

    def clear(self) -> None:
        """Forward every command from now on."""
        with self.lock:
            self.rules.clear()

    def start(self) -> Interposer:
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _take(self, args: list) -> bytes | None:
        with self.lock:
            for rule in self.rules:
                if rule[2] > 0 and rule[0](args):
                    rule[2] -= 1
                    self.answered.append(args)
                    return rule[1]
        return None

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(("127.0.0.1", self.target), timeout=30)
        server.settimeout(None)
        with self.lock:
            self.conns += [client, server]
        from_client, from_server = _Buffered(client), _Buffered(server)
        try:
            while True:
                raw, args = read_value(from_client)
                reply = self._take(args) if isinstance(args, list) else None
                if reply is None or reply is LOST:
                    server.sendall(raw)
                    lost = reply is LOST
                    reply, _ = read_value(from_server)
                    if lost:
                        return  # the reply read and dropped: the connection closes below
                client.sendall(reply)
        except (EOFError, OSError):
            pass
        finally:
            client.close()
            server.close()

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()
        with self.lock:
            conns, self.conns = self.conns, []
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def __enter__(self) -> Interposer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
