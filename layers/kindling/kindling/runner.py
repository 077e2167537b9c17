"""The batch runner: deliveries in, one outcome per delivery out.

The runner is the same for every trigger (SQS through Lambda, the local SQS loop, the
Valkey stream consumer). A trigger turns its messages into :class:`Delivery` objects,
calls :meth:`Runner.run`, and maps the outcomes back to its own acknowledgement:

* ``succeeded``, ``rejected``, ``skipped`` (a duplicate of a job already succeeded) are
  settled: acknowledge / delete the message.
* ``failed`` (will be retried) and ``deferred`` (not started: the invocation's time ran
  short, ``not_before`` is in the future, or the result store is down) go back to the
  queue for redelivery.
* ``dead`` (failed on its last attempt) is settled as far as kindling is concerned; SQS
  hands it back so the redrive policy moves it to the DLQ, Valkey moves it to the dead
  stream.

Per batch the runner makes at most two round trips to the result store: one read of the
statuses of the batch's job ids (to skip duplicates of succeeded jobs) and one write of
every outcome.
"""

from __future__ import annotations

import sys
import time
from contextvars import ContextVar

from kindling import codec
from kindling.envelope import Job, decode_job, now_ms
from kindling.errors import InvalidJob, JobTimeout, ResultTooLarge, StoreUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from kindling.registry import Registry, Task
    from kindling.results import ResultStore

SUCCEEDED = "succeeded"
FAILED = "failed"
DEAD = "dead"
REJECTED = "rejected"
SKIPPED = "skipped"
DEFERRED = "deferred"
SETTLED = frozenset({SUCCEEDED, REJECTED, SKIPPED})
"""Statuses after which a message can be acknowledged (``dead`` is the trigger's call)."""

MAX_RESULT_BYTES = 350_000  # DynamoDB items hold 400 KB; the rest of the record needs room
MAX_RAW_BYTES = 300_000
DAY_S = 86_400

_current: ContextVar[JobContext] = ContextVar("kindling_job")


def _log(entry: dict) -> None:
    sys.stdout.write(codec.dumps(entry) + "\n")


class Delivery:
    """One message as a trigger received it.

    Attributes:
        ref: the trigger's handle for acknowledging it (SQS message id, stream entry id).
        body: the raw message body.
        attempts: how many times it has been delivered, this time included.
    """

    __slots__ = ("ref", "body", "attempts")

    def __init__(self, ref: str, body: str | bytes, attempts: int = 1):
        self.ref = ref
        self.body = body
        self.attempts = attempts

    def __repr__(self) -> str:
        return f"Delivery(ref={self.ref!r}, attempts={self.attempts})"


class Outcome:
    """What became of one delivery. ``record`` is what was (or will be) written to the store."""

    __slots__ = ("ref", "job_id", "task", "status", "attempts", "reason", "record", "job")

    def __init__(self, ref: str, job_id: str | None, task: str | None, status: str, attempts: int):
        self.ref = ref
        self.job_id = job_id
        self.task = task
        self.status = status
        self.attempts = attempts
        self.reason: str | None = None
        self.record: dict | None = None
        self.job: Job | None = None

    def __repr__(self) -> str:
        return f"Outcome({self.ref!r}, {self.job_id!r}, {self.status})"


class JobContext:
    """What a running task can learn about its job through :func:`current_job`."""

    __slots__ = ("id", "task", "attempt", "max_attempts", "deadline")

    def __init__(self, id: str, task: str, attempt: int, max_attempts: int, deadline: float | None):
        self.id = id
        self.task = task
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.deadline = deadline  # time.monotonic() value the job must finish by, if any

    def __repr__(self) -> str:
        return f"JobContext(id={self.id!r}, attempt={self.attempt}/{self.max_attempts})"


def current_job() -> JobContext:
    """The job the calling task is running for. Raises ``LookupError`` outside a job."""
    return _current.get()


class Runner:
    """Runs batches of deliveries against a registry and records outcomes in a store.

    Args:
        registry: where task names are looked up.
        store: the result store (:class:`kindling.results.DynamoResultStore` in Lambda).
        max_attempts: deliveries before a failing job is ``dead``, when neither the job
            nor its task says otherwise.
        attempts_cap: an upper bound the trigger imposes (SQS: the redrive policy's
            maxReceiveCount; past it the message is in the DLQ whatever a task asks).
        default_timeout: seconds a job may run when neither job nor task sets a timeout.
        concurrency: async jobs of one batch that run at the same time.
        threads: synchronous jobs of one batch that run at the same time, in a thread pool
            (long-lived workers). ``0`` (the default, and what Lambda uses) runs them one by
            one on the calling thread, where SIGALRM enforces their timeouts; in threads a
            job past its timeout is recorded as timed out, but its thread runs on.
        safety_ms: time kept back from the invocation's remaining time for writing results.
        cutoff_ms: no job is started once less than this is left (after ``safety_ms``).
        worker: recorded with each outcome (function name, version, ...).
        ttl_days: results expire this many days after they are written (DynamoDB TTL).
        log: where one JSON line per batch and per failed job goes (default: stdout, which
            Lambda sends to CloudWatch); ``None`` for silence.
    """

    def __init__(
        self,
        registry: Registry,
        store: ResultStore,
        *,
        max_attempts: int = 3,
        attempts_cap: int | None = None,
        default_timeout: float = 300.0,
        concurrency: int = 16,
        threads: int = 0,
        safety_ms: int = 1000,
        cutoff_ms: int = 500,
        worker: dict | None = None,
        ttl_days: float = 7.0,
        log=_log,
    ):
        self.registry = registry
        self.store = store
        self.max_attempts = max_attempts
        self.attempts_cap = attempts_cap
        self.default_timeout = default_timeout
        self.concurrency = max(1, concurrency)
        self.threads = threads
        self._pool = None
        self.safety_ms = safety_ms
        self.cutoff_ms = cutoff_ms
        self.worker = worker or {}
        self.ttl_s = int(ttl_days * DAY_S)
        self.log = log
        self._loop = None

    # -- the batch, top to bottom ----------------------------------------------------

    def run(
        self,
        deliveries: Sequence[Delivery],
        remaining_ms: Callable[[], int] | None = None,
        request_id: str | None = None,
    ) -> list[Outcome]:
        """Run one batch; return an outcome for every delivery, in the same order."""
        outcomes = [self._admit(d) for d in deliveries]
        runnable = self._drop_duplicates(outcomes)
        try:
            self._skip_finished(runnable)
        except StoreUnavailable as exc:
            return self._hand_back_all(outcomes, f"result store unavailable: {exc}")

        runnable = [o for o in runnable if o.status is None]
        deadline = None if remaining_ms is None else time.monotonic() + remaining_ms() / 1000
        sync_jobs = [o for o in runnable if not self._task(o).is_async]
        async_jobs = [o for o in runnable if self._task(o).is_async]
        if self.threads > 1 and len(sync_jobs) > 1:
            self._run_threaded(sync_jobs, deadline)
        else:
            for o in sync_jobs:
                self._run_sync(o, deadline)
        if async_jobs:
            self._run_async(async_jobs, deadline)

        self._settle_duplicates(outcomes)
        worker = dict(self.worker, request_id=request_id) if request_id else self.worker
        records = [o.record for o in outcomes if o.record is not None]
        for r in records:
            r["worker"] = worker
            r["expires_at"] = r["finished_at"] // 1000 + self.ttl_s
        if records:
            try:
                self.store.write(records)
            except StoreUnavailable as exc:
                return self._hand_back_all(outcomes, f"result store unavailable: {exc}")
        if self.log:
            _log_batch(outcomes, self.log)
        return outcomes

    # -- steps -------------------------------------------------------------------------

    def _admit(self, d: Delivery) -> Outcome:
        """Decode and validate; a bad message becomes a ``rejected`` outcome right here."""
        job = None
        try:
            job = decode_job(d.body)
            task = self.registry.get(job.task)
            task.check_arguments(job.args, job.kwargs)
        except InvalidJob as exc:
            if job is not None:  # a valid envelope for a task this worker cannot run
                exc.job_id, exc.task = job.id, job.task
            return self._rejected(d, exc)
        o = Outcome(d.ref, job.id, job.task, None, d.attempts)  # type: ignore[arg-type]
        o.job = job
        if job.not_before is not None and job.not_before > now_ms():
            o.status = DEFERRED
            o.reason = "not_before is in the future"
        return o

    def _rejected(self, d: Delivery, exc: InvalidJob) -> Outcome:
        job_id = exc.job_id or f"rejected-{d.ref}"
        o = Outcome(d.ref, job_id, exc.task, REJECTED, d.attempts)
        o.reason = exc.reason
        raw = d.body if isinstance(d.body, str) else d.body.decode("utf-8", "backslashreplace")
        at = now_ms()
        o.record = {
            "id": job_id,
            "task": exc.task or "",
            "status": REJECTED,
            "attempts": d.attempts,
            "error": {"type": "InvalidJob", "message": exc.reason, "traceback": ""},
            "raw": raw[:MAX_RAW_BYTES],
            "started_at": at,
            "finished_at": at,
            "duration_ms": 0,
        }
        if len(raw) > MAX_RAW_BYTES:
            o.record["raw_truncated"] = len(raw)
        return o

    def _drop_duplicates(self, outcomes: list[Outcome]) -> list[Outcome]:
        """The same job id twice in one batch runs once; the copies follow the first."""
        seen: set[str] = set()
        runnable = []
        for o in outcomes:
            if o.status is not None:
                continue
            if o.job_id in seen:
                o.status = "duplicate"
                continue
            seen.add(o.job_id)  # type: ignore[arg-type]
            runnable.append(o)
        return runnable

    def _skip_finished(self, runnable: list[Outcome]) -> None:
        """One store read for the batch: skip succeeded jobs, do not rerun dead ones."""
        if not runnable:
            return
        statuses = self.store.get_statuses([o.job_id for o in runnable])  # type: ignore[misc]
        for o in runnable:
            previous = statuses.get(o.job_id)  # type: ignore[arg-type]
            if previous == SUCCEEDED and self._task(o).skip_succeeded:
                o.status = SKIPPED
                o.reason = "already succeeded (duplicate delivery)"
            elif previous == DEAD:
                o.status = DEAD
                o.reason = "already dead; not run again"

    def _attempts_allowed(self, o: Outcome) -> int:
        job, task = o.job, self._task(o)
        allowed = job.max_attempts or task.max_attempts or self.max_attempts  # type: ignore[union-attr]
        if self.attempts_cap:
            allowed = min(allowed, self.attempts_cap)
        return allowed

    def _timeout(self, o: Outcome, deadline: float | None) -> tuple[float, bool] | None:
        """Seconds this job may run, and whether the invocation (not the job) bounds it.

        ``None`` means there is not enough time left to start it.
        """
        own = o.job.timeout or self._task(o).timeout or self.default_timeout  # type: ignore[union-attr]
        if deadline is None:
            return own, False
        left = deadline - time.monotonic() - self.safety_ms / 1000
        if left < self.cutoff_ms / 1000:
            return None
        return (left, True) if left < own else (own, False)

    def _defer(self, o: Outcome) -> None:
        o.status = DEFERRED
        o.reason = "not started: the invocation's remaining time ran short"

    def _run_sync(self, o: Outcome, deadline: float | None) -> None:
        limit = self._timeout(o, deadline)
        if limit is None:
            return self._defer(o)
        seconds, by_invocation = limit
        job, task = o.job, self._task(o)
        token = _current.set(JobContext(job.id, job.task, o.attempts, self._attempts_allowed(o),  # type: ignore[union-attr]
                                        time.monotonic() + seconds))
        started = now_ms()
        t0 = time.perf_counter()
        try:
            with _alarm(seconds, by_invocation):
                value = task.fn(*job.args, **job.kwargs)  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - a task's failure is data, not a crash
            if not isinstance(exc, Exception):
                raise
            self._finish(o, started, t0, error=exc)
        else:
            self._finish(o, started, t0, value=value)
        finally:
            _current.reset(token)

    def _run_threaded(self, outcomes: list[Outcome], deadline: float | None) -> None:
        from concurrent.futures import ThreadPoolExecutor
        from concurrent.futures import TimeoutError as FutureTimeout

        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="kindling")
        # The time limit is checked when a job really starts, not when it is queued.
        futures = [(o, self._pool.submit(self._run_sync, o, deadline)) for o in outcomes]
        for o, future in futures:
            wait_s = None if deadline is None else max(0.0, deadline - time.monotonic() - self.safety_ms / 1000)
            own = o.job.timeout or self._task(o).timeout or self.default_timeout  # type: ignore[union-attr]
            try:
                future.result(timeout=own if wait_s is None else min(own, wait_s) + 0.05)
            except FutureTimeout:
                if o.status is None:  # still running: record it timed out and move on
                    self._finish(o, now_ms(), time.perf_counter(), error=_timeout_error(own, wait_s is not None))

    def _run_async(self, outcomes: list[Outcome], deadline: float | None) -> None:
        import asyncio  # only batches with async tasks pay for asyncio

        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        sem = asyncio.Semaphore(self.concurrency)

        async def one(o: Outcome) -> None:
            async with sem:
                limit = self._timeout(o, deadline)
                if limit is None:
                    return self._defer(o)
                seconds, by_invocation = limit
                job, task = o.job, self._task(o)
                _current.set(JobContext(job.id, job.task, o.attempts, self._attempts_allowed(o),  # type: ignore[union-attr]
                                        time.monotonic() + seconds))
                started = now_ms()
                t0 = time.perf_counter()
                try:
                    value = await asyncio.wait_for(task.fn(*job.args, **job.kwargs), seconds)  # type: ignore[union-attr]
                except TimeoutError:
                    self._finish(o, started, t0, error=_timeout_error(seconds, by_invocation))
                except Exception as exc:  # noqa: BLE001
                    self._finish(o, started, t0, error=exc)
                else:
                    self._finish(o, started, t0, value=value)

        async def batch() -> None:
            await asyncio.gather(*(one(o) for o in outcomes))

        self._loop.run_until_complete(batch())

    def _finish(self, o: Outcome, started: int, t0: float, *, value=None, error=None) -> None:
        if o.status is not None:  # a thread that outlived its timeout: already recorded
            return
        duration = round((time.perf_counter() - t0) * 1000, 3)
        result = None
        if error is None:
            try:
                result = codec.dumps(value)
            except codec.EncodeError as exc:
                error = TypeError(f"task result is not JSON-serializable: {exc}")
            else:
                if len(result) > MAX_RESULT_BYTES:
                    error = ResultTooLarge(
                        f"result is {len(result):,} bytes of JSON; a result record holds at most "
                        f"{MAX_RESULT_BYTES:,} (store large results elsewhere and return a reference)"
                    )
        job = o.job
        record = {
            "id": o.job_id,
            "task": o.task,
            "attempts": o.attempts,
            "enqueued_at": job.enqueued_at,  # type: ignore[union-attr]
            "started_at": started,
            "finished_at": now_ms(),
            "duration_ms": duration,
        }
        if error is None:
            o.status = SUCCEEDED
            record["result"] = result
        else:
            o.status = DEAD if o.attempts >= self._attempts_allowed(o) else FAILED
            record["error"] = _describe(error)
            o.reason = f"{type(error).__name__}: {error}"
        record["status"] = o.status
        o.record = record

    def _settle_duplicates(self, outcomes: list[Outcome]) -> None:
        first: dict[str, Outcome] = {}
        for o in outcomes:
            if o.status == "duplicate":
                original = first[o.job_id]  # type: ignore[index]
                if original.status in (SUCCEEDED, SKIPPED):
                    o.status = SKIPPED
                    o.reason = "duplicate of a job in the same batch"
                else:
                    o.status = DEFERRED
                    o.reason = "duplicate of a job in the same batch that did not succeed"
            elif o.job_id is not None and o.job_id not in first:
                first[o.job_id] = o

    def _hand_back_all(self, outcomes: list[Outcome], reason: str) -> list[Outcome]:
        for o in outcomes:
            if o.status != SKIPPED:
                o.status = DEFERRED
                o.reason = reason
                o.record = None
        if self.log:
            self.log({"kindling": "store_unavailable", "error": reason, "handed_back": len(outcomes)})
        return outcomes

    def _task(self, o: Outcome) -> Task:
        return self.registry.get(o.task)  # type: ignore[arg-type]


class _alarm:
    """Interrupt a synchronous task after ``seconds`` with SIGALRM (main thread only).

    Lambda runs the handler on the main thread, where a signal can interrupt even a
    blocking system call. Off the main thread (a thread-pool worker) no timer is set and
    the limit is not enforced.
    """

    __slots__ = ("seconds", "by_invocation", "previous", "armed")

    def __init__(self, seconds: float, by_invocation: bool):
        self.seconds = seconds
        self.by_invocation = by_invocation
        self.armed = False

    def _fire(self, signum, frame):
        raise _timeout_error(self.seconds, self.by_invocation)

    def __enter__(self):
        import _signal as signal  # the C module: signal.py imports enum (~2 ms on a cold start)

        try:
            self.previous = signal.signal(signal.SIGALRM, self._fire)
        except ValueError:  # not the main thread
            return self
        signal.setitimer(signal.ITIMER_REAL, max(self.seconds, 0.001))
        self.armed = True
        return self

    def __exit__(self, *exc_info):
        if self.armed:
            import _signal as signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


def _timeout_error(seconds: float, by_invocation: bool) -> JobTimeout:
    if by_invocation:
        return JobTimeout(f"stopped after {seconds:.3f}s: the invocation's remaining time ran out")
    return JobTimeout(f"job exceeded its timeout of {seconds:g}s")


def _describe(exc: BaseException) -> dict:
    """The error as recorded: type, message and the last frames of the traceback."""
    import traceback

    tb = "".join(traceback.format_exception(exc, limit=-6))
    return {"type": type(exc).__name__, "message": str(exc)[:4000], "traceback": tb[-4000:]}


def _log_batch(outcomes: list[Outcome], log) -> None:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    log({"kindling": "batch", "messages": len(outcomes), **counts})
    for o in outcomes:
        if o.status in (FAILED, DEAD, REJECTED):
            log({"kindling": o.status, "job": o.job_id, "task": o.task, "attempt": o.attempts,
                  "ref": o.ref, "error": o.reason})
