"""kindling's own Valkey client: the commands kindling uses, over ``_socket``.

``Valkey.from_url(url)`` takes the URLs and options valkey-py's does (``redis://`` and
``rediss://``, ``valkey://`` and ``valkeys://``, ``user:password@``, ``/db``, query options)
and its methods return what valkey-py's return with its default ``decode_responses=False``
(RESP2): bytes, ints, the dicts of ``xpending`` and ``xpending_range``, the
``[[stream, [(id, {field: value})]]]`` of ``xreadgroup`` and so on. Pipelines,
``register_script`` (a Script usable with ``client=pipe``) and the errors of
:mod:`kindling.drivers.valkey.errors` behave as valkey-py's, so code written for one runs on the other.

The commands themselves are in :mod:`.commands`, the protocol in :mod:`.resp`.

Cold path: beyond kindling's own modules, only C modules (``_socket``, and ``_sha1`` once a
script is registered); ``ssl`` is imported at the first ``rediss://`` connection only.
Measured on this machine (CPython 3.13.0, x86-64, 2 vCPUs, shared with other work; median
[min] of 21 fresh processes for import times, 15 for RSS)::

    PYTHONPATH=layers/kindling python -X importtime -S -c "import kindling.drivers.valkey.client"
    PYTHONPATH=.venv/lib/python3.13/site-packages python -X importtime -S -c "import valkey"

                                  kindling.drivers.valkey.client     valkey-py 6.2.0
    import, cumulative            14.0 [12.9] ms             318 [201] ms
      of which kindling itself    11.5 [9.3] ms (``import kindling``: the worker has it already)
      the client's five modules   3.5 ms (errors 0.8, resp 0.4, commands 0.6, client 0.9, _socket 0.6)
    modules in sys.modules        50                         249
    VmRSS, import + connect +
      one XADD, ``python -S``      10.0 MiB                   27.3 MiB
      (a bare ``python -S``: 8.4 MiB; after ``import kindling``: 9.3 MiB)

``import kindling.drivers.valkey.resp`` alone: 17.4 [11.1] ms, nearly all of it ``import kindling``.
The RSS probe is ``_rss_probe`` in ``tests/service/test_resp_client.py`` (VmRSS from
/proc/self/status after ``Valkey.from_url(url).xadd(...)`` in a fresh ``python -S``).

Connections. A client keeps a connection per concurrent caller (thread-safe as valkey-py's
pool is) and opens it at first use: TCP_NODELAY, TLS if asked, then AUTH, CLIENT SETNAME
and SELECT in one round trip. Every socket wait is bounded by ``socket_timeout``
(``socket_connect_timeout`` while connecting) and, given ``deadline=`` (a
:func:`time.monotonic` value) to ``execute_command`` or ``Pipeline.execute``, never past
the deadline (:class:`~kindling.drivers.valkey.errors.DeadlineExceeded`).

Reconnects. Before anything is sent on an open connection, it is checked without blocking
(one ``recv``: a connection the server closed reads as the end of the stream), and after
``health_check_interval`` seconds idle with a PING; a connection found dropped is opened
again, nothing having been sent. A connection lost *after* a command was sent is opened
again and the command sent once more only if every command sent is a read (GET, MGET,
XLEN, XPENDING, XRANGE, PING, ...); a write (XADD, XREADGROUP, XACK, SET, EVALSHA, ...)
is never sent twice by the client: :class:`~kindling.drivers.valkey.errors.ConnectionError` says
it may or may not have run, and the caller decides. Timeouts are never retried.

Valkey Cluster (and ElastiCache with cluster mode enabled, or Serverless): the same URL.
The first reply that says the server is one node of a cluster (MOVED, ASK or CROSSSLOT:
nothing ran) turns the client into a cluster client, :mod:`.cluster` imported then and not
before; ``?cluster=true`` (``cluster=True``) does it at the first command instead. A single
node never loads it.

Not supported: speaking RESP3 (the parser reads it; the client sends no HELLO),
``decode_responses=True``, pub/sub, WATCH, sentinel, unix sockets. TLS
checks the server's host name by default (valkey-py does not; ``?ssl_check_hostname=false``
turns it off).
"""

from __future__ import annotations

import _socket
import builtins
from time import monotonic

from kindling.core.errors import KindlingError
from kindling.drivers.valkey import resp
from kindling.drivers.valkey.commands import IDEMPOTENT, Commands, Script, command_name, parse_reply
from kindling.drivers.valkey.errors import (
    AuthenticationError,
    BusyLoadingError,
    ConnectionError,
    DataError,
    DeadlineExceeded,
    ExecAbortError,
    InvalidResponse,
    ResponseError,
    TimeoutError,
    ValkeyError,
    WatchError,
    topology_changed,
)

_ssl = None  # the ssl module, once a TLS connection has needed it
_restores = 0  # snapshots this process was restored from (kindling.shared.snapstart)


def after_restore() -> None:
    """The process was restored from a snapshot: every connection opened before is stale, and
    is closed (a new one opened) at its next command."""
    global _restores
    _restores += 1
_UNSET = object()

# -- URLs --------------------------------------------------------------------------------------

_SCHEMES = ("redis", "rediss", "valkey", "valkeys")
_FALSE = ("0", "F", "FALSE", "N", "NO", "OFF", "DISABLED")
_HEX = frozenset("0123456789abcdefABCDEF")


def _to_bool(value: str) -> bool | None:
    if value == "":
        return None
    return value.upper() not in _FALSE


_QUERY_TYPES = {
    "db": int, "socket_timeout": float, "socket_connect_timeout": float, "socket_keepalive": _to_bool,
    "health_check_interval": int, "ssl_check_hostname": _to_bool, "cluster": _to_bool,
    "wait_replicas": int, "cluster_allow": str,
}

# The first word of an error reply that means "this key lives on another node of a cluster":
# the command did not run, and a cluster client sends it where it belongs.
REDIRECTS = ("MOVED", "ASK", "CROSSSLOT")


def redirected(reply) -> bool:
    """Whether ``reply`` is a cluster's refusal to run a command here (nothing ran)."""
    return isinstance(reply, ResponseError) and type(reply) is ResponseError and bool(reply.args) \
        and str(reply.args[0]).split(" ", 1)[0] in REDIRECTS


def unquote(text: str) -> str:
    """urllib.parse.unquote: %XX escapes decoded as UTF-8 (invalid bytes replaced)."""
    if "%" not in text:
        return text
    first, *rest = text.split("%")
    data = bytearray(first.encode())
    for piece in rest:
        if len(piece) >= 2 and piece[0] in _HEX and piece[1] in _HEX:
            data.append(int(piece[:2], 16))
            data += piece[2:].encode()
        else:
            data += b"%" + piece.encode()
    return data.decode("utf-8", errors="replace")


def parse_url(url: str) -> dict:
    """The connection options in ``url``, as valkey-py's ``parse_url`` reads them (but
    without urllib.parse, which imports re): host, port, username, password (decoded),
    db (the path, unless the query names one), ssl for rediss:// and valkeys://, and the
    query's options (``socket_timeout``, ``ssl_ca_certs``, ``ssl_cert_reqs``, ...)."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _SCHEMES:
        raise ValueError(f"Valkey URL must specify one of the following schemes {list(_SCHEMES)}")
    rest = rest.partition("#")[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, rest = rest[:cut], rest[cut:]
    path, _, query = rest.partition("?")
    options: dict = {}
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if not value:
            continue
        name = unquote(name.replace("+", " "))
        if name in options:
            continue  # the first value counts, as parse_qs' [0]
        value = unquote(unquote(value.replace("+", " ")))
        parse = _QUERY_TYPES.get(name)
        if parse is not None:
            try:
                value = parse(value)
            except (TypeError, ValueError):
                raise ValueError(f"Invalid value for `{name}` in connection URL.") from None
        options[name] = value
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        username, colon, password = userinfo.partition(":")
        if username:
            options["username"] = unquote(username)
        if colon and password:
            options["password"] = unquote(password)
    if hostport.startswith("["):  # an IPv6 literal
        host, _, port = hostport[1:].partition("]")
        port = port[1:] if port.startswith(":") else ""
    else:
        host, _, port = hostport.partition(":")
    if host:
        options["host"] = unquote(host.lower())
    if port:
        if not (port.isascii() and port.isdigit() and int(port) <= 65535):
            raise ValueError(f"Port could not be cast to integer value as {port!r}")
        if int(port):
            options["port"] = int(port)
    if path and "db" not in options:
        db = unquote(path).replace("/", "")
        if db.isascii() and db.strip().lstrip("+-").isdigit():
            options["db"] = int(db)
    if scheme in ("rediss", "valkeys"):
        options["ssl"] = True
    return options


class Valkey(Commands):
    """A Valkey client with valkey-py's constructor and ``from_url`` (the options below).

    ``socket_timeout`` bounds each socket wait of a command (``None``: wait forever, as
    valkey-py), ``socket_connect_timeout`` (default ``socket_timeout``) the connect and TLS
    handshake. ``health_check_interval``: PING a connection idle longer than this many
    seconds before using it (0: never). TLS (``ssl=True``, or rediss://) verifies the
    server's certificate (``ssl_cert_reqs``: "required", "optional" or "none") against the
    system's CAs plus ``ssl_ca_certs``/``ssl_ca_path``/``ssl_ca_data``, and its host name
    unless ``ssl_check_hostname`` is false; ``ssl_certfile``/``ssl_keyfile`` for client
    certificates.
    """

    def __init__(self, host: str = "localhost", port: int = 6379, db: int = 0, password: str | None = None,
                 socket_timeout: float | None = None, socket_connect_timeout: float | None = None,
                 socket_keepalive: bool | None = None, username: str | None = None, ssl: bool = False,
                 ssl_keyfile: str | None = None, ssl_certfile: str | None = None, ssl_cert_reqs="required",
                 ssl_ca_certs: str | None = None, ssl_ca_path: str | None = None, ssl_ca_data=None,
                 ssl_check_hostname: bool | None = True, ssl_password=None, health_check_interval: float = 0,
                 client_name: str | None = None, decode_responses: bool = False, cluster: bool | None = None,
                 wait_replicas: int = 0, cluster_allow: str | None = None) -> None:
        if decode_responses:
            raise DataError("kindling's Valkey client returns bytes only (decode_responses=False)")
        self.host, self.port, self.db = host, int(port), int(db or 0)
        self.username, self.password, self.client_name = username, password, client_name
        self.socket_timeout = socket_timeout
        self.socket_connect_timeout = socket_connect_timeout or socket_timeout
        self.socket_keepalive = socket_keepalive
        self.health_check_interval = health_check_interval or 0
        self.ssl = ssl
        self.ssl_options = {
            "keyfile": ssl_keyfile, "certfile": ssl_certfile, "cert_reqs": ssl_cert_reqs, "ca_certs": ssl_ca_certs,
            "ca_path": ssl_ca_path, "ca_data": ssl_ca_data, "check_hostname": ssl_check_hostname is not False,
            "password": ssl_password,
        }
        self._ssl_context = None
        self._idle: list[Connection] = []
        self.cluster = bool(cluster)
        self.wait_replicas = int(wait_replicas or 0)  # on a cluster: WAIT for this many replicas after writes
        self.cluster_allow = cluster_allow  # on a cluster: the nodes a redirect may name (cluster.NodePolicy)
        self.router = None  # a kindling.drivers.valkey.cluster.Router once this client speaks to a cluster
        self._options = dict(
            db=db, password=password, socket_timeout=socket_timeout, socket_connect_timeout=socket_connect_timeout,
            socket_keepalive=socket_keepalive, username=username, ssl=ssl, ssl_keyfile=ssl_keyfile,
            ssl_certfile=ssl_certfile, ssl_cert_reqs=ssl_cert_reqs, ssl_ca_certs=ssl_ca_certs, ssl_ca_path=ssl_ca_path,
            ssl_ca_data=ssl_ca_data, ssl_check_hostname=ssl_check_hostname, ssl_password=ssl_password,
            health_check_interval=health_check_interval, client_name=client_name)

    def for_node(self, host: str, port: int) -> Valkey:
        """A client of another node with this one's options (credentials, TLS, timeouts),
        speaking to that node only: what a cluster client keeps for each node."""
        return type(self)(host, port, **self._options)

    def cluster_router(self):
        """The router of this client's cluster, made (and :mod:`.cluster` imported) at first need."""
        if self.router is None:
            from kindling.drivers.valkey.cluster import Router

            self.router = Router(self)
        return self.router

    @classmethod
    def from_url(cls, url: str, **options) -> Valkey:
        """A client for ``url``; its options win over ``options``, as in valkey-py."""
        options.update(parse_url(url))
        return cls(**options)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {'rediss' if self.ssl else 'redis'}://{self.host}:{self.port}/{self.db}>"

    def __enter__(self) -> Valkey:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the idle connections (a later command opens one again)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self.router is not None:
            self.router.close()

    def pipeline(self, transaction: bool = True, shard_hint=None) -> Pipeline:
        return Pipeline(self, transaction)

    def execute_command(self, *args, deadline: float | None = None, **options):
        """Send one command and return its reply, shaped as valkey-py shapes it."""
        if self.router is not None or self.cluster:
            return self.cluster_router().execute_command(args, options, deadline)
        name = command_name(args)
        out: list[bytes] = []
        resp.pack_command(args, out)
        (reply,) = self._run(out, 1, name, name in IDEMPOTENT, deadline)
        if redirected(reply):  # one node of a cluster: nothing ran here
            return self.cluster_router().execute_command(args, options, deadline)
        if isinstance(reply, ResponseError):
            if "_empty" in options:
                return options["_empty"]
            raise reply
        return parse_reply(name, reply, options)

    # -- connections

    def _run(self, out: list[bytes], count: int, what: str, retry: bool, deadline: float | None) -> list:
        """Send the packed commands and read their ``count`` replies (errors in place).

        A connection lost with replies unread is opened again and everything sent once
        more only when ``retry`` (reads only); otherwise ConnectionError.
        """
        if deadline is not None and deadline <= monotonic():  # nothing sent: the connection stays usable
            raise DeadlineExceeded(f"the deadline passed before {what} was sent")
        data = b"".join(out)
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = Connection(self)
        try:
            for attempt in (1, 2):
                conn.prepare(deadline)
                try:
                    conn.send(data)
                    replies = conn.read(count)
                except BaseException as exc:
                    conn.close()
                    error = conn.translate(exc)
                    if error is None:
                        raise
                    if type(error) is ConnectionError:  # lost, not refused (AUTH, LOADING)
                        if retry and attempt == 1:
                            continue
                        if not retry:
                            error = ConnectionError(f"{error} (after {what} was sent: it may or may not have run)")
                    if isinstance(error, ValkeyError) and not isinstance(
                            error, AuthenticationError | BusyLoadingError | ResponseError):
                        error.maybe_ran = True  # sent, the reply lost: callers must not read it as "not run"
                    if error is exc:
                        raise
                    raise error from exc
                conn.last_used = monotonic()
                if any(isinstance(r, ResponseError) and topology_changed(r) for r in replies):
                    conn.close()  # a failover: the next command opens it again (a name resolved again)
                return replies
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            self._idle.append(conn)

    def _context(self):
        """The TLS context, built once per client (loading CAs takes milliseconds)."""
        global _ssl
        if self._ssl_context is None:
            import ssl

            _ssl = ssl
            o = self.ssl_options
            reqs = o["cert_reqs"]
            if reqs is None:
                reqs = ssl.CERT_NONE
            elif isinstance(reqs, str):
                levels = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
                if reqs not in levels:
                    raise ConnectionError(f"Invalid SSL Certificate Requirements Flag: {reqs}")
                reqs = levels[reqs]
            context = ssl.create_default_context()
            context.check_hostname = bool(o["check_hostname"]) and reqs != ssl.CERT_NONE
            context.verify_mode = reqs
            if o["certfile"] or o["keyfile"]:
                context.load_cert_chain(certfile=o["certfile"], keyfile=o["keyfile"], password=o["password"])
            if o["ca_certs"] or o["ca_path"] or o["ca_data"]:
                context.load_verify_locations(cafile=o["ca_certs"], capath=o["ca_path"], cadata=o["ca_data"])
            self._ssl_context = context
        return self._ssl_context


class Connection:
    """One connection of a :class:`Valkey` client: opened on demand, closed on any failure."""

    __slots__ = ("client", "sock", "reader", "last_used", "_timeout", "_deadline", "_deadline_bound", "_armed",
                 "_restores")

    def __init__(self, client: Valkey) -> None:
        self.client = client
        self.sock = None
        self.reader = resp.Reader(self._recv)
        self.last_used = 0.0
        self._timeout: float | None = client.socket_timeout
        self._deadline: float | None = None
        self._deadline_bound = False
        self._armed: object = _UNSET  # the timeout the socket was given
        self._restores = _restores  # when the socket was opened, in restores

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self.reader.clear()
        if sock is not None:
            sock.close()

    # -- waits

    def _wait(self) -> float | None:
        self._deadline_bound = False
        if self._deadline is None:
            return self._timeout
        remaining = self._deadline - monotonic()
        if remaining <= 0:
            raise DeadlineExceeded("the deadline passed")
        if self._timeout is None or remaining < self._timeout:
            self._deadline_bound = True
            return remaining
        return self._timeout

    def _arm(self) -> None:
        wait = self._wait()
        if wait != self._armed:
            self.sock.settimeout(wait)
            self._armed = wait

    def _recv(self, n: int) -> bytes:
        self._arm()
        return self.sock.recv(n)

    def translate(self, exc: BaseException) -> BaseException | None:
        """The client's error for what a socket or the parser raised; None for anything
        else (an interrupt, a task's own timeout), which is raised as it is."""
        where = f"{self.client.host}:{self.client.port}"
        if isinstance(exc, KindlingError):  # ours, or a JobTimeout raised into the wait
            return exc
        if type(exc) is builtins.TimeoutError:  # a socket's own timeout, not a task's JobTimeout
            if self._deadline_bound:
                return DeadlineExceeded(f"the deadline passed waiting for {where}")
            return TimeoutError(f"Timeout talking to {where}")
        if isinstance(exc, OSError):
            return ConnectionError(f"Error talking to {where}: {exc}")
        if isinstance(exc, ValueError):
            return InvalidResponse(f"Protocol Error: {exc}")
        return None

    # -- connecting

    def prepare(self, deadline: float | None) -> None:
        """Make the connection ready to send: opened if closed, opened again if dropped."""
        self._deadline = deadline
        if self.sock is not None and (self._restores != _restores or self._dropped()):
            self.close()  # dropped, or opened before a snapshot was restored
        if self.sock is None:
            self._open()
            return
        interval = self.client.health_check_interval
        if interval and monotonic() - self.last_used > interval:
            try:
                self.send(b"*1\r\n$4\r\nPING\r\n")
                self.read(1)
            except BaseException as exc:
                self.close()
                if self.translate(exc) is None:
                    raise
                self._open()

    def _dropped(self) -> bool:
        """Whether the idle connection was closed by the server (or holds bytes nobody asked for)."""
        if self.reader.unread():
            return True
        sock = self.sock
        try:
            sock.settimeout(0.0)
            self._armed = 0.0
            sock.recv(1)
        except BlockingIOError:
            return False
        except OSError as exc:
            return not (_ssl is not None and isinstance(exc, _ssl.SSLWantReadError))
        return True  # b"": the end of the stream; anything else: out of step

    def _open(self) -> None:
        self._restores = _restores
        try:
            self._connect()
            self._handshake()
        except BaseException as exc:
            self.close()
            error = self.translate(exc)
            if error is None or error is exc:
                raise
            raise error from exc
        self.last_used = monotonic()

    def _connect(self) -> None:
        client = self.client
        self._timeout = client.socket_connect_timeout
        context = client._context() if client.ssl else None
        if context is not None:
            import socket  # ssl wraps socket.socket only; ssl has imported it already

            make = socket.socket
        else:
            make = _socket.socket
        # getaddrinfo runs a str host through the idna codec (re, unicodedata...): ASCII goes as bytes.
        host = client.host.encode("ascii") if client.host.isascii() else client.host
        error: BaseException | None = None
        for family, kind, proto, _, address in _socket.getaddrinfo(host, client.port, 0, _socket.SOCK_STREAM):
            sock = make(family, kind, proto)
            self.sock, self._armed = sock, _UNSET
            try:
                self._arm()
                sock.connect(address)
                break
            except OSError as exc:
                self.sock = None
                sock.close()
                if isinstance(exc, DeadlineExceeded) or (self._deadline_bound and type(exc) is builtins.TimeoutError):
                    raise
                error = exc
        else:
            raise error or ConnectionError(f"getaddrinfo returned nothing for {client.host}")
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        if client.socket_keepalive:
            sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_KEEPALIVE, 1)
        if context is not None:
            self._arm()  # the TLS handshake, as one wait
            self.sock = context.wrap_socket(sock, server_hostname=client.host)
        self._timeout = client.socket_timeout
        self._armed = _UNSET

    def _handshake(self) -> None:
        client = self.client
        commands: list[tuple] = []
        if client.username or client.password:
            commands.append(("AUTH", client.username, client.password or "") if client.username
                            else ("AUTH", client.password))
        if client.client_name:
            commands.append(("CLIENT", "SETNAME", client.client_name))
        if client.db:
            commands.append(("SELECT", client.db))
        if not commands:
            return
        out: list[bytes] = []
        for command in commands:
            resp.pack_command(command, out)
        self.send(b"".join(out))
        for reply in self.read(len(commands)):
            if isinstance(reply, ResponseError):
                raise reply

    # -- I/O

    def send(self, data: bytes) -> None:
        sock = self.sock
        view = memoryview(data)
        while view:
            self._arm()
            view = view[sock.send(view) :]

    def read(self, count: int) -> list:
        reader = self.reader
        return [resp.read_reply(reader) for _ in range(count)]


def _annotate(error: Exception, number: int, args) -> None:
    text = " ".join(a.decode("utf-8", errors="replace") if isinstance(a, bytes) else str(a) for a in args)
    if len(text) > 200:
        text = text[:200] + "..."
    error.args = (f"Command # {number} ({text}) of pipeline caused error: {error.args[0]}", *error.args[1:])


class Pipeline(Commands):
    """Commands queued and sent in one write, their replies read in one go by :meth:`execute`.

    ``transaction=True`` wraps them in MULTI/EXEC. ``len(pipe)`` is the number queued.
    """

    def __init__(self, client: Valkey, transaction: bool = True) -> None:
        self.client = client
        self.transaction = transaction
        self.command_stack: list[tuple[tuple, dict]] = []
        self.scripts: set[Script] = set()

    def __len__(self) -> int:
        return len(self.command_stack)

    def __bool__(self) -> bool:
        return True

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.reset()

    def reset(self) -> None:
        self.command_stack, self.scripts = [], set()

    def execute_command(self, *args, **options) -> Pipeline:
        self.command_stack.append((args, options))
        return self

    def execute(self, raise_on_error: bool = True, *, deadline: float | None = None) -> list:
        """Send every queued command, return their replies in order (shaped as valkey-py's).

        With ``raise_on_error`` the first error reply is raised, its message prefixed as
        valkey-py prefixes it ("Command # 3 (XADD ...) of pipeline caused error: ..."), after
        every reply has been read; without, error replies are in the list.
        """
        stack, scripts = self.command_stack, list(self.scripts)
        self.reset()
        if not stack:
            return []
        client = self.client
        if client.router is None and not client.cluster:
            replies = self.raw_replies(stack, scripts, deadline, redirects=True)
            if not any(redirected(r) for r in replies):
                return self._shape(stack, replies, raise_on_error)
            # One node of a cluster: what it refused did not run; the rest did and stays done.
            done = None if self.transaction else [None if redirected(r) else (r,) for r in replies]
        else:
            done = None
        replies = client.cluster_router().pipeline_replies(stack, scripts, self.transaction, deadline, done)
        return self._shape(stack, replies, raise_on_error)

    def raw_replies(self, stack: list, scripts: list, deadline: float | None, redirects: bool = False) -> list:
        """Send ``stack`` (``(args, options)`` pairs) to this pipeline's client and return a
        reply per command, unshaped, errors in place (a cluster client sends each node its
        part with this). With ``redirects``, a transaction a cluster refused (MOVED, ...)
        returns that refusal for each of its commands: none of them ran."""
        out: list[bytes] = []
        for script in scripts:  # in the same write: no round trip of its own, as SCRIPT EXISTS would cost
            resp.pack_command(("SCRIPT", "LOAD", script.script), out)
        if self.transaction:
            resp.pack_command(("MULTI",), out)
        names = []
        for args, _ in stack:
            names.append(command_name(args))
            resp.pack_command(args, out)
        if self.transaction:
            resp.pack_command(("EXEC",), out)
        retry = not self.transaction and all(n in IDEMPOTENT for n in names)
        count = len(scripts) + len(stack) + 2 * self.transaction
        what = f"a pipeline of {len(stack)} commands ({names[0]}{', ...' if len(stack) > 1 else ''})"
        replies = self.client._run(out, count, what, retry, deadline)
        for reply in replies[: len(scripts)]:
            if isinstance(reply, ResponseError):
                raise reply
        replies = replies[len(scripts) :]
        if self.transaction:
            refusal = next((r for r in replies[1:-1] if redirected(r)), None) if redirects else None
            if refusal is not None:
                return [refusal] * len(stack)
            replies = self._exec_replies(stack, replies)
        return replies

    @staticmethod
    def _shape(stack: list, replies: list, raise_on_error: bool) -> list:
        names = [command_name(args) for args, _ in stack]
        results = []
        for (_, options), name, reply in zip(stack, names, replies, strict=True):
            if isinstance(reply, ResponseError):
                results.append(options.get("_empty", reply))
            else:
                results.append(parse_reply(name, reply, options))
        if raise_on_error:
            for number, ((args, _), reply) in enumerate(zip(stack, results, strict=True), 1):
                if isinstance(reply, ResponseError):
                    _annotate(reply, number, args)
                    raise reply
        return results

    def _exec_replies(self, stack, replies: list) -> list:
        """The commands' replies from MULTI, QUEUED..., EXEC: refusals at queueing in place."""
        errors = []
        if isinstance(replies[0], ResponseError):
            errors.append((0, replies[0]))
        for i, ((args, options), reply) in enumerate(zip(stack, replies[1:-1], strict=True)):
            if "_empty" in options:
                errors.append((i, options["_empty"]))
            elif isinstance(reply, ResponseError):
                _annotate(reply, i + 1, args)
                errors.append((i, reply))
        result = replies[-1]
        if isinstance(result, ExecAbortError):
            raise errors[0][1] if errors else result
        if isinstance(result, ResponseError):
            raise result
        if result is None:
            raise WatchError("Watched variable changed.")
        for i, error in errors:
            result.insert(i, error)
        if len(result) != len(stack):
            raise ResponseError("Wrong number of response items from pipeline execution")
        return result


__all__ = ["AuthenticationError", "Connection", "ConnectionError", "Pipeline", "ResponseError", "Script",
           "TimeoutError", "Valkey", "parse_url", "unquote"]
