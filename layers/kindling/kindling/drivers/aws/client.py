"""JsonClient, a keep-alive client for one AWS JSON-protocol service, and the process's cached clients."""

import os
from _thread import allocate_lock, get_ident  # threading's Lock and get_ident without importing threading

from kindling.core import codec  # codec.loads/dumps are rebound by codec.use_orjson()
from kindling.core.errors import masked_url
from kindling.core.policy import Retry
from kindling.drivers.aws import errors
from kindling.drivers.aws.connection import MAX_BODY_BYTES, Body, Connection
from kindling.drivers.aws.endpoints import resolve as resolve_endpoint
from kindling.drivers.aws.endpoints import resolve_region
from kindling.drivers.aws.errors import AwsError
from kindling.drivers.aws.signing import sign
from kindling.drivers.aws.url import DEFAULT_PORTS, Url, host_header


def get_credentials(deadline: float | None = None) -> tuple[str, str, str | None]:
    """(access key, secret key, session token or None), from the environment or the rest of
    the chain (fetched by ``deadline``, a time.monotonic value, if given).

    The environment's first, re-read on every call (``AWS_ACCESS_KEY_ID`` and friends, as Lambda
    sets them: inside Lambda nothing else is read or imported); an access key id without a
    secret is an error, as in botocore. Without them (outside Lambda;
    SnapStart functions get no key variables) :mod:`kindling.drivers.aws.chain` walks botocore's chain:
    profiles and the shared files, web identity, the container endpoint, EC2 instance metadata."""
    env = os.environ
    access_key = env.get("AWS_ACCESS_KEY_ID")
    if access_key:
        secret_key = env.get("AWS_SECRET_ACCESS_KEY")
        if not secret_key:  # botocore refuses too: never another identity from further down the chain
            raise AwsError("CredentialsError", "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
        # botocore reads the older AWS_SECURITY_TOKEN first
        return access_key, secret_key, env.get("AWS_SECURITY_TOKEN") or env.get("AWS_SESSION_TOKEN") or None
    from kindling.drivers.aws import chain  # not in Lambda: it sets the variables above

    return chain.get(deadline)


# Kept under their old names for the callers outside this package (the Valkey kick):
# the rules live in kindling.drivers.aws.endpoints.
_resolve_region = resolve_region


def _resolve_endpoint(service: str, region: str, endpoint: str | None) -> str:
    """The configured endpoint, else AWS's own for the region (see :mod:`kindling.drivers.aws.endpoints`)."""
    return resolve_endpoint(service, region, endpoint).url


class JsonClient:
    """A keep-alive client for one AWS JSON-protocol service.

    One persistent HTTP/1.1 connection per client, opened at the first call; calls on
    one client are serialized by a lock (a connection carries one request at a time).
    Region and endpoint are resolved when the client is created (see :mod:`kindling.drivers.aws.endpoints`);
    credentials on every call.

    Retries: transport failures (but not a server certificate that fails verification),
    HTTP 5xx/429, throttling codes (``RETRYABLE_CODES``) and DynamoDB CRC32 mismatches
    are retried up to ``max_attempts`` attempts in all, with kindling's full-jitter
    exponential backoff (:func:`kindling.core.backoff.compute_backoff`: ``backoff_base``
    doubling per attempt, capped at ``backoff_cap``). As in botocore, non-idempotent
    operations (SendMessage, PutItem) may therefore be applied twice if a response is
    lost after the server acted on it. A stale kept-alive connection (dropped while
    idle, e.g. across a Lambda freeze) is reopened and the request resent at once; that
    does not count as an attempt.

    Deadlines: given ``deadline`` (a :func:`time.monotonic` value), a call's attempts,
    backoff sleeps, credential fetches and socket operations all end by then; a call
    still unfinished raises AwsError "DeadlineExceeded" (retryable) rather than sleep or
    wait past it. Without one, each socket operation waits at most ``timeout`` seconds.

    Replies: a body over ``max_response_bytes`` (default
    :data:`kindling.drivers.aws.connection.MAX_BODY_BYTES`) fails the call with AwsError
    "ResponseTooLarge", not retried, the rest of it unread.

    ``call`` sends an operation and waits for its reply. ``start`` sends it and returns a
    :class:`PendingCall` whose ``result()`` reads the reply (retrying there if need be),
    so a caller with two clients (two connections) can have both requests in flight.
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
        max_response_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.service = service
        self.max_response_bytes = max_response_bytes
        self.target_prefix = target_prefix
        self.region = resolve_region(region)
        resolved = resolve_endpoint(service, self.region, endpoint)
        self.endpoint = resolved.url
        self.signing_region = resolved.signing_region  # not the region for a global endpoint (aws-global)
        self.timeout = timeout
        self.max_attempts = max_attempts
        parts = Url(self.endpoint)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"endpoint must be an http:// or https:// URL: {masked_url(self.endpoint)!r}")
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
        self._lock = allocate_lock()  # held by the call using the connection, until its result is read
        self._holder = 0  # the thread that started the call holding the lock

    @property
    def retry(self) -> Retry:
        """This client's retries (:class:`kindling.core.policy.Retry`): ``max_attempts`` requests,
        full-jitter waits from ``backoff_base`` doubling to ``backoff_cap``."""
        return Retry(self.max_attempts, base=self.backoff_base, cap=self.backoff_cap)

    def __repr__(self) -> str:
        return f"JsonClient({self.service!r}, {self.target_prefix!r}, endpoint={masked_url(self.endpoint)!r})"

    def __enter__(self) -> "JsonClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call(self, operation: str, payload: dict, *, deadline: float | None = None) -> dict:
        """POST one operation (X-Amz-Target: f"{target_prefix}.{operation}") and wait for its reply.

        Returns the decoded JSON response ({} for an empty body). Raises AwsError.
        Binary values (DynamoDB "B", SQS BinaryValue) are base64 strings both ways, as
        the JSON protocols carry them. A payload :mod:`kindling.core.codec` cannot serialize
        raises TypeError/ValueError before anything is sent. ``deadline``: a
        :func:`time.monotonic` value by which the call ends, reply or AwsError
        "DeadlineExceeded".
        """
        return self.start(operation, payload, deadline=deadline).result()

    def start(self, operation: str, payload: dict, *, deadline: float | None = None) -> "PendingCall":
        """Send one operation now; its reply is read by the returned call's ``result()``.

        Until then the call holds this client's connection: other threads' calls on the
        client wait for it, and starting another call on it from the same thread raises
        RuntimeError (that would wait forever). Failures, even of the first send, are
        raised by ``result()``; only a payload that cannot be serialized raises here.
        """
        body = codec.dumps(payload).encode()
        headers = dict(self._headers)
        headers["X-Amz-Target"] = f"{self.target_prefix}.{operation}"
        if self._holder == get_ident():
            raise RuntimeError(f"{self!r}: a started call has not been collected; call its result() first")
        return PendingCall(self, headers, body, deadline)

    def close(self) -> None:
        """Close the connection; the next call opens a new one. Waits for a started call's result."""
        if self._holder == get_ident():
            raise RuntimeError(f"{self!r}: a started call has not been collected; call its result() first")
        with self._lock:
            self._drop()

    # -- internals

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connection(self) -> Connection:
        conn = self._conn
        if conn is None:
            conn = self._conn = Connection(self._scheme, self._host, self._port, self.timeout)
        return conn

    def _send(self, headers: dict[str, str], body: bytes, deadline: float | None) -> bool:
        """Send a signed request on the kept-alive connection; returns whether that connection
        had served an earlier request. A reused connection found dead is replaced and the
        request sent again at once."""
        conn = self._connection()
        # An open socket has served an earlier request (it is closed when a response says
        # "Connection: close"); its peer may be gone since.
        reused = conn.sock is not None
        try:
            conn.send("POST", self._target, body, headers, deadline)
            return reused
        except BaseException as exc:
            self._drop()
            if not (reused and errors.is_stale(exc)):
                raise
        try:
            self._connection().send("POST", self._target, body, headers, deadline)
        except BaseException:
            self._drop()
            raise
        return False

    def _receive(
        self, headers: dict[str, str], body: bytes, deadline: float | None, reused: bool
    ) -> tuple[int, dict[str, str], Body]:
        """Read the reply to what ``_send`` sent. If the connection was reused and turns out to
        have been dead, the request is sent again on a new one (once) and that reply read."""
        try:
            return self._conn.read_response(deadline, self.max_response_bytes)
        except BaseException as exc:
            self._drop()
            if not (reused and errors.is_stale(exc)):
                raise
        try:
            return self._connection().request("POST", self._target, body, headers, deadline, self.max_response_bytes)
        except BaseException:
            self._drop()
            raise


class PendingCall:
    """An operation started by :meth:`JsonClient.start`, its reply still to be read.

    ``result()`` reads the reply, retrying as :class:`JsonClient` describes (so a retry
    resends from there), and returns the decoded response or raises AwsError; called
    again, it returns or raises the same. ``cancel()`` abandons the call instead: the
    reply is never read, so the connection is closed (the operation may still have been
    applied). Either one releases the client for its next call; a call dropped without
    either is cancelled when it is garbage-collected.
    """

    def __init__(self, client: JsonClient, headers: dict[str, str], body: bytes, deadline: float | None) -> None:
        self.client = client
        self.deadline = deadline
        self._headers = headers
        self._body = body
        self._attempt = 0  # requests sent so far (a stale connection's resend not counted)
        self._signed: dict[str, str] = {}
        self._reused = False
        self._failure: AwsError | None = None  # the last send's failure, for result() to handle
        self._outcome: tuple[dict | None, AwsError | None] | None = None
        self._holding = False
        if not errors.acquire(client._lock, deadline):
            self._failure = AwsError("DeadlineExceeded", f"{client!r} was busy until the deadline", 0, True, attempts=0)
            return
        client._holder = get_ident()
        self._holding = True
        try:
            self._send()
        except BaseException:
            self._release()
            raise

    def result(self) -> dict:
        """The decoded JSON response ({} for an empty body). Raises AwsError."""
        if self._outcome is None:
            try:
                self._outcome = (self._run(), None)
            except AwsError as exc:
                self._outcome = (None, exc)
            except BaseException:  # interrupted (KeyboardInterrupt, a job timeout): not resumable
                self._outcome = (None, AwsError("Cancelled", "interrupted while waiting for the reply"))
                raise
            finally:
                self._release()
        value, error = self._outcome
        if error is not None:
            raise error
        return value

    def cancel(self) -> None:
        """Abandon the call if its reply has not been read; the connection is closed."""
        if self._outcome is None:
            self._outcome = (None, AwsError("Cancelled", "the call was cancelled", attempts=self._attempt))
            if self._holding:
                self.client._drop()
            self._release()

    def __del__(self) -> None:
        if getattr(self, "_holding", False):
            self.cancel()

    # -- internals

    def _release(self) -> None:
        if self._holding:
            self._holding = False
            self.client._holder = 0
            self.client._lock.release()

    def _send(self) -> None:
        """Send the next attempt's request; a failure is kept for ``_run`` to raise or retry."""
        self._attempt += 1
        client = self.client
        try:
            access_key, secret_key, token = get_credentials(self.deadline)
            self._signed = sign(
                "POST",
                client._url,
                self._headers,
                self._body,
                service=client.service,
                region=client.signing_region,
                access_key=access_key,
                secret_key=secret_key,
                session_token=token,
            )
            self._reused = client._send(self._signed, self._body, self.deadline)
        except errors.TRANSPORT_ERRORS as exc:
            self._failure = errors.transport_error(exc, self._attempt)
        except AwsError as exc:
            exc.attempts = self._attempt
            self._failure = exc
        else:
            self._failure = None

    def _run(self) -> dict:
        client, deadline = self.client, self.deadline
        retry = None  # read from the client at the first failure: nothing built on the way to a reply
        while True:
            try:
                return self._reply()
            except AwsError as exc:
                retry = retry or client.retry
                if not exc.retryable or exc.code == "DeadlineExceeded" or retry.exhausted(self._attempt):
                    exc.attempts = self._attempt
                    raise
                if not retry.wait(self._attempt, deadline, errors.sleep):
                    raise AwsError(
                        "DeadlineExceeded",
                        f"no time left for another attempt; the last failed with {exc}",
                        exc.status,
                        True,
                        request_id=exc.request_id,
                        attempts=self._attempt,
                    ) from exc
            self._send()

    def _reply(self) -> dict:
        """Read and decode this attempt's reply, or raise its AwsError."""
        if self._failure is not None:
            raise self._failure
        attempt = self._attempt
        try:
            status, headers, data = self.client._receive(self._signed, self._body, self.deadline, self._reused)
        except errors.TRANSPORT_ERRORS as exc:
            raise errors.transport_error(exc, attempt) from exc
        if status >= 300:
            raise errors.error_from_response(status, headers, data, attempt)
        crc = headers.get("x-amz-crc32")  # DynamoDB checksums its responses
        if crc is not None:
            import zlib

            if crc.isdigit() and int(crc) != zlib.crc32(data):
                raise AwsError(
                    "CRC32CheckFailed",
                    "response body does not match its x-amz-crc32 header",
                    status,
                    True,
                    request_id=headers.get("x-amzn-requestid"),
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


# What Secrets Manager and SSM send kindling is small by their own limits (a secret is at
# most 64 KiB, a parameter 8 KiB): their replies get a bound far below the default.
_SECRET_REPLY_BYTES = 1024 * 1024

_clients: dict[tuple[str, str, str], JsonClient] = {}
_clients_pid = 0
_clients_lock = allocate_lock()


def _cached(service: str, target_prefix: str, json_version: str = "1.0",
            max_response_bytes: int = MAX_BODY_BYTES) -> JsonClient:
    """The process's client for ``service`` at the region and endpoint the environment names
    now: a process that points AWS_ENDPOINT_URL elsewhere gets a client for it, never one
    still talking to the old endpoint."""
    global _clients_pid
    region = resolve_region(None)
    key = (service, region, _resolve_endpoint(service, region, None))
    with _clients_lock:
        pid = os.getpid()
        if pid != _clients_pid:  # forked: never share the parent's socket
            _clients.clear()
            _clients_pid = pid
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = JsonClient(service, target_prefix, json_version=json_version,
                                                max_response_bytes=max_response_bytes)
        return client


def dynamodb() -> JsonClient:
    """The process's DynamoDB client (JSON 1.0, target prefix DynamoDB_20120810)."""
    return _cached("dynamodb", "DynamoDB_20120810")


def sqs() -> JsonClient:
    """The process's SQS client (JSON 1.0 protocol, target prefix AmazonSQS)."""
    return _cached("sqs", "AmazonSQS")


def secretsmanager() -> JsonClient:
    """The process's Secrets Manager client (JSON 1.1, target prefix secretsmanager): used
    only where a deployment keeps a secret there (signing keys, the Valkey URL)."""
    return _cached("secretsmanager", "secretsmanager", "1.1", _SECRET_REPLY_BYTES)


def ssm() -> JsonClient:
    """The process's SSM client (JSON 1.1, target prefix AmazonSSM), for SecureString parameters."""
    return _cached("ssm", "AmazonSSM", "1.1", _SECRET_REPLY_BYTES)
