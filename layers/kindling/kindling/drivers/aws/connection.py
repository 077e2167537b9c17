"""One HTTP/1.1 client connection over ``_socket`` (ssl only for https, at connect).

A request is sent by :meth:`Connection.send` and its response read by
:meth:`Connection.read_response`, so a caller can do other work in between (send on a
second connection, say); :meth:`Connection.request` does both. Every socket operation
waits at most ``timeout`` seconds and, given a deadline (a :func:`time.monotonic` value),
never past it: connecting, sending and the whole response must be done by then, however
slowly the server drips its bytes. Name resolution (``getaddrinfo``) cannot be bounded.

Proxies as botocore uses them (:mod:`kindling.drivers.aws.proxy`, imported only when a proxy
variable is set): https through an HTTP CONNECT tunnel, http with the absolute URL as the
request's target.

Every body is bounded too (``max_body``, default :data:`MAX_BODY_BYTES`; an error reply's by
:data:`MAX_ERROR_BODY_BYTES`): past the bound the read stops with
:class:`~kindling.drivers.aws.errors.ResponseTooLarge`, and a body whose declared length is over it
is refused before any of it is read. Bodies are read in linear time: into one buffer of the
declared length, or as pieces joined once.
"""

import _socket  # the C module: socket.py would import enum, selectors and array
from os import environ
from time import monotonic

from kindling.drivers.aws.errors import (
    DeadlineExceeded,
    HttpProtocolError,
    ProxyError,
    RemoteDisconnected,
    ResponseTooLarge,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeAlias

Body: "TypeAlias" = "bytes | bytearray"
"""A response body: a large one is the bytearray it was received into, never copied again."""

_ssl_context = None
_restores = 0  # snapshots this process was restored from (kindling.shared.snapstart)


def after_restore() -> None:
    """The process was restored from a snapshot: every socket opened before is stale, and is
    closed (a new one opened) at its connection's next request."""
    global _restores
    _restores += 1

_MAX_HEADER_BYTES = 65536
# Any of these set: kindling.drivers.aws.proxy decides (imported only then; Lambda sets none).
_PROXY_VARIABLES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")
_RECV_BYTES = 65536

# Above any legitimate AWS JSON reply (DynamoDB caps BatchGetItem at 16 MB of items, SQS a
# ReceiveMessage at 10 messages of 1 MiB; escaping and base64 add to both) while bounding the
# memory a runaway or hostile endpoint can make a worker spend.
MAX_BODY_BYTES = 64 * 1024 * 1024

# An error document (S3's XML, a JSON error) is a few hundred bytes; it gets this bound
# whatever the caller's, so a GET bounded to a payload's size still reads S3's error codes.
MAX_ERROR_BODY_BYTES = 1024 * 1024


class Connection:
    """One HTTP/1.1 client connection, just what the AWS JSON protocols need.

    ``send`` writes a request with a Content-Length body; ``read_response`` reads the whole
    response (Content-Length, chunked, or until close), its body up to ``max_body`` bytes.
    One request at a time: a request is sent only once the previous response has been read.
    The socket opens at the first ``send`` and stays open while the server keeps it alive;
    ``sock`` is None when it is closed. Any failure in ``send`` or ``read_response``
    closes the connection (a half-written request or half-read response leaves it
    unusable): OSError for the network (TimeoutError after ``timeout`` seconds of silence, its subclass
    :class:`~kindling.drivers.aws.errors.DeadlineExceeded` when the deadline came first),
    HttpProtocolError for a reply that is not HTTP/1.x, its subclass ResponseTooLarge for
    a body over its bound.
    """

    use_proxy = True  # the container endpoint sets False: botocore never proxies it

    def __init__(self, scheme: str, host: str, port: int, timeout: float | None) -> None:
        self.scheme, self.host, self.port, self.timeout = scheme, host, port, timeout
        self.sock: Any = None  # a _socket.socket or an ssl.SSLSocket (annotation never evaluated)
        # Bytes received and not yet consumed. A bytearray: appending is amortized O(1) and
        # deleting a prefix is O(1) in CPython, so no byte is copied more than a few times.
        self._buf = bytearray()
        self._method: str | None = None  # the sent request's method, until its response is read
        self._deadline: float | None = None
        self._deadline_bound = False  # whether the deadline, not ``timeout``, set the last wait
        self._target_prefix = ""  # "http://host:port" when an http request goes through a proxy
        self._proxy_headers: dict[str, str] = {}
        self._restores = _restores  # when the socket was opened, in restores

    def close(self) -> None:
        sock, self.sock, self._buf, self._method = self.sock, None, bytearray(), None
        if sock is not None:
            sock.close()

    def send(
        self, method: str, target: str, body: bytes, headers: dict[str, str], deadline: float | None = None
    ) -> None:
        """Send one request, connecting first if the socket is closed; returns once it is written."""
        if self._method is not None:
            raise RuntimeError("the previous request's response has not been read")
        if deadline is not None and deadline <= monotonic():  # nothing written: the connection stays usable
            raise DeadlineExceeded("the deadline passed before the request was sent")
        self._deadline = deadline
        try:
            if self.sock is not None and self._restores != _restores:
                self.close()  # opened before a snapshot was restored: not this environment's
            if self.sock is None:
                self.sock = self._connect()
                self._restores = _restores
            sock = self.sock
            lines = [f"{method} {self._target_prefix}{target} HTTP/1.1"]
            lines += [f"{name}: {value}" for name, value in headers.items()]
            lines += [f"{name}: {value}" for name, value in self._proxy_headers.items()]
            lines.append(f"Content-Length: {len(body)}\r\n\r\n")
            data = memoryview("\r\n".join(lines).encode("latin-1") + body)
            while data:  # send, not sendall: each wait is bounded by the deadline
                self._arm(sock)
                data = data[sock.send(data) :]
        except BaseException as exc:
            self.close()
            if self._cut_short(exc):
                raise DeadlineExceeded(f"the deadline passed ({exc})") from exc
            raise
        self._method = method

    def read_response(
        self, deadline: float | None = None, max_body: int | None = None
    ) -> tuple[int, dict[str, str], Body]:
        """Read the sent request's response: (status, headers with lowercased names, body).

        A 2xx body holds at most ``max_body`` bytes (default :data:`MAX_BODY_BYTES`), any
        other at most :data:`MAX_ERROR_BODY_BYTES`; a longer one raises ResponseTooLarge
        (and closes the connection) having read at most one receive past the bound.
        """
        method = self._method
        if method is None:
            raise RuntimeError("no request has been sent on this connection")
        self._deadline = deadline
        try:
            response = self._read_response(method, MAX_BODY_BYTES if max_body is None else max_body)
        except BaseException as exc:
            self.close()
            if self._cut_short(exc):
                raise DeadlineExceeded(f"the deadline passed ({exc})") from exc
            raise
        self._method = None
        return response

    def request(
        self,
        method: str,
        target: str,
        body: bytes,
        headers: dict[str, str],
        deadline: float | None = None,
        max_body: int | None = None,
    ) -> tuple[int, dict[str, str], Body]:
        """``send`` then ``read_response``."""
        self.send(method, target, body, headers, deadline)
        return self.read_response(deadline, max_body)

    # -- internals

    def _read_response(self, method: str, max_body: int) -> tuple[int, dict[str, str], Body]:
        while True:
            status, version, response_headers = self._read_head()
            if not 100 <= status < 200:
                break  # 1xx interim responses (100 Continue) carry no body: read on
        limit = max_body if 200 <= status < 300 else MAX_ERROR_BODY_BYTES
        data: Body
        if method == "HEAD" or status in (204, 304):
            data = b""
        elif "chunked" in response_headers.get("transfer-encoding", "").lower():
            data = self._read_chunked(status, limit)
        elif "content-length" in response_headers:
            length = response_headers["content-length"]
            if not length.isdigit():
                raise HttpProtocolError(f"bad Content-Length {length!r}")
            if int(length) > limit:
                raise ResponseTooLarge(status, limit, int(length))
            data = self._read_exact(int(length))
        else:
            data = self._read_to_close(status, limit)
        connection = response_headers.get("connection", "").lower()
        if "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection):
            self.close()
        return status, response_headers, data

    def _wait(self) -> float | None:
        """How long the next socket operation may wait: ``timeout``, or less if the deadline is nearer."""
        self._deadline_bound = False
        if self._deadline is None:
            return self.timeout
        remaining = self._deadline - monotonic()
        if remaining <= 0:
            raise DeadlineExceeded("the deadline passed")
        if self.timeout is None or remaining < self.timeout:
            self._deadline_bound = True
            return remaining
        return self.timeout

    def _arm(self, sock) -> None:
        sock.settimeout(self._wait())

    def _cut_short(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the timeout of a wait that the deadline, not ``timeout``, bounded."""
        return self._deadline_bound and isinstance(exc, TimeoutError) and not isinstance(exc, DeadlineExceeded)

    def _connect(self):
        proxy = None
        if self.use_proxy and any(name in environ for name in _PROXY_VARIABLES):
            from kindling.drivers.aws.proxy import proxy_for

            proxy = proxy_for(self.scheme, self.host, self.port)
        self._target_prefix, self._proxy_headers = "", {}
        if proxy is not None and self.scheme == "http":
            # Through the proxy: the request names the absolute URL, as urllib3's ProxyManager does.
            from kindling.drivers.aws.url import host_header

            self._target_prefix = f"http://{host_header('http', self.host, self.port)}"
            if proxy.authorization:
                self._proxy_headers = {"Proxy-Authorization": proxy.authorization}
            return self._connect_plain(proxy.host, proxy.port)
        if self.scheme == "https":
            global _ssl_context
            import socket
            import ssl

            if _ssl_context is None:
                # Once per process: most of the cost is OpenSSL parsing the CA bundle (~50 ms
                # for the 145 certificates of Debian's bundle, OpenSSL 3.0). create_default_context
                # (SSL_CERT_FILE or the default paths, CERT_REQUIRED, host name checked) measured
                # the same as SSLContext(PROTOCOL_TLS_CLIENT) + load_verify_locations, within 1 ms.
                _ssl_context = ssl.create_default_context()
            where = (proxy.host, proxy.port) if proxy is not None else (self.host, self.port)
            sock = socket.create_connection(where, self._wait())
            try:
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                if proxy is not None:
                    self._tunnel(sock, proxy)
                self._arm(sock)  # the TLS handshake, as one wait
                return _ssl_context.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
        return self._connect_plain(self.host, self.port)

    def _tunnel(self, sock, proxy) -> None:
        """HTTP CONNECT through ``proxy`` to this connection's host, on ``sock`` before TLS."""
        authority = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
        if proxy.authorization:
            lines.append(f"Proxy-Authorization: {proxy.authorization}")
        data = memoryview(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        while data:
            self._arm(sock)
            data = data[sock.send(data) :]
        self.sock = sock  # _read_head reads through self.sock
        try:
            status, _, _ = self._read_head()
        finally:
            self.sock = None
        if status != 200:
            raise ProxyError(f"the proxy {proxy.host}:{proxy.port} refused CONNECT {authority}: HTTP {status}")
        if self._buf:
            raise ProxyError(f"the proxy {proxy.host}:{proxy.port} sent data past its CONNECT reply")

    def _connect_plain(self, host_name: str, port: int):
        error: OSError | None = None
        # getaddrinfo runs a str host through the idna codec, which imports re, enum and
        # more (~10 ms); an ASCII host name is passed as bytes to skip that.
        host = host_name.encode("ascii") if host_name.isascii() else host_name
        for family, kind, proto, _, address in _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM):
            sock = _socket.socket(family, kind, proto)
            try:
                self._arm(sock)
                sock.connect(address)
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                return sock
            except OSError as exc:
                sock.close()
                if isinstance(exc, DeadlineExceeded) or self._cut_short(exc):
                    raise
                error = exc
        self._deadline_bound = False  # ``error`` may be an earlier address's own timeout
        raise error or OSError(f"getaddrinfo returned nothing for {host_name}")

    def _fill(self) -> bool:
        """Receive what the peer has sent (up to 64 KiB) onto the buffer; False at its end."""
        sock = self.sock
        self._arm(sock)
        chunk = sock.recv(_RECV_BYTES)
        self._buf += chunk
        return bool(chunk)

    def _read_head(self) -> tuple[int, str, dict[str, str]]:
        buf, start = self._buf, 0
        while (end := buf.find(b"\r\n\r\n", start)) < 0:
            if len(buf) > _MAX_HEADER_BYTES:
                raise HttpProtocolError("response headers too long")
            start = max(len(buf) - 3, 0)  # what was searched holds no CRLFCRLF, save at its end
            if not self._fill():
                if buf:
                    raise HttpProtocolError("connection closed inside the response headers")
                raise RemoteDisconnected("remote end closed connection without response")
        head = buf[:end].decode("latin-1")
        del buf[: end + 4]
        status_line, *header_lines = head.split("\r\n")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise HttpProtocolError(f"bad status line {status_line[:100]!r}")
        headers: dict[str, str] = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if not sep:
                raise HttpProtocolError(f"bad header line {line[:100]!r}")
            name, value = name.strip().lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return int(code), version, headers

    def _read_exact(self, n: int) -> Body:
        """The next ``n`` bytes: from the buffer if it holds them, else received straight into
        one buffer of ``n`` bytes (each byte copied once)."""
        buf = self._buf
        have = len(buf)
        if have >= n:
            data = bytes(buf[:n])
            del buf[:n]
            return data
        out = bytearray(n)
        out[:have] = buf
        buf.clear()
        sock = self.sock
        with memoryview(out) as view:
            while have < n:
                self._arm(sock)
                got = sock.recv_into(view[have:], n - have)
                if not got:
                    raise HttpProtocolError(f"connection closed after {have} of {n} body bytes")
                have += got
        return out

    def _read_line(self) -> bytes:
        buf, start = self._buf, 0
        while (end := buf.find(b"\r\n", start)) < 0:
            if len(buf) > _MAX_HEADER_BYTES:
                raise HttpProtocolError("bad chunked encoding")
            start = max(len(buf) - 1, 0)
            if not self._fill():
                raise HttpProtocolError("bad chunked encoding")
        line = bytes(buf[:end])
        del buf[: end + 2]
        return line

    def _read_chunked(self, status: int, limit: int) -> Body:
        # One growing buffer, not a list of pieces: a peer sending one-byte chunks would make
        # a list hold ~40 bytes of objects for each byte of the body.
        body: Body = b""
        framing = 0  # size lines, CRLFs, trailers: bounded too, or a peer could send them forever
        while True:
            line = self._read_line()
            framing += len(line) + 4  # its CRLF and the chunk's
            if framing > limit + _MAX_HEADER_BYTES:
                raise HttpProtocolError(f"chunked framing over {limit + _MAX_HEADER_BYTES:,} bytes")
            size = line.split(b";", 1)[0].strip()
            try:
                n = int(size, 16)
            except ValueError:
                raise HttpProtocolError(f"bad chunk size {size[:20]!r}") from None
            if n == 0:
                while line := self._read_line():  # trailers, up to the blank line
                    framing += len(line) + 2
                    if framing > limit + _MAX_HEADER_BYTES:
                        raise HttpProtocolError(f"chunked framing over {limit + _MAX_HEADER_BYTES:,} bytes")
                return body
            if len(body) + n > limit:  # refused before the chunk is read
                raise ResponseTooLarge(status, limit)
            data = self._read_exact(n)
            if not body and isinstance(data, bytearray):
                body = data  # a body of one large chunk is not copied again
            else:
                if not isinstance(body, bytearray):
                    body = bytearray(body)
                body += data
            if self._read_line():
                raise HttpProtocolError("chunk not followed by CRLF")

    def _read_to_close(self, status: int, limit: int) -> Body:
        body = self._buf  # one growing buffer, as in _read_chunked
        self._buf = bytearray()
        sock = self.sock
        while len(body) <= limit:
            self._arm(sock)
            # Never ask for more than one byte past the bound: that byte is the proof.
            chunk = sock.recv(min(_RECV_BYTES, limit + 1 - len(body)))
            if not chunk:
                self.close()
                return body
            body += chunk
        raise ResponseTooLarge(status, limit)


def request_url(
    method: str,
    url: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    timeout: float | None,
    deadline: float | None = None,
    max_body: int | None = None,
) -> tuple[int, dict[str, str], Body]:
    """One request on a connection of its own, closed after: for the credential endpoints
    (instance metadata, STS), called once an hour or so, where a kept-alive socket would
    only go stale."""
    from kindling.drivers.aws.url import DEFAULT_PORTS, Url, host_header

    parts = Url(url)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        from kindling.core.errors import masked_url

        raise ValueError(f"not an http:// or https:// URL: {masked_url(url)!r}")
    conn = Connection(parts.scheme, parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme], timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        return conn.request(method, target, body, {"Host": host_header(parts.scheme, parts.hostname, parts.port),
                                                   **(headers or {})}, deadline, max_body)
    finally:
        conn.close()
