"""The ``kindling`` command's exit codes, and the one line it prints for each expected error.

A script calling ``kindling`` tells the outcomes apart by the exit code alone:

====  =====================================================================
0     done
1     an error: AWS (credentials, a queue or table that is not there, the
      network), an operation refused
2     usage: the command line is wrong (argparse's own code: an unknown
      option, a missing argument, an argument value that does not parse),
      or a required setting is neither passed nor set
3     the job is dead, rejected, revoked or (still) failed
4     timed out waiting for a job's result
====  =====================================================================

:func:`describe` turns an exception into ``(message, code)``: one line naming the cause
and the fix, never a traceback (``kindling --debug`` shows that). It is pure (botocore
is looked at by class name, never imported) so the mapping is tested without a network.
"""

from __future__ import annotations

from kindling.core.errors import masked_url
from kindling.core.status import FAILED, REJECTED, REVOKED

OK = 0
ERROR = 1
USAGE = 2
JOB_FAILED = 3
TIMEOUT = 4

__all__ = ["OK", "ERROR", "USAGE", "JOB_FAILED", "TIMEOUT", "UsageError", "describe", "need"]


class UsageError(Exception):
    """The command line cannot work as given: an argument that does not parse, a required
    setting that is neither an option nor in the environment. Exits :data:`USAGE`."""


def need(value: str | None, option: str, variable: str) -> str:
    """``value``, or a :class:`UsageError` naming the option and the variable that give it."""
    if not value:
        raise UsageError(f"{option} is required: pass {option} or set {variable}")
    return value


_QUEUE_MISSING = {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist",
                  "NonExistentQueue", "InvalidAddress"}
_ACCESS = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnrecognizedClientException",
           "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException",
           "InvalidAccessKeyId", "InvalidSecurity"}


def describe(exc: BaseException) -> tuple[str, int] | None:
    """``(one line, exit code)`` for an error the command expects, ``None`` for a bug (which
    keeps its traceback)."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    text = masked_url(_one_line(str(exc)))
    if isinstance(exc, UsageError):
        return text, USAGE
    if name in ("JobFailed",) and module.startswith("kindling"):
        status = getattr(exc, "status", FAILED)
        fix = {REVOKED: "it was cancelled (kindling jobs revoke)",
               REJECTED: "its message cannot run as sent: fix the producer, then enqueue it again"}.get(
            status, "see its traceback with `kindling jobs show ID`; `kindling jobs retry ID` runs it again")
        return f"{text} ({fix})", JOB_FAILED
    if isinstance(exc, TimeoutError):  # kindling.core.errors.JobTimeout is one too
        return f"{text or 'timed out'} (wait longer with --timeout, or look later with `kindling status ID`)", TIMEOUT
    if module.startswith("botocore"):
        return _botocore(exc, name, text), ERROR
    if module.startswith("kindling") and (isinstance(exc, ValueError) or _is_kindling_error(exc)):
        return text, ERROR
    if isinstance(exc, OSError):  # the machine's side: a port in use, a file not there, a refused connection
        return f"{name}: {text}", ERROR
    return None


def _is_kindling_error(exc: BaseException) -> bool:
    # KindlingError, EnqueueError (a KindlingError) and ops.OpsError: by name, so the
    # mapping imports nothing.
    return any(c.__name__ in ("KindlingError", "OpsError") for c in type(exc).__mro__)


def _botocore(exc: BaseException, name: str, text: str) -> str:
    if name in ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"):
        return (f"no AWS credentials ({text}): set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or run `aws configure`")
    if name == "NoRegionError":
        return ("no AWS region: set AWS_DEFAULT_REGION, or a region in your AWS profile (boto3 does not read "
                "AWS_REGION)")
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"):
        return (f"cannot reach AWS ({text}): check the queue URL, AWS_ENDPOINT_URL and AWS_REGION, and the "
                "network")
    if name == "ParamValidationError":
        return f"AWS refused the request's parameters ({text}): check the queue URL and the table name"
    if any(c.__name__ == "ClientError" for c in type(exc).__mro__):  # a client's own classes derive from it
        response = getattr(exc, "response", None) or {}
        code = str(response.get("Error", {}).get("Code", ""))
        message = _one_line(str(response.get("Error", {}).get("Message", ""))) or text
        operation = getattr(exc, "operation_name", "") or "the AWS call"
        if code in _QUEUE_MISSING:
            return (f"queue not found ({operation}: {code}): check --queue-url / KINDLING_QUEUE_URL (the URL "
                    "`aws sqs get-queue-url` prints) and AWS_REGION")
        if code == "ResourceNotFoundException":
            return (f"table not found ({operation}: {message}): check --table / KINDLING_TABLE (the stack's "
                    "results table) and AWS_REGION")
        if code in _ACCESS:
            return (f"AWS refused {operation} ({code}: {message}): check the credentials (AWS_PROFILE) and that "
                    "their role may use the queue and table")
        return f"{operation} failed ({code}: {message})"
    return f"AWS: {text}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
