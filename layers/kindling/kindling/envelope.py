"""The job envelope: what a producer puts on the queue, and how the worker reads it back.

An envelope is a JSON object::

    {"version": 1, "id": "01JD3...", "task": "resize", "args": ["a.png"], "kwargs": {},
     "enqueued_at": 1763725000000, "max_attempts": 5, "timeout": 30, "not_before": ...}

``max_attempts``, ``timeout`` and ``not_before`` are optional. Anything else (unknown
fields, wrong types, values out of range, not JSON at all) is refused by
:func:`decode_job` with an :class:`~kindling.errors.InvalidJob` whose ``reason`` says
exactly what is wrong.

Attempts are not in the envelope: they are counted in the result record (see
:mod:`kindling.runner`), so a re-sent or redelivered message needs no new field for them.
The fields planned next come as one change, version 2, all optional: ``group`` (a FIFO
message group), ``chain`` (the calls to enqueue with this job's result), ``parent`` (the
group or chord this job belongs to) and ``payload`` (an S3 pointer replacing ``args`` and
``kwargs`` when they are too large for the queue). A producer writes version 2 only when
a job uses one of them, so plain jobs stay readable by every worker during a rollout.

Versions: an envelope whose ``version`` is above :data:`VERSION` raises
:class:`~kindling.errors.NewerEnvelope` before any other check (its fields may be new to
this worker). The runner hands such a message back, with backoff, instead of rejecting
it, so during a rolling deploy a worker one version behind leaves newer jobs to the
workers that read them; only on the message's last delivery is it recorded.
"""

from __future__ import annotations

import os
import time

from kindling import codec
from kindling.errors import InvalidJob, NewerEnvelope
from kindling.policy import MAX_ATTEMPTS, MAX_TASK_LENGTH, MAX_TIMEOUT_S

VERSION = 1
MAX_ID_LENGTH = 128
MAX_EPOCH_MS = 253_402_300_800_000  # the year 10000: later times are not times
_REQUIRED = ("version", "id", "task", "args", "kwargs", "enqueued_at")
_OPTIONAL = ("max_attempts", "timeout", "not_before")
_FIELDS = frozenset(_REQUIRED + _OPTIONAL)
_ID_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_.:")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class Job:
    """A decoded, validated job. Plain attributes; build one with :func:`new_job`."""

    __slots__ = ("id", "task", "args", "kwargs", "enqueued_at", "max_attempts", "timeout", "not_before")

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
    ):
        self.id = id
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.enqueued_at = enqueued_at
        self.max_attempts = max_attempts
        self.timeout = timeout
        self.not_before = not_before

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, task={self.task!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and all(
            getattr(self, f) == getattr(other, f) for f in self.__slots__
        )


def now_ms() -> int:
    return time.time_ns() // 1_000_000


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


def new_job(
    task: str,
    args: list | tuple = (),
    kwargs: dict | None = None,
    *,
    job_id: str | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    not_before: int | None = None,
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
    )
    _validate(to_dict(job))
    return job


def to_dict(job: Job) -> dict:
    d = {
        "version": VERSION,
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
        raise InvalidJob(f"message body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidJob(f"message body is JSON {type(data).__name__}, expected an object")
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
    )


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
    if version != VERSION:
        raise bad(f"unsupported envelope version {version!r:.40} (this worker reads {VERSION})")
    jid = data["id"]
    if not isinstance(jid, str) or not jid or len(jid) > MAX_ID_LENGTH or not _ID_CHARS.issuperset(jid):
        raise bad(
            f"id must be 1-{MAX_ID_LENGTH} characters of letters, digits and -_.:, got {jid!r:.80}"
        )
    if not isinstance(data["task"], str) or not data["task"] or len(data["task"]) > MAX_TASK_LENGTH:
        raise bad(f"task must be a string of 1-{MAX_TASK_LENGTH} characters, got {data['task']!r:.80}")
    if not isinstance(data["args"], list):
        raise bad(f"args must be a JSON array, got {type(data['args']).__name__}")
    if not isinstance(data["kwargs"], dict):
        raise bad(f"kwargs must be a JSON object, got {type(data['kwargs']).__name__}")
    if not _is_int(data["enqueued_at"]) or not 0 <= data["enqueued_at"] < MAX_EPOCH_MS:
        raise bad(f"enqueued_at must be epoch milliseconds, got {data['enqueued_at']!r:.40}")
    ma = data.get("max_attempts")
    if ma is not None and (not _is_int(ma) or not 1 <= ma <= MAX_ATTEMPTS):
        raise bad(f"max_attempts must be an integer from 1 to {MAX_ATTEMPTS}, got {ma!r:.40}")
    to = data.get("timeout")
    if to is not None and (not (_is_int(to) or isinstance(to, float)) or not 0 < to <= MAX_TIMEOUT_S):
        raise bad(f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {to!r:.40}")
    nb = data.get("not_before")
    if nb is not None and (not _is_int(nb) or not 0 <= nb < MAX_EPOCH_MS):
        raise bad(f"not_before must be epoch milliseconds, got {nb!r:.40}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
