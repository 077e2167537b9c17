"""Attempts, time limits and backoff: each rule written once, for every trigger.

Precedence, everywhere: the job's own value, then its task's, then the worker's default,
and for attempts the trigger's cap last (a queue cannot deliver more often than its
redrive policy allows).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.envelope import Job
    from kindling.registry import Task

MAX_TIMEOUT_S = 86_400.0
"""The longest time limit a job or task may ask for. Longer ones are refused when the job
is validated: no trigger holds a message that long, and timers overflow far beyond it."""

MAX_ATTEMPTS = 1_000
"""The most attempts a job or task may ask for."""

MAX_TASK_LENGTH = 200
"""The longest task name: names are recorded with every outcome and logged with every failure."""

MAX_DELAY_S = 43_200
"""The longest a message can be kept out of sight at once (SQS: 12 hours)."""

STORE_BACKOFF_CAP_S = 900
"""Hand-backs because kindling's own store is down come back after 2, 4, 8 ... seconds,
at most this long, so an outage of hours costs a few dozen deliveries, not thousands."""


def attempts_allowed(job: Job, task: Task | None, default: int, cap: int | None = None) -> int:
    allowed = job.max_attempts or (task.max_attempts if task is not None else None) or default
    return min(allowed, cap) if cap else allowed


def timeout_for(job: Job, task: Task | None, default: float) -> float:
    return job.timeout or (task.timeout if task is not None else None) or default


def retry_delay_s(attempt: int, base: float) -> int:
    """Seconds before a failed job's next attempt: ``base`` doubling per attempt, capped."""
    if base <= 0:
        return 0
    return int(min(base * 2 ** min(max(attempt - 1, 0), 30), MAX_DELAY_S))


def store_backoff_s(deliveries: int) -> int:
    """Seconds before a batch handed back for a store outage is delivered again."""
    return int(min(2 ** min(max(deliveries, 1), 30), STORE_BACKOFF_CAP_S))
