"""A small SigV4 client for the AWS JSON protocols (DynamoDB, SQS), standard library only.

This runs inside the worker's cold path (see DESIGN.md, "The cold path"): importing it
loads only C modules (``_socket``, ``_sha2``), never boto3/botocore, http.client, ssl or
orjson (JSON goes through :mod:`kindling.codec`, which uses orjson only once a process opts
in), reads no credentials and opens no socket. HTTP/1.1 is spoken by the small
:class:`_Connection` below: ``import http.client`` alone costs a fresh interpreter more
than the whole worker handler (it pulls in the email package, socket, enum and ssl).
HTTPS endpoints import ssl when the first connection opens. Connections open at the first call and are kept alive
across warm invocations; a connection the server (or a NAT) dropped while the Lambda
sandbox was frozen is detected on first use and replaced without costing a retry attempt.

Credentials come from the environment Lambda provides, re-read on every call:
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, or, when those
are absent (SnapStart functions get no key variables), the container credentials endpoint
``AWS_CONTAINER_CREDENTIALS_FULL_URI`` (or ``_RELATIVE_URI``) with
``AWS_CONTAINER_AUTHORIZATION_TOKEN`` (or ``_TOKEN_FILE``).

Producers and tools outside Lambda should keep using boto3.
"""

import _socket  # the C module: socket.py would import enum, selectors and array
import os
import time
from _thread import allocate_lock  # threading.Lock without importing threading

try:  # HACL* SHA-256, built into CPython 3.12+: hashlib would load OpenSSL's libcrypto
    from _sha2 import sha256
except ImportError:  # pragma: no cover - a build without it
    from hashlib import sha256

from kindling import codec  # codec.loads/dumps are rebound by codec.use_orjson()

__all__ = ["AwsError", "JsonClient", "dynamodb", "sign", "sqs"]

# Headers botocore leaves out of the signature (botocore.auth.SIGNED_HEADERS_BLACKLIST):
# hop-by-hop headers and ones that proxies or tracing may rewrite.
_UNSIGNED_HEADERS = frozenset(
    {
        "baggage",
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "traceparent",
        "tracestate",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
    }
)
_DEFAULT_PORTS = {"http": 80, "https": 443}

# Error codes retried with backoff. The throttling set is botocore's standard-mode list
# (retries/standard.py) minus LimitExceededException, plus botocore's transient codes and
# the SQS KMS throttle. Deliberately NOT retried:
#   LimitExceededException  - DynamoDB: too many concurrent control-plane operations
#                             (CreateTable/UpdateTable/...); a 2 s backoff window rarely
#                             clears it and the worker only uses the data plane.
#   TransactionConflictException, ConditionalCheckFailedException, SQS OverLimit - the
#                             caller has to decide; retrying blindly is wrong.
# Any HTTP 5xx and HTTP 429 are retried whatever the code, as are transport failures.
RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "RequestThrottled",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TransactionInProgressException",
        "BandwidthLimitExceeded",
        "SlowDown",
        "PriorRequestNotComplete",
        "RequestTimeout",
        "RequestTimeoutException",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "KmsThrottled",
        "KMS.ThrottlingException",
    }
)

class HttpProtocolError(Exception):
    """The server's reply was not HTTP/1.x as this client understands it."""


class RemoteDisconnected(ConnectionResetError):
    """The server closed the connection before sending a status line."""


# Errors that mean "the kept-alive connection was already dead when we used it". ssl's
# EOF errors are matched by name so that plain-HTTP workers never import ssl.
_STALE_ERRORS = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
_STALE_SSL_ERRORS = frozenset({"SSLEOFError", "SSLZeroReturnError"})


def _is_stale(exc: BaseException) -> bool:
    return isinstance(exc, _STALE_ERRORS) or type(exc).__name__ in _STALE_SSL_ERRORS


_TRANSPORT_ERRORS = (OSError, HttpProtocolError)

# Indirection so tests can make backoff instant.
_sleep = time.sleep


class AwsError(Exception):
    """An AWS error response or a transport failure after retries.

    ``code`` is the service's error code with any namespace stripped
    ("ResourceNotFoundException"); for SQS, the query-compatible code from the
    ``x-amzn-query-error`` header when present ("AWS.SimpleQueueService.NonExistentQueue"),
    as boto3 reports it. Transport failures use "ConnectionError" and status 0; local
    configuration problems use "MissingCredentials", "MissingRegion" or
    "CredentialsError" (container credentials endpoint failed), also with status 0.
    ``retryable`` says whether the failure was of a kind worth retrying (throttling, 5xx,
    transport); when a call raises a retryable error its attempts are exhausted.
    """

    code: str
    message: str
    status: int
    retryable: bool
    request_id: str | None
    attempts: int

    def __init__(
        self,
        code: str,
        message: str,
        status: int = 0,
        retryable: bool = False,
        *,
        request_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(code, message, status, retryable)
        self.code = code
        self.message = message
        self.status = status
        self.retryable = retryable
        self.request_id = request_id
        self.attempts = attempts

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}" if self.message else self.code
        details = [f"HTTP {self.status}"] if self.status else []
        if self.attempts > 1:
            details.append(f"after {self.attempts} attempts")
        if self.request_id:
            details.append(f"request id {self.request_id}")
        return f"{text} ({', '.join(details)})" if details else text


# --------------------------------------------------------------------------- signing


_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


def _hmac(key: bytes, msg: str) -> bytes:
    """HMAC-SHA256 (RFC 2104), as hmac.new(key, msg, sha256).digest() without importing hmac."""
    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(key.translate(_IPAD) + msg.encode("utf-8")).digest()
    return sha256(key.translate(_OPAD) + inner).digest()


# Percent-encoding as urllib.parse.quote: unreserved characters (RFC 3986) stay as they are.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def _quote(text: str, safe: str = "/") -> str:
    """urllib.parse.quote(text, safe) for str input (UTF-8, uppercase hex)."""
    keep = _UNRESERVED | frozenset(safe.encode("ascii"))
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in text.encode("utf-8"))


class _Url:
    """The parts of an http(s) URL this module needs, as urllib.parse.urlsplit reads them."""

    __slots__ = ("scheme", "hostname", "port", "path", "query")

    def __init__(self, url: str) -> None:
        scheme, sep, rest = url.partition("://")
        if not sep:
            scheme, rest = "", url
        self.scheme = scheme.lower()
        rest = rest.partition("#")[0]
        cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
        netloc, rest = rest[:cut], rest[cut:]
        self.path, _, self.query = rest.partition("?")
        hostport = netloc.rpartition("@")[2]
        if hostport.startswith("["):  # IPv6 literal
            host, _, port = hostport[1:].partition("]")
            port = port[1:] if port.startswith(":") else ""
        else:
            host, _, port = hostport.partition(":")
        self.hostname = host.lower() or None
        if port and not (port.isdigit() and int(port) <= 65535):
            raise ValueError(f"invalid port in URL {url!r}")
        self.port = int(port) if port else None


def _canonical_path(path: str) -> str:
    """RFC 3986 dot-segment removal plus collapsing of repeated slashes, then URI-encode.

    ``path`` is the wire form (already percent-encoded), so this encodes it a second
    time, as SigV4 requires for every service except S3 (botocore does the same).
    """
    if not path:
        return "/"
    segments: list[str] = []
    for segment in path.split("/"):
        if segment and segment != ".":
            if segment == "..":
                if segments:
                    segments.pop()
            else:
                segments.append(segment)
    normalized = "/".join(segments)
    if path[0] == "/":
        normalized = "/" + normalized
    if path[-1] == "/" and segments:
        normalized += "/"
    return _quote(normalized, safe="/~")


def _canonical_query(query: str) -> str:
    """Sort the wire-form query's parameters by (name, value); no re-encoding, as botocore."""
    if not query:
        return ""
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&"))
    return "&".join(f"{name}={value}" for name, value in pairs)


def _host_header(scheme: str, hostname: str | None, port: int | None) -> str:
    host = hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    return host


def sign(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    *,
    service: str,
    region: str,
    access_key: str,
    secret_key: str,
    session_token: str | None = None,
    amz_date: str | None = None,
) -> dict[str, str]:
    """Return a new headers dict with SigV4 auth added.

    Adds ``Authorization``, ``X-Amz-Date``, ``X-Amz-Security-Token`` (when a token is
    given; replacing any present) and ``Host`` (computed from the url, without a default
    port, when absent); drops any ``Authorization``/``X-Amz-Date`` already present.
    ``amz_date`` like "20260101T000000Z" for tests; default now (UTC).

    ``url`` must be the wire form: path and query percent-encoded exactly as they will be
    sent. The canonical request is built the way botocore's ``SigV4Auth`` builds it for
    non-S3 services: path normalized and encoded again, query parameters sorted but not
    re-encoded, header values trimmed with inner whitespace runs collapsed, headers
    differing only in case joined with ",", hop-by-hop/tracing headers (and User-Agent)
    left unsigned, ``X-Amz-Content-SHA256`` used as the payload hash when present. Not
    for S3 (single path encoding, different payload rules). A caller-supplied ``Date``
    header is signed as given (botocore would rewrite it); prefer not to send one.
    """
    if amz_date is None:
        amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    drop = {"authorization", "x-amz-date"}
    if session_token:
        drop.add("x-amz-security-token")
    out = {name: value for name, value in headers.items() if name.lower() not in drop}
    out["X-Amz-Date"] = amz_date
    if session_token:
        out["X-Amz-Security-Token"] = session_token

    parts = _Url(url)
    signed: dict[str, list[str]] = {}
    payload_hash = None
    for name, value in out.items():
        lname = name.lower()
        if lname == "x-amz-content-sha256" and payload_hash is None:
            payload_hash = value
        if lname not in _UNSIGNED_HEADERS:
            signed.setdefault(lname, []).append(" ".join(value.split()))
    if "host" not in signed:
        host = _host_header(parts.scheme, parts.hostname, parts.port)
        out["Host"] = host
        signed["host"] = [host]
    names = sorted(signed)
    signed_names = ";".join(names)
    if payload_hash is None:
        payload_hash = sha256(body).hexdigest()

    canonical_request = "\n".join(
        (
            method.upper(),
            _canonical_path(parts.path),
            _canonical_query(parts.query),
            "".join(f"{name}:{','.join(signed[name])}\n" for name in names),
            signed_names,
            payload_hash,
        )
    )
    date = amz_date[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        (
            "AWS4-HMAC-SHA256",
            amz_date,
            scope,
            sha256(canonical_request.encode("utf-8")).hexdigest(),
        )
    )
    key = _hmac(f"AWS4{secret_key}".encode(), date)
    key = _hmac(_hmac(_hmac(key, region), service), "aws4_request")
    signature = _hmac(key, string_to_sign).hex()
    out["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={signed_names}, Signature={signature}"
    )
    return out


# --------------------------------------------------------------------- configuration


def _resolve_region(region: str | None) -> str:
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise AwsError("MissingRegion", "no region: set AWS_REGION or AWS_DEFAULT_REGION")
    return region


def _resolve_endpoint(service: str, region: str, endpoint: str | None) -> str:
    """Explicit endpoint, else AWS_ENDPOINT_URL_<SERVICE>, else AWS_ENDPOINT_URL, else AWS.

    The environment variables are skipped when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true,
    as in the AWS SDKs.
    """
    if endpoint:
        return endpoint
    env = os.environ
    if env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() != "true":
        service_id = service.upper().replace("-", "_").replace(" ", "_")
        endpoint = env.get(f"AWS_ENDPOINT_URL_{service_id}") or env.get("AWS_ENDPOINT_URL")
        if endpoint:
            return endpoint
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://{service}.{region}.{suffix}"


_ssl_context = None
_MAX_HEADER_BYTES = 65536


class _Connection:
    """One HTTP/1.1 client connection, just what the AWS JSON protocols need.

    ``request`` sends a request with a Content-Length body and reads the whole response
    (Content-Length, chunked, or until close). The socket opens on the first request and
    stays open while the server keeps it alive; ``sock`` is None when it is closed.
    """

    def __init__(self, scheme: str, host: str, port: int, timeout: float) -> None:
        self.scheme, self.host, self.port, self.timeout = scheme, host, port, timeout
        self.sock = None
        self._buf = b""

    def close(self) -> None:
        sock, self.sock, self._buf = self.sock, None, b""
        if sock is not None:
            sock.close()

    def request(self, method: str, target: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict, bytes]:
        """Returns (status, headers with lowercased names, body)."""
        if self.sock is None:
            self.sock = self._connect()
        lines = [f"{method} {target} HTTP/1.1"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(body)}\r\n\r\n")
        self.sock.sendall("\r\n".join(lines).encode("latin-1") + body)
        while True:
            status, version, response_headers = self._read_head()
            if not 100 <= status < 200:
                break  # 1xx interim responses (100 Continue) carry no body: read on
        if method == "HEAD" or status in (204, 304):
            data = b""
        elif "chunked" in response_headers.get("transfer-encoding", "").lower():
            data = self._read_chunked()
        elif "content-length" in response_headers:
            length = response_headers["content-length"]
            if not length.isdigit():
                raise HttpProtocolError(f"bad Content-Length {length!r}")
            data = self._read_exact(int(length))
        else:
            data = self._read_to_close()
        connection = response_headers.get("connection", "").lower()
        if "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection):
            self.close()
        return status, response_headers, data

    # -- internals

    def _connect(self):
        if self.scheme == "https":
            global _ssl_context
            import socket
            import ssl

            if _ssl_context is None:  # loading the CA bundle takes milliseconds: once per process
                _ssl_context = ssl.create_default_context()
            sock = socket.create_connection((self.host, self.port), self.timeout)
            try:
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                return _ssl_context.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
        error: OSError | None = None
        # getaddrinfo runs a str host through the idna codec, which imports re, enum and
        # more (~10 ms); an ASCII host name is passed as bytes to skip that.
        host = self.host.encode("ascii") if self.host.isascii() else self.host
        for family, kind, proto, _, address in _socket.getaddrinfo(host, self.port, 0, _socket.SOCK_STREAM):
            sock = _socket.socket(family, kind, proto)
            try:
                sock.settimeout(self.timeout)
                sock.connect(address)
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
        raise error or OSError(f"getaddrinfo returned nothing for {self.host}")

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self._buf += chunk
        return bool(chunk)

    def _read_head(self) -> tuple[int, str, dict[str, str]]:
        while (end := self._buf.find(b"\r\n\r\n")) < 0:
            if len(self._buf) > _MAX_HEADER_BYTES:
                raise HttpProtocolError("response headers too long")
            if not self._fill():
                if self._buf:
                    raise HttpProtocolError("connection closed inside the response headers")
                raise RemoteDisconnected("remote end closed connection without response")
        head, self._buf = self._buf[:end].decode("latin-1"), self._buf[end + 4 :]
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

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not self._fill():
                raise HttpProtocolError(f"connection closed after {len(self._buf)} of {n} body bytes")
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def _read_line(self) -> bytes:
        while (end := self._buf.find(b"\r\n")) < 0:
            if len(self._buf) > _MAX_HEADER_BYTES or not self._fill():
                raise HttpProtocolError("bad chunked encoding")
        line, self._buf = self._buf[:end], self._buf[end + 2 :]
        return line

    def _read_chunked(self) -> bytes:
        parts = []
        while True:
            size = self._read_line().split(b";", 1)[0].strip()
            try:
                n = int(size, 16)
            except ValueError:
                raise HttpProtocolError(f"bad chunk size {size[:20]!r}") from None
            if n == 0:
                while self._read_line():  # trailers, up to the blank line
                    pass
                return b"".join(parts)
            parts.append(self._read_exact(n))
            if self._read_line():
                raise HttpProtocolError("chunk not followed by CRLF")

    def _read_to_close(self) -> bytes:
        while self._fill():
            pass
        data = self._buf
        self.close()
        return data


# ----------------------------------------------------------------------- credentials

_container_cache: dict[tuple[str, str], tuple[tuple[str, str, str | None], float]] = {}
_container_lock = allocate_lock()
_CONTAINER_REFRESH_MARGIN = 300.0  # refresh container credentials 5 min before expiry


def _credentials() -> tuple[str, str, str | None]:
    env = os.environ
    access_key = env.get("AWS_ACCESS_KEY_ID")
    secret_key = env.get("AWS_SECRET_ACCESS_KEY")
    if access_key and secret_key:
        return access_key, secret_key, env.get("AWS_SESSION_TOKEN") or None
    full_uri = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    relative_uri = env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    if full_uri or relative_uri:
        return _container_credentials(full_uri or f"http://169.254.170.2{relative_uri}")
    raise AwsError(
        "MissingCredentials",
        "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
        "(plus AWS_SESSION_TOKEN for temporary credentials), or "
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    )


def _parse_utc(stamp: str) -> float:
    """Seconds since the epoch for "YYYY-MM-DDTHH:MM:SS[.fff]Z" (UTC), without importing
    _strptime/calendar/datetime: on SnapStart functions this runs on every cold start."""
    year, month, day = int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10])
    hour, minute, second = int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19])
    # days_from_civil (H. Hinnant): days since 1970-01-01 in the proleptic Gregorian calendar
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146097 + day_of_era - 719468
    return days * 86400.0 + hour * 3600 + minute * 60 + second


def _container_credentials(uri: str) -> tuple[str, str, str | None]:
    """Fetch (and cache until shortly before expiry) credentials from the container endpoint."""
    env = os.environ
    token = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
    token_file = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
    if not token and token_file:
        try:
            with open(token_file) as f:
                token = f.read().strip()
        except OSError as exc:
            raise AwsError("CredentialsError", f"cannot read {token_file}: {exc}") from exc
    key = (uri, token or "")
    with _container_lock:
        cached = _container_cache.get(key)
        if cached is not None and time.time() < cached[1]:
            return cached[0]
        parts = _Url(uri)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise AwsError("CredentialsError", f"unsupported container credentials URI {uri!r}")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"Authorization": token} if token else {}
        last = ""
        for attempt in range(3):
            if attempt:
                _sleep(0.05 * attempt)
            conn = _Connection(parts.scheme, parts.hostname, parts.port or _DEFAULT_PORTS[parts.scheme], 2.0)
            host = _host_header(parts.scheme, parts.hostname, parts.port)
            try:
                status, _, data = conn.request("GET", target, b"", {"Host": host, **headers})
            except _TRANSPORT_ERRORS as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            finally:
                conn.close()
            if status != 200:
                last = f"HTTP {status}: {data[:200]!r}"
                if status < 500:
                    break
                continue
            try:
                doc = codec.loads(data)
                creds = (doc["AccessKeyId"], doc["SecretAccessKey"], doc.get("Token") or None)
                expires = time.time() + 600.0  # no Expiration given: refresh after 10 minutes
                if doc.get("Expiration"):
                    expires = _parse_utc(doc["Expiration"]) - _CONTAINER_REFRESH_MARGIN
            except (ValueError, KeyError, TypeError) as exc:
                raise AwsError("CredentialsError", f"bad response from {uri}: {exc}") from exc
            _container_cache[key] = (creds, expires)
            return creds
        raise AwsError("CredentialsError", f"container credentials from {uri}: {last}", 0, True)


# ---------------------------------------------------------------------------- client


def _error_from_response(status: int, headers: dict[str, str], data: bytes, attempts: int) -> AwsError:
    """``headers`` with lowercased names, as :meth:`_Connection.request` returns them."""
    code = message = ""
    try:
        doc = codec.loads(data) if data else None
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        code = str(doc.get("__type") or doc.get("code") or doc.get("Code") or "")
        message = str(doc.get("message") or doc.get("Message") or "")
    elif data:
        message = data[:300].decode("utf-8", "replace")
    if not code:
        code = headers.get("x-amzn-errortype") or ""
    # "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException",
    # "ValidationException:http://internal.amazon.com/coral/..."
    code = code.split(":", 1)[0].rpartition("#")[2]
    type_code = code
    query_error = headers.get("x-amzn-query-error")  # "AWS.SimpleQueueService.X;Sender"
    if query_error:
        query_code, sep, fault = query_error.partition(";")
        if query_code and sep and fault and ";" not in fault:
            code = query_code
    if not code:
        code = str(status)
    retryable = status >= 500 or status == 429 or code in RETRYABLE_CODES or type_code in RETRYABLE_CODES
    return AwsError(
        code,
        message,
        status,
        retryable,
        request_id=headers.get("x-amzn-requestid"),
        attempts=attempts,
    )


class JsonClient:
    """A keep-alive client for one AWS JSON-protocol service.

    One persistent HTTP/1.1 connection per client, opened at the first call; calls on
    one client are serialized by a lock (a connection carries one request at a time).
    Region and endpoint are resolved when the client is created (see ``_resolve_endpoint``);
    credentials on every call.

    Retries: transport failures, HTTP 5xx/429, throttling codes (``RETRYABLE_CODES``) and
    DynamoDB CRC32 mismatches are retried up to ``max_attempts`` attempts in all, with
    full-jitter exponential backoff (``backoff_base`` doubling per attempt, capped at
    ``backoff_cap``). As in botocore, non-idempotent operations (SendMessage, PutItem)
    may therefore be applied twice if a response is lost after the server acted on it.
    A stale kept-alive connection (dropped while idle, e.g. across a Lambda freeze) is
    reopened and the request resent at once; that does not count as an attempt.
    """

    backoff_base = 0.05
    backoff_cap = 2.0

    def __init__(
        self,
        service: str,
        target_prefix: str,
        *,
        json_version: str = "1.0",
        region: str | None = None,
        endpoint: str | None = None,
        timeout: float = 10.0,
        max_attempts: int = 5,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.service = service
        self.target_prefix = target_prefix
        self.region = _resolve_region(region)
        self.endpoint = _resolve_endpoint(service, self.region, endpoint)
        self.timeout = timeout
        self.max_attempts = max_attempts
        parts = _Url(self.endpoint)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"endpoint must be an http:// or https:// URL: {self.endpoint!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or _DEFAULT_PORTS[parts.scheme]
        # The request target is the endpoint's path (botocore sends "/" for JSON
        # protocols, or the endpoint's path prefix as is).
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = _host_header(parts.scheme, parts.hostname, parts.port)
        self._url = f"{parts.scheme}://{host}{self._target}"
        self._headers = {
            "Content-Type": f"application/x-amz-json-{json_version}",
            "User-Agent": "kindling-aws/1",
        }
        if service == "sqs":
            # SQS is "awsQueryCompatible": ask for the x-amzn-query-error header so error
            # codes match what boto3 reports, as botocore does.
            self._headers["x-amzn-query-mode"] = "true"
        self._conn: _Connection | None = None
        self._lock = allocate_lock()

    def __repr__(self) -> str:
        return f"JsonClient({self.service!r}, {self.target_prefix!r}, endpoint={self.endpoint!r})"

    def __enter__(self) -> "JsonClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call(self, operation: str, payload: dict) -> dict:
        """POST one operation (X-Amz-Target: f"{target_prefix}.{operation}").

        Returns the decoded JSON response ({} for an empty body). Raises AwsError.
        Binary values (DynamoDB "B", SQS BinaryValue) are base64 strings both ways, as
        the JSON protocols carry them. A payload :mod:`kindling.codec` cannot serialize
        raises TypeError/ValueError before anything is sent.
        """
        body = codec.dumps(payload).encode()
        headers = dict(self._headers)
        headers["X-Amz-Target"] = f"{self.target_prefix}.{operation}"
        with self._lock:
            attempt = 0
            while True:
                attempt += 1
                try:
                    return self._attempt(headers, body, attempt)
                except AwsError as exc:
                    if not exc.retryable or attempt >= self.max_attempts:
                        exc.attempts = attempt
                        raise
                delay = min(self.backoff_cap, self.backoff_base * (1 << (attempt - 1)))
                # Full jitter; os.urandom avoids importing random (~1 ms) on the cold path.
                _sleep(delay * int.from_bytes(os.urandom(4)) / 0x1_0000_0000)

    def close(self) -> None:
        """Close the connection; the next call opens a new one."""
        with self._lock:
            self._drop()

    # -- internals

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _attempt(self, headers: dict[str, str], body: bytes, attempt: int) -> dict:
        access_key, secret_key, token = _credentials()
        signed = sign(
            "POST",
            self._url,
            headers,
            body,
            service=self.service,
            region=self.region,
            access_key=access_key,
            secret_key=secret_key,
            session_token=token,
        )
        try:
            status, response_headers, data = self._exchange(signed, body)
        except _TRANSPORT_ERRORS as exc:
            raise AwsError(
                "ConnectionError", f"{type(exc).__name__}: {exc}", 0, True, attempts=attempt
            ) from exc
        if status >= 300:
            raise _error_from_response(status, response_headers, data, attempt)
        crc = response_headers.get("x-amz-crc32")  # DynamoDB checksums its responses
        if crc is not None:
            import zlib

            if crc.isdigit() and int(crc) != zlib.crc32(data):
                raise AwsError(
                    "CRC32CheckFailed",
                    "response body does not match its x-amz-crc32 header",
                    status,
                    True,
                    request_id=response_headers.get("x-amzn-requestid"),
                    attempts=attempt,
                )
        if not data:
            return {}
        try:
            return codec.loads(data)
        except ValueError as exc:
            raise AwsError(
                "InvalidResponse", f"undecodable JSON response: {exc}", status, attempts=attempt
            ) from exc

    def _exchange(self, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        """Send one request and read the whole response, reopening a stale connection once."""
        conn = self._conn
        if conn is None:
            conn = self._conn = _Connection(self._scheme, self._host, self._port, self.timeout)
        # An open socket has served an earlier request (it is closed when a response says
        # "Connection: close"); its peer may be gone since.
        reused = conn.sock is not None
        try:
            return conn.request("POST", self._target, body, headers)
        except BaseException as exc:
            self._drop()
            if not (reused and _is_stale(exc)):
                raise
        conn = self._conn = _Connection(self._scheme, self._host, self._port, self.timeout)
        try:
            return conn.request("POST", self._target, body, headers)
        except BaseException:
            self._drop()
            raise


_clients: dict[str, JsonClient] = {}
_clients_pid = 0
_clients_lock = allocate_lock()


def _cached(service: str, target_prefix: str) -> JsonClient:
    global _clients_pid
    with _clients_lock:
        pid = os.getpid()
        if pid != _clients_pid:  # forked: never share the parent's socket
            _clients.clear()
            _clients_pid = pid
        client = _clients.get(service)
        if client is None:
            client = _clients[service] = JsonClient(service, target_prefix)
        return client


def dynamodb() -> JsonClient:
    """The process's DynamoDB client (JSON 1.0, target prefix DynamoDB_20120810)."""
    return _cached("dynamodb", "DynamoDB_20120810")


def sqs() -> JsonClient:
    """The process's SQS client (JSON 1.0 protocol, target prefix AmazonSQS)."""
    return _cached("sqs", "AmazonSQS")
