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
  :func:`kindling.policy.out_of_deliveries`, judged only after the message is decoded and its
  signature checked) is the trigger's to move to its dead letters (SQS DLQ, Valkey dead stream).

A running task learns its job through :func:`current_job`.
Between the runner's phases a batch is a :class:`Batch`; a synchronous job's time limit is
an :class:`Alarm`.

Core: no I/O, nothing imported beyond the standard library's C modules, the errors and the
policy, so every trigger and observer can use it without loading the runner. The runner
(:mod:`kindling.runner`) re-exports these names.
"""

from __future__ import annotations

from _contextvars import ContextVar  # the C module: contextvars.py is one more import on the cold path

from kindling.errors import JobTimeout
from kindling.policy import MAX_TIMEOUT_S

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from contextvars import Token

    from kindling.envelope import Job

__all__ = ["Alarm", "Batch", "Delivery", "JobContext", "Outcome", "STORE_UNAVAILABLE", "current_job",
           "reset_current_job", "set_current_job", "timeout_error"]

STORE_UNAVAILABLE = "result store unavailable"
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
        signature: the signature carried beside the body (:mod:`kindling.jobsig`), read
            only when signing is on.
        source: where the message was read from, as a signature binds it
            (:func:`kindling.jobsig.sqs_destination`, :func:`~kindling.jobsig.stream_destination`).
        counts_runs: ``attempts`` counts runs only: the trigger gives a hand-back's delivery
            back (a Valkey stream). A job delivered more often than its attempts allow is then
            recorded ``dead`` instead of run (:func:`kindling.policy.out_of_deliveries`).
    """

    __slots__ = ("ref", "body", "attempts", "trace", "group", "signature", "source", "counts_runs")

    def __init__(self, ref: str, body: str | bytes, attempts: int = 1, trace: str | None = None,
                 group: str | None = None, signature: str | bytes | None = None, source: str | None = None,
                 counts_runs: bool = False):
        self.ref = ref
        self.body = body
        self.attempts = attempts
        self.trace = trace
        self.group = group
        self.signature = signature
        self.source = source
        self.counts_runs = counts_runs

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
                 "previous", "result", "generation", "exhausted")

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


class Alarm:
    """Interrupt a synchronous task after ``seconds`` with SIGALRM (main thread only).

    Here, not beside the other strategies in :mod:`kindling.execution`, because every Lambda
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

