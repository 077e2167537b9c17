"""The errors of :mod:`kindling.drivers.aws`: what a call raises, what the transport raises inside it,
and which of them are worth another attempt (errors read from responses too).

All of them derive from :class:`kindling.core.errors.KindlingError`; the transport's also from
the built-in exception a caller of the standard library would catch. How long to wait
between attempts is :func:`kindling.core.backoff.compute_backoff`.
"""

import time
from _thread import TIMEOUT_MAX

from kindling.core import codec  # codec.loads is rebound by codec.use_orjson()
from kindling.core.errors import KindlingError


class AwsError(KindlingError):
    """An AWS error response or a transport failure after retries.

    ``code`` is the service's error code with any namespace stripped
    ("ResourceNotFoundException"); for SQS, the query-compatible code from the
    ``x-amzn-query-error`` header when present ("AWS.SimpleQueueService.NonExistentQueue"),
    as boto3 reports it. Transport failures use "ConnectionError" and status 0, except a
    server certificate that fails verification: "TLSVerificationFailed", not retryable.
    A call whose deadline passed first uses "DeadlineExceeded" (status 0, retryable: the
    call may succeed given more time); local configuration problems use "MissingCredentials",
    "MissingRegion" or "CredentialsError" (container credentials endpoint failed), also
    with status 0. A reply whose body is over its reader's bound is "ResponseTooLarge"
    (the reply's status; not retryable), an S3 object over a GET's bound "ObjectTooLarge".
    ``retryable`` says whether the failure was of a kind worth retrying (throttling, 5xx,
    transport, deadline); when a call raises a retryable error its
    attempts (or its time) are exhausted. ``attempts`` counts the requests sent, 0 when
    the deadline had passed before the first.
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


class HttpProtocolError(KindlingError):
    """The server's reply was not HTTP/1.x as this client understands it."""


class RemoteDisconnected(KindlingError, ConnectionResetError):
    """The server closed the connection before sending a status line."""


class DeadlineExceeded(KindlingError, TimeoutError):
    """A connection's socket operation was cut short by the caller's deadline (or the
    deadline had passed before it began)."""


class ResponseTooLarge(HttpProtocolError):
    """A response body over the bound its reader set; the rest of it is never read.

    ``length`` is the length the response declared (Content-Length), None when the body was
    chunked or ran until the connection closed and was cut off at the bound.
    """

    def __init__(self, status: int, limit: int, length: int | None = None) -> None:
        self.status, self.limit, self.length = status, limit, length
        declared = f" (Content-Length: {length:,})" if length is not None else ""
        super().__init__(f"the HTTP {status} response's body is over the {limit:,} bytes it may hold{declared}")


class ProxyError(ConnectionError):
    """The proxy (HTTPS_PROXY / HTTP_PROXY) refused to open the tunnel, or broke it."""


# -- which failures are retried, and errors read from responses ---------------------------

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

# Errors that mean "the kept-alive connection was already dead when we used it". ssl's
# EOF errors are matched by name so that plain-HTTP workers never import ssl.
_STALE_ERRORS = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
_STALE_SSL_ERRORS = frozenset({"SSLEOFError", "SSLZeroReturnError"})

# What a connection raises when the request or its response did not get through.
TRANSPORT_ERRORS = (OSError, HttpProtocolError)

# A server certificate that fails verification (untrusted, expired, another host's) will
# fail the same way on every attempt: not retried. Matched by name, as the stale errors.
_TLS_VERIFICATION_ERRORS = frozenset({"SSLCertVerificationError"})

# Indirection so tests can make backoff instant.
sleep = time.sleep


def is_stale(exc: BaseException) -> bool:
    """Whether ``exc`` says a kept-alive connection was dead before this request used it."""
    return isinstance(exc, _STALE_ERRORS) or type(exc).__name__ in _STALE_SSL_ERRORS


def is_tls_verification_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is ssl's refusal of the server's certificate."""
    return type(exc).__name__ in _TLS_VERIFICATION_ERRORS


def transport_error(exc: BaseException, attempts: int) -> AwsError:
    """The AwsError for a request or reply that did not get through (one of ``TRANSPORT_ERRORS``)."""
    if isinstance(exc, DeadlineExceeded):
        return AwsError("DeadlineExceeded", str(exc), 0, True, attempts=attempts)
    if is_tls_verification_failure(exc):
        return AwsError("TLSVerificationFailed", str(exc), 0, False, attempts=attempts)
    if isinstance(exc, ResponseTooLarge):  # the same reply would be as large again: not retried
        return AwsError("ResponseTooLarge", str(exc), exc.status, False, attempts=attempts)
    return AwsError("ConnectionError", f"{type(exc).__name__}: {exc}", 0, True, attempts=attempts)


def acquire(lock, deadline: float | None) -> bool:
    """Take ``lock``, waiting no later than ``deadline`` (a time.monotonic value; None: no limit)."""
    if deadline is None:
        return lock.acquire()
    remaining = deadline - time.monotonic()
    return remaining > 0 and lock.acquire(True, min(remaining, TIMEOUT_MAX))


def error_from_response(status: int, headers: dict[str, str], data: bytes | bytearray, attempts: int) -> AwsError:
    """The AwsError an HTTP error response stands for; ``headers`` with lowercased names,
    as :meth:`Connection.request <kindling.drivers.aws.connection.Connection.request>` returns them."""
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
