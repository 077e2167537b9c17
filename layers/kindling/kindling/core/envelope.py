"""The job envelope: what a producer puts on the queue, and how the worker reads it back.

An envelope is a JSON object::

    {"version": 1, "id": "01JD3...", "task": "resize", "args": ["a.png"], "kwargs": {},
     "enqueued_at": 1763725000000, "max_attempts": 5, "timeout": 30, "not_before": ...}

``max_attempts``, ``timeout`` and ``not_before`` are optional. Anything else (unknown
fields, wrong types, values out of range, not JSON at all) is refused by
:func:`decode_job` with an :class:`~kindling.core.errors.InvalidJob` whose ``reason`` says
exactly what is wrong.

Attempts are not in the envelope: they are counted in the result record (see
:mod:`kindling.engine.runner`), so a re-sent or redelivered message needs no new field for them.

Version 2 adds three optional fields, all validated here and nowhere else:

``chain``
    The calls to make with this job's result, in order: a list of 1-100 call objects
    ``{"task", "args", "kwargs"}`` with optional ``max_attempts``, ``timeout`` and
    ``immutable`` (``true``: called with its own arguments only, ``task.si()``). When the
    job succeeds, ``chain[0]`` is enqueued with the result prepended to its arguments
    (unless immutable) and ``chain[1:]`` as its own chain.
``parent``
    The group (chord) this job is a member of: ``{"id", "index", "size", "then"}``, where
    ``then`` is the call to make once all ``size`` members have finished (or ``null``).
``payload``
    An S3 pointer ``{"bucket", "key", "size", "sha256"}`` to the job's arguments, for
    arguments too large for the queue. With a payload, ``args`` must be ``[]`` and
    ``kwargs`` ``{}``: the real ones are the object's JSON ``{"args": [...], "kwargs": {...}}``.

A producer writes version 2 only when a job uses one of them (:func:`to_dict`), so plain
jobs stay version 1 and readable by every worker during a rollout. A version 1 envelope
carrying a version 2 field is refused.

A FIFO message group is not an envelope field: ordering needs the transport's help (an
SQS FIFO queue holds a group back while one of its messages is in flight), so the group
travels as the message's ``MessageGroupId``, and a field on a stream entry could promise
no order.

Versions: an envelope whose ``version`` is above :data:`VERSION` raises
:class:`~kindling.core.errors.NewerEnvelope` before any other check (its fields may be new to
this worker). The runner hands such a message back, with backoff, instead of rejecting
it, so during a rolling deploy a worker one version behind leaves newer jobs to the
workers that read them; only on the message's last delivery is it recorded.
"""

from __future__ import annotations

import os

from kindling.core import codec
from kindling.core.errors import InvalidJob, NewerEnvelope

# A job id's limits and the clock a job's times are read by are policy's, below this module and
# the Celery reader alike; they are imported from here as from there (ID_CHARS, MAX_ID_LENGTH).
from kindling.core.policy import (
    CALLBACK_SUFFIX,
    MAX_ATTEMPTS,
    MAX_TASK_LENGTH,
    MAX_TIMEOUT_S,
    is_job_id,
    job_id_error,
    now_ms,
)
from kindling.core.policy import ID_CHARS as ID_CHARS
from kindling.core.policy import MAX_ID_LENGTH as MAX_ID_LENGTH

VERSION = 2
MAX_CHAIN_LENGTH = 100
MAX_GROUP_SIZE = 10_000  # members of one group (chord)
MAX_S3_KEY_BYTES = 1024
MAX_EPOCH_MS = 253_402_300_800_000  # the year 10000: later times are not times
# 2020-01-01: no job was enqueued before it, and every epoch time in SECONDS up to the year
# 2039 is below it, so a producer that wrote seconds is told so instead of its job showing
# a queue wait of half a million hours.
MIN_EPOCH_MS = 1_577_836_800_000
MAX_CLOCK_SKEW_MS = 86_400_000  # an enqueue time more than a day ahead of the reader's clock is not one
_REQUIRED = ("version", "id", "task", "args", "kwargs", "enqueued_at")
_OPTIONAL_V1 = ("max_attempts", "timeout", "not_before")
_OPTIONAL_V2 = ("chain", "parent", "payload")
_OPTIONAL = _OPTIONAL_V1 + _OPTIONAL_V2
_FIELDS = frozenset(_REQUIRED + _OPTIONAL)
_CALL_REQUIRED = ("task", "args", "kwargs")
_CALL_FIELDS = frozenset(_CALL_REQUIRED + ("max_attempts", "timeout", "immutable"))
_PARENT_FIELDS = frozenset(("id", "index", "size", "then"))
_PAYLOAD_FIELDS = frozenset(("bucket", "key", "size", "sha256"))
_HEX = frozenset("0123456789abcdef")
_BUCKET_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
MAX_CHORD_ID_LENGTH = 100
"""A chord id leaves room for ``.<index>`` and ``.then`` within the 128 characters of a job id."""
_NEXT = ".next-"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from kindling.core.policy import TaskOptions

# The SQS message attributes kindling sets beside a job's body, never inside it: its
# signature (kindling.core.jobsig), and, on a message the worker moved to a dead-letter queue,
# why it died and which job it was (read back by the operator tools).
SIGNATURE_ATTRIBUTE = "kindling_signature"
REASON_ATTRIBUTE = "kindling_reason"
JOB_ID_ATTRIBUTE = "kindling_job_id"


class Job:
    """A decoded, validated job. Plain attributes; build one with :func:`new_job`.

    ``headers``: a Celery message's own headers (:mod:`kindling.core.celery_message`), for the
    task's :attr:`~kindling.core.batch.JobContext.headers`; never part of an envelope.
    """

    __slots__ = ("id", "task", "args", "kwargs", "enqueued_at", "max_attempts", "timeout", "not_before",
                 "chain", "parent", "payload", "headers")

    def __init__(
        self,
        id: str,
        task: str,
        args: list,
        kwargs: dict,
        enqueued_at: int,
        max_attempts: int | None = None,
        timeout: float | None = None,
        not_before: int | None = None,
        chain: list[dict] | None = None,
        parent: dict | None = None,
        payload: dict | None = None,
        headers: dict | None = None,
    ):
        self.id = id
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.enqueued_at = enqueued_at
        self.max_attempts = max_attempts
        self.timeout = timeout
        self.not_before = not_before
        self.chain = chain
        self.parent = parent
        self.payload = payload
        self.headers = headers

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, task={self.task!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and all(
            getattr(self, f) == getattr(other, f) for f in self.__slots__
        )


def new_job_id(at_ms: int | None = None) -> str:
    """A 26-character, time-ordered id (ULID layout: 48-bit milliseconds, 80 random bits).

    Ids sort by creation time as strings, so result tables list jobs in enqueue order.
    """
    ms = now_ms() if at_ms is None else at_ms
    n = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    out = []
    for _ in range(26):
        out.append(_CROCKFORD[n & 31])
        n >>= 5
    return "".join(reversed(out))


# Follow-up ids are derived, never drawn: a follow-up sent twice carries the same id, so the
# batch's duplicate check runs it once (kindling.engine.followups).


def next_id(job_id: str) -> str:
    """The id of the chain step after ``job_id``: its readable stem (the chain's first id, up
    to 64 characters) and 80 bits of SHA-256 of ``job_id``, so every step has its own."""
    from kindling.core.digest import sha256_hex

    stem = job_id.partition(_NEXT)[0][:64]
    return f"{stem}{_NEXT}{sha256_hex(job_id)[:20]}"


def chain_first(job_id: str) -> str:
    """The id of the first step of the chain ``job_id`` is a later step of (the stem
    :func:`next_id` keeps, when under 64 characters), else ``job_id`` itself."""
    stem = job_id.partition(_NEXT)[0]
    return stem if stem != job_id and len(stem) < 64 else job_id


def member_id(chord_id: str, index: int) -> str:
    """The job id of a chord's member ``index``."""
    return f"{chord_id}.{index}"


def callback_id(chord_id: str) -> str:
    """The job id of a chord's callback."""
    return f"{chord_id}{CALLBACK_SUFFIX}"


def check_chord_id(chord_id: object) -> str:
    """``chord_id`` if it is a valid job id short enough for its members' ids; else ValueError."""
    if not (is_job_id(chord_id) and len(chord_id) <= MAX_CHORD_ID_LENGTH):  # type: ignore[arg-type]
        raise ValueError(f"a chord id is 1-{MAX_CHORD_ID_LENGTH} characters of letters, digits and -_.:, "
                         f"got {chord_id!r:.80}")
    return chord_id  # type: ignore[return-value]


class Call:
    """One job to send (:meth:`kindling.producer.client.Client.enqueue_many`, a producer's ``send``),
    with its per-job options."""

    __slots__ = ("task", "args", "kwargs", "delay", "job_id", "max_attempts", "timeout", "group", "queue", "chain",
                 "parent")

    def __init__(self, task: str | TaskOptions, args: Sequence = (), kwargs: dict | None = None, *,
                 delay: int = 0, job_id: str | None = None, max_attempts: int | None = None,
                 timeout: float | None = None, group: str | None = None, queue: str | None = None,
                 chain: list[dict] | None = None, parent: dict | None = None):
        self.task, self.args, self.kwargs = task, args, kwargs or {}
        self.delay, self.job_id, self.max_attempts, self.timeout = delay, job_id, max_attempts, timeout
        self.group = group  # a FIFO queue's message group: jobs of one group run in order
        self.queue = queue  # a named queue, over the task's own (kindling.core.routing)
        # What kindling.producer.canvas sets: the calls to run after this one, the chord it belongs to.
        self.chain, self.parent = chain, parent


def new_job(
    task: str,
    args: list | tuple = (),
    kwargs: dict | None = None,
    *,
    job_id: str | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    not_before: int | None = None,
    chain: list[dict] | None = None,
    parent: dict | None = None,
    payload: dict | None = None,
) -> Job:
    """Build a job for ``task``; validates it as the worker will, so mistakes fail early."""
    at = now_ms()
    job = Job(
        id=job_id or new_job_id(at),
        task=task,
        args=list(args),
        kwargs=dict(kwargs or {}),
        enqueued_at=at,
        max_attempts=max_attempts,
        timeout=timeout,
        not_before=not_before,
        chain=chain,
        parent=parent,
        payload=payload,
    )
    _validate(to_dict(job))
    return job


def replace(job: Job, **changes: object) -> Job:
    """A copy of ``job`` with ``changes`` (names of :class:`Job` fields) and every other field
    as it was, validated as :func:`new_job` validates. Every copy of a job goes through here:
    a copy that lists the fields by hand drops the ones added after it was written."""
    unknown = sorted(set(changes) - set(Job.__slots__))
    if unknown:
        raise TypeError(f"Job has no field(s) {', '.join(unknown)}")
    copy = Job(**{name: changes[name] if name in changes else getattr(job, name) for name in Job.__slots__})
    _validate(to_dict(copy))
    return copy


def to_dict(job: Job) -> dict:
    """The envelope as a dict: version 1 unless the job uses a version 2 field."""
    d = {
        "version": 2 if any(getattr(job, name) is not None for name in _OPTIONAL_V2) else 1,
        "id": job.id,
        "task": job.task,
        "args": job.args,
        "kwargs": job.kwargs,
        "enqueued_at": job.enqueued_at,
    }
    for name in _OPTIONAL:
        value = getattr(job, name)
        if value is not None:
            d[name] = value
    return d


def encode_job(job: Job) -> bytes:
    """The envelope as compact UTF-8 JSON bytes. Raises ``TypeError`` for arguments JSON cannot hold."""
    try:
        return codec.dumps(to_dict(job)).encode()
    except codec.EncodeError as exc:
        raise TypeError(f"job {job.id} for {job.task!r}: arguments are not JSON-serializable: {exc}") from None


def decode_job(body: str | bytes) -> Job:
    """Parse and validate one message body; raise :class:`InvalidJob` with a clear reason."""
    try:
        data = codec.loads(body)
    except codec.DecodeError as exc:
        # base64 of '{"', or the JSON text kombu's SQS transport writes without base64: a Celery producer
        if body[:3] in ("eyJ", b"eyJ") or body[:9] in ('{"body": ', b'{"body": '):
            return _celery_job(body)
        raise InvalidJob(f"message body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidJob(f"message body is JSON {type(data).__name__}, expected an object")
    if "version" not in data and isinstance(data.get("headers"), dict) and "body" in data:  # kombu, no base64
        return _celery_job(data)
    _validate(data)
    return Job(
        id=data["id"],
        task=data["task"],
        args=data["args"],
        kwargs=data["kwargs"],
        enqueued_at=data["enqueued_at"],
        max_attempts=data.get("max_attempts"),
        timeout=data.get("timeout"),
        not_before=data.get("not_before"),
        chain=data.get("chain"),
        parent=data.get("parent"),
        payload=data.get("payload"),
    )


def _celery_job(message: str | bytes | dict) -> Job:
    """A Celery task message's job: :mod:`kindling.core.celery_message` reads the message (loaded
    only here, for a body that is not an envelope), and the job it asks for is made and checked
    here, as a kindling producer's."""
    from kindling.core import celery_message

    return celery_message.decode(message, _checked_job)


def _checked_job(task: str, args: list, kwargs: dict, *, job_id: str, timeout: float | None,
                 not_before: int | None) -> Job:
    """A job made as :func:`new_job` makes one and read back through :func:`decode_job`'s checks."""
    job = new_job(task, args, kwargs, job_id=job_id, timeout=timeout, not_before=not_before)
    return decode_job(encode_job(job))


def _validate(data: dict) -> None:
    job_id = data.get("id") if isinstance(data.get("id"), str) else None
    task = data.get("task") if isinstance(data.get("task"), str) else None

    def bad(reason: str) -> InvalidJob:
        return InvalidJob(reason, job_id=job_id, task=task)

    if _is_int(data.get("version")) and data["version"] > VERSION:  # its fields may be new to us
        raise NewerEnvelope(f"envelope version {data['version']} needs a newer kindling (this worker reads "
                            f"{VERSION})", job_id=job_id, task=task)
    missing = [f for f in _REQUIRED if f not in data]
    if missing:
        raise bad(f"envelope is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise bad(f"envelope has unknown field(s): {', '.join(map(str, unknown))}")
    version = data["version"]
    if not _is_int(version) or not 1 <= version <= VERSION:
        raise bad(f"unsupported envelope version {version!r:.40} (this worker reads 1 to {VERSION})")
    if version == 1:
        newer = [f for f in _OPTIONAL_V2 if f in data]
        if newer:
            raise bad(f"field(s) {', '.join(newer)} need envelope version 2, the message says 1")
    reason = job_id_error(data["id"])
    if reason:
        raise bad(reason)
    reason = _call_error(data)
    if reason:
        raise bad(reason)
    reason = _epoch_ms_error("enqueued_at", data["enqueued_at"], now_ms() + MAX_CLOCK_SKEW_MS)
    if reason:
        raise bad(reason)
    nb = data.get("not_before")
    reason = _epoch_ms_error("not_before", nb, MAX_EPOCH_MS) if nb is not None else None
    if reason:
        raise bad(reason)
    if version == 2:
        reason = _v2_error(data)
        if reason:
            raise bad(reason)


def _epoch_ms_error(name: str, value: object, latest: int) -> str | None:
    """What is wrong with an epoch-milliseconds field (``enqueued_at``, ``not_before``)."""
    if not _is_int(value) or not 0 <= value < MAX_EPOCH_MS:
        return f"{name} must be epoch milliseconds, got {value!r:.40}"
    if value < MIN_EPOCH_MS:
        return (f"{name} {value} looks like seconds (or is before 2020-01-01): it must be epoch milliseconds, "
                "e.g. time.time_ns() // 1_000_000 or Date.now()")
    if value > latest:
        return (f"{name} {value} is more than a day ahead of this clock ({now_ms()} ms): it must be epoch "
                "milliseconds, not microseconds or a bad clock")
    return None


def _call_error(call: dict) -> str | None:
    """What is wrong with a call's task, arguments and limits (a job's or a chained call's)."""
    if not isinstance(call["task"], str) or not call["task"] or len(call["task"]) > MAX_TASK_LENGTH:
        return f"task must be a string of 1-{MAX_TASK_LENGTH} characters, got {call['task']!r:.80}"
    if not isinstance(call["args"], list):
        return f"args must be a JSON array, got {type(call['args']).__name__}"
    if not isinstance(call["kwargs"], dict):
        return f"kwargs must be a JSON object, got {type(call['kwargs']).__name__}"
    ma = call.get("max_attempts")
    if ma is not None and (not _is_int(ma) or not 1 <= ma <= MAX_ATTEMPTS):
        return f"max_attempts must be an integer from 1 to {MAX_ATTEMPTS}, got {ma!r:.40}"
    to = call.get("timeout")
    if to is not None and (not (_is_int(to) or isinstance(to, float)) or not 0 < to <= MAX_TIMEOUT_S):
        return f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {to!r:.40}"
    return None


def _nested_call_error(where: str, call: object) -> str | None:
    if not isinstance(call, dict):
        return f"{where} must be a call object, got {type(call).__name__}"
    missing = [f for f in _CALL_REQUIRED if f not in call]
    if missing:
        return f"{where} is missing field(s): {', '.join(missing)}"
    unknown = sorted(set(call) - _CALL_FIELDS)
    if unknown:
        return f"{where} has unknown field(s): {', '.join(map(str, unknown))}"
    if call.get("immutable", False) is not True and "immutable" in call:
        return f"{where}: immutable must be true when present, got {call['immutable']!r:.40}"
    reason = _call_error(call)
    return f"{where}: {reason}" if reason else None


def _v2_error(data: dict) -> str | None:
    chain = data.get("chain")
    if chain is not None:
        if not isinstance(chain, list) or not 1 <= len(chain) <= MAX_CHAIN_LENGTH:
            return f"chain must be a list of 1-{MAX_CHAIN_LENGTH} call objects, got {chain!r:.80}"
        for i, call in enumerate(chain):
            reason = _nested_call_error(f"chain[{i}]", call)
            if reason:
                return reason
    parent = data.get("parent")
    if parent is not None:
        if not isinstance(parent, dict) or set(parent) != _PARENT_FIELDS:
            return f"parent must be an object with exactly {', '.join(sorted(_PARENT_FIELDS))}, got {parent!r:.80}"
        if not is_job_id(parent["id"]):
            return f"parent.id must be a job id, got {parent['id']!r:.80}"
        size, index = parent["size"], parent["index"]
        if not _is_int(size) or not 1 <= size <= MAX_GROUP_SIZE:
            return f"parent.size must be an integer from 1 to {MAX_GROUP_SIZE}, got {size!r:.40}"
        if not _is_int(index) or not 0 <= index < size:
            return f"parent.index must be an integer from 0 to size - 1, got {index!r:.40}"
        if parent["then"] is not None:
            reason = _nested_call_error("parent.then", parent["then"])
            if reason:
                return reason
    payload = data.get("payload")
    if payload is not None:
        reason = _payload_error(payload)
        if reason:
            return reason
        if data["args"] or data["kwargs"]:
            return "a job with a payload carries its arguments there: args must be [] and kwargs {}"
    return None


def _payload_error(payload: object) -> str | None:
    if not isinstance(payload, dict) or set(payload) != _PAYLOAD_FIELDS:
        return f"payload must be an object with exactly {', '.join(sorted(_PAYLOAD_FIELDS))}, got {payload!r:.80}"
    bucket, key = payload["bucket"], payload["key"]
    if not (isinstance(bucket, str) and 3 <= len(bucket) <= 63 and _BUCKET_CHARS.issuperset(bucket)):
        return f"payload.bucket must be an S3 bucket name, got {bucket!r:.80}"
    if not (isinstance(key, str) and key and len(key.encode("utf-8", "surrogatepass")) <= MAX_S3_KEY_BYTES
            and key.isprintable()):
        return f"payload.key must be 1-{MAX_S3_KEY_BYTES} bytes of printable characters, got {key!r:.80}"
    if not _is_int(payload["size"]) or payload["size"] < 0:
        return f"payload.size must be a byte count, got {payload['size']!r:.40}"
    digest = payload["sha256"]
    if not (isinstance(digest, str) and len(digest) == 64 and _HEX.issuperset(digest)):
        return f"payload.sha256 must be 64 lowercase hex digits, got {digest!r:.80}"
    return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
