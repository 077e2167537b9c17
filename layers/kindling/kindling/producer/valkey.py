"""Putting jobs on a stream, and waking the Lambda worker to drain it.

Acknowledged entries are deleted, so ``XLEN`` is the number of jobs not finished yet (unread
plus pending). With ``maxlen`` the producer refuses to add jobs past that many unfinished
jobs (:class:`StreamFull`); it never trims: ``XADD MAXLEN`` would drop unread jobs silently.
The check is a soft cap (concurrent producers can overshoot it by one chunk each), never a
loss.

A job with a delay goes on the stream like any other, with its ``not_before``: the first
worker to read it records it ``scheduled`` with its due time (the runner's admission, so
``kindling jobs show`` and the dashboard say when it is due from the start) and moves it to
the scheduled set (:mod:`kindling.shared.valkey.scheduled`), which puts it back on the stream when
it is due. One extra pass through a worker per delayed job buys a record of it.

Given the worker function (``function_name=``, or ``KINDLING_WORKER_FUNCTION``), the
producer wakes it after adding jobs: in the same pipelined round trip as the ``XADD`` s, after
them, ``SET <stream>:kick 1 NX PX <ttl>``, and only if that set the flag an asynchronous
Lambda ``Invoke`` of a drain (:mod:`kindling.shared.valkey.kick`, which argues why no job is left
behind). With a backlog, up to ``max_drains`` drains.

Outcomes: jobs the server refused, or a round trip that never went out, raise
:class:`~kindling.core.errors.EnqueueError` (``failed``: not sent). A connection lost after a
round trip was sent raises :class:`~kindling.core.errors.EnqueueUncertain` (``unknown``: the ids
that may have been added), after invoking the drain anyway, since this producer may hold
the kick flag.
"""

from __future__ import annotations

from kindling.core import codec
from kindling.core.envelope import encode_job, new_job, now_ms
from kindling.core.errors import EnqueueError, EnqueueUncertain
from kindling.core.valkey.keys import DEFAULT_GROUP, DEFAULT_STREAM, FIELD, SIG_FIELD, TRACE_FIELD
from kindling.producer.handles import JobHandle, NoReader
from kindling.shared.valkey.connection import DEFAULT_SOCKET_TIMEOUT, connect, text
from kindling.shared.valkey.kick import BACKLOG_PER_DRAIN, KICK_TTL_MS, Kicker, LambdaInvoker

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterable
    from typing import Any, NoReturn, ParamSpec, TypeVar, overload

    from kindling.core.registry import Task

    P = ParamSpec("P")
    R = TypeVar("R")
    T = TypeVar("T")

CHUNK = 500
"""XADDs per pipelined round trip."""


class StreamFull(EnqueueError):
    """Adding the jobs would put more than ``maxlen`` unfinished jobs on the stream."""


class Sent(JobHandle["R"]):  # generic in its task's return type for checkers (handles.pyi)
    """A job put on the stream: its handle (``status()``, ``result()``, ``revoke()``, read
    through the producer's ``reader``: :mod:`kindling.producer.handles`), with its job id, task and
    stream entry id as added (a delayed job's is acknowledged and deleted once a worker has
    moved it to the scheduled set; it gets a new entry when it is due)."""

    __slots__ = ("entry",)

    def __init__(self, id: str, task: str, entry: str | None, reader=None):
        super().__init__(id, task, reader)
        self.entry = entry

    def __repr__(self) -> str:
        return f"Sent({self.id!r}, {self.task!r}, entry={self.entry!r})"


NO_READER = ("this StreamProducer has no result store to read outcomes from: set KINDLING_TABLE (results in "
             "DynamoDB) or KINDLING_RESULTS=valkey (results in Valkey, as the worker's), or pass "
             "reader=DynamoResultStore(table) / reader=ValkeyResultStore(url) to StreamProducer")


def default_reader(url: str, client):
    """Where the deployment's workers record outcomes, as ``kindling worker`` and ``kindling
    jobs`` read it: ``KINDLING_RESULTS=valkey`` the Valkey result store at ``url``, else the
    results table ``KINDLING_TABLE``; neither: a :class:`~kindling.producer.handles.NoReader` saying so."""
    from kindling.shared import config

    if config.get("KINDLING_RESULTS") == "valkey":
        from kindling.stores.valkey import ValkeyResultStore

        return ValkeyResultStore(url, client=client)
    table = config.table()
    if table:
        from kindling.stores.dynamo import DynamoResultStore

        return DynamoResultStore(table)
    return NoReader(NO_READER)


class StreamProducer:
    """Puts jobs on a Valkey stream.

    Args:
        url: ``redis://[user:password@]host:port/db`` or ``rediss://`` for TLS. Default: the
            deployment's, as the worker finds it: ``KINDLING_VALKEY_URL``, else the secret
            ``KINDLING_VALKEY_URL_SECRET`` names.
        stream: the stream's key.
        maxlen: refuse (raise :class:`StreamFull`) rather than exceed this many unfinished
            jobs on the stream; ``None`` for no limit. Nothing is ever trimmed.
        function_name: the Lambda worker to wake after adding jobs (name or ARN; default
            ``KINDLING_WORKER_FUNCTION``; neither: no kicks, for long-lived workers). Needs
            ``lambda:InvokeFunction`` on it (the template's ``ProducerPolicyArn``).
        invoker: called with the drain event instead of invoking ``function_name`` (tests,
            or another way to start a drain).
        max_drains: most drains woken at once, one per ``backlog_per_drain`` jobs on the stream.
        kick_ttl_ms: the flag's expiry, longer than the worker's function timeout (a drain
            that dies blocks new kicks until then).
        group: the drains' consumer group.
        signing: sign every job (:mod:`kindling.core.jobsig`), for workers with signing on: the
            signing secret's ARN (default ``KINDLING_SIGNING_SECRET``; read at the first
            enqueue with kindling's own AWS client, or pass a :class:`kindling.shared.signed.Keyring`
            built with another ``fetch``). Empty: unsigned. A signature is bound to ``stream``.
        socket_timeout: seconds one socket wait may take (default 10; the URL's
            ``?socket_timeout=`` wins): a silent server raises a timeout, never blocks for ever.
            Past it the jobs' outcome is unknown (:class:`~kindling.core.errors.EnqueueUncertain`).
        reader: where handles read outcomes (and revoke): a
            :class:`~kindling.valkey.ValkeyResultStore` or a
            :class:`~kindling.stores.dynamo.DynamoResultStore`, or anything with ``record(job_id)``.
            Default: the deployment's (:func:`default_reader`, from ``KINDLING_RESULTS`` and
            ``KINDLING_TABLE``).
    """

    def __init__(self, url: str | None = None, stream: str = DEFAULT_STREAM, maxlen: int | None = None, *, client=None,
                 function_name: str | None = None, invoker=None, max_drains: int = 1,
                 backlog_per_drain: int = BACKLOG_PER_DRAIN, kick_ttl_ms: int = KICK_TTL_MS,
                 group: str = DEFAULT_GROUP, signing=None, socket_timeout: float | None = DEFAULT_SOCKET_TIMEOUT,
                 reader=None):
        import os

        codec.use_orjson()
        if not url:
            from kindling.core.errors import KindlingError
            from kindling.shared.valkey.connection import configured_url

            url = configured_url()
            if not url:
                raise KindlingError("no Valkey URL: pass StreamProducer(url) or set KINDLING_VALKEY_URL "
                                    "(or KINDLING_VALKEY_URL_SECRET)")
        self.url = url
        self.stream = stream
        self.maxlen = maxlen
        self.client = client or connect(url, socket_timeout=socket_timeout)
        self.reader = reader if reader is not None else default_reader(url, self.client)
        if signing is None:
            from kindling.shared import config

            signing = config.signing_secret()
        if isinstance(signing, str) and signing:
            from kindling.shared.signed import Keyring

            signing = Keyring(signing)
        self.keyring = signing or None
        function_name = function_name or os.environ.get("KINDLING_WORKER_FUNCTION") or None
        if invoker is None and function_name:
            invoker = LambdaInvoker(function_name)
        self.kicker: Kicker | None = None
        if invoker is not None:
            import logging

            self.kicker = Kicker(self.client, stream, invoker, group=group, max_drains=max_drains,
                                 backlog_per_drain=backlog_per_drain, ttl_ms=kick_ttl_ms,
                                 log=logging.getLogger("kindling.valkey").warning)

    # A Task's handle gives what the task returns (an async task's: what its coroutine
    # returns), and its arguments are checked against the function's; a name's gives Any.
    if TYPE_CHECKING:  # overloads for checkers; typing is never loaded at run time
        @overload
        def enqueue(self, task: Task[P, Coroutine[Any, Any, T]], /, *args: P.args, **kwargs: P.kwargs) -> Sent[T]: ...
        @overload
        def enqueue(self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Sent[R]: ...
        @overload
        def enqueue(self, task: str, /, *args: Any, **kwargs: Any) -> Sent[Any]: ...

    def enqueue(self, task, /, *args, **kwargs) -> Sent[Any]:
        """Put one job running ``task(*args, **kwargs)`` on the stream."""
        from kindling.core.envelope import Call

        return self.enqueue_many([Call(task, args, kwargs)])[0]

    def send(self, call) -> Sent:
        """Put one :class:`kindling.producer.client.Call` (with its options) on the stream; its handle."""
        return self.enqueue_many([call])[0]

    def enqueue_many(self, calls: Iterable) -> list[Sent]:
        """Put many jobs on the stream: one pipelined (non-transactional) round trip per
        ``CHUNK`` jobs. ``calls`` holds :class:`kindling.producer.client.Call` objects or
        ``(task, args, kwargs)`` tuples; a ``Call.delay`` becomes the job's ``not_before``."""
        return self._put([self._prepare(c) for c in calls])

    def send_each(self, calls: list) -> list:
        """Put ``calls`` on the stream in one pipeline (at most ``CHUNK``: the async producer's
        batch) and return one outcome per call, in order: its :class:`Sent`, or the exception
        for that call alone (a bad call; an XADD the server refused, as
        :class:`~kindling.core.errors.EnqueueError`; a lost reply, as
        :class:`~kindling.core.errors.EnqueueUncertain`). Nothing is raised for one call's failure."""
        outcomes: list = [None] * len(calls)
        prepared, where = [], []
        for i, c in enumerate(calls):
            try:
                prepared.append(self._prepare(c))
            except Exception as exc:  # noqa: BLE001 - this call's own error, for its own awaiter
                outcomes[i] = exc
                continue
            where.append(i)
        if not prepared:
            return outcomes
        try:
            sent, failed, unknown, error = self._put(prepared), {}, {}, None
        except EnqueueError as exc:
            sent, failed, unknown, error = exc.sent, exc.failed, getattr(exc, "unknown", {}), exc
        by_id = {s.id: s for s in sent}
        for i, (job, _) in zip(where, prepared, strict=True):
            if job.id in by_id:
                outcomes[i] = by_id[job.id]
            elif job.id in unknown:
                outcomes[i] = EnqueueUncertain(f"job {job.id} may have been added to {self.stream!r}: "
                                               f"{unknown[job.id]}", unknown={job.id: unknown[job.id]})
            else:
                reason = failed.get(job.id, str(error))
                outcomes[i] = (StreamFull if isinstance(error, StreamFull) else EnqueueError)(
                    f"job {job.id} was not sent: {reason}", failed={job.id: reason})
        return outcomes

    if TYPE_CHECKING:
        @overload
        async def aenqueue(self, task: Task[P, Coroutine[Any, Any, T]], /, *args: P.args,
                           **kwargs: P.kwargs) -> Sent[T]: ...
        @overload
        async def aenqueue(self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Sent[R]: ...
        @overload
        async def aenqueue(self, task: str, /, *args: Any, **kwargs: Any) -> Sent[Any]: ...

    async def aenqueue(self, task, /, *args, **kwargs) -> Sent[Any]:
        """``await`` form of :meth:`enqueue`: concurrent awaits share one pipeline of XADDs
        per round trip (:mod:`kindling.producer.coalesce`); returns once this job's XADD was answered."""
        from kindling.core.envelope import Call

        return await self.asend(Call(task, args, kwargs))

    async def asend(self, call) -> Sent:
        """``await`` form of :meth:`send` (see :meth:`aenqueue`)."""
        coalescer = self.__dict__.get("_coalescer")
        if coalescer is None:
            from kindling.producer.coalesce import Coalescer

            # One pipeline in flight: what arrives meanwhile is the next one, so each round
            # trip carries everything that waited for it.
            coalescer = self._coalescer = Coalescer(self.send_each, max_batch=CHUNK, max_flights=1)
        return await coalescer.submit(call)

    def _prepare(self, c) -> tuple:
        """A call (or ``(task, args, kwargs)``) checked and encoded: ``(job, body)``."""
        from kindling.core.envelope import Call
        from kindling.core.registry import Task

        call = c if isinstance(c, Call) else Call(*c)
        name = call.task.name if isinstance(call.task, Task) else call.task
        if isinstance(call.task, Task):
            call.task.check_call(call.args, call.kwargs)  # TypeError here, not "rejected" later
        routed = call.queue or (call.task.queue if isinstance(call.task, Task) else None)
        if routed and routed != "default":
            from kindling.core.errors import UnknownQueue

            raise UnknownQueue(f"job for {name!r} is routed to queue {routed!r}: named queues are SQS queues, "
                               "and a stream producer has only its stream (send it with a kindling.Client)")
        job = new_job(name, call.args, call.kwargs, job_id=call.job_id, max_attempts=call.max_attempts,
                      timeout=call.timeout, not_before=now_ms() + int(call.delay * 1000) if call.delay else None,
                      chain=call.chain, parent=call.parent)
        return job, encode_job(job)

    def _put(self, prepared: list) -> list[Sent]:
        """Put prepared ``(job, body)`` pairs on the stream, ``CHUNK`` per round trip."""
        if self.keyring is not None:
            from kindling.core.jobsig import stream_destination

            destination = stream_destination(self.stream)
            prepared = [(job, body, self.keyring.sign(destination, body)) for job, body in prepared]
        sent: list[Sent] = []
        # The caller's X-Ray trace travels as a field of each entry, as SQS's AWSTraceHeader
        # does (a delayed job's entry made when it is due goes without it).
        import os

        header = os.environ.get("_X_AMZN_TRACE_ID")
        for start in range(0, len(prepared), CHUNK):
            chunk = prepared[start : start + CHUNK]
            if self.maxlen is not None:
                self._check_room(len(chunk), sent, prepared[start:])
            pipe = self.client.pipeline(transaction=False)
            for _job, body, *signed in chunk:
                signature = signed[0] if signed else None
                fields = {FIELD: body}  # a delayed one too: see the module's docstring
                if signature is not None:
                    fields[SIG_FIELD] = signature
                if header:
                    fields[TRACE_FIELD] = header
                pipe.xadd(self.stream, fields)
            if self.kicker is not None:
                self.kicker.queue(pipe)  # after the XADDs: see kindling.shared.valkey.kick
            try:
                replies = pipe.execute(raise_on_error=False)
            except Exception as exc:  # noqa: BLE001 - report what was sent, what was not, what may have been
                self._lost(exc, chunk, sent, prepared, start)
            refused = {}
            for (job, *_), reply in zip(chunk, replies, strict=False):
                if isinstance(reply, Exception):
                    refused[job.id] = f"{type(reply).__name__}: {reply}"
                else:
                    sent.append(Sent(job.id, job.task, text(reply), self.reader))
            if self.kicker is not None:
                took, backlog = replies[len(chunk):]
                # A flag taken is kicked even if every XADD was refused: only its drain frees it.
                self.kicker.after(took is True, backlog if isinstance(backlog, int) else 0)
            if refused:
                failed = dict(refused, **{job.id: "not sent: an earlier chunk was refused"
                                          for job, *_ in prepared[start + len(chunk):]})
                raise EnqueueError(f"{len(failed)} of {len(prepared)} jobs were not sent", failed=failed, sent=sent)
        return sent

    def _lost(self, exc: Exception, chunk: list, sent: list[Sent], prepared: list, start: int) -> NoReturn:
        """Raise for a chunk whose pipeline raised: :class:`EnqueueError` if nothing of it ran,
        :class:`EnqueueUncertain` if it may have (the reply was lost after it was sent). Then
        this producer may hold the kick flag too, so the drain is invoked anyway: a flag no
        drain will free would block every producer's kick until it expires
        (:mod:`kindling.shared.valkey.kick`, "A lost reply")."""
        from kindling.drivers.valkey.errors import outcome_unknown

        reason = f"{type(exc).__name__}: {exc}"
        later = {job.id: "not sent: an earlier chunk's outcome is unknown" for job, *_ in prepared[start + len(chunk):]}
        if not outcome_unknown(exc):
            failed = {job.id: reason for job, *_ in prepared[start:]}
            raise EnqueueError(f"{len(failed)} of {len(prepared)} jobs were not sent", failed=failed,
                               sent=sent) from exc
        if self.kicker is not None:
            self.kicker.after_lost_reply()
        unknown = {job.id: reason for job, *_ in chunk}
        shown = ", ".join(list(unknown)[:20]) + (", ..." if len(unknown) > 20 else "")
        raise EnqueueUncertain(
            f"{len(unknown)} of {len(prepared)} jobs may have been added to {self.stream!r} (the reply was lost: "
            f"{reason[:200]}): {shown}" + (f"; {len(later)} more were not sent" if later else ""),
            unknown=unknown, failed=later, sent=sent) from exc

    def _check_room(self, n: int, sent: list[Sent], rest: list) -> None:
        length = self.client.xlen(self.stream)
        if length + n > self.maxlen:  # type: ignore[operator]
            failed = {job.id: "stream full" for job, *_ in rest}
            raise StreamFull(
                f"stream {self.stream!r} holds {length} unfinished jobs; adding {n} would exceed "
                f"maxlen={self.maxlen} (unread jobs are never trimmed; {len(rest)} jobs not sent)",
                failed=failed, sent=sent,
            )
