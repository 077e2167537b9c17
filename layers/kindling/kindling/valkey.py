"""The Valkey trigger: a stream with a consumer group instead of an SQS queue.

Imported only when the Valkey trigger is used (``kindling worker --valkey URL``, a Lambda
``{"kindling": "drain"}`` event, or a producer); the ``valkey`` client package is imported
here and nowhere on the SQS path.

Producer::

    from kindling.valkey import StreamProducer
    p = StreamProducer("redis://127.0.0.1:6390/0")
    p.enqueue("resize", "a.png", width=64)
    p.enqueue_many([("noop", [], {})] * 10_000)      # pipelined, 500 XADDs per round trip

Every entry has one field, ``job``: the envelope JSON (:mod:`kindling.envelope`).

Consumer (:class:`StreamWorker`), per round:

1. ``XAUTOCLAIM`` entries idle for more than ``visibility_ms`` (whatever consumer holds
   them, a dead one included); their delivery counts come from ``XPENDING`` (XAUTOCLAIM has
   already counted this delivery);
2. otherwise ``XREADGROUP ... BLOCK block_ms >`` (a blocking read, never a sleep-poll);
3. :meth:`kindling.runner.Runner.run` on the batch;
4. one pipelined round trip: ``XACK`` + ``XDEL`` of settled entries (succeeded, rejected,
   skipped); for ``dead`` ones an ``XADD`` of the body and error to ``<stream>:dead`` first.
   ``failed`` and ``deferred`` entries stay pending and are reclaimed after ``visibility_ms``.

An entry delivered more than its allowed attempts (its worker crashed every time) is not run
again: it is recorded ``dead`` ("delivered too many times") and moved to the dead stream,
unless the store already has a final outcome for it.

Acknowledged entries are deleted, so ``XLEN`` is the number of jobs not finished yet (unread
plus pending). With ``maxlen`` the producer refuses to add jobs past that many unfinished
jobs (:class:`StreamFull`); it never trims: ``XADD MAXLEN`` would drop unread jobs silently.
The check is a soft cap (concurrent producers can overshoot it by one chunk each), never a
loss.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import sys
import time

from kindling import codec
from kindling.envelope import decode_job, encode_job, new_job, now_ms
from kindling.errors import EnqueueError, InvalidJob, KindlingError
from kindling.runner import DEAD, DEFERRED, FAILED, SETTLED, Delivery, Runner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

DEFAULT_STREAM = "kindling:jobs"
DEFAULT_GROUP = "kindling"
FIELD = b"job"
CHUNK = 500


class StreamFull(EnqueueError):
    """Adding the jobs would put more than ``maxlen`` unfinished jobs on the stream."""


def connect(url: str, **options):
    """A ``valkey.Valkey`` client for ``url`` (redis://, rediss:// with TLS, user:password@)."""
    import valkey

    options.setdefault("socket_connect_timeout", 5)
    options.setdefault("health_check_interval", 30)
    return valkey.Valkey.from_url(url, **options)


def default_consumer() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


# -- producer --------------------------------------------------------------------------------


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


# -- consumer --------------------------------------------------------------------------------


class StreamWorker:
    """A consumer-group worker feeding :class:`kindling.runner.Runner`.

    Args:
        url: the Valkey URL.
        table: the DynamoDB results table (ignored when ``store`` is given).
        registry: the tasks (default: everything registered with ``@task``).
        store: a result store (default: ``DynamoResultStore(table, concurrency=4)``).
        stream, group, consumer: the stream key, consumer group and this consumer's name.
        batch: entries read per round.
        block_ms: how long one ``XREADGROUP`` blocks waiting for entries.
        visibility_ms: how long an entry may stay pending before another consumer reclaims it.
        max_attempts: deliveries before a failing job is dead (a job or task may say less or more).
        **runner_options: passed to the runner (``concurrency``, ``default_timeout``, ...).
    """

    def __init__(self, url: str, table: str | None = None, registry=None, *, store=None,
                 stream: str = DEFAULT_STREAM, group: str = DEFAULT_GROUP, consumer: str | None = None,
                 batch: int = 100, block_ms: int = 1000, visibility_ms: int = 30_000, max_attempts: int = 3,
                 client=None, log=True, **runner_options):
        codec.use_orjson()
        if store is None:
            if not table:
                raise KindlingError("StreamWorker needs a results table (or a store)")
            from kindling.results import DynamoResultStore

            # A batch of hundreds is a few dozen DynamoDB calls: keep several in flight.
            store = DynamoResultStore(table, concurrency=4)
        if registry is None:
            from kindling.registry import default_registry

            registry = default_registry
        self.url = url
        self.stream = stream
        self.dead_stream = f"{stream}:dead"
        self.group = group
        self.consumer = consumer or default_consumer()
        self.batch = batch
        self.block_ms = block_ms
        self.visibility_ms = visibility_ms
        self.max_attempts = max_attempts
        self.client = client or connect(url, socket_timeout=max(10.0, block_ms / 1000 + 10))
        options = {"max_attempts": max_attempts, "worker": {"function": "kindling-valkey", "consumer": self.consumer}}
        if not log:
            options["log"] = None
        options.update(runner_options)
        self.runner = Runner(registry, store, **options)
        self.counts: dict[str, int] = {}
        self._stopping = False
        self._group_ready = False

    # -- group -------------------------------------------------------------------------

    def ensure_group(self) -> None:
        """Create the group (and the stream) if missing; a restarted server without
        persistence has lost both."""
        from valkey.exceptions import ResponseError

        try:
            self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    # -- one round -----------------------------------------------------------------------

    def fetch(self, block_ms: int | None) -> list[Delivery]:
        """Reclaimed entries first (idle past the visibility timeout), else new ones."""
        from valkey.exceptions import ResponseError

        if not self._group_ready:
            self.ensure_group()
        try:
            deliveries = self._reclaim()
            if not deliveries:
                deliveries = self._read(block_ms)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self.ensure_group()  # the server lost the group (restart without persistence)
            return []
        return deliveries

    def _reclaim(self) -> list[Delivery]:
        reply = self.client.xautoclaim(self.stream, self.group, self.consumer, self.visibility_ms,
                                       start_id="0-0", count=self.batch)
        entries = reply[1] if len(reply) > 1 else []
        entries = [(i, f) for i, f in entries if f is not None]  # deleted meanwhile
        if not entries:
            return []
        pipe = self.client.pipeline(transaction=False)
        for entry_id, _ in entries:
            pipe.xpending_range(self.stream, self.group, min=entry_id, max=entry_id, count=1)
        counts = pipe.execute()
        deliveries = []
        for (entry_id, fields), info in zip(entries, counts, strict=True):
            attempts = int(info[0]["times_delivered"]) if info else 2
            deliveries.append(self._delivery(entry_id, fields, attempts))
        return deliveries

    def _read(self, block_ms: int | None) -> list[Delivery]:
        reply = self.client.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=self.batch,
                                       block=block_ms)
        if not reply:
            return []
        if isinstance(reply, dict):  # RESP3
            entries = next(iter(reply.values()))
            entries = entries[0] if entries and isinstance(entries[0], list) else entries
        else:
            entries = reply[0][1]
        return [self._delivery(i, f, 1) for i, f in entries]

    @staticmethod
    def _delivery(entry_id, fields, attempts: int) -> Delivery:
        fields = fields or {}
        body = fields.get(FIELD)
        if body is None:
            body = fields.get("job")
        if body is None:  # not a kindling entry: the runner rejects the empty body
            body = b""
        return Delivery(_s(entry_id), body, attempts)

    def process(self, deliveries: list[Delivery], remaining_ms: Callable[[], int] | None = None):
        """Run one batch and settle it in one pipelined round trip; return the outcomes."""
        exhausted, runnable = self._split_exhausted(deliveries)
        outcomes = exhausted + (self.runner.run(runnable, remaining_ms) if runnable else [])
        bodies = {d.ref: d.body for d in deliveries}
        pipe = self.client.pipeline(transaction=False)
        done = []
        for o in outcomes:
            if o.status == DEAD:
                body = bodies[o.ref]
                pipe.xadd(self.dead_stream, {
                    FIELD: body, b"error": o.reason or "", b"entry": o.ref, b"job_id": o.job_id or "",
                    b"attempts": str(o.attempts), b"dead_at": str(now_ms()),
                })
                done.append(o.ref)
            elif o.status in SETTLED:
                done.append(o.ref)
        if done:
            pipe.xack(self.stream, self.group, *done)
            pipe.xdel(self.stream, *done)
            pipe.execute()
        for o in outcomes:
            self.counts[o.status] = self.counts.get(o.status, 0) + 1
        return outcomes

    def _allowed(self, job) -> int:
        try:
            task = self.runner.registry.get(job.task)
        except InvalidJob:
            return job.max_attempts or self.max_attempts
        return job.max_attempts or task.max_attempts or self.max_attempts

    def _split_exhausted(self, deliveries: list[Delivery]):
        """Entries delivered more often than allowed (their workers died running them) are
        recorded dead without running them once more."""
        from kindling.runner import Outcome

        over = []
        for d in deliveries:
            if d.attempts <= self.max_attempts:
                continue
            try:
                job = decode_job(d.body)
            except InvalidJob:
                continue  # the runner rejects it
            if d.attempts > self._allowed(job):
                over.append((d, job))
        if not over:
            return [], list(deliveries)
        refs = {d.ref for d, _ in over}
        statuses = self.runner.store.get_statuses([job.id for _, job in over])
        outcomes, records = [], []
        at = now_ms()
        for d, job in over:
            previous = statuses.get(job.id)
            if previous in ("succeeded", "rejected", "dead"):
                o = Outcome(d.ref, job.id, job.task, "skipped" if previous != "dead" else DEAD, d.attempts)
                o.reason = f"already {previous}"
                outcomes.append(o)
                continue
            o = Outcome(d.ref, job.id, job.task, DEAD, d.attempts)
            o.reason = f"delivered {d.attempts} times without finishing (its workers died)"
            o.record = {
                "id": job.id, "task": job.task, "status": DEAD, "attempts": d.attempts,
                "error": {"type": "TooManyDeliveries", "message": o.reason, "traceback": ""},
                "enqueued_at": job.enqueued_at, "started_at": at, "finished_at": at, "duration_ms": 0,
                "worker": self.runner.worker, "expires_at": at // 1000 + self.runner.ttl_s,
            }
            records.append(o.record)
            outcomes.append(o)
        if records:
            self.runner.store.write(records)
        return outcomes, [d for d in deliveries if d.ref not in refs]

    def idle(self) -> bool:
        """Nothing left: no entry in the stream (acked ones are deleted) and none pending."""
        pipe = self.client.pipeline(transaction=False)
        pipe.xlen(self.stream)
        pipe.xpending(self.stream, self.group)
        length, pending = pipe.execute()
        count = pending.get("pending", 0) if isinstance(pending, dict) else pending[0]
        return length == 0 and not count

    # -- the loop ------------------------------------------------------------------------

    def stop(self, *_args) -> None:
        self._stopping = True

    def run(self, *, burst: bool = False) -> dict[str, int]:
        """Work until SIGTERM/SIGINT (the batch in hand is finished and acknowledged first),
        or with ``burst`` until the stream and its pending list are empty. Reconnects with
        backoff when Valkey goes away."""
        import threading

        from valkey.exceptions import ConnectionError, TimeoutError

        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = [signal.signal(s, self.stop) for s in (signal.SIGTERM, signal.SIGINT)]
        delay = 0.05
        try:
            while not self._stopping:
                try:
                    deliveries = self.fetch(self.block_ms)
                    if deliveries:
                        self.process(deliveries)
                    elif burst and self.idle():
                        break
                    delay = 0.05
                except (ConnectionError, TimeoutError, OSError) as exc:
                    self._group_ready = False
                    if self.runner.log:
                        self.runner.log({"kindling": "valkey_unavailable", "error": str(exc)[:300],
                                         "retry_in_s": round(delay, 2)})
                    time.sleep(delay * random.uniform(0.5, 1.0))
                    delay = min(delay * 2, 5.0)
        finally:
            if previous:
                for s, handler in zip((signal.SIGTERM, signal.SIGINT), previous, strict=True):
                    signal.signal(s, handler)
        return self.counts


# -- results in Valkey (optional) ---------------------------------------------------------------


class ValkeyResultStore:
    """Outcomes in Valkey instead of DynamoDB, with waiters that block instead of polling.

    A record is JSON under ``<prefix>:result:<id>`` with an expiry of ``ttl_s``. Writing a
    final outcome (succeeded, dead, rejected) also pushes to ``<prefix>:done:<id>``, which
    :meth:`wait` blocks on with ``BLPOP``. ``get_statuses`` and ``write`` are one pipelined
    round trip each. Valkey errors become :class:`~kindling.errors.StoreUnavailable`, so the
    runner hands a batch back rather than losing it.
    """

    def __init__(self, url: str, ttl_s: int = 7 * 86_400, *, prefix: str = "kindling", client=None):
        self.url = url
        self.ttl_s = ttl_s
        self.prefix = prefix
        self.client = client or connect(url, socket_timeout=10)

    def _key(self, job_id: str) -> str:
        return f"{self.prefix}:result:{job_id}"

    def _done(self, job_id: str) -> str:
        return f"{self.prefix}:done:{job_id}"

    def get_statuses(self, job_ids):
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        values = self._guard(lambda: self.client.mget([self._key(i) for i in ids]))
        return {i: codec.loads(v)["status"] for i, v in zip(ids, values, strict=True) if v is not None}

    def write(self, records) -> None:
        from kindling.results import FINAL

        pipe = self.client.pipeline(transaction=False)
        for r in records:
            pipe.set(self._key(r["id"]), codec.dumps(r), ex=self.ttl_s)
            if r.get("status") in FINAL:
                pipe.rpush(self._done(r["id"]), 1)
                pipe.expire(self._done(r["id"]), self.ttl_s)
        if records:
            self._guard(pipe.execute)

    def get(self, job_id: str) -> dict | None:
        value = self._guard(lambda: self.client.get(self._key(job_id)))
        return codec.loads(value) if value is not None else None

    def wait(self, job_id: str, timeout: float = 30.0) -> dict | None:
        """The job's final record, blocking (``BLPOP``) up to ``timeout`` seconds for it;
        ``None`` if none arrived in time (a ``failed`` record is waited through)."""
        from kindling.results import FINAL

        deadline = time.monotonic() + timeout
        while True:
            record = self.get(job_id)
            if record is not None and record.get("status") in FINAL:
                return record
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            done = self._done(job_id)
            block_s = max(0.01, min(left, 5.0))
            popped = self._guard(lambda key=done, t=block_s: self.client.blpop([key], timeout=t))
            if popped:  # put the token back for any other waiter on the same job
                pipe = self.client.pipeline(transaction=False)
                pipe.rpush(done, 1)
                pipe.expire(done, self.ttl_s)
                self._guard(pipe.execute)

    @staticmethod
    def _guard(fn):
        from valkey.exceptions import ValkeyError

        from kindling.errors import StoreUnavailable

        try:
            return fn()
        except (ValkeyError, OSError) as exc:
            raise StoreUnavailable(f"Valkey result store: {exc}") from exc


# -- Lambda drain ----------------------------------------------------------------------------


def drain(runner: Runner, event: dict, remaining_ms: Callable[[], int] | None) -> dict:
    """Handle ``{"kindling": "drain", "url": ..., "stream": ..., "batch": ...}`` in Lambda.

    Reads batches (reclaimed entries first, then new ones with a 100 ms block) and runs
    them with the invocation's runner until the stream has nothing for this consumer or
    less than twice the runner's safety margin (plus its start cutoff, below which the
    runner would defer every job it read) is left. Unfinished entries stay pending.
    """
    url = event.get("url") or os.environ.get("KINDLING_VALKEY_URL")
    if not url:
        raise KindlingError("drain: no Valkey URL (event 'url' or KINDLING_VALKEY_URL)")
    worker = _drain_worker(runner, url, event)
    stop_below = 2 * runner.safety_ms + runner.cutoff_ms
    started = time.monotonic()
    processed = batches = 0
    counts: dict[str, int] = {}
    left = 0
    while True:
        if remaining_ms is not None and remaining_ms() < stop_below:
            break
        deliveries = worker.fetch(int(event.get("block_ms", 100)))
        if not deliveries:
            break
        outcomes = worker.process(deliveries, remaining_ms)
        batches += 1
        for o in outcomes:
            counts[o.status] = counts.get(o.status, 0) + 1
            if o.status in (FAILED, DEFERRED):
                left += 1
            else:
                processed += 1
    return {"kindling": "drained", "stream": worker.stream, "consumer": worker.consumer, "batches": batches,
            "processed": processed, "left_pending": left, "counts": counts,
            "elapsed_ms": round((time.monotonic() - started) * 1000, 1)}


_drain_workers: dict[tuple, StreamWorker] = {}


def _drain_worker(runner: Runner, url: str, event: dict) -> StreamWorker:
    """One worker (and connection) per URL/stream/group, reused across warm invocations."""
    stream = event.get("stream") or DEFAULT_STREAM
    group = event.get("group") or DEFAULT_GROUP
    key = (url, stream, group, id(runner))
    worker = _drain_workers.get(key)
    if worker is None:
        worker = StreamWorker.__new__(StreamWorker)
        worker.url, worker.stream, worker.dead_stream, worker.group = url, stream, f"{stream}:dead", group
        worker.consumer = event.get("consumer") or os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or default_consumer()
        worker.block_ms = 100
        worker.visibility_ms = int(event.get("visibility_ms", 30_000))
        worker.max_attempts = runner.max_attempts
        worker.client = connect(url, socket_timeout=10)
        worker.runner = runner
        worker.counts = {}
        worker._stopping = False
        worker._group_ready = False
        _drain_workers[key] = worker
    worker.batch = int(event.get("batch", 100))
    return worker


# -- the CLI -----------------------------------------------------------------------------------


def run_worker(ns) -> int:
    """``kindling worker --valkey URL [--stream S] [--processes N] [--burst]``.

    Tuning from the environment: ``KINDLING_VALKEY_BATCH`` (100), ``KINDLING_VALKEY_BLOCK_MS``
    (1000), ``KINDLING_VALKEY_VISIBILITY_MS`` (30000), ``KINDLING_MAX_ATTEMPTS`` (3),
    ``KINDLING_VALKEY_GROUP`` (kindling), ``KINDLING_LOG=0`` (no per-batch log lines),
    ``KINDLING_RESULTS=valkey`` (results in Valkey via :class:`ValkeyResultStore`, TTL
    ``KINDLING_RESULT_TTL_S``; default: DynamoDB ``--table``). With ``--processes N`` this process runs one
    worker and starts N-1 more (the same command line), forwarding SIGTERM/SIGINT to them.
    """
    import subprocess

    env = os.environ.get
    children = []
    if getattr(ns, "processes", 1) > 1:
        argv = [sys.executable, "-m", "kindling.cli", *sys.argv[1:], "--processes", "1"]
        children = [subprocess.Popen(argv) for _ in range(ns.processes - 1)]
    store = None
    if env("KINDLING_RESULTS") == "valkey":  # results in Valkey instead of DynamoDB
        store = ValkeyResultStore(ns.valkey, int(env("KINDLING_RESULT_TTL_S", str(7 * 86_400))))
    elif not ns.table:
        raise SystemExit("kindling: --table / KINDLING_TABLE is required (or KINDLING_RESULTS=valkey)")
    worker = StreamWorker(
        ns.valkey, ns.table, store=store, stream=ns.stream, group=env("KINDLING_VALKEY_GROUP", DEFAULT_GROUP),
        batch=int(env("KINDLING_VALKEY_BATCH", "100")), block_ms=int(env("KINDLING_VALKEY_BLOCK_MS", "1000")),
        visibility_ms=int(env("KINDLING_VALKEY_VISIBILITY_MS", "30000")),
        max_attempts=int(env("KINDLING_MAX_ATTEMPTS", "3")), concurrency=ns.concurrency, threads=ns.concurrency,
        log=env("KINDLING_LOG", "1") != "0",
    )

    stop_worker = worker.stop

    def stop(*_args):
        stop_worker()
        for c in children:
            if c.poll() is None:
                c.send_signal(signal.SIGTERM)

    worker.stop = stop  # type: ignore[method-assign]
    counts = worker.run(burst=ns.burst)
    rc = 0
    for c in children:
        rc = c.wait() or rc
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no jobs", flush=True)
    return rc


def _s(value) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
