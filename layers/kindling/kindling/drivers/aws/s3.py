"""S3 objects over kindling's own HTTP/1.1 connection: PUT and GET of one object, SigV4-signed.

Imported only when a job carries a payload pointer or a result is too large for its record
(:mod:`kindling.shared.payloads`), so a batch of plain jobs never loads it.

Addressing: path-style (``{endpoint}/{bucket}/{key}``) whenever an endpoint URL is
configured (an explicit ``endpoint``, ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``):
LocalStack and other local clouds serve every bucket from one host, and the bucket's own
host name would not resolve there. On AWS, virtual-hosted style
(``https://{bucket}.s3.{region}.amazonaws.com/{key}``, or the FIPS, dual-stack or other
partition's host :mod:`kindling.drivers.aws.endpoints` resolves) for a bucket whose name can be a
host name under the wildcard certificate (no dots), path-style otherwise, as botocore
chooses.

Retries as :class:`kindling.drivers.aws.client.JsonClient`'s: transport failures, HTTP 5xx/429 and
throttling codes (``SlowDown``) up to ``max_attempts`` with kindling's backoff, all within
an optional deadline; a kept-alive connection found dead is reopened without costing an
attempt. PUT of the same key and body is idempotent, so retrying it is safe.

A GET is bounded: it asks for (Range) and reads at most one byte more than the caller
accepts, so an object larger than expected costs that much to refuse, never its size.
"""

from __future__ import annotations

from _thread import allocate_lock

from kindling.core.digest import sha256
from kindling.core.errors import masked_url
from kindling.core.policy import Retry
from kindling.drivers.aws import errors
from kindling.drivers.aws.client import get_credentials
from kindling.drivers.aws.connection import MAX_BODY_BYTES, Body, Connection
from kindling.drivers.aws.endpoints import aws_endpoint, configured_endpoint, flags, resolve_region, service_setting
from kindling.drivers.aws.errors import AwsError
from kindling.drivers.aws.signing import sign
from kindling.drivers.aws.url import DEFAULT_PORTS, Url, host_header, quote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_HOST_LABEL = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_PUT_REPLY_BYTES = 65536  # a PUT's reply has no body; its error document has its own bound


def is_virtual_hostable(bucket: str) -> bool:
    """Whether ``bucket`` can be the first label of an https host name (botocore's rule,
    without dots: the wildcard certificate covers one label)."""
    return (
        3 <= len(bucket) <= 63
        and _HOST_LABEL.issuperset(bucket)
        and bucket[0] != "-"
        and bucket[-1] != "-"
    )


def check_location(bucket: str, key: str) -> None:
    """Raise ValueError for a bucket or key S3 cannot address (before anything is sent)."""
    if not isinstance(bucket, str) or not bucket or "/" in bucket or not bucket.isascii() or len(bucket) > 255:
        raise ValueError(f"not an S3 bucket name: {bucket!r:.80}")
    if not isinstance(key, str) or not key or len(key.encode("utf-8", "surrogatepass")) > 1024:
        raise ValueError(f"an S3 object key is 1-1024 bytes of UTF-8, got {key!r:.80}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"an S3 object key is UTF-8 text, got {key!r:.80}") from None


class S3Client:
    """PUT and GET of whole objects, one kept-alive connection per host.

    Args:
        region: default ``AWS_REGION`` / ``AWS_DEFAULT_REGION``.
        endpoint: an endpoint URL (default: the environment's, see the module's docstring;
            none: AWS). With one, requests are path-style.
        credentials: returns (access key, secret key, session token or None), given the
            call's deadline; default :func:`kindling.drivers.aws.client.get_credentials`
            (Lambda's environment). Producers pass their boto3 session's.
        timeout: seconds any one socket operation may wait.
        max_attempts: requests per call, retries included.

    Calls on one client are serialized by a lock (a connection carries one request at a
    time); threads that need parallel transfers use a client each.
    """

    backoff_base = 0.05
    backoff_cap = 2.0

    def __init__(
        self,
        *,
        region: str | None = None,
        endpoint: str | None = None,
        credentials: Callable[[float | None], tuple[str, str, str | None]] | None = None,
        timeout: float = 10.0,
        max_attempts: int = 5,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.region = resolve_region(region)
        self.endpoint = configured_endpoint("s3", endpoint)
        self._flags = flags()  # FIPS, dual-stack, us-east-1's global endpoint: AWS's endpoints only
        self._setting = service_setting("s3")
        self.path_style = self.endpoint is not None
        # The region requests are signed for: not the region itself for aws-global. Resolved
        # now, so a FIPS / dual-stack setting the partition lacks fails here, not at a GET.
        self.signing_region = (self.region if self.path_style
                               else aws_endpoint("s3", self.region, *self._flags,
                                                 service_setting=self._setting).signing_region)
        if self.endpoint is not None:
            parts = Url(self.endpoint)
            if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
                raise ValueError(f"endpoint must be an http:// or https:// URL: {masked_url(self.endpoint)!r}")
            self._base = (parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/"))
        self.timeout = timeout
        self.max_attempts = max_attempts
        self._credentials = credentials or get_credentials
        self._conns: dict[tuple[str, str, int], Connection] = {}
        self._lock = allocate_lock()

    @property
    def retry(self) -> Retry:
        """This client's retries (:class:`kindling.core.policy.Retry`): ``max_attempts`` requests,
        full-jitter waits from ``backoff_base`` doubling to ``backoff_cap``."""
        return Retry(self.max_attempts, base=self.backoff_base, cap=self.backoff_cap)

    def __repr__(self) -> str:
        return f"S3Client(region={self.region!r}, endpoint={masked_url(self.endpoint or '')!r})"

    def __enter__(self) -> S3Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, {}
            for conn in conns.values():
                conn.close()

    def url(self, bucket: str, key: str) -> str:
        """The object's URL, as it is sent (the key percent-encoded)."""
        return self._address(bucket, key)[3]

    def put_object(self, bucket: str, key: str, body: bytes, *, content_type: str = "application/octet-stream",
                   deadline: float | None = None) -> dict[str, str]:
        """Store ``body`` under ``key``; returns the response headers (lowercased names).

        ``Content-MD5`` is not sent: ``x-amz-content-sha256``, which is signed, already lets
        S3 refuse a body altered on the way."""
        check_location(bucket, key)
        headers = {"Content-Type": content_type, "X-Amz-Content-SHA256": sha256(body).hexdigest()}
        return self._request("PUT", bucket, key, bytes(body), headers, deadline, _PUT_REPLY_BYTES)[0]

    def get_object(self, bucket: str, key: str, *, max_bytes: int = MAX_BODY_BYTES,
                   deadline: float | None = None) -> Body:
        """The object's bytes, if it holds at most ``max_bytes`` (a bytearray when large: never
        copied once received). Raises AwsError ("NoSuchKey", "NoSuchBucket", "AccessDenied",
        ...; "ObjectTooLarge", not retried, for a larger object).

        Asks for bytes 0 to ``max_bytes`` (a Range header: one byte more than accepted, which
        tells a larger object from one of exactly ``max_bytes``) and reads no more than that,
        even from a server that ignores the range."""
        check_location(bucket, key)
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be at least 0, got {max_bytes}")
        try:
            headers, data = self._request("GET", bucket, key, b"", {"Range": f"bytes=0-{max_bytes}"}, deadline,
                                          max_bytes + 1)
        except AwsError as exc:
            if exc.status == 416 and exc.code == "InvalidRange":  # no byte 0: the object is empty
                return b""
            if exc.code == "ResponseTooLarge" and 200 <= exc.status < 300:  # the range was ignored
                raise AwsError("ObjectTooLarge", f"the object holds more than the {max_bytes:,} bytes asked for "
                               f"({exc.message})", exc.status, attempts=exc.attempts) from None
            raise
        if len(data) > max_bytes:
            total = _object_size(headers)
            size = f"{total:,} bytes" if total is not None else f"over {max_bytes:,} bytes"
            raise AwsError("ObjectTooLarge", f"the object is {size}; {max_bytes:,} were asked for", 206,
                           request_id=headers.get("x-amz-request-id"))
        return data

    # -- internals

    def _address(self, bucket: str, key: str) -> tuple[tuple[str, str, int], str, str, str]:
        """((scheme, host, port), Host header, request target, URL) for one object."""
        path_key = "/" + quote(key, safe="/~")
        if self.path_style:
            scheme, hostname, port, prefix = self._base
            target = f"{prefix}/{quote(bucket, safe='')}{path_key}"
        else:
            virtual = is_virtual_hostable(bucket)
            endpoint = aws_endpoint("s3", self.region, *self._flags, bucket=bucket if virtual else None,
                                    service_setting=self._setting)
            parts = Url(endpoint.url)
            scheme, hostname, port = parts.scheme, parts.hostname, parts.port
            target = path_key if virtual else f"/{quote(bucket, safe='')}{path_key}"
        host = host_header(scheme, hostname, port)
        return (scheme, hostname, port or DEFAULT_PORTS[scheme]), host, target, f"{scheme}://{host}{target}"

    def _request(self, method: str, bucket: str, key: str, body: bytes, headers: dict[str, str],
                 deadline: float | None, max_body: int) -> tuple[dict[str, str], Body]:
        where, host, target, url = self._address(bucket, key)
        headers = {"Host": host, "User-Agent": "kindling-aws/1", **headers}
        if not errors.acquire(self._lock, deadline):
            raise AwsError("DeadlineExceeded", f"{self!r} was busy until the deadline", 0, True, attempts=0)
        try:
            attempt = 0
            retry = None  # read at the first failure
            while True:
                attempt += 1
                try:
                    status, reply_headers, data = self._attempt(method, where, target, url, body, headers, deadline,
                                                                max_body)
                except errors.TRANSPORT_ERRORS as exc:
                    error = errors.transport_error(exc, attempt)
                except AwsError as exc:  # credentials
                    exc.attempts = attempt
                    raise
                else:
                    if status < 300:
                        return reply_headers, data
                    error = error_from_response(status, reply_headers, data, attempt)
                retry = retry or self.retry
                if not error.retryable or error.code == "DeadlineExceeded" or retry.exhausted(attempt):
                    raise error
                if not retry.wait(attempt, deadline, errors.sleep):
                    raise AwsError("DeadlineExceeded", f"no time left for another attempt; the last failed with "
                                   f"{error}", error.status, True, request_id=error.request_id, attempts=attempt)
        finally:
            self._lock.release()

    def _attempt(self, method: str, where: tuple[str, str, int], target: str, url: str, body: bytes,
                 headers: dict[str, str], deadline: float | None, max_body: int) -> tuple[int, dict[str, str], Body]:
        access_key, secret_key, token = self._credentials(deadline)
        signed = sign(method, url, headers, body, service="s3", region=self.signing_region, access_key=access_key,
                      secret_key=secret_key, session_token=token)
        conn = self._conns.get(where)
        if conn is None:
            conn = self._conns[where] = Connection(where[0], where[1], where[2], self.timeout)
        reused = conn.sock is not None
        try:
            return conn.request(method, target, body, signed, deadline, max_body)
        except BaseException as exc:
            conn.close()
            if not (reused and errors.is_stale(exc)):
                raise
        # The kept-alive connection had died while idle: once more on a new one, not an attempt.
        return conn.request(method, target, body, signed, deadline, max_body)


def _object_size(headers: dict[str, str]) -> int | None:
    """The object's size, from a 206's ``Content-Range: bytes 0-100/8388608``; None if unknown."""
    total = headers.get("content-range", "").rpartition("/")[2]
    return int(total) if total.isdigit() else None


def _xml_text(data: bytes | bytearray, tag: str) -> str:
    """The text of the first ``<tag>`` in an S3 error document (no XML parser: its import is
    dear, and S3's error documents are flat)."""
    start = data.find(f"<{tag}>".encode())
    if start < 0:
        return ""
    start += len(tag) + 2
    end = data.find(f"</{tag}>".encode(), start)
    if end < 0:
        return ""
    text = data[start:end].decode("utf-8", "replace")
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return text


_STATUS_CODES = {403: "AccessDenied", 404: "NotFound", 301: "PermanentRedirect", 400: "BadRequest"}


def error_from_response(status: int, headers: dict[str, str], data: bytes | bytearray, attempts: int) -> AwsError:
    """The AwsError for an S3 error response (an XML ``<Error>`` document, or none)."""
    code = _xml_text(data, "Code") or _STATUS_CODES.get(status) or str(status)
    message = _xml_text(data, "Message")
    if not message and data and b"<Error>" not in data:
        message = data[:300].decode("utf-8", "replace")
    retryable = status >= 500 or status == 429 or code in errors.RETRYABLE_CODES or code == "InternalError"
    return AwsError(code, message, status, retryable,
                    request_id=headers.get("x-amz-request-id") or _xml_text(data, "RequestId") or None,
                    attempts=attempts)


_clients: dict[tuple[int, str, str | None, tuple[bool, bool]], S3Client] = {}
_clients_lock = allocate_lock()


def client() -> S3Client:
    """The process's S3 client for the region and endpoint its environment names now (as
    :func:`kindling.drivers.aws.client.dynamodb`'s: a changed endpoint gets a client of its own)."""
    import os

    region = resolve_region(None)
    key = (os.getpid(), region, configured_endpoint("s3", None), flags(), service_setting("s3"))
    with _clients_lock:
        found = _clients.get(key)
        if found is None:
            if any(k[0] != key[0] for k in _clients):
                _clients.clear()  # forked: never share the parent's sockets
            found = _clients[key] = S3Client()
        return found
