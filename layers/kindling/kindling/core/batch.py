"""The batch vocabulary: what triggers, the runner, its execution strategies and the
observers of a batch (logs, metrics, spans, follow-ups) say to one another.

A trigger turns its messages into :class:`Delivery` objects; the runner gives back one
:class:`Outcome` per delivery, which the trigger maps to its own acknowledgement:

* ``succeeded``, ``rejected``, ``skipped`` (a duplicate of a job already finished) are
  settled: acknowledge / delete the message.
* ``failed`` (will be retried, after ``Outcome.retry_in`` seconds when set) and
  ``deferred`` (not started: the invocation's time ran short, ``not_before`` is ahead, the
  result store is down, the envelope needs a newer worker) go back to the queue for
  redelivery. A deferred job has not used an attempt.
* ``dead`` (failed on its last attempt, or delivered past its allowance without an outcome:
  :func:`kindling.core.policy.out_of_deliveries`, judged only after the message is decoded and its
  signature checked) is the trigger's to move to its dead letters (SQS DLQ, Valkey dead stream).

A running task learns its job through :func:`current_job`.
Between the runner's phases a batch is a :class:`Batch`. How the invocation's remaining
time is divided (time kept back for recording, the cutoff for starting a job) is a
:class:`Budget`; a synchronous job's time limit is an :class:`Alarm`.

Core: no I/O, nothing imported beyond the standard library's C modules, the errors and the
policy, so every trigger and observer can use it without loading the runner. The runner
(:mod:`kindling.engine.runner`) re-exports these names.
"""

from __future__ import annotations

import time
from _contextvars import ContextVar  # the C module: contextvars.py is one more import on the cold path

from kindling.core.errors import JobTimeout
from kindling.core.policy import MAX_TIMEOUT_S, store_backoff_s
from kindling.core.status import DEFERRED, DUPLICATE, SKIPPED, SUCCEEDED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from contextvars import Token
    from typing import Any, Protocol

    from kindling.core.envelope import Job
    from kindling.core.policy import TaskOptions
    from kindling.core.result_store import ResultStore

__all__ = ["Alarm", "Batch", "Budget", "Delivery", "JobContext", "Outcome", "STORE_OUTAGE", "STORE_UNAVAILABLE",
           "current_job", "drop_duplicates", "hand_back", "job_of", "lambda_context", "read_state",
           "resend_last_deliveries", "reset_current_job", "set_current_job", "set_lambda_context", "settle_duplicates",
           "timeout_error"]

STORE_UNAVAILABLE = "result store unavailable"
STORE_OUTAGE = "store_unavailable"  # Outcome.handed_back_because when the store could not be reached
"""How every hand-back because the result store could not be reached begins its reason."""

_current: ContextVar[JobContext] = ContextVar("kindling_job")


class Delivery:
    """One message as a trigger received it.

    Attributes:
        ref: the trigger's handle for acknowledging it (SQS message id, stream entry id).
        body: the raw message body.
        attempts: how many times it has been delivered, this time included (SQS's
            ApproximateReceiveCount, a stream entry's delivery count).
        trace: the producer's X-Ray trace header (SQS's ``AWSTraceHeader``), if any.
        group: the FIFO message group; jobs of one group run in batch order, and after
            one of them does not succeed the rest of its group is handed back unstarted.
        signature: the signature carried beside the body (:mod:`kindling.core.jobsig`), checked
            only when signing is on (a dead SQS message keeps it in its dead-letter queue).
        source: where the message was read from, as a signature binds it
            (:func:`kindling.core.jobsig.sqs_destination`, :func:`~kindling.core.jobsig.stream_destination`).
        counts_runs: ``attempts`` counts runs only: the trigger gives a hand-back's delivery
            back (a Valkey stream). A job delivered more often than its attempts allow is then
            recorded ``dead`` instead of run (:func:`kindling.core.policy.out_of_deliveries`).
        receipt, queue_arn: what settles it (an SQS receipt handle) and where it came from
            (``eventSourceARN``).
        stream: the Valkey stream it was read from (a job's span names it).
    """

    __slots__ = ("ref", "body", "attempts", "trace", "group", "signature", "source", "counts_runs", "receipt",
                 "queue_arn", "stream")

    def __init__(self, ref: str, body: str | bytes, attempts: int = 1, trace: str | None = None,
                 group: str | None = None, signature: str | bytes | None = None, source: str | None = None,
                 counts_runs: bool = False, receipt: str | None = None, queue_arn: str | None = None,
                 stream: str | None = None):
        self.ref = ref
        self.body = body
        self.attempts = attempts
        self.trace = trace
        self.group = group
        self.signature = signature
        self.source = source
        self.counts_runs = counts_runs
        self.receipt, self.queue_arn = receipt, queue_arn
        self.stream = stream

    def __repr__(self) -> str:
        return f"Delivery(ref={self.ref!r}, attempts={self.attempts})"


class Outcome:
    """What became of one delivery. ``record`` is what was (or will be) written to the store.

    ``attempts`` is the attempt number of this run (counted in the result record),
    ``deliveries`` how often the message has been delivered, and ``retry_in`` the seconds
    the trigger should keep a handed-back message out of sight (``None``: its default).
    """

    __slots__ = ("ref", "job_id", "task", "status", "attempts", "deliveries", "reason", "record", "job",
                 "retry_in", "limit", "limit_at", "started_ms", "t0", "trace_id", "trace", "unread", "error",
                 "previous", "result", "generation", "exhausted", "handed_back_because", "unrecorded", "resend",
                 "results")

    def __init__(self, ref: str, job_id: str | None, task: str | None, status: str | None, attempts: int,
                 deliveries: int | None = None):
        self.ref = ref
        self.job_id = job_id
        self.task = task
        self.status = status
        self.attempts = attempts
        self.deliveries = attempts if deliveries is None else deliveries
        self.reason: str | None = None
        self.record: dict | None = None
        self.job: Job | None = None
        self.retry_in: int | None = None
        self.limit: tuple[float, bool] | None = None  # seconds it may run, and whether the invocation set that
        self.limit_at: float | None = None  # monotonic time a started job must finish by
        self.started_ms = 0
        self.t0 = 0.0
        self.trace_id: str | None = None  # the producer's X-Ray trace id
        self.trace: str | None = None  # its whole header (read only for OpenTelemetry spans)
        self.unread = False  # not read before running (its task opted out of duplicate skipping)
        self.error: BaseException | None = None  # what a failed run raised
        self.previous: str | None = None  # the status the store held before this delivery
        self.result: str | None = None  # a succeeded run's result as JSON, inline or kept in S3 (chains read it)
        self.generation = 1  # the generation of the job's record as read (a revive makes a new one)
        self.exhausted = False  # delivered past its allowance: recorded dead unless already final
        self.handed_back_because: str | None = None  # handed back unrun: STORE_OUTAGE, "signing_keys_unavailable"
        self.unrecorded = False  # settled here, but the results policy keeps no record of it
        # Handed back unrun on its last delivery (the store was down): sent again as a new
        # message, its delivery count starting over, rather than moved by the queue unrecorded.
        self.resend = False
        self.results: str | None = None  # the results policy it is recorded under, once admitted

    def __repr__(self) -> str:
        return f"Outcome({self.ref!r}, {self.job_id!r}, {self.status})"


def job_of(o: Outcome) -> Job:
    """The decoded job of an admitted outcome: every outcome past admission has one."""
    job = o.job
    if job is None:
        raise RuntimeError(f"{o!r} was never admitted: it has no job")
    return job


def drop_duplicates(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes to run: the same job id twice in one batch runs once, and its copies
    (marked ``duplicate``) follow the first (:func:`settle_duplicates`).

    A message refused at decoding with a record under the job id it names (a Celery
    message's, :func:`kindling.core.refusals.reject`) takes part as the copy it is: the first
    message of an id decides, and a later one, refused or not, follows it unrecorded, so one
    batch never writes two records of one id."""
    seen: set[str | None] = set()
    runnable = []
    for o in outcomes:
        if o.status is not None and o.record is None:  # handed back at decoding: claims no id
            continue
        if o.job_id in seen:
            o.status, o.record = DUPLICATE, None
            continue
        seen.add(o.job_id)
        if o.status is None:
            runnable.append(o)
    return runnable


def settle_duplicates(outcomes: list[Outcome]) -> None:
    """A copy is ``skipped`` when the first of its job succeeded (or was skipped), else
    handed back with it."""
    first: dict[str | None, Outcome] = {}
    for o in outcomes:
        if o.status == DUPLICATE:
            original = first[o.job_id]
            if original.status in (SUCCEEDED, SKIPPED):
                o.status = SKIPPED
                o.reason = "duplicate of a job in the same batch"
            else:
                o.status = DEFERRED
                o.reason = "duplicate of a job in the same batch that did not succeed"
                o.retry_in = original.retry_in
        elif o.job_id is not None and o.job_id not in first:
            first[o.job_id] = o


def hand_back(outcomes: list[Outcome], reason: str, because: str = STORE_OUTAGE) -> None:
    """Hand a whole batch back unrecorded (the store or the signing keys could not be read):
    every outcome but a skipped one, after the store's backoff for its delivery, with
    ``because`` as its cause (:attr:`Outcome.handed_back_because`)."""
    for o in outcomes:
        if o.status != SKIPPED:
            o.status, o.reason, o.handed_back_because = DEFERRED, reason, because
            o.record = None
            o.retry_in = store_backoff_s(o.deliveries)


def resend_last_deliveries(batch: Batch, outcomes: list[Outcome], max_deliveries: int | None) -> list[Outcome]:
    """Every last delivery ends in a terminal record: a job handed back on it all the same
    (nothing could be recorded: the store or the signing keys could not be read) is marked to
    be sent again as a new message (:attr:`Outcome.resend`) where each hand-back is a delivery
    (SQS), instead of being moved to the dead letters by the queue's redrive with no record,
    or a stale one. Returns ``outcomes``."""
    if max_deliveries:
        for o, d in zip(outcomes, batch.deliveries, strict=True):
            if o.status == DEFERRED and not d.counts_runs and d.attempts >= max_deliveries:
                o.resend = True
    return outcomes


def read_state(o: Outcome, states: dict) -> tuple[str | None, int]:
    """The status and attempts the store holds for ``o``'s job (``states`` as a store's
    ``read_states`` gives them); notes the generation read on ``o``."""
    state = states.get(o.job_id, (None, 0))
    o.generation = state[2] if len(state) > 2 else 1  # a store gives it for revived jobs only
    return state[0], state[1]


class JobContext:
    """What a running task can learn about its job through :func:`current_job`. A direct call
    of a task (``resize("a.png")``) gets one too, as Celery's ``self.request``: ``id``
    ``None``, attempt 1, no deadline.

    ``lambda_context`` is the Lambda context object of the invocation running the job
    (``None`` outside Lambda): what Powertools' utilities take, such as Idempotency's
    ``config.register_lambda_context``.

    ``headers``: a job sent by a Celery producer sees the message's own headers there
    (``apply_async(headers={...})``), as Celery's ``self.request.headers``: the message's
    headers less Celery's own, ``None`` when none are left; a kindling job's are ``None``.
    """

    __slots__ = ("id", "task", "attempt", "max_attempts", "deadline", "lambda_context", "headers")

    def __init__(self, id: str | None, task: str, attempt: int, max_attempts: int, deadline: float | None,
                 lambda_context: object = None, headers: dict | None = None):
        self.id = id
        self.task = task
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.deadline = deadline  # time.monotonic() value the job must finish by, if any
        self.lambda_context = lambda_context
        self.headers = headers

    def __repr__(self) -> str:
        return f"JobContext(id={self.id!r}, attempt={self.attempt}/{self.max_attempts})"


# The Lambda context of the invocation now running (the handler sets it; None elsewhere).
_lambda_context: list = [None]


def set_lambda_context(context: object) -> None:
    """The Lambda handler's: the invocation whose jobs run next (``None`` outside Lambda)."""
    _lambda_context[0] = context


def lambda_context() -> object:
    return _lambda_context[0]


def current_job() -> JobContext:
    """The job the calling task is running for. Raises ``LookupError`` outside a job."""
    return _current.get()


def set_current_job(context: JobContext) -> Token[JobContext]:
    """Make ``context`` what :func:`current_job` answers in this thread or task."""
    return _current.set(context)


def reset_current_job(token: Token[JobContext]) -> None:
    _current.reset(token)


class Batch:
    """A batch between its phases (:meth:`Runner.begin`, :meth:`Runner.execute`,
    :meth:`Runner.finish`): its outcomes so far and the store replies still to read."""

    __slots__ = ("deliveries", "outcomes", "runnable", "collect", "deadline", "read_by", "worker", "collect_write",
                 "handed_back", "spans")

    def __init__(self, deliveries: Sequence[Delivery], outcomes: list[Outcome], runnable: list[Outcome],
                 collect: Callable[[], dict], deadline: float | None, read_by: float | None, worker: dict):
        self.deliveries = deliveries
        self.outcomes = outcomes
        self.runnable = runnable
        self.collect = collect  # the duplicate check's reply
        self.deadline = deadline
        self.read_by = read_by
        self.worker = worker
        self.collect_write: Callable[[], dict] | None = None  # the write's reply, once sent
        self.handed_back: list[Outcome] | None = None  # the check failed: nothing ran
        self.spans: list = []  # (outcome, span, start ns) of its runs, with KINDLING_OTEL=1

    def writing(self) -> set[str]:
        """The job ids whose records this batch's write carries."""
        return {o.record["id"] for o in self.outcomes if o.record is not None}

    def job_ids(self) -> set[str]:
        """Every job id its write may carry, known before its jobs have run."""
        return {o.job_id for o in self.outcomes if o.job_id is not None} | self.writing()


class Budget:
    """How a batch divides the invocation's remaining time, as a value with its own clock
    (urllib3's ``Timeout`` in spirit): every remaining time kindling works with is computed
    here, from Lambda's remaining-time callback or a duration, never by hand elsewhere.

    ``ends`` is a ``time.monotonic()`` value, ``None`` where nothing bounds the batch (a
    long-lived worker); :meth:`started` and :meth:`lasting` give a budget its clock,
    :meth:`left_ms` reads it. ``safety_ms`` is kept back from the end for recording: jobs must end
    by :meth:`run_by`, a large result's upload by :meth:`upload_by` (half of it is left for
    the write), the write and the follow-ups by :meth:`write_by` (a margin is left for the
    reply to Lambda), hooks by :meth:`hooks_by`. No job starts with less than ``cutoff_ms`` left before :meth:`run_by`.
    A budget is immutable: :meth:`started` and :meth:`lasting` return a new one.
    """

    __slots__ = ("safety_ms", "cutoff_ms", "ends")

    REPLY_MS = 50
    """Kept back from Lambda's remaining time by the handler, for its reply: the invocation's calls after a
    batch (settling its messages, sending follow-ups) end this long before Lambda's own deadline."""

    def __init__(self, safety_ms: int = 1000, cutoff_ms: int = 500, ends: float | None = None):
        setter = object.__setattr__
        setter(self, "safety_ms", safety_ms)
        setter(self, "cutoff_ms", cutoff_ms)
        setter(self, "ends", ends)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Budget is immutable: {name} is not set on it (started() or lasting() make a new one)")

    def __repr__(self) -> str:
        return f"Budget(safety_ms={self.safety_ms}, cutoff_ms={self.cutoff_ms}, ends={self.ends})"

    @staticmethod
    def remaining_of(context) -> Callable[[], int] | None:
        """A Lambda context's remaining-time callback; ``None`` for no context (a test, a local run)."""
        return getattr(context, "get_remaining_time_in_millis", None)

    @staticmethod
    def deadline(remaining_ms: Callable[[], int] | None, reserve_ms: int = 0) -> float | None:
        """The invocation's end, from its remaining-time callback, less ``reserve_ms``."""
        return None if remaining_ms is None else time.monotonic() + (remaining_ms() - reserve_ms) / 1000

    def started(self, remaining_ms: Callable[[], int] | None, reserve_ms: int = 0) -> Budget:
        """This budget's margins, with a clock that ends with the invocation (less ``reserve_ms``);
        unbounded without a remaining-time callback."""
        return Budget(self.safety_ms, self.cutoff_ms, self.deadline(remaining_ms, reserve_ms))

    def lasting(self, seconds: float | None) -> Budget:
        """This budget's margins, with a clock that ends ``seconds`` from now (``None``: unbounded)."""
        return Budget(self.safety_ms, self.cutoff_ms, None if seconds is None else time.monotonic() + seconds)

    def left_ms(self) -> int | None:
        """Whole milliseconds left on this budget's clock (never below 0); ``None``: unbounded."""
        return None if self.ends is None else max(0, int((self.ends - time.monotonic()) * 1000))

    def left_s(self) -> float | None:
        """Seconds left on this budget's clock (never below 0); ``None``: unbounded."""
        return None if self.ends is None else max(0.0, self.ends - time.monotonic())

    def before(self, margin_ms: float) -> float | None:
        """The ``time.monotonic()`` value ``margin_ms`` before this budget's end (``None``: unbounded)."""
        return None if self.ends is None else self.ends - margin_ms / 1000

    def spent(self) -> bool:
        """Whether this budget's clock has run out (never, unbounded)."""
        return self.ends is not None and time.monotonic() >= self.ends

    @staticmethod
    def seconds_to(deadline: float) -> float:
        """Seconds from now to a ``time.monotonic()`` deadline (negative once it is past)."""
        return deadline - time.monotonic()

    @property
    def next_batch_ms(self) -> int:
        """The least time left with which a drain takes one more batch: the batch's own (``cutoff_ms``
        to start a job, ``safety_ms`` to record it) and ``safety_ms`` again to hand the stream on."""
        return 2 * self.safety_ms + self.cutoff_ms

    def run_by(self, deadline: float | None) -> float | None:
        """When jobs must have ended (and past which a read allows nothing to run)."""
        return None if deadline is None else deadline - self.safety_ms / 1000

    def upload_by(self, deadline: float | None) -> float | None:
        return None if deadline is None else deadline - self.safety_ms / 2000

    def write_by(self, deadline: float | None) -> float | None:
        return None if deadline is None else deadline - self.safety_ms / 4000

    def hooks_by(self, deadline: float | None) -> float | None:
        """When hooks still running are abandoned: half the time kept back is left for
        settling the batch's messages (a Lambda handler's SQS calls) and its log lines."""
        return None if deadline is None else deadline - self.safety_ms / 2000

    def job_limit(self, deadline: float | None, own: float) -> tuple[float, bool] | None:
        """Seconds a job with a timeout of ``own`` may run if it starts now, and whether the
        invocation (not the job) bounds it; ``None``: too little time is left to start it."""
        if deadline is None:
            return own, False
        left = self.seconds_to(deadline) - self.safety_ms / 1000
        if left < self.cutoff_ms / 1000:
            return None
        return (left, True) if left < own else (own, False)


class Alarm:
    """Interrupt a synchronous task after ``seconds`` with SIGALRM (main thread only).

    Here, not beside the other strategies in :mod:`kindling.engine.execution`, because every Lambda
    batch of sync jobs uses it: a module of its own would be one more import on the cold path.

    Lambda runs the handler on the main thread, where a signal can interrupt even a
    blocking system call. A task that swallows the :class:`JobTimeout` is interrupted
    again every second until it gives up, and ``fired`` keeps the timeout to record even
    if it then returns. Off the main thread (a pool worker) no timer is set.
    """

    __slots__ = ("seconds", "by_invocation", "previous", "armed", "fired")

    def __init__(self, seconds: float, by_invocation: bool):
        self.seconds = min(max(seconds, 0.001), MAX_TIMEOUT_S)
        self.by_invocation = by_invocation
        self.armed = False
        self.fired: JobTimeout | None = None

    def _fire(self, signum, frame):
        self.fired = timeout_error(self.seconds, self.by_invocation)
        raise self.fired

    def __enter__(self):
        import _signal as signal  # the C module: signal.py imports enum (~2 ms on a cold start)

        try:
            self.previous = signal.signal(signal.SIGALRM, self._fire)
        except ValueError:  # not the main thread
            return self
        signal.setitimer(signal.ITIMER_REAL, self.seconds, 1.0)
        self.armed = True
        return self

    def __exit__(self, *exc_info):
        if self.armed:
            import _signal as signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


def timeout_error(seconds: float, by_invocation: bool) -> JobTimeout:
    """The error a job past its limit is recorded with, whichever strategy stopped it."""
    if by_invocation:
        return JobTimeout(f"stopped after {seconds:.3f}s: the invocation's remaining time ran out")
    return JobTimeout(f"job exceeded its timeout of {seconds:g}s")


if TYPE_CHECKING:
    class RunnableTask(TaskOptions, Protocol):
        """What a strategy reads of a job's task (:class:`kindling.core.registry.Task`, whose
        registry imports this module to set the job's context)."""

        @property
        def fn(self) -> Callable[..., Any]: ...
        @property
        def is_async(self) -> bool: ...

    class Steps(Protocol):
        """What an execution strategy (:mod:`kindling.engine.execution`) may do with a batch's jobs:
        the runner's public steps. A strategy decides only when and where each job runs."""

        concurrency: int  # async jobs of one batch at a time
        threads: int  # sync jobs of one batch at a time, in a pool
        budget: Budget
        otel: bool
        store: ResultStore  # a rate limit's count (kindling.core.ratelimit)
        log: Callable[[dict], object] | None
        thread_pool: object | None  # the strategies' own, kept while the worker is warm
        event_loop: object | None

        def task_of(self, o: Outcome) -> RunnableTask: ...

        def start_job(self, o: Outcome, deadline: float | None) -> tuple[float, bool] | None: ...

        def defer_job(self, o: Outcome) -> None: ...

        def finish_job(self, o: Outcome, *, value: object = None, error: BaseException | None = None) -> None: ...

        def run_job(self, o: Outcome, deadline: float | None) -> None: ...

        def job_context(self, o: Outcome, seconds: float) -> JobContext: ...

        def open_span(self, o: Outcome) -> object | None: ...

        def load_arguments(self, o: Outcome) -> None: ...
