"""Putting jobs on a stream.

Acknowledged entries are deleted, so ``XLEN`` is the number of jobs not finished yet (unread
plus pending). With ``maxlen`` the producer refuses to add jobs past that many unfinished
jobs (:class:`StreamFull`); it never trims: ``XADD MAXLEN`` would drop unread jobs silently.
The check is a soft cap (concurrent producers can overshoot it by one chunk each), never a
loss.
"""

from __future__ import annotations

from kindling import codec
from kindling.envelope import encode_job, new_job, now_ms
from kindling.errors import EnqueueError
from kindling.valkey.connection import DEFAULT_STREAM, FIELD, _s, connect

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

CHUNK = 500
"""XADDs per pipelined round trip."""


class StreamFull(EnqueueError):
    """Adding the jobs would put more than ``maxlen`` unfinished jobs on the stream."""


class Sent:
    """A job put on the stream: its job id, task and stream entry id."""

    __slots__ = ("id", "task", "entry")

    def __init__(self, id: str, task: str, entry: str):
        self.id, self.task, self.entry = id, task, entry

    def __repr__(self) -> str:
        return f"Sent({self.id!r}, {self.task!r}, entry={self.entry!r})"


class StreamProducer:
    """Puts jobs on a Valkey stream.

    Args:
        url: ``redis://[user:password@]host:port/db`` or ``rediss://`` for TLS.
        stream: the stream's key.
        maxlen: refuse (raise :class:`StreamFull`) rather than exceed this many unfinished
            jobs on the stream; ``None`` for no limit. Nothing is ever trimmed.
    """

    def __init__(self, url: str, stream: str = DEFAULT_STREAM, maxlen: int | None = None, *, client=None):
        codec.use_orjson()
        self.url = url
        self.stream = stream
        self.maxlen = maxlen
        self.client = client or connect(url)

    def enqueue(self, task, /, *args, **kwargs) -> Sent:
        """Put one job running ``task(*args, **kwargs)`` on the stream."""
        from kindling.client import Call

        return self.enqueue_many([Call(task, args, kwargs)])[0]

    def enqueue_many(self, calls: Iterable) -> list[Sent]:
        """Put many jobs on the stream: one pipelined (non-transactional) round trip per
        ``CHUNK`` jobs. ``calls`` holds :class:`kindling.client.Call` objects or
        ``(task, args, kwargs)`` tuples; a ``Call.delay`` becomes the job's ``not_before``."""
        from kindling.client import Call
        from kindling.registry import Task

        prepared = []
        for c in calls:
            call = c if isinstance(c, Call) else Call(*c)
            name = call.task.name if isinstance(call.task, Task) else call.task
            job = new_job(name, call.args, call.kwargs, job_id=call.job_id, max_attempts=call.max_attempts,
                          timeout=call.timeout, not_before=now_ms() + call.delay * 1000 if call.delay else None)
            prepared.append((job, encode_job(job)))
        sent: list[Sent] = []
        for start in range(0, len(prepared), CHUNK):
            chunk = prepared[start : start + CHUNK]
            if self.maxlen is not None:
                self._check_room(len(chunk), sent, prepared[start:])
            pipe = self.client.pipeline(transaction=False)
            for _job, body in chunk:
                pipe.xadd(self.stream, {FIELD: body})
            try:
                ids = pipe.execute()
            except Exception as exc:  # noqa: BLE001 - report what was sent and what was not
                failed = {job.id: f"{type(exc).__name__}: {exc}" for job, _ in prepared[start:]}
                raise EnqueueError(f"{len(failed)} of {len(prepared)} jobs were not sent", failed=failed,
                                   sent=sent) from exc
            sent.extend(Sent(job.id, job.task, _s(i)) for (job, _), i in zip(chunk, ids, strict=True))
        return sent

    def _check_room(self, n: int, sent: list[Sent], rest: list) -> None:
        length = self.client.xlen(self.stream)
        if length + n > self.maxlen:  # type: ignore[operator]
            failed = {job.id: "stream full" for job, _ in rest}
            raise StreamFull(
                f"stream {self.stream!r} holds {length} unfinished jobs; adding {n} would exceed "
                f"maxlen={self.maxlen} (unread jobs are never trimmed; {len(rest)} jobs not sent)",
                failed=failed, sent=sent,
            )
