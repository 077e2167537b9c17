"""The errors of :mod:`kindling.aws`: what a call raises, and what the transport raises inside it.

All of them derive from :class:`kindling.errors.KindlingError`; the transport's also from
the built-in exception a caller of the standard library would catch.
"""

from kindling.errors import KindlingError


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
