"""One exception tree for kindling.

Everything kindling raises on purpose derives from :class:`KindlingError`, so callers can
catch the family in one clause and still tell the cases apart.
"""

from __future__ import annotations


class KindlingError(Exception):
    """Base class of every error kindling raises on purpose."""


class ConfigurationError(KindlingError, ValueError):
    """A setting kindling does not support (an ``https://`` proxy): refused where the worker is
    built, before any batch, any URL in it masked (:func:`masked_url`)."""


class TaskDefinitionError(KindlingError, TypeError):
    """A task was declared wrongly (unknown option, bad value, duplicate name)."""


class InvalidJob(KindlingError, ValueError):
    """A message is not a valid job; ``reason`` says why, for the ``rejected`` record.

    ``job_id`` and ``task``: what the message claims to be. ``keyed``: the message names its
    job id beyond doubt (a Celery message's ``id`` header, a valid job id), so its refusal is
    recorded under that id, where its sender looks (:func:`kindling.core.refusals.reject`); a
    record under a job id is written only where :data:`kindling.core.status.REPLACES` lets it.
    """

    def __init__(self, reason: str, *, job_id: str | None = None, task: str | None = None, keyed: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.job_id = job_id
        self.task = task
        self.keyed = keyed


class Expired(InvalidJob):
    """A message past its expiry (Celery's ``expires``), or one that expires before it is
    due: never run, and its job recorded ``revoked``, as Celery's worker marks it."""


class NewerEnvelope(InvalidJob):
    """An envelope written by a newer kindling than this worker: handed back, not rejected,
    so a worker that reads it picks it up during a rolling deploy."""


class Retry(KindlingError):
    """Raised by a task to ask for another attempt, ``after`` seconds from now (default:
    the task's backoff). It counts as an attempt; on the last one the job is ``dead``."""

    def __init__(self, after: float | None = None, reason: str = ""):
        if after is not None and (isinstance(after, bool) or not isinstance(after, int | float) or after < 0):
            raise ValueError(f"Retry(after=...) takes seconds >= 0, got {after!r}")
        super().__init__(reason or (f"retry requested in {after:g}s" if after is not None else "retry requested"))
        self.after = after


class JobTimeout(KindlingError, TimeoutError):
    """A job ran past its time limit (its own timeout or the invocation's remaining time)."""


class ResultTooLarge(KindlingError, ValueError):
    """A task returned a result too large to record in one DynamoDB item. ``text`` is its
    JSON, for a worker with a payload bucket to keep in S3 instead."""

    def __init__(self, message: str, text: str | None = None):
        super().__init__(message)
        self.text = text


class UnencodableResult(KindlingError, TypeError):
    """A task returned a value the JSON contract refuses (:mod:`kindling.core.codec`): NaN, a
    non-string dict key, ``bytes``, nesting too deep... Never retried: the same code returns
    the same kind of value again, and another run would only repeat the task's effects."""


class PayloadTooLarge(KindlingError, ValueError):
    """A job's envelope is larger than the queue accepts (its MaximumMessageSize) and no
    payload bucket is configured to hold its arguments."""


class PayloadUnavailable(KindlingError):
    """A payload in S3 (a job's arguments, a result) could not be read, or was not the bytes
    its pointer names. ``retryable``: whether another attempt may succeed (S3 throttled or
    unreachable), not (the object is missing, altered, or not what kindling wrote).

    ``lost``: the bytes are gone for good (S3 has no such key, the object is not the bytes
    the pointer names, or the pointer names nothing S3 can hold); never retryable. Not every
    failure that is not retryable is lost: ``AccessDenied`` or ``NoSuchBucket`` may be the
    reader's setup, which an operator can fix, so whoever would give up on a value for good
    (a chord's callback, a chain's next step) gives up only on a lost one."""

    def __init__(self, message: str, *, retryable: bool, lost: bool = False):
        super().__init__(message)
        self.retryable = retryable and not lost
        self.lost = lost


class UnknownQueue(KindlingError, ValueError):
    """A job was routed to a queue name the producer has no URL for (``KINDLING_QUEUES``)."""


class EnqueueError(KindlingError):
    """Some jobs could not be sent; ``failed`` maps their ids to the reason, ``sent`` holds the rest."""

    def __init__(self, message: str, *, failed: dict[str, str], sent: list | None = None):
        super().__init__(message)
        self.failed = failed
        self.sent = sent or []


class EnqueueUncertain(EnqueueError):
    """The connection was lost after jobs were sent and before the reply came: they may or
    may not have been added. ``unknown`` maps their ids to the reason; ``failed`` holds jobs
    known not to be sent (later chunks), ``sent`` those known sent. An unknown job sent again
    with the same id is skipped once one copy has finished, as any redelivery is."""

    def __init__(self, message: str, *, unknown: dict[str, str], failed: dict[str, str] | None = None,
                 sent: list | None = None):
        super().__init__(message, failed=failed or {}, sent=sent)
        self.unknown = unknown


class StoreUnavailable(KindlingError):
    """The result store could not be read or written; the batch is handed back untouched."""


class LayerMissing(KindlingError, ImportError):
    """A module kindling needs is not in the function: the Valkey stream support ships in a
    layer of its own (``KindlingValkeyLayer``), which template.yaml and the CDK construct
    attach only when a Valkey URL is configured (:func:`missing_layer`)."""


VALKEY_LAYER = "KindlingValkeyLayer"
"""The optional layer of the Valkey stream support (layers/kindling/Makefile's target of that name)."""


def missing_layer(exc: ModuleNotFoundError) -> Exception:
    """What to raise for ``exc``: :class:`LayerMissing` naming the Valkey layer when the module
    missing is one it ships (a ``valkey`` module or folder of the package's layer folders);
    ``exc`` itself for any other."""
    parts = (exc.name or "").split(".")
    if parts[0] == "kindling" and "valkey" in parts[2:]:
        return LayerMissing(f"{exc.name} is not in this function: the Valkey stream support ships in the "
                            f"{VALKEY_LAYER} layer, which template.yaml (and the CDK construct) attach when "
                            "ValkeyUrl or ValkeyUrlSecretArn is set; attach it to run Valkey streams")
    return exc


class JobFailed(KindlingError):
    """Raised by ``Client.result`` for a job recorded dead, rejected or (at timeout) failed.

    ``error`` is the recorded error: ``{"type": ..., "message": ..., "traceback": ...}``.
    """

    def __init__(self, job_id: str, status: str, error: dict | None):
        self.job_id = job_id
        self.status = status
        self.error = error or {}
        kind = self.error.get("type", "Error")
        message = self.error.get("message", "")
        super().__init__(f"job {job_id} is {status}: {kind}: {message}")


class ResultNotRecorded(KindlingError):
    """A handle asked for a result its task's results policy does not record
    (``results="failures"`` or ``"none"``, :data:`kindling.core.policy.RESULTS_POLICIES`): a
    success leaves no record, so no wait could ever see it."""

    def __init__(self, job_id: str, task: str, results: str):
        self.job_id, self.task, self.results = job_id, task, results
        super().__init__(f"job {job_id}: task {task!r} records no success (results={results!r}), so its result "
                         "cannot be read; a failure that ended it is recorded (handle.status()). Declare the task "
                         "with results='all' to read results")


# -- what a message may show of a URL -------------------------------------------------------

# Where a URL's authority ends, for masking: the URL's own delimiters, and what ends it in a
# message (white space, quotes, angle brackets). Not sub-delimiters: "(", ",", ";" may stand
# unencoded in a password.
_AUTHORITY_END = frozenset("/?#'\"<> \t\r\n")
_SECRET_PARAMETERS = ("password", "secret", "token", "signature", "credential")


def masked_url(text: str) -> str:
    """``text`` with every URL's credentials replaced by ``***``: the password of its user
    part (the whole user part when it has no password: it may be a token), and the values of
    query parameters named as secrets (``password=``, ``X-Amz-Signature=``...). ``text`` is a
    URL (``user:password@host:port`` without a scheme too, as a proxy may be set) or a message
    holding URLs. The one masking every error and log line that can hold a URL goes through:
    proxies, Valkey URLs, endpoints."""
    if "@" not in text and "=" not in text:
        return text
    if "://" not in text:
        if "@" in text and text[:1] not in "/?" and not any(c in _AUTHORITY_END for c in text.partition("/")[0]):
            return _masked_authority(text)  # a bare authority: "user:password@host:port"
        return text
    return _masked_urls(text)


def _masked_urls(text: str) -> str:
    out, at = [], 0
    while True:
        found = text.find("://", at)
        if found < 0:
            out.append(text[at:])
            return "".join(out)
        start = found + 3
        out.append(text[at:start])
        end = start
        while end < len(text) and text[end] not in _AUTHORITY_END:
            end += 1
        out.append(_masked_authority(text[start:end]))
        at = end
        if end < len(text) and text[end] in "/?#":  # the path and query, to the end of the URL
            tail = end
            while tail < len(text) and text[tail] not in "'\"<> \t\r\n":
                tail += 1
            out.append(_masked_query(_masked_urls(text[end:tail])))  # a URL in a URL's query too
            at = tail


def _masked_authority(authority: str) -> str:
    userinfo, sign, host = authority.rpartition("@")
    if not sign:
        return authority
    user, colon, _ = userinfo.partition(":")
    return f"{user}:***@{host}" if colon else f"***@{host}"


def _masked_query(rest: str) -> str:
    path, mark, query = rest.partition("?")
    if not mark or "=" not in query:
        return rest
    fields = []
    for field in query.split("&"):
        name, equals, _ = field.partition("=")
        secret = equals and any(word in name.lower() for word in _SECRET_PARAMETERS)
        fields.append(f"{name}=***" if secret else field)
    return f"{path}?{'&'.join(fields)}"
