"""The producer side: send jobs to SQS and read their outcomes from DynamoDB (boto3).

Example::

    from kindling import Client

    client = Client(queue_url="https://sqs.../jobs", table="kindling-results")
    job = client.enqueue("resize", "a.png", width=64)
    print(job.result(timeout=30))              # waits; raises JobFailed if the job died

    handles = client.enqueue_many([("resize", ["a.png"], {}), ("resize", ["b.png"], {})])

``queue_url`` and ``table`` default to ``KINDLING_QUEUE_URL`` and ``KINDLING_TABLE``, and the
named queues (``queues={"reports": url}``) to ``KINDLING_QUEUES`` (:mod:`kindling.core.routing`);
boto3 finds credentials, region and endpoint (``AWS_ENDPOINT_URL`` for LocalStack) as usual.

Large jobs: a job whose envelope is over its queue's ``MaximumMessageSize`` (read once per
queue and client, at the first send to it) has its arguments put in the payload bucket
(``payload_bucket``, default ``KINDLING_PAYLOAD_BUCKET``) and the message carries a pointer
to them (:mod:`kindling.shared.payloads`); without a bucket it is refused with
:class:`PayloadTooLarge`. A result kept in S3 by the worker is read back by
:meth:`Client.result` the same way.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, ParamSpec, TypeVar, overload

from kindling.core import codec
from kindling.core.envelope import (  # Call: defined beside Job, imported from here too
    Call,
    Job,
    encode_job,
    new_job,
    now_ms,
)
from kindling.core.errors import EnqueueError, JobFailed, PayloadTooLarge, masked_url  # noqa: F401 - raised through payloads.fit
from kindling.core.registry import Task
from kindling.core.routing import queue_name, resolve
from kindling.producer.handles import JobHandle, wait_result
from kindling.shared import config
from kindling.shared.payloads import SIGNATURE_BYTES
from kindling.stores.dynamo import from_item

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

SQS_MAX_DELAY = 900
"""The longest SQS holds a message back itself (DelaySeconds)."""
SQS_MAX_RETENTION = 1_209_600
"""The longest a message can wait on SQS (14 days, the template's MessageRetentionPeriod): a
longer delay rides in the envelope's ``not_before`` (see :meth:`Client._prepare`)."""
_FIRST_USE = threading.Lock()


class Client:
    """Sends jobs and reads results.

    Args:
        queue_url: the jobs queue (default ``KINDLING_QUEUE_URL``).
        table: the results table (default ``KINDLING_TABLE``).
        queues: the named queues' URLs by name (default: ``KINDLING_QUEUES``, read once).
        session: a ``boto3.Session`` to build clients from (default: a new one).
        max_send_attempts: tries for messages SQS refuses with a server-side error.
        payload_bucket: the S3 bucket for arguments too large for the queue (default
            ``KINDLING_PAYLOAD_BUCKET``; the stack's ``PayloadBucketName`` output).
        signing: sign every message (:mod:`kindling.core.jobsig`), for a worker with signing on:
            the signing secret's ARN (default ``KINDLING_SIGNING_SECRET``; read with this
            client's boto3 session at the first send, needs ``secretsmanager:GetSecretValue``
            on it) or a :class:`kindling.shared.signed.Keyring`. Empty: unsigned.
    """

    def __init__(self, queue_url: str | None = None, table: str | None = None, *, queues: dict[str, str] | None = None,
                 session=None, max_send_attempts: int = 5, payload_bucket: str | None = None, signing=None):
        self.queue_url = queue_url or os.environ.get("KINDLING_QUEUE_URL", "")
        self.table = table or config.table()
        self.queues = config.queues() if queues is None else dict(queues)
        self.max_send_attempts = max_send_attempts
        if payload_bucket is None:
            payload_bucket = os.environ.get("KINDLING_PAYLOAD_BUCKET", "")
        self.payload_bucket = payload_bucket
        self._max_bytes: dict[str, int] = {}
        self._s3 = None
        if session is None:
            import boto3

            session = boto3.Session()
        self._session = session
        if signing is None:
            signing = config.signing_secret()
        if isinstance(signing, str) and signing:
            from kindling.shared.signed import Keyring, boto3_fetch

            signing = Keyring(signing, fetch=boto3_fetch(session))
        self.keyring = signing or None
        self._sqs = None
        self._ddb = None
        codec.use_orjson()

    @property
    def sqs(self):
        if self._sqs is None:
            if not self.queue_url and not self.queues:
                raise ValueError("no queue: pass queue_url= or set KINDLING_QUEUE_URL")
            self._sqs = self._session.client("sqs")
        return self._sqs

    @property
    def dynamodb(self):
        if self._ddb is None:
            if not self.table:
                raise ValueError("no results table: pass table= or set KINDLING_TABLE")
            self._ddb = self._session.client("dynamodb")
        return self._ddb

    @property
    def max_message_bytes(self) -> int:
        """The default queue's MaximumMessageSize (see :meth:`max_message_bytes_of`)."""
        return self.max_message_bytes_of(self.queue_url)

    def max_message_bytes_of(self, url: str) -> int:
        """A queue's MaximumMessageSize, read once (GetQueueAttributes) at the first send to
        it: the most one message, and one SendMessageBatch in all, may hold.

        If the queue cannot be asked (no such queue, no permission, throttled), SQS's old
        256 KiB limit stands in for the client's life: larger arguments then go to S3 a
        little sooner than they must, and the send itself reports what is wrong, per job."""
        limit = self._max_bytes.get(url)
        if limit is None:
            from kindling.shared.sqs_send import queue_max_bytes

            limit = self._max_bytes[url] = queue_max_bytes(self.sqs, url)
        return limit

    @property
    def s3(self):
        """kindling's S3 client, signing with this client's boto3 session (made at the first payload)."""
        if self._s3 is None:
            from kindling.shared.payloads import session_client

            self._s3 = session_client(self._session)
        return self._s3

    # -- sending ---------------------------------------------------------------------

    # A Task's handle gives what the task returns (an async task's: what its coroutine
    # returns), and its arguments are checked against the function's; a name's gives Any.
    @overload
    def enqueue(self, task: Task[P, Coroutine[Any, Any, T]], /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[T]: ...
    @overload
    def enqueue(self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]: ...
    @overload
    def enqueue(self, task: str, /, *args: Any, **kwargs: Any) -> JobHandle[Any]: ...
    def enqueue(self, task: str | Task, /, *args: Any, **kwargs: Any) -> JobHandle[Any]:
        """Send one job running ``task(*args, **kwargs)``; see :meth:`send` for options."""
        return self.send(Call(task, args, kwargs))

    def send(self, call: Call) -> JobHandle:
        """Send one job with options (delay in seconds, up to 14 days: past 900 the job's
        ``not_before``; job id, attempts, timeout, FIFO group, named queue)."""
        job, body, options, url = self._prepare(call)
        self.sqs.send_message(QueueUrl=url, MessageBody=body, **options, **_trace_attribute())
        return JobHandle(job.id, job.task, self)

    def enqueue_many(self, calls: Iterable[Call | tuple], *, concurrency: int = 8) -> list[JobHandle]:
        """Send many jobs with SendMessageBatch: 10 per call, and at most the queue's
        MaximumMessageSize per call (arguments over it go to S3 one job at a time, first).

        ``calls`` holds :class:`Call` objects or ``(task, args, kwargs)`` tuples; jobs routed
        to different queues go in different batches. On a FIFO queue each message group
        reaches the queue in the order of ``calls``: its batches go one after the other, and
        only batches of different groups (or of a standard queue) go at once, up to
        ``concurrency`` (boto3 clients are thread-safe and keep 10 connections per host;
        :mod:`kindling.shared.sqs_send`). The handles come back in the order of ``calls``.
        Entries SQS refuses with a server-side error are retried with backoff; if any still
        fail (or SQS refuses them as invalid), :class:`EnqueueError` names them and carries
        the handles of the jobs that were sent; a FIFO group's jobs after one not sent are
        not sent either, so the group can be sent again from there in order. Nothing is
        dropped silently.

        Example::

            handles = client.enqueue_many(("resize", [key], {}) for key in keys)
        """
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        prepared = []
        for c in calls:
            call = c if isinstance(c, Call) else Call(*c)
            prepared.append(self._prepare(call))
        by_queue: dict[str, list] = {}
        for item in prepared:
            by_queue.setdefault(item[3], []).append(item)
        from kindling.shared import sqs_send

        accepted: dict[str, str] = {}
        failed: dict[str, str] = {}
        # Queue by queue, each FIFO group in call order (kindling.shared.sqs_send).
        for url, items in by_queue.items():
            ok, bad = sqs_send.send(self.sqs, url, [(job.id, body, options) for job, body, options, _ in items],
                                    max_bytes=self.max_message_bytes_of(url), max_attempts=self.max_send_attempts,
                                    concurrency=concurrency, sleep=lambda attempt: _sleep(attempt))
            accepted.update(ok)
            failed.update(bad)
        sent = [JobHandle(job.id, job.task, self) for job, _, _, _ in prepared if job.id in accepted]
        if failed:
            raise EnqueueError(f"{len(failed)} of {len(prepared)} jobs were not sent", failed=failed, sent=sent)
        return sent

    def send_each(self, calls: list[Call]) -> list:
        """Send ``calls`` in one SendMessageBatch per queue (at most 10 calls: the async
        producer's batch) and return one outcome per call, in order: its :class:`JobHandle`,
        or the exception for that call alone (a bad call, an entry SQS refused as
        :class:`EnqueueError`). Nothing is raised for one call's failure."""
        from kindling.shared import sqs_send

        with _FIRST_USE:  # batches in flight start at once; boto3 makes a client on one thread at a time
            sqs = self.sqs
        outcomes: list = [None] * len(calls)
        by_queue: dict[str, list] = {}
        for i, call in enumerate(calls):
            try:
                job, body, options, url = self._prepare(call)
            except Exception as exc:  # noqa: BLE001 - this call's own error, for its own awaiter
                outcomes[i] = exc
                continue
            by_queue.setdefault(url, []).append((i, job, body, options))
        for url, items in by_queue.items():
            accepted, failed = sqs_send.send(sqs, url, [(str(i), body, options) for i, _, body, options in items],
                                             max_bytes=self.max_message_bytes_of(url),
                                             max_attempts=self.max_send_attempts, concurrency=1,
                                             sleep=lambda attempt: _sleep(attempt))
            for i, job, _, _ in items:
                if str(i) in accepted:
                    outcomes[i] = JobHandle(job.id, job.task, self)
                else:
                    reason = failed.get(str(i), "not sent")
                    outcomes[i] = EnqueueError(f"job {job.id} was not sent: {reason}", failed={job.id: reason})
        return outcomes

    @overload
    async def aenqueue(self, task: Task[P, Coroutine[Any, Any, T]], /, *args: P.args,
                       **kwargs: P.kwargs) -> JobHandle[T]: ...
    @overload
    async def aenqueue(self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]: ...
    @overload
    async def aenqueue(self, task: str, /, *args: Any, **kwargs: Any) -> JobHandle[Any]: ...
    async def aenqueue(self, task: str | Task, /, *args: Any, **kwargs: Any) -> JobHandle[Any]:
        """``await`` form of :meth:`enqueue`: concurrent awaits share SendMessageBatch calls
        (:mod:`kindling.producer.coalesce`); returns once this job was accepted by SQS."""
        return await self.asend(Call(task, args, kwargs))

    async def asend(self, call: Call) -> JobHandle:
        """``await`` form of :meth:`send` (see :meth:`aenqueue`)."""
        coalescer = self.__dict__.get("_coalescer")
        if coalescer is None:
            from kindling.producer.coalesce import Coalescer
            from kindling.shared.sqs_send import MAX_BATCH

            # Eight batches in flight, as enqueue_many sends: boto3 keeps 10 connections per host.
            coalescer = self._coalescer = Coalescer(self.send_each, max_batch=MAX_BATCH, max_flights=8)
        return await coalescer.submit(call)

    def _prepare(self, call: Call) -> tuple[Job, str, dict, str]:
        """The job, its body, the message's own SQS parameters (delay, FIFO group) and the
        URL of the queue it is routed to."""
        name = call.task.name if isinstance(call.task, Task) else call.task
        if isinstance(call.task, Task):
            call.task.check_call(call.args, call.kwargs)  # TypeError here, not "rejected" later
        task_queue = call.task.queue if isinstance(call.task, Task) else None
        url = resolve(queue_name(call.queue, task_queue), self.queue_url, self.queues)
        if not 0 <= call.delay <= SQS_MAX_RETENTION:
            raise ValueError(f"delay must be 0-{SQS_MAX_RETENTION} seconds (14 days, SQS's longest retention) "
                             f"for SQS, got {call.delay}")
        fifo = url.endswith(".fifo")
        if fifo and call.delay:
            raise ValueError("a FIFO queue takes no per-message delay (set the queue's DelaySeconds instead)")
        if fifo and not call.group:
            raise ValueError(f"a FIFO queue needs group= on every job ({name!r} has none)")
        if call.group and not fifo:
            raise ValueError(f"group= needs a FIFO queue (a URL ending in .fifo), not {masked_url(url)!r}")
        # Past SQS's 15 minutes the delay is the job's not_before, and the message is sent at
        # once: the worker records the job scheduled (so its due time can be read from the
        # start) and hands it back until it is due (up to 12 h a hop, no attempt).
        not_before = now_ms() + int(call.delay * 1000) if call.delay > SQS_MAX_DELAY else None
        job = new_job(name, call.args, call.kwargs, job_id=call.job_id, max_attempts=call.max_attempts,
                      timeout=call.timeout, chain=call.chain, parent=call.parent, not_before=not_before)
        body = encode_job(job).decode()
        options: dict = {}
        size = len(body.encode())
        limit = self.max_message_bytes_of(url)
        # The signature attribute counts toward the queue's limit too.
        overhead = SIGNATURE_BYTES if self.keyring is not None else 0
        if size + overhead > limit:
            job, body = self._offload(call, job, name, size, limit - overhead)
        if self.keyring is not None:  # over the body as sent: the pointer, for an offloaded job
            from kindling.core import jobsig

            value = self.keyring.sign(jobsig.sqs_destination(url), body)
            options["MessageAttributes"] = {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": value}}
        if call.delay and not_before is None:
            options["DelaySeconds"] = int(call.delay)
        if call.group:
            options.update(_fifo_options(job, call.group))
        return job, body, options, url

    def _offload(self, call: Call, job: Job, name: str, size: int, limit: int) -> tuple[Job, str]:
        """The job with its arguments put in the payload bucket, and its envelope (a pointer):
        :func:`kindling.shared.payloads.fit`, the rule the worker's follow-ups go by too."""
        from kindling.shared import payloads

        job, body = payloads.fit(job, limit, self.payload_bucket, lambda: self.s3)
        return job, body.decode()

    # -- reading results -------------------------------------------------------------

    def record(self, job_id: str) -> dict | None:
        """The job's result record as stored (consistent read), or ``None`` if none yet."""
        response = self.dynamodb.get_item(TableName=self.table, Key={"id": {"S": job_id}}, ConsistentRead=True)
        item = response.get("Item")
        return from_item(item) if item else None

    def status(self, job_id: str) -> str | None:
        """``succeeded``, ``failed`` (will be retried), ``dead``, ``rejected``, ``revoked``,
        ``scheduled`` (not due yet), or ``None`` while no worker has recorded an outcome
        (queued or running)."""
        record = self.record(job_id)
        return record["status"] if record else None

    def revoke(self, job_id: str, *, task: str | None = None) -> None:
        """Record the job ``revoked`` (:func:`kindling.core.records.revoke`), so no worker starts it
        from now on: the duplicate check every batch already makes skips it (a job of a task
        with ``skip_succeeded=False`` is not read, so it is not stopped). Raises
        :class:`KindlingError` if the job has finished already (or is dead). A run already
        under way is not stopped: see :func:`kindling.core.records.revoked_record`."""
        from kindling.core.records import revoke
        from kindling.stores.dynamo import DynamoResultStore

        revoke(DynamoResultStore(self.table), job_id, task=task)

    def result(self, job_id: str, timeout: float = 30.0, *, model: Any = None) -> Any:
        """Wait for the job's final outcome and return its result.

        Polls with consistent reads and backoff (20 ms growing to 1 s:
        :func:`kindling.producer.handles.wait`). A ``failed`` job is waited through, since it will be
        retried. Raises :class:`JobFailed` for a ``dead``, ``rejected`` or ``revoked`` job,
        or for one still ``failed`` when ``timeout`` runs out (with that attempt's error),
        and ``TimeoutError`` if no outcome was recorded in time. With ``model`` (a pydantic
        model), the result is returned validated as one.
        """
        return wait_result(self, job_id, timeout, model=model)


def _fifo_options(job: Job, group: str) -> dict:
    """A FIFO queue's send parameters for ``job`` in message group ``group``."""
    # The send's own id: a retried SendMessageBatch entry is dropped as a copy, yet a job
    # sent again later (a revive) is not lost to the 5-minute deduplication window.
    return {"MessageGroupId": group, "MessageDeduplicationId": f"{job.id[:100]}.{job.enqueued_at}"}


def _trace_attribute() -> dict:
    from kindling.shared.sqs_send import trace_attribute

    return trace_attribute()


def _sleep(attempt: int) -> None:
    from kindling.shared.sqs_send import backoff_sleep

    backoff_sleep(attempt)
