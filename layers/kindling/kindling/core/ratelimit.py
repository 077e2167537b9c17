"""Rate limits per task, held across every worker (Celery's ``rate_limit``).

``@task(rate_limit="100/m")``: at most 100 runs of the task start in any window of the
limit's grain, whichever worker, invocation or trigger starts them. The count lives in the
result store, one item per task and window (``rate#<task>#<window>``, expiring with the
window), taken in one round trip per rate-limited task per batch: DynamoDB's conditional
``ADD`` (:meth:`kindling.stores.dynamo.DynamoResultStore.take`), a Valkey script, or the memory
store's dict. Tasks without a limit never pay it, and a worker whose tasks have none never
imports this module.

The grain: ``N/P`` is held as ``N/g`` runs per window of ``P/g`` seconds, ``g`` the largest
common divisor of ``N`` and ``P`` in seconds (``10/s``: 10 per second; ``100/m``: 5 per
3 s; ``7/m``: 7 per minute), so a limit is exact over time and no window holds more than
its share; across a window's edge, two windows' shares may start close together.

A job over the limit is handed back unrun (``deferred``, as a job not due yet), due again
once its window ends plus a random part of the next ``2**(d-1)`` windows on its ``d``-th
delivery (at most 12 hours), so the jobs handed back spread out instead of all coming back
at once, and a backlog many windows deep costs each job a few receives, not one per window.
It uses no attempt; on SQS each hand-back is a receive of its message, which the queue's
``MaxReceiveCount`` bounds (100 by default).

A run is spent only on a job that starts: one granted to a job that is then handed back
unstarted (the invocation's time ran short) is given back to its window. In a FIFO batch a
run is taken just before each rate-limited job starts, once the jobs of its group before it
have succeeded, so a job handed back because its group stopped takes none, and another
group's job can have it.
"""

from __future__ import annotations

from kindling.core.errors import TaskDefinitionError

__all__ = ["RateLimit", "parse"]

_PERIODS = {"s": 1, "m": 60, "h": 3600}


class RateLimit:
    """``limit`` runs per window of ``window_ms`` milliseconds, as parsed from ``spec``."""

    __slots__ = ("spec", "limit", "window_ms")

    def __init__(self, spec: str, limit: int, window_ms: int):
        self.spec, self.limit, self.window_ms = spec, limit, window_ms

    def window(self, now_ms: int) -> tuple[int, int]:
        """The number of the window ``now_ms`` falls in, and milliseconds until it ends."""
        index, into = divmod(now_ms, self.window_ms)
        return index, self.window_ms - into

    def __repr__(self) -> str:
        return f"RateLimit({self.spec!r}: {self.limit} per {self.window_ms} ms)"


def parse(spec: str | int) -> RateLimit:
    """``"100/m"``, ``"10/s"``, ``"5/h"`` or a number (per second, as Celery reads one);
    :class:`TaskDefinitionError` for anything else."""
    from math import gcd

    text = str(spec).strip()
    count, _, unit = text.partition("/")
    unit = unit or "s"
    if not count.isdigit() or int(count) < 1 or unit not in _PERIODS or isinstance(spec, bool):
        raise TaskDefinitionError(f"rate_limit must be like '100/m', '10/s' or '5/h', got {spec!r:.40}")
    n, period = int(count), _PERIODS[unit]
    g = gcd(n, period)
    return RateLimit(text if "/" in text else f"{text}/s", n // g, period * 1000 // g)


def admit(runner, runnable: list, deadline: float | None, grants: dict | None = None) -> dict:
    """Take a run from each rate-limited task's window for the batch's jobs that are about to
    run, in one round trip per such task; hand back (``deferred``) those over the limit.

    Returns ``grants`` (a new dict if ``None``), with the jobs granted a run added under
    their window's key: :func:`give_back` returns the runs of those that never start."""
    import random

    from kindling.core.envelope import now_ms
    from kindling.core.policy import MAX_DELAY_S, backoff_ceiling
    from kindling.core.records import rate_key
    from kindling.core.status import DEFERRED

    grants = {} if grants is None else grants
    by_task: dict[str, list] = {}
    for o in runnable:
        if o.status is None and runner.task_of(o).rate_limit is not None:
            by_task.setdefault(o.task, []).append(o)
    for name, jobs in by_task.items():
        rate = runner.task_of(jobs[0]).rate_limit
        index, left_ms = rate.window(now_ms())
        ttl_s = -(-(left_ms + rate.window_ms) // 1000) + 60  # the item outlives its window a little
        key = rate_key(name, index)
        granted = runner.store.take(key, len(jobs), rate.limit, ttl_s=ttl_s, deadline=deadline)
        grants.setdefault(key, []).extend(jobs[:granted])
        for o in jobs[granted:]:
            o.status = DEFERRED
            o.reason = f"over the task's rate limit ({rate.spec}): handed back unrun, no attempt used"
            # Spread over more windows each time it comes back: a backlog deeper than the
            # limit takes few receives per job (SQS counts each, up to MaxReceiveCount).
            spread = backoff_ceiling(o.deliveries, base=rate.window_ms, cap=rate.window_ms * (1 << 20))
            o.retry_in = min(-(-(left_ms + int(random.random() * spread)) // 1000), MAX_DELAY_S)
    return grants


def give_back(runner, grants: dict, deadline: float | None) -> None:
    """Return to its window each run granted to a job that never started (handed back: the
    invocation's time ran short, the batch was interrupted), one round trip per window that
    has one; a store that cannot be reached leaves it spent, as before."""
    from kindling.core.errors import StoreUnavailable

    for key, jobs in grants.items():
        unstarted = sum(1 for o in jobs if o.limit_at is None)
        if not unstarted:
            continue
        try:
            runner.store.give_back(key, unstarted, deadline=deadline)
        except StoreUnavailable as exc:
            if runner.log:
                runner.log({"level": "WARNING", "kindling": "rate_limit_not_given_back", "key": key,
                            "runs": unstarted, "error": f"{exc}"[:300]})
