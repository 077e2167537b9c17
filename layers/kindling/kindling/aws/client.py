"""JsonClient, a keep-alive client for one AWS JSON-protocol service, and the process's cached clients."""

import os
from _thread import allocate_lock  # threading.Lock without importing threading

from kindling import codec  # codec.loads/dumps are rebound by codec.use_orjson()
from kindling.aws import retry
from kindling.aws.connection import Connection
from kindling.aws.credentials import get_credentials
from kindling.aws.errors import AwsError
from kindling.aws.signing import sign
from kindling.aws.url import DEFAULT_PORTS, Url, host_header


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
        parts = Url(self.endpoint)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"endpoint must be an http:// or https:// URL: {self.endpoint!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or DEFAULT_PORTS[parts.scheme]
        # The request target is the endpoint's path (botocore sends "/" for JSON
        # protocols, or the endpoint's path prefix as is).
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = host_header(parts.scheme, parts.hostname, parts.port)
        self._url = f"{parts.scheme}://{host}{self._target}"
        self._headers = {
            "Content-Type": f"application/x-amz-json-{json_version}",
            "User-Agent": "kindling-aws/1",
        }
        if service == "sqs":
            # SQS is "awsQueryCompatible": ask for the x-amzn-query-error header so error
            # codes match what boto3 reports, as botocore does.
            self._headers["x-amzn-query-mode"] = "true"
        self._conn: Connection | None = None
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
                retry.sleep(retry.backoff_delay(attempt, self.backoff_base, self.backoff_cap))

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
        access_key, secret_key, token = get_credentials()
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
        except retry.TRANSPORT_ERRORS as exc:
            raise AwsError(
                "ConnectionError", f"{type(exc).__name__}: {exc}", 0, True, attempts=attempt
            ) from exc
        if status >= 300:
            raise retry.error_from_response(status, response_headers, data, attempt)
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
            conn = self._conn = Connection(self._scheme, self._host, self._port, self.timeout)
        # An open socket has served an earlier request (it is closed when a response says
        # "Connection: close"); its peer may be gone since.
        reused = conn.sock is not None
        try:
            return conn.request("POST", self._target, body, headers)
        except BaseException as exc:
            self._drop()
            if not (reused and retry.is_stale(exc)):
                raise
        conn = self._conn = Connection(self._scheme, self._host, self._port, self.timeout)
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
