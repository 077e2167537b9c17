"""Attempts, time limits, retries and backoff: each rule written once, for every trigger.

Precedence, everywhere: the job's own value, then its task's, then the worker's default,
and for attempts the trigger's cap last (a queue cannot deliver more often than its
redrive policy allows).

Whether a failure is retried: a task's ``no_retry_on`` exceptions never are (the job is
recorded ``dead`` at once), nor a result the codec refuses (``UnencodableResult``), and
with ``retry_on`` only those exceptions are; a payload in S3
that cannot be read is retried only if S3 itself failed (not for a missing or altered
object), whatever the task's rules; a task may
raise :class:`kindling.core.errors.Retry` to ask for another attempt after a delay of its
choosing. When: ``Retry(after=...)``, else the task's :class:`Backoff`, else the worker's
``retry_delay`` doubling per attempt; triggers honour it (SQS through the message's
visibility).

Beside those, the limits every job is held to, whoever wrote it: its id (:func:`is_job_id`),
its task's name, its time limit, and the clock its times are read by (:func:`now_ms`).

The lowest of core's rule modules: it imports none of them, and reads a job and a task
through what it needs of each (:class:`JobFields`, :class:`TaskOptions`), not their classes.
"""

from __future__ import annotations

import os
import time

from kindling.core.status import Status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class JobFields(Protocol):
        """What the rules read of a job (:class:`kindling.core.envelope.Job`)."""

        @property
        def id(self) -> str: ...
        @property
        def enqueued_at(self) -> int: ...
        @property
        def max_attempts(self) -> int | None: ...
        @property
        def timeout(self) -> float | None: ...
        @property
        def not_before(self) -> int | None: ...
        @property
        def parent(self) -> dict | None: ...

    class TaskOptions(Protocol):
        """What the rules read of a task (:class:`kindling.core.registry.Task`)."""

        @property
        def name(self) -> str: ...
        @property
        def max_attempts(self) -> int | None: ...
        @property
        def timeout(self) -> float | None: ...
        @property
        def retry_on(self) -> tuple[type[BaseException], ...] | None: ...
        @property
        def no_retry_on(self) -> tuple[type[BaseException], ...]: ...
        @property
        def backoff(self) -> Backoff | None: ...
        @property
        def results(self) -> str | None: ...
        @property
        def skip_succeeded(self) -> bool: ...
        @property
        def rate_limit(self) -> object | None: ...

MAX_TIMEOUT_S = 86_400.0
"""The longest time limit a job or task may ask for. Longer ones are refused when the job
is validated: no trigger holds a message that long, and timers overflow far beyond it."""

MAX_ATTEMPTS = 1_000
"""The most attempts a job or task may ask for."""

DEFAULT_MAX_ATTEMPTS = 3
"""Attempts before a failing job is dead when neither the job, its task nor the deployment
(``KINDLING_MAX_ATTEMPTS``) says: the same for every trigger."""

DEFAULT_RESULT_TTL_DAYS = 14
"""Days an outcome record is kept (DynamoDB's TTL, a Valkey key's expiry) when the
deployment does not say (``KINDLING_RESULT_TTL_DAYS``, the template's ``ResultTtlDays``)."""

MAX_TASK_LENGTH = 200
"""The longest task name: names are recorded with every outcome and logged with every failure."""

MAX_DELAY_S = 43_200
"""The longest a message can be kept out of sight at once (SQS: 12 hours)."""

DEFAULT_RETRY_DELAY_S = 5.0
"""Seconds before a failed job's first retry (doubling per attempt) when neither the job's
task (``backoff=``, ``Retry(after=...)``) nor the deployment (``KINDLING_RETRY_DELAY``, the
template's ``RetryDelay``) says otherwise: the same for every trigger."""

DEFAULT_RETENTION_S = 1_209_600
"""How long a queue keeps a message, when the worker cannot read its queue's own
retention: SQS's longest (14 days, the template's MessageRetentionPeriod). A job due later
than this after it was enqueued is refused: its message would be deleted before it is due."""

HOP_S = MAX_DELAY_S - 900
"""How far one delivery is counted to carry a job toward its due time where each hand-back
is a delivery (SQS): a hop of up to 12 hours, less up to 15 minutes the message may have been
held before the worker saw it (Lambda's batching window, a cold start)."""

STORE_BACKOFF_CAP_S = 900
"""Hand-backs because kindling's own store is down come back after 2, 4, 8 ... seconds,
at most this long, so an outage of hours costs a few dozen deliveries, not thousands."""

MAX_ID_LENGTH = 128
"""The longest job id."""

ID_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_.:")
"""The characters of a job id: safe in a log line, a DynamoDB key and a Valkey key."""

CALLBACK_SUFFIX = ".then"
"""Ends a chord's callback's job id (:func:`kindling.core.envelope.callback_id`)."""


def now_ms() -> int:
    """The time, in epoch milliseconds: what a job's times are compared with."""
    return time.time_ns() // 1_000_000


def is_job_id(value: object) -> bool:
    """Whether ``value`` is a job id: 1-128 characters of letters, digits and ``-_.:``."""
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and ID_CHARS.issuperset(value)


def job_id_error(value: object) -> str | None:
    """What is wrong with ``value`` as a job id, or ``None`` if it is one."""
    if is_job_id(value):
        return None
    return f"id must be 1-{MAX_ID_LENGTH} characters of letters, digits and -_.:, got {value!r:.80}"


def attempts_allowed(job: JobFields, task: TaskOptions | None, default: int, cap: int | None = None) -> int:
    allowed = job.max_attempts or (task.max_attempts if task is not None else None) or default
    return min(allowed, cap) if cap else allowed


def out_of_deliveries(deliveries: int, attempts_allowed: int, max_deliveries: int | None, counts_runs: bool) -> bool:
    """Whether a job on this delivery is recorded ``dead`` instead of being run: the crash-loop
    rule, for every trigger, judged only once the message has been decoded and its signature
    checked.

    A run that kills its worker records nothing, so only the delivery count bounds it. Where
    the trigger's count ``counts_runs`` (a hand-back gives its delivery back, as a Valkey
    stream's ``XCLAIM ... RETRYCOUNT`` does), a job delivered more often than its attempts
    allow has used them all. ``max_deliveries`` is the queue's own bound (SQS:
    ``maxReceiveCount``, after which the queue moves the message anyway): its last delivery is
    recorded rather than lost.
    """
    if max_deliveries and deliveries >= max_deliveries:
        return True
    return counts_runs and deliveries > attempts_allowed


def due_refusal(job: JobFields, now: int, deliveries: int, max_deliveries: int | None, retention_s: float,
                counts_runs: bool) -> str | None:
    """Why a job that is not due yet is refused (recorded ``rejected``) instead of waited for;
    ``None`` if it can wait. The same for every trigger and every producer (a kindling envelope's
    ``not_before``, a Celery message's ``eta``).

    A due time more than ``retention_s`` after the job was enqueued is refused on any delivery:
    the queue deletes the message before it is due. Where each hand-back is a delivery
    (not ``counts_runs``: SQS, whose ``maxReceiveCount`` is ``max_deliveries``), a due time
    that the deliveries left cannot reach (one :data:`HOP_S` hop each, and one more to run) is
    refused on the job's first delivery; on a later one (other hand-backs used deliveries
    meanwhile) it is waited for, and its last delivery records it ``dead``
    (:func:`out_of_deliveries`), so it reaches the dead letters with a terminal record.
    """
    not_before = job.not_before
    if not_before is None or not_before <= now:
        return None
    ahead_s = (not_before - job.enqueued_at) // 1000
    if ahead_s > retention_s:
        return (f"not_before is {ahead_s} s after the job was enqueued, past the queue's retention "
                f"({int(retention_s)} s): its message would be deleted before it is due")
    if not counts_runs and max_deliveries and deliveries <= 1:
        hops = -(-(not_before - now) // (HOP_S * 1000))
        if deliveries + hops >= max_deliveries:
            return (f"not_before is {(not_before - now) // 1000} s ahead: waiting takes {hops} more deliveries "
                    f"(one per {HOP_S} s) and the queue moves a message to its dead letters on delivery "
                    f"{max_deliveries} (maxReceiveCount)")
    return None


def timeout_for(job: JobFields, task: TaskOptions | None, default: float) -> float:
    return job.timeout or (task.timeout if task is not None else None) or default


class Backoff:
    """A task's retry delays: ``base`` seconds after the first failure, times ``factor``
    after each further one, at most ``max``; with ``jitter`` each delay is drawn uniformly
    between half and all of that (so retries of many jobs spread out)."""

    __slots__ = ("base", "factor", "max", "jitter")

    def __init__(self, base: float = 5.0, factor: float = 2.0, max: float = 3600.0, jitter: bool = True):
        for name, value in (("base", base), ("factor", factor), ("max", max)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"Backoff {name} must be a number >= 0, got {value!r}")
        if factor < 1:
            raise ValueError(f"Backoff factor must be at least 1, got {factor!r}")
        if max > MAX_DELAY_S:
            raise ValueError(f"Backoff max is at most {MAX_DELAY_S} s (a queue hides a message at most that long)")
        self.base, self.factor, self.max, self.jitter = base, factor, max, bool(jitter)

    def delay_s(self, attempt: int) -> int:
        ceiling = min(self.max, self.base * self.factor ** min(max(attempt - 1, 0), 64))
        if self.jitter:
            import os

            ceiling *= 0.5 + 0.5 * int.from_bytes(os.urandom(4)) / 0x1_0000_0000
        return int(ceiling)

    def __repr__(self) -> str:
        return f"Backoff(base={self.base}, factor={self.factor}, max={self.max}, jitter={self.jitter})"


def should_retry(task: TaskOptions | None, error: BaseException) -> bool:
    """Whether this failure may be tried again (attempts permitting)."""
    from kindling.core.errors import PayloadUnavailable, Retry, UnencodableResult

    if isinstance(error, Retry):
        return True
    if isinstance(error, UnencodableResult):  # the next run returns the same kind of value
        return False
    if isinstance(error, PayloadUnavailable):  # kindling's own S3 read, whatever the task's rules
        return error.retryable
    if task is None:
        return True
    if task.no_retry_on and isinstance(error, task.no_retry_on):
        return False
    return task.retry_on is None or isinstance(error, task.retry_on)


def retry_in_s(task: TaskOptions | None, error: BaseException, attempt: int, default_base: float) -> int | None:
    """Seconds before the next attempt; ``None`` leaves it to the queue's visibility timeout."""
    from kindling.core.errors import Retry

    if isinstance(error, Retry) and error.after is not None:
        return int(min(error.after, MAX_DELAY_S))
    if task is not None and task.backoff is not None:
        return task.backoff.delay_s(attempt)
    return retry_delay_s(attempt, default_base) if default_base else None


def configured_retry_delay(environ=None) -> float:
    """The deployment's retry delay: ``KINDLING_RETRY_DELAY`` seconds, else
    :data:`DEFAULT_RETRY_DELAY_S`; 0 leaves retries to the trigger's redelivery (SQS: the
    queue's visibility timeout; Valkey: the stream's)."""
    import os

    value = (os.environ if environ is None else environ).get("KINDLING_RETRY_DELAY", "")
    if not value.strip():
        return DEFAULT_RETRY_DELAY_S
    delay = float(value)
    if not 0 <= delay <= MAX_DELAY_S:
        raise ValueError(f"KINDLING_RETRY_DELAY must be between 0 and {MAX_DELAY_S} seconds, got {value!r}")
    return delay


def configured_max_attempts(environ=None) -> int:
    """The deployment's attempts for a job whose own call and task say none:
    ``KINDLING_MAX_ATTEMPTS`` (the template's MaxAttempts), else :data:`DEFAULT_MAX_ATTEMPTS`.
    Every trigger's runner reads it here, so the Lambda function and ``kindling worker`` agree."""
    import os

    value = (os.environ if environ is None else environ).get("KINDLING_MAX_ATTEMPTS") or ""
    if not value.strip():
        return DEFAULT_MAX_ATTEMPTS
    attempts = int(value)
    if attempts < 1:
        raise ValueError(f"KINDLING_MAX_ATTEMPTS must be 1 or more, got {value!r}")
    return attempts


def configured_result_ttl_days(environ=None) -> float:
    """How long outcome records are kept, in days: ``KINDLING_RESULT_TTL_DAYS`` (the
    template's ResultTtlDays), else ``KINDLING_RESULT_TTL_S`` (the name ``kindling worker
    --valkey`` read before, in seconds), else :data:`DEFAULT_RESULT_TTL_DAYS`. Every runner
    and the Valkey result store read it here."""
    import os

    env = os.environ if environ is None else environ
    days, seconds = env.get("KINDLING_RESULT_TTL_DAYS", "").strip(), env.get("KINDLING_RESULT_TTL_S", "").strip()
    if days:
        kept = float(days)
    elif seconds:
        kept = int(seconds) / 86_400
    else:
        return float(DEFAULT_RESULT_TTL_DAYS)
    if not kept > 0:
        raise ValueError(f"KINDLING_RESULT_TTL_DAYS must be more than 0, got {days or seconds!r}")
    return kept


def retry_delay_s(attempt: int, base: float) -> int:
    """Seconds before a failed job's next attempt: ``base`` doubling per attempt, capped."""
    if base <= 0:
        return 0
    return int(min(base * 2 ** min(max(attempt - 1, 0), 30), MAX_DELAY_S))


def store_backoff_s(deliveries: int) -> int:
    """Seconds before a batch handed back for a store outage is delivered again."""
    return int(min(2 ** min(max(deliveries, 1), 30), STORE_BACKOFF_CAP_S))


# One jittered exponential backoff for everything in kindling that waits before retrying
# (AWS calls, the result store, the stream worker's pauses). Full jitter (the AWS Architecture
# Blog's "Exponential Backoff and Jitter"); randomness from os.urandom, so the cold path never
# imports random (~1 ms). Here, with the other retry rules, which the worker loads anyway:
# in a module of its own it would be one more import on the cold path.
def compute_backoff(attempt: int, *, base: float, cap: float) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first failure).

    Uniform between 0 and min(cap, base * 2 ** (attempt - 1)): the ceiling doubles per
    attempt from ``base`` until it reaches ``cap``. Raises ValueError for an attempt below
    1 or a negative base or cap.
    """
    ceiling = backoff_ceiling(attempt, base=base, cap=cap)
    return ceiling * ((int.from_bytes(os.urandom(7)) >> 3) / (1 << 53))  # 53 random bits: [0, 1)


def backoff_ceiling(attempt: int, *, base: float, cap: float) -> float:
    """The most :func:`compute_backoff` waits after failed attempt number ``attempt``:
    min(cap, base * 2 ** (attempt - 1)). Same ValueErrors."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    if base < 0 or cap < 0:
        raise ValueError(f"base and cap must not be negative (base={base}, cap={cap})")
    # 2.0 ** 1000 is still a finite float: no OverflowError however many attempts.
    return min(cap, base * 2.0 ** min(attempt - 1, 1000))


class Retry:
    """How one call is tried again, as an immutable value (urllib3's ``Retry`` in spirit):
    every hand-written retry loop in the drivers and stores takes its attempts, its waits
    and its deadline check from one of these.

    ``total``: the most attempts (``None``: until the deadline or the errors say stop).
    The wait after failed attempt ``n`` is :func:`compute_backoff` (full jitter) from ``base``
    doubling up to ``cap``, or, with ``jitter=False``, its ceiling (:func:`backoff_ceiling`).
    ``on``: the exceptions :meth:`retries` tries again (the loops whose rule is a reply code
    or a flag say so themselves, and ask :meth:`exhausted`).
    """

    __slots__ = ("total", "base", "cap", "jitter", "on")

    def __init__(self, total: int | None, *, base: float, cap: float = MAX_TIMEOUT_S, jitter: bool = True,
                 on: tuple[type[BaseException], ...] = ()):
        if total is not None and total < 1:
            raise ValueError(f"a Retry makes at least one attempt, got total={total}")
        backoff_ceiling(1, base=base, cap=cap)  # the same ValueErrors as the formula
        setter = object.__setattr__
        for name, value in (("total", total), ("base", base), ("cap", cap), ("jitter", jitter), ("on", on)):
            setter(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Retry is immutable: {name} is not set on it (replace() makes a new one)")

    def __repr__(self) -> str:
        return f"Retry({self.total}, base={self.base}, cap={self.cap}, jitter={self.jitter}, on={self.on})"

    def __eq__(self, other) -> bool:
        return type(other) is Retry and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def replace(self, **changes) -> Retry:
        """A copy with some fields changed (``Retry.replace(total=5)``)."""
        fields = {n: getattr(self, n) for n in self.__slots__}
        fields.update(changes)
        return Retry(fields.pop("total"), **fields)

    def tries(self) -> range:
        """The attempt numbers, from 1 (a retry value with no ``total`` has none to list)."""
        if self.total is None:
            raise ValueError("a Retry without a total is bounded by its deadline: it has no range of attempts")
        return range(1, self.total + 1)

    def exhausted(self, failed: int) -> bool:
        """Whether ``failed`` attempts use up every try."""
        return self.total is not None and failed >= self.total

    def retries(self, error: BaseException, failed: int) -> bool:
        """Whether ``error``, raised by attempt number ``failed``, is tried again."""
        return isinstance(error, self.on) and not self.exhausted(failed)

    def delay(self, failed: int) -> float:
        """Seconds to wait after failed attempt number ``failed`` (from 1)."""
        if self.jitter:
            return compute_backoff(failed, base=self.base, cap=self.cap)
        return backoff_ceiling(failed, base=self.base, cap=self.cap)

    def sleeps(self) -> list[float]:
        """The most each wait between the attempts lasts, in order (``total - 1`` of them)."""
        return [backoff_ceiling(n, base=self.base, cap=self.cap) for n in self.tries()[:-1]]

    def wait(self, failed: int, deadline: float | None, sleep: Callable[[float], object], *,
             clip: bool = False) -> bool:
        """Sleep (through ``sleep``) the wait after failed attempt ``failed``; ``False``, and no
        sleep, when the next attempt could not start before ``deadline`` (a ``time.monotonic()``
        value; ``None``: none). With ``clip`` the wait is cut short at the deadline instead, and
        the next attempt is made then."""
        delay = self.delay(failed)
        if deadline is not None:
            now = time.monotonic()
            if clip:
                delay = min(delay, max(0.0, deadline - now))
            elif now + delay >= deadline:
                return False
        sleep(delay)
        return True


# -- the results policy: which outcomes get a record ---------------------------------------

RESULTS_ALL, RESULTS_FAILURES, RESULTS_NONE = "all", "failures", "none"
RESULTS_POLICIES = (RESULTS_ALL, RESULTS_FAILURES, RESULTS_NONE)
"""What a task (``@task(results=...)``) or a deployment (``KINDLING_RESULTS_POLICY``, the
template's ``ResultsPolicy``) keeps: ``"all"`` every outcome (the default); ``"failures"``
no record for a success (``failed``, ``dead`` and ``rejected`` are recorded); ``"none"``
only ``dead`` and ``rejected``. A task's own setting wins over the deployment's.

What a policy other than ``"all"`` gives up: the job is not read before it runs (no
duplicate check: a duplicate delivery runs it again, and a revoke does not stop it), and a
handle's ``result()`` cannot see a success (:class:`kindling.core.errors.ResultNotRecorded`).
Under ``"none"`` a failed attempt leaves no record either, so attempts are counted from
the queue's deliveries, not from records, but for a job the worker hands back by design on a
queue that counts those hand-backs (:func:`handed_back_by_design`), which is recorded as under
``"failures"``. A chord's members and its callback always keep
every outcome: the callback is built from the members' records, and the chord's claim
tells a sent callback by its record (:mod:`kindling.engine.followups`)."""

_KEPT = {RESULTS_ALL: None, RESULTS_FAILURES: frozenset({Status.FAILED, Status.DEAD, Status.REJECTED}),
         RESULTS_NONE: frozenset({Status.DEAD, Status.REJECTED})}


def check_results(value: object, where: str = "results") -> str:
    """``value`` if it is a results policy, else ``ValueError`` naming ``where``."""
    if value not in RESULTS_POLICIES:
        raise ValueError(f"{where} must be one of {', '.join(map(repr, RESULTS_POLICIES))}, got {value!r:.80}")
    return value  # type: ignore[return-value]


def configured_results(environ=None) -> str:
    """The deployment's results policy: ``KINDLING_RESULTS_POLICY``, else ``"all"``."""
    value = (os.environ if environ is None else environ).get("KINDLING_RESULTS_POLICY") or RESULTS_ALL
    return check_results(value, "KINDLING_RESULTS_POLICY")


def results_for(job: JobFields, task: TaskOptions | None, deployment: str, *, group: str | None = None,
                counts_runs: bool = True) -> str:
    """The policy a job is recorded under: its task's, else the deployment's; always
    ``"all"`` for a chord's member (``parent``) or callback (its derived id), whose records
    the chord is built from.

    ``"none"`` counts a job's attempts from its deliveries. Where the trigger counts the
    worker's own hand-backs as deliveries (SQS), a job the worker hands back by design
    (:func:`handed_back_by_design`, judged with its delivery's ``group`` and ``counts_runs``) is recorded under
    ``"failures"`` instead: its failed attempts are recorded, so its attempts count the runs
    of its task, not its hops and hand-backs."""
    if job.parent is not None or job.id.endswith(CALLBACK_SUFFIX):
        return RESULTS_ALL  # a plain job whose id ends so is recorded too: recording more is safe
    own = task.results if task is not None else None
    chosen = own or deployment
    if chosen == RESULTS_NONE and handed_back_by_design(job, task, group, counts_runs):
        return RESULTS_FAILURES
    return chosen


def handed_back_by_design(job: JobFields, task: TaskOptions | None, group: str | None, counts_runs: bool) -> bool:
    """Whether the worker may hand this job back unrun as a matter of course, on a trigger that
    counts each hand-back as a delivery (SQS; a Valkey stream gives it back): a job with a due
    time (hopped until due), of a rate-limited task (handed back over its limit), or in a FIFO
    group (handed back after an earlier job of its group did not succeed)."""
    if counts_runs:
        return False
    return job.not_before is not None or group is not None or (task is not None and task.rate_limit is not None)


def keeps(results: str, status: str, attempt: int = 1) -> bool:
    """Whether an outcome of ``status`` (on ``attempt``) gets a record under ``results``.

    Under ``"failures"`` a success after a first attempt is recorded too: it replaces the
    ``failed`` record an earlier attempt left, which would otherwise stand (a write for
    retried jobs only). ``"none"`` records no failed attempt, so it has none to replace."""
    kept = _KEPT[results]
    if kept is None or status in kept:
        return True
    return results == RESULTS_FAILURES and status == Status.SUCCEEDED and attempt > 1


def read_first(task: TaskOptions, results: str) -> bool:
    """Whether the duplicate check reads a job before it runs: only if its task skips
    duplicates (``skip_succeeded``) and its successes are recorded (``results="all"``)."""
    return task.skip_succeeded and results == RESULTS_ALL
