"""Synchronous jobs in a thread pool: ``Runner(threads=N)`` with N > 1, in long-lived workers.

A thread cannot be interrupted, so a job past its limit is recorded as timed out by the
batch's waiter while its thread runs on (the record is written once: see
:meth:`kindling.runner.Runner._finish`). Jobs still queued when the invocation's time runs
short are handed back unstarted.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from kindling.runner import _timeout_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.runner import Outcome, Runner


def run_threaded(runner: Runner, outcomes: list[Outcome], deadline: float | None) -> None:
    """Run ``outcomes`` in the runner's pool (made at its first use, kept while warm) and
    wait until each has an outcome, its limit has passed, or it was handed back."""
    if runner._pool is None:
        runner._pool = ThreadPoolExecutor(runner.threads, thread_name_prefix="kindling")
    futures = {runner._pool.submit(runner._run_sync, o, deadline): o for o in outcomes}
    pending = set(futures)
    stop_at = None if deadline is None else deadline - runner.safety_ms / 1000
    while pending:
        now = time.monotonic()
        for future in list(pending):
            o = futures[future]
            # A job's limit counts from its own start, never from when it was queued.
            if o.limit_at is not None and now >= o.limit_at and o.status is None:
                runner._finish(o, error=_timeout_error(*o.limit))  # type: ignore[misc]
            if o.status is not None:
                pending.discard(future)
        if stop_at is not None and now >= stop_at:
            for future in list(pending):
                o = futures[future]
                if o.limit_at is None and future.cancel():  # never started: hand it back
                    runner._defer(o)
                    pending.discard(future)
        if not pending:
            break
        wake = [o.limit_at for f in pending if (o := futures[f]).limit_at is not None]
        if stop_at is not None:
            wake.append(stop_at)
        timeout = max(0.0, min(wake) - time.monotonic()) + 0.001 if wake else None
        if any(futures[f].limit_at is None for f in pending) and stop_at is not None and now >= stop_at:
            timeout = 0.01  # a job is starting right now: look again shortly
        done, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
        pending -= done
